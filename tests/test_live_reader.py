"""The live reader against the session's real broker, on real damage (tests/live_damage.py): a
topic written by kafka-python, bytes of its closed segments damaged while the broker was down,
served again as they are.  pykbatch's reader delivers every readable record (exactly what a clean
copy of the topic minus the damaged records gives) and names each unreadable range; librdkafka
(confluent-kafka) on the same topic does not get past the first damaged batch.
"""
from __future__ import annotations

import json
import time

import pytest

from pykbatch.live import JsonLinesDeadLetters, Reader, TopicPartition, UnreadableRecordsError
from pykbatch.policy import ErrorPolicy
from tests import kafka_tools
from tests.live_damage import BATCH, BATCHES, PLAN, TOPIC, index_of, key_of, unreadable, value_of

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))

TOLERANT = ErrorPolicy(tolerance="all")


@pytest.fixture
def damaged(live_damaged):
    return live_damaged.broker, live_damaged.on_disk, live_damaged.done


def read_all(bootstrap, **kwargs):
    with Reader({"bootstrap.servers": bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets="latest", **kwargs) as reader:
        table = reader.read()
        return table, reader


def test_every_readable_record_is_delivered_and_each_damaged_range_named(damaged, tmp_path):
    broker, on_disk, done = damaged
    dead = tmp_path / "dead.jsonl"
    table, reader = read_all(broker.bootstrap, policy=TOLERANT, dead_letters=JsonLinesDeadLetters(dead))
    offsets = table.column("offset").to_pylist()
    assert offsets == sorted(set(offsets)), "each record once, in order"
    want = [o for o in range(BATCHES * BATCH) if o not in unreadable(on_disk, done)]
    assert offsets == want
    # every delivered record is the one written (keys, values, the first record's header)
    rows = table.select(["offset", "key", "value", "headers"]).to_pylist()
    assert all(r["key"] == key_of(r["offset"]) and r["value"] == value_of(r["offset"]) for r in rows)
    assert all(r["headers"] == ([{"key": "n", "value": str(r["offset"]).encode()}] if r["offset"] % BATCH == 0
                                else []) for r in rows)
    # each damaged batch is one skip, its exact offsets and the rule that caught it
    got = {(s.first_offset, s.last_offset): s.rule for s in reader.skips}
    b = {i: on_disk[i] for i in PLAN}
    assert got[(b[15].base_offset, b[15].last_offset)] == "batch.crc_mismatch"
    assert got[(b[44].base_offset, b[44].last_offset)] == "batch.decompression_failed"
    assert got[(b[60].base_offset + 7, b[60].last_offset)] == "record.size_mismatch"
    garbage = got[(b[80].base_offset, b[80].last_offset)]
    assert garbage.startswith("framing.") or garbage == "consumer.broker_corrupt"
    zeros = on_disk[index_of(done, "zeros")]
    assert got[(zeros.base_offset, zeros.last_offset)].startswith("framing.")
    segment_end = index_of(done, "flip")
    assert got[(on_disk[segment_end].base_offset, on_disk[segment_end].last_offset)] == "batch.crc_mismatch"
    assert len(got) == len(done)
    # each went to the dead letters with its bytes and context
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [(d["record"]["offset"], d["record"]["last_offset"]) for d in letters] == \
        [(s.first_offset, s.last_offset) for s in reader.skips]
    assert all(d["record"]["value"] and d["exception"]["message"] for d in letters)
    m = reader.metrics.as_dict()
    assert m["total-record-failures"] == len(done) and m["deadletterqueue-produce-requests"] == len(done)
    assert m["probe-requests"] > 0  # the damage that ends a segment
    assert m["records-consumed"] == len(want)
    assert m["offsets-skipped"] == BATCHES * BATCH - len(want)


def test_tolerance_none_fails_naming_the_range_and_keeps_the_position(damaged):
    broker, on_disk, done = damaged
    first = on_disk[15]
    with Reader({"bootstrap.servers": broker.bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets="latest") as reader:
        delivered = []
        with pytest.raises(UnreadableRecordsError) as err:
            for poll in reader.polls():
                delivered += poll.table.column("offset").to_pylist()
        assert f"offsets [{first.base_offset}, {first.last_offset}]" in str(err.value)
        assert err.value.rule == "batch.crc_mismatch" and err.value.code == 2
        assert reader.positions()[TopicPartition(TOPIC, 0)] <= first.base_offset
        assert delivered == list(range(len(delivered))) and delivered[-1] < first.base_offset


def test_a_broker_that_answers_corrupt_message_is_probed_past(damaged):
    """Started at the zeroed batch, every fetch up to the next offset-index entry past it makes the
    broker's own search fail (CORRUPT_MESSAGE, no records, franz-go#1164); the reader probes
    forward to the first offset the broker serves and reports the range it could not get."""
    broker, on_disk, done = damaged
    zeros = on_disk[index_of(done, "zeros")]
    with Reader({"bootstrap.servers": broker.bootstrap}, subscribe=TOPIC,
                starting_offsets={TOPIC: {"0": zeros.base_offset}}, ending_offsets="latest",
                policy=TOLERANT) as reader:
        offsets = reader.read().column("offset").to_pylist()
        (skip,) = reader.skips
        assert skip.rule == "consumer.broker_corrupt" and skip.code == 2
        assert skip.first_offset == zeros.base_offset and skip.last_offset >= zeros.last_offset
        next_segment = min(b.base_offset for b in on_disk if b.path > zeros.path)
        assert skip.last_offset < next_segment  # the broker serves a segment from its start
        assert offsets == list(range(skip.last_offset + 1, BATCHES * BATCH))
        assert f"from offset {zeros.base_offset} to {skip.last_offset}" in skip.message
        assert reader.metrics.as_dict()["probe-requests"] > 0


def test_small_fetches_end_in_partial_batches_and_lose_nothing(damaged):
    """Each response ends in a partial batch (the fetch size is 1.5 batches): normal, not damage."""
    broker, on_disk, done = damaged
    size = max(b.size for b in on_disk[:10])
    with Reader({"bootstrap.servers": broker.bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets={TOPIC: {"0": on_disk[10].base_offset}}, max_partition_fetch_bytes=size * 3 // 2,
                fetch_max_bytes=size * 3 // 2) as reader:
        table = reader.read()
        assert table.column("offset").to_pylist() == list(range(on_disk[10].base_offset))
        assert reader.skips == [] and reader.metrics.as_dict()["fetch-requests"] >= 10


def test_a_batch_larger_than_the_fetch_size_is_fetched_whole(damaged):
    broker, on_disk, done = damaged
    with Reader({"bootstrap.servers": broker.bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets={TOPIC: {"0": 100}}, max_partition_fetch_bytes=64) as reader:
        assert reader.read().column("offset").to_pylist() == list(range(100))
        assert reader.skips == []


def test_librdkafka_does_not_get_past_the_first_damaged_batch(damaged):
    """The contrast: confluent-kafka (librdkafka, check.crcs on) from the start for 15 s."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker, on_disk, done = damaged
    first = on_disk[15]
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "contrast",
                                  "auto.offset.reset": "earliest", "check.crcs": True, "enable.auto.commit": False})
    c.subscribe([TOPIC])
    seen, errors = [], []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                (errors if m.error() else seen).append(m.error() or m.offset())
    finally:
        c.close()
    assert seen and max(seen) < first.base_offset, "librdkafka stays before the damaged batch"
    assert errors, "and reports errors"


def test_kafkas_java_consumer_does_not_get_past_the_first_damaged_batch(damaged):
    """The contrast: Kafka's own consumer (kafka-clients from tests/kafka_harness) from the start
    for 15 s keeps throwing at the first damaged batch and never delivers a record after it."""
    import subprocess

    from tests import kafka_broker as harness
    broker, on_disk, done = damaged
    first = on_disk[15]
    proc = subprocess.run(["java", "-cp", harness.classpath(), "pykbatch.harness.StuckConsumer", broker.bootstrap,
                           TOPIC, "15"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["max_offset"] < first.base_offset and got["position"] <= first.base_offset
    assert got["thrown"], "it throws, again and again"
    assert sum(got["thrown"].values()) > 5
    assert "seek past" in got["last_error"] or "corrupt" in got["last_error"].lower()


def test_offsets_deleted_by_retention_fail_or_move_on_as_fail_on_data_loss_says(kafka_broker):
    """Spark's failOnDataLoss: records deleted (DeleteRecords, as retention does) before they were
    read raise by default; with it off the reader moves to the log's start and reports the gap."""
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient

    from pykbatch.live import DataLossError
    from tests.live_damage import create_topic, produce_batches
    topic = "live-retention"
    create_topic(kafka_broker.bootstrap, topic)
    produce_batches(kafka_broker.bootstrap, topic, 5)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for f in admin.delete_records([CTP(topic, 0, 40)]).values():
        f.result(timeout=30)
    props = {"bootstrap.servers": kafka_broker.bootstrap}
    with Reader(props, subscribe=topic, starting_offsets={topic: {"0": 0}}, ending_offsets="latest") as reader:
        with pytest.raises(DataLossError, match="offset 0 of live-retention-0 is out of the partition's range"):
            reader.read()
    with Reader(props, subscribe=topic, starting_offsets={topic: {"0": 0}}, ending_offsets="latest",
                fail_on_data_loss=False) as reader:
        assert reader.read().column("offset").to_pylist() == list(range(40, 5 * BATCH))
        (skip,) = reader.skips
        assert (skip.first_offset, skip.last_offset, skip.rule, skip.name) == (0, 39, "consumer.data_loss",
                                                                              "OFFSET_OUT_OF_RANGE")


def test_committed_offsets_resume_a_reader_and_a_real_consumer_sees_them(kafka_broker):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    from tests.live_damage import create_topic, produce_batches
    topic, group = "live-commit", "live-commit-group"
    create_topic(kafka_broker.bootstrap, topic)
    produce_batches(kafka_broker.bootstrap, topic, 4)
    props = {"bootstrap.servers": kafka_broker.bootstrap}
    with Reader(props, subscribe=topic, starting_offsets="committed", group_id=group,
                ending_offsets={topic: {"0": 30}}) as reader:
        assert reader.read().column("offset").to_pylist() == list(range(30))  # nothing committed: earliest
        reader.commit()
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": group})
    try:
        (committed,) = c.committed([CTP(topic, 0)], timeout=30)
    finally:
        c.close()
    assert committed.offset == 30
    with Reader(props, subscribe=topic, starting_offsets="committed", group_id=group,
                ending_offsets="latest") as reader:
        assert reader.read().column("offset").to_pylist() == list(range(30, 4 * BATCH))


def test_adjacent_ranges_report_a_damaged_batch_once_between_them(damaged):
    """As Spark's micro-batches read [start, end) ranges: a damaged batch across the boundary is
    reported by each range for its own offsets, so together once, and nothing is delivered twice."""
    broker, on_disk, done = damaged
    crc = on_disk[15]
    cut = crc.base_offset + 7
    tp = TopicPartition(TOPIC, 0)
    seen, skipped = [], []
    for start, end in ((crc.base_offset - 20, cut), (cut, crc.last_offset + 21)):
        with Reader({"bootstrap.servers": broker.bootstrap}, assign={TOPIC: [0]}, positions={tp: start},
                    ending_offsets={TOPIC: {"0": end}}, policy=TOLERANT) as reader:
            seen += reader.read().column("offset").to_pylist()
            skipped += [(s.first_offset, s.last_offset) for s in reader.skips]
            assert reader.positions()[tp] == end
    assert skipped == [(crc.base_offset, cut - 1), (cut, crc.last_offset)]
    assert seen == list(range(crc.base_offset - 20, crc.base_offset)) + \
        list(range(crc.last_offset + 1, crc.last_offset + 21))


def pykbatch_cli(*args, timeout=120):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", "import sys; from pykbatch.commands import main; sys.exit(main())",
                           *args], capture_output=True, text=True, errors="replace", timeout=timeout)


def test_the_consume_command_reports_each_damaged_range_and_exits_1(damaged, tmp_path):
    broker, on_disk, done = damaged
    out, dead = tmp_path / "records.parquet", tmp_path / "dead.jsonl"
    proc = pykbatch_cli("consume", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC, "--out", str(out),
                        "--dead-letters", str(dead))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    crc = on_disk[15]
    assert f"offsets [{crc.base_offset}, {crc.last_offset}] skipped: CORRUPT_MESSAGE(2) batch.crc_mismatch" in proc.stdout
    assert f"{len(done)} range(s) skipped" in proc.stdout
    import pyarrow.parquet as pq
    bad = unreadable(on_disk, done)
    assert pq.read_table(out).column("offset").to_pylist() == [o for o in range(BATCHES * BATCH) if o not in bad]
    assert len(dead.read_text().splitlines()) == len(done)


def test_the_consume_command_applies_an_offset_to_every_partition(kafka_broker, tmp_path):
    from tests.live_damage import create_topic, produce_batches
    topic = "live-cli-offsets"
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    for p in (0, 1):
        produce_batches(kafka_broker.bootstrap, topic, 2, partition=p)
    out = tmp_path / "r.arrow"
    proc = pykbatch_cli("consume", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic, "--from", "5",
                        "--to", "30", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{topic}-0: offsets [5, 30)" in proc.stdout and f"{topic}-1: offsets [5, 30)" in proc.stdout
    import pyarrow as pa
    t = pa.ipc.open_file(str(out)).read_all()
    assert sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist())) == \
        [(p, o) for p in (0, 1) for o in range(5, 30)]


def test_the_consume_command_on_what_a_new_user_gets_wrong(kafka_broker, tmp_path):
    """A topic that does not exist, a broker that does not answer, a refused password, a bad
    output name: each a message and exit status 2, never a traceback, never "ok"."""
    from tests.kafka_tools import PLAIN_USER
    bootstrap = kafka_broker.bootstrap
    cases = [
        (["--bootstrap-server", bootstrap, "--topic", "no-such-topic"], "does not exist"),
        (["--bootstrap-server", bootstrap, "--topic", TOPIC, "--out", str(tmp_path / "x.csv")], ".parquet, .arrow, .jsonl"),
        (["--bootstrap-server", bootstrap, "--topic", TOPIC, "--from", "yesterday"], "earliest, latest or an offset"),
        (["--bootstrap-server", bootstrap, "--topic", TOPIC, "--from", "10", "--to", "5"], "past --to"),
        (["--bootstrap-server", kafka_broker.sasl_bootstrap, "--topic", TOPIC, "--consumer-property",
          "security.protocol=SASL_SSL", "--consumer-property", "sasl.mechanism=PLAIN", "--consumer-property",
          f"sasl.username={PLAIN_USER}", "--consumer-property", "sasl.password=hunter2", "--consumer-property",
          f"ssl.ca.location={kafka_broker.certs.ca}"], "authentication"),
        (["--bootstrap-server", bootstrap, "--topic", TOPIC, "--consumer-property", "sasl.mechansim=PLAIN"],
         "unknown connection setting"),
        (["--bootstrap-server", bootstrap, "--topic", TOPIC, "--consumer.config", str(tmp_path / "missing")],
         "No such file"),
    ]
    for args, says in cases:
        proc = pykbatch_cli("consume", *args)
        assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "hunter2" not in proc.stderr + proc.stdout  # a password is never echoed


def test_fetch_sessions_read_the_same_as_sessionless_fetches(kafka_broker):
    """KIP-227: after the first full fetch the broker keeps the session and answers only what
    changed; the records read are the same either way."""
    from tests.live_damage import create_topic, produce_batches
    topic = "live-sessions"
    create_topic(kafka_broker.bootstrap, topic, partitions=3)
    for p, n in ((0, 5), (1, 1), (2, 3)):
        produce_batches(kafka_broker.bootstrap, topic, n, partition=p)
    got = {}
    for sessions in (True, False):
        with Reader({"bootstrap.servers": kafka_broker.bootstrap}, subscribe=topic, starting_offsets="earliest",
                    ending_offsets="latest", fetch_sessions=sessions, max_partition_fetch_bytes=2000) as reader:
            t = reader.read()
            got[sessions] = sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist()))
            if sessions:
                (session,) = reader._sessions.values()
                assert session.session_id != 0 and session.epoch > 1  # incremental
    assert got[True] == got[False] == [(p, o) for p, n in ((0, 5), (1, 1), (2, 3)) for o in range(n * BATCH)]


def test_a_broker_restart_mid_read_loses_nothing_and_repeats_nothing(kafka_broker):
    """The broker stops (cleanly) and starts again while a reader is half way: its polls fail and
    back off, then it goes on from its position."""
    from tests.live_damage import create_topic, produce_batches, wait_until_served
    topic = "live-restart"
    create_topic(kafka_broker.bootstrap, topic)
    produce_batches(kafka_broker.bootstrap, topic, 10)
    offsets = []
    with Reader({"bootstrap.servers": kafka_broker.bootstrap, "request.timeout.ms": 5000}, subscribe=topic,
                starting_offsets="earliest", ending_offsets="latest", max_partition_fetch_bytes=2000) as reader:
        while len(offsets) < 60:
            offsets += reader.poll().table.column("offset").to_pylist()
        kafka_broker.stop()
        for _ in range(3):  # polls while the broker is down: no records, no exception
            assert reader.poll().table.num_rows == 0
        kafka_broker.start()
        wait_until_served(kafka_broker.bootstrap, topic)
        deadline = time.monotonic() + 120
        while not reader.finished and time.monotonic() < deadline:
            offsets += reader.poll().table.column("offset").to_pylist()
    assert offsets == list(range(10 * BATCH))


def test_partitions_whose_batches_exceed_the_fetch_size_are_all_read(kafka_broker):
    """KIP-74: the broker hands the first partition of a request its first batch whole, however
    large; another partition whose first batch exceeds its partition_max_bytes gets nothing (the
    broker drops an incomplete first entry).  The reader puts a different partition first on each
    fetch, as Kafka's consumer does, so every one is read."""
    from tests.live_damage import create_topic, produce_batches
    topic = "live-grow"
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    for p in (0, 1):
        produce_batches(kafka_broker.bootstrap, topic, 3, partition=p)
    with Reader({"bootstrap.servers": kafka_broker.bootstrap}, subscribe=topic, starting_offsets="earliest",
                ending_offsets="latest", max_partition_fetch_bytes=64) as reader:
        t = reader.read()
        assert sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist())) == \
            [(p, o) for p in (0, 1) for o in range(3 * BATCH)]
        assert reader.skips == []


def test_skips_go_to_a_dead_letter_topic_with_connects_headers(damaged):
    """Each skipped range is one record of the dead-letter topic: the unreadable bytes as its
    value, Connect's __connect.errors.* headers; read back by librdkafka."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    from pykbatch.live import Cluster, DeadLetterTopic
    from tests.live_damage import create_topic
    broker, on_disk, done = damaged
    create_topic(broker.bootstrap, "live-dlq")
    with Cluster({"bootstrap.servers": broker.bootstrap}) as cluster:
        reader = Reader(cluster, subscribe=TOPIC, starting_offsets="earliest", ending_offsets="latest",
                        policy=TOLERANT, dead_letters=DeadLetterTopic(cluster, "live-dlq"))
        reader.read()
        skips = list(reader.skips)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dlq-check"})
    c.assign([CTP("live-dlq", 0, 0)])
    letters = []
    deadline = time.monotonic() + 30
    try:
        while len(letters) < len(skips) and time.monotonic() < deadline:
            letters += [m for m in c.consume(100, timeout=1) if not m.error()]
    finally:
        c.close()
    assert len(letters) == len(skips) == len(done)
    for m, s in zip(letters, skips):
        h = {k: v.decode() for k, v in m.headers()}
        assert (h["__connect.errors.topic"], h["__connect.errors.partition"], h["__connect.errors.offset"]) == \
            (TOPIC, "0", str(s.first_offset))
        assert h["__pykbatch.errors.last.offset"] == str(s.last_offset) and h["__pykbatch.errors.rule"] == s.rule
        assert h["__connect.errors.exception.message"] == s.message
        assert h["__connect.errors.exception.class.name"].startswith("org.apache.kafka")
        assert m.value() == s.data
    assert reader.metrics.as_dict()["deadletterqueue-produce-requests"] == len(done)


def test_starting_at_a_timestamp_asks_the_broker_for_the_first_offset_at_or_after_it(kafka_broker):
    from tests.live_damage import create_topic, produce_batches
    topic = "live-timestamps"
    create_topic(kafka_broker.bootstrap, topic)
    for _ in range(3):
        produce_batches(kafka_broker.bootstrap, topic, 2, first_offset=0)
        time.sleep(0.05)  # batches a few milliseconds apart
    props = {"bootstrap.servers": kafka_broker.bootstrap}
    with Reader(props, subscribe=topic, starting_offsets="earliest", ending_offsets="latest") as reader:
        t = reader.read()
    offsets = t.column("offset").to_pylist()
    stamps = [int(x.timestamp() * 1000) for x in t.column("timestamp").to_pylist()]
    at = stamps[70]
    want = min(o for o, s in zip(offsets, stamps) if s >= at)
    for kwargs in ({"starting_timestamp": at}, {"starting_offsets_by_timestamp": json.dumps({topic: {"0": at}})}):
        with Reader(props, subscribe=topic, ending_offsets="latest", **kwargs) as reader:
            assert reader.read().column("offset").to_pylist() == list(range(want, len(offsets)))
    with Reader(props, subscribe=topic, ending_offsets="latest", starting_timestamp=stamps[-1] + 60_000) as reader:
        assert reader.read().num_rows == 0  # no record that late: the end


def test_the_consume_command_prints_records_as_kafka_users_read_them(kafka_broker, tmp_path):
    """kafka-console-consumer's lines (--property print.*), kcat's -f, JSON lines to standard
    output or a file, --max-messages, --from-beginning; what consume writes as JSON lines,
    produce reads back (headers ordered and repeated, bytes that are not UTF-8)."""
    from pykbatch.live import Producer
    from tests.live_damage import create_topic
    bootstrap = kafka_broker.bootstrap
    topic, copy = "live-cli-print", "live-cli-print-copy"
    for t in (topic, copy):
        create_topic(bootstrap, t)
    records = [{"key": b"k%d" % i, "value": b"v%d\xff" % i if i % 3 == 0 else b"v%d" % i,
                "headers": [("h", b"1"), ("h", b"2")] if i % 2 else []} for i in range(30)]
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce(records, topic=topic)
    base = ["consume", "--bootstrap-server", bootstrap, "--topic", topic]
    proc = pykbatch_cli(*base, "--from-beginning", "--max-messages", "5", "--property", "print.key=true",
                        "--property", "print.offset=true", "--property", "print.headers=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines()[:2] == ["Offset:0\tNO_HEADERS\tk0\tv0\ufffd", "Offset:1\th:1,h:2\tk1\tv1"]
    assert len(proc.stdout.splitlines()) == 5 and "5 records read, ok" in proc.stderr
    proc = pykbatch_cli(*base, "--format", "%o:%k=%S\\n", "--max-messages", "3")
    assert proc.stdout == "0:k0=3\n1:k1=2\n2:k2=2\n"
    proc = pykbatch_cli(*base, "--jsonl")
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [x["offset"] for x in lines] == list(range(30)) and lines[1]["headers"][1]["value"] == "2"
    assert pykbatch_cli(*base, "--jsonl", "--out", "-").stdout == proc.stdout
    out = tmp_path / "records.jsonl"
    proc = pykbatch_cli(*base, "--out", str(out))
    assert proc.returncode == 0 and "30 records read, ok" in proc.stdout
    assert out.read_text() == pykbatch_cli(*base, "--jsonl").stdout
    proc = pykbatch_cli("produce", "--bootstrap-server", bootstrap, "--topic", copy, "--input", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = [json.loads(x) for x in pykbatch_cli("consume", "--bootstrap-server", bootstrap, "--topic", copy,
                                                 "--jsonl").stdout.splitlines()]
    keep = ("key", "value", "value_encoding", "headers", "timestamp")
    assert [{k: x[k] for k in keep} for x in again] == [{k: x[k] for k in keep} for x in lines]


def test_the_reader_takes_the_java_consumers_property_names(kafka_broker):
    """group.id resumes the group's commits (auto.offset.reset where it has none), isolation.level
    and the fetch sizes are honoured; enable.auto.commit=true is refused, naming what does it."""
    from pykbatch.live import SettingsError
    from tests.live_damage import create_topic, produce_batches
    topic = "live-java-names"
    create_topic(kafka_broker.bootstrap, topic)
    produce_batches(kafka_broker.bootstrap, topic, 2)
    props = {"bootstrap.servers": kafka_broker.bootstrap, "group.id": "java-names", "auto.offset.reset": "earliest",
             "isolation.level": "read_committed", "max.partition.fetch.bytes": "1024", "enable.auto.commit": "false"}
    with Reader(props, subscribe=topic, ending_offsets="latest") as reader:
        assert reader.read().column("offset").to_pylist() == list(range(2 * BATCH))
        assert reader.level == "read_committed"
        reader.commit()
    produce_batches(kafka_broker.bootstrap, topic, 1, first_offset=2 * BATCH)
    with Reader(props, subscribe=topic, ending_offsets="latest") as reader:  # from the group's commit
        assert reader.read().column("offset").to_pylist() == list(range(2 * BATCH, 3 * BATCH))
    with Reader({**props, "group.id": "java-names-new", "auto.offset.reset": "latest"}, subscribe=topic,
                ending_offsets="latest") as reader:  # no commits: auto.offset.reset says where
        assert reader.read().num_rows == 0
    with pytest.raises(SettingsError, match=r"Reader.commit\(\)"):
        Reader({**props, "enable.auto.commit": "true"}, subscribe=topic, ending_offsets="latest")


def test_the_consume_command_keeps_its_verdict_wherever_the_reader_leaves(damaged, tmp_path):
    """`pykbatch consume ... | head -N` with N anywhere from the first line naming a skip: exit 1."""
    from tests.test_closed_pipe import statuses_when_the_reader_leaves
    broker, _, _ = damaged
    got = statuses_when_the_reader_leaves(["consume", "--bootstrap-server", broker.bootstrap, "--topic", TOPIC,
                                           "--out", str(tmp_path / "r.parquet")], lambda line: "skipped" in line)
    assert got and set(got.values()) == {1}, got


def test_the_wire_seam_receives_frames_into_their_own_buffers(kafka_broker):
    """With the pinned kafka-python the receiver of live/frames.py is on the reader's connections
    (a library change that turns it off fails here, not as a silent slowdown), and a read through
    it, with the next fetch in flight, gives every record once."""
    from pykbatch.live import frames
    from tests.live_damage import create_topic, produce_batches
    assert frames.ACCELERATED
    topic = "live-frames"
    create_topic(kafka_broker.bootstrap, topic)
    produce_batches(kafka_broker.bootstrap, topic, 20)
    with Reader({"bootstrap.servers": kafka_broker.bootstrap}, subscribe=topic, starting_offsets="earliest",
                ending_offsets="latest", max_partition_fetch_bytes=3000) as reader:
        offsets = reader.read().column("offset").to_pylist()
        connections = list(reader.cluster._client._manager._conns.values())
        assert reader.metrics.as_dict()["prefetches"] > 0
    assert offsets == list(range(20 * BATCH))
    assert any(getattr(c, frames.MARK, None) is not None for c in connections)
