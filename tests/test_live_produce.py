"""pykbatch's producer against the session's real broker, every result read back by a real
consumer (librdkafka): the records a reference producer delivers, for every codec; KIP-467's
culprits out and every other record delivered, under each policy; pre-flight and the broker
agreeing on rule, code and message; dead letters with Connect's headers; conservation."""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

from pykbatch import errors as kb_errors
from pykbatch.live import Producer
from pykbatch.live.produced import ProduceFailedError
from tests import kafka_tools
from tests.live_damage import create_topic

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
confluent_kafka = pytest.importorskip("confluent_kafka")
pa = pytest.importorskip("pyarrow")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
NOW = int(time.time() * 1000)


def consume_all(bootstrap, topic, expect: int, *, partitions=None, read_committed=False, quiet_s=1.0):
    """Every record of ``topic`` as librdkafka reads it: (partition, offset, key, value, headers, timestamp)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.time()}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    meta = c.list_topics(topic, timeout=30).topics[topic]
    c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
              for p in (partitions or sorted(meta.partitions))])
    got, last, deadline = [], time.monotonic(), time.monotonic() + 120
    try:
        while time.monotonic() < deadline and (len(got) < expect or time.monotonic() - last < quiet_s):
            msgs = c.consume(num_messages=10000, timeout=0.5)
            for m in msgs:
                if m.error():
                    if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(m.error())
                got.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                            m.timestamp()[1]))
            if msgs:
                last = time.monotonic()
            elif len(got) >= expect and time.monotonic() - last >= quiet_s:
                break
    finally:
        c.close()
    return sorted(got, key=lambda g: g[:2])


def records(n: int, *, seed: int = 1):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"key-%d" % rng.integers(0, 50)
        headers = [("h", b"%d" % i)] if i % 3 == 0 else []
        if i % 11 == 0:
            headers.append(("null-valued", None))
        out.append({"key": key, "value": b"value-%d-" % i + b"x" * int(rng.integers(0, 200)), "headers": headers,
                    "timestamp": NOW - 1000 + i})
    return out


def as_table(recs):
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.table({"key": pa.array([r["key"] for r in recs], pa.binary()),
                     "value": pa.array([r["value"] for r in recs], pa.binary()),
                     "headers": pa.array([[{"key": k, "value": v} for k, v in r["headers"]] for r in recs],
                                         header_type),
                     "timestamp": pa.array([r["timestamp"] for r in recs], pa.timestamp("ms"))})


def comparable(got):
    """What a consumer sees of a record, offsets aside (they depend on batch boundaries)."""
    return sorted(((p, k, v, h, ts) for p, _, k, v, h, ts in got), key=repr)


@pytest.fixture(scope="module")
def bootstrap(kafka_broker):
    return kafka_broker.bootstrap


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_delivers_what_librdkafka_delivers(bootstrap, codec):
    """The same records through librdkafka (murmur2_random: Kafka's own partitioner) and through
    pykbatch (from Arrow, and one by one) land on the same partitions with the same key, value,
    headers and timestamp."""
    recs = records(600)
    theirs_topic, arrow_topic, send_topic = (f"produce-{codec}-{who}" for who in ("librdkafka", "arrow", "send"))
    for t in (theirs_topic, arrow_topic, send_topic):
        create_topic(bootstrap, t, partitions=3)
    ref = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                                    "partitioner": "murmur2_random", "linger.ms": 5})
    for r in recs:
        if r["key"] is None:  # librdkafka spreads null keys at random; ours are sticky: fix the partition
            ref.produce(theirs_topic, value=r["value"], key=None, headers=r["headers"], timestamp=r["timestamp"],
                        partition=r["timestamp"] % 3)
        else:
            ref.produce(theirs_topic, value=r["value"], key=r["key"], headers=r["headers"], timestamp=r["timestamp"])
    assert ref.flush(60) == 0
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec}) as producer:
        table = as_table(recs).append_column("partition", pa.array(
            [r["timestamp"] % 3 if r["key"] is None else None for r in recs], pa.int32()))
        report = producer.produce_arrow(table, topic=arrow_topic)
        assert report.counts == {"delivered": 600, "dropped": 0, "dead_lettered": 0, "failed": 0}
        deliveries = [producer.send(send_topic, r["value"], key=r["key"], headers=r["headers"],
                                    timestamp=r["timestamp"], partition=r["timestamp"] % 3 if r["key"] is None else None)
                      for r in recs]
        producer.flush()
    theirs = consume_all(bootstrap, theirs_topic, 600)
    arrow = consume_all(bootstrap, arrow_topic, 600)
    sent = consume_all(bootstrap, send_topic, 600)
    assert len(theirs) == 600
    assert comparable(arrow) == comparable(theirs)
    assert comparable(sent) == comparable(theirs)
    # each Delivery names where its record landed, and the report the same for every row
    landed = {(p, o): v for p, o, _, v, _, _ in sent}
    assert all(landed[(d.result().partition, d.result().offset)] == r["value"] for d, r in zip(deliveries, recs))
    at = {(p, o): v for p, o, _, v, _, _ in arrow}
    assert all(at[(int(report.partition[i]), int(report.offset[i]))] == r["value"] for i, r in enumerate(recs))


def test_a_batch_on_disk_is_the_batch_pykbatch_built(bootstrap, kafka_broker):
    """Kafka's own dump tool reads what pykbatch sent: one batch per partition and flush, with
    the producer id, epoch and sequences idempotence gave it, and a CRC that verifies."""
    topic = "produce-dump"
    create_topic(bootstrap, topic)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "batch.size": 1 << 20}) as producer:
        producer.produce([{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(10)], topic=topic)
        producer.produce([{"key": b"k%d" % i, "value": b"w%d" % i} for i in range(5)], topic=topic)
        pid = producer._sender.pid
    files = [f for f in kafka_broker.files(".log") if f"/{topic}-0/" in f]
    out, err = kafka_tools.dump(files)
    batches = [line for line in out.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 2, out
    assert f"producerId: {pid.id} producerEpoch: {pid.epoch}" in batches[0]
    assert "baseSequence: 0 lastSequence: 9" in batches[0] and "baseSequence: 10 lastSequence: 14" in batches[1]
    assert all("isvalid: true" in b for b in batches)


# -- poison records: the broker names them (KIP-467), the rest is delivered -------------------------
POISON_TOPICS = {
    # topic suffix: (topic config, a poison record, the rule the pre-flight names)
    "nokey": ({"cleanup.policy": "compact"}, {"key": None, "value": b"poison"}, "record.compacted_no_key"),
    "future": ({"message.timestamp.after.max.ms": "60000"},
               {"key": b"k", "value": b"poison", "timestamp": NOW + 3_600_000}, "record.timestamp_out_of_range"),
    "large": ({"max.message.bytes": "2000"}, {"key": b"k", "value": b"p" * 5000}, "batch.too_large"),
}


def poisoned(kind: str, n: int = 60, every: int = 10):
    config, poison, _ = POISON_TOPICS[kind]
    out = []
    for i in range(n):
        if i % every == every - 1:
            out.append({**poison, "value": poison["value"] + b"-%d" % i})
        else:
            out.append({"key": b"k%d" % i, "value": b"good-%d" % i})
    return out


def make_poison_topic(bootstrap, kind: str, name: str) -> str:
    create_topic(bootstrap, name, **POISON_TOPICS[kind][0])
    return name


@pytest.mark.parametrize("preflight", [False, True], ids=["broker", "preflight"])
@pytest.mark.parametrize("kind", sorted(POISON_TOPICS))
def test_poison_records_out_every_other_record_delivered(bootstrap, kind, preflight):
    """errors.tolerance=all: the poison records are dropped with the broker's error (named by the
    broker's KIP-467 answer, or found by the pre-flight with the same code and message) and every
    other record lands, in order."""
    topic = make_poison_topic(bootstrap, kind, f"poison-{kind}-{'pre' if preflight else 'broker'}")
    recs = poisoned(kind)
    with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "preflight": preflight,
                   "linger.ms": 50}) as producer:
        report = producer.produce(recs, topic=topic)
        metrics = producer.metrics_dict()
    bad = [i for i in range(len(recs)) if i % 10 == 9]
    assert report.counts == {"delivered": 54, "dropped": 6, "dead_lettered": 0, "failed": 0}
    assert sorted(c.row for c in report.culprits) == bad
    got = consume_all(bootstrap, topic, 54)
    assert [v for _, _, _, v, _, _ in got] == [r["value"] for i, r in enumerate(recs) if i not in bad]
    want_code = {"nokey": "INVALID_RECORD", "future": "INVALID_TIMESTAMP", "large": "MESSAGE_TOO_LARGE"}[kind]
    assert {c.error.name for c in report.culprits} == {want_code}
    for c in report.culprits:
        if kind == "nokey":
            assert c.error.message == f"Compacted topic cannot accept message without key in topic partition {topic}-0"
        if kind == "future":  # the record's offset in its batch, as the broker words it
            assert c.error.message.startswith(f"Timestamp {recs[c.row]['timestamp']} of message with offset ")
    if preflight:
        assert {c.error.source for c in report.culprits} == {"preflight"}
        assert {c.error.rule for c in report.culprits} == {POISON_TOPICS[kind][2]}
        assert metrics["records-named-by-preflight"] == 6 and metrics["records-named-by-broker"] == 0
    else:
        assert {c.error.source for c in report.culprits} == {"broker"}
        assert metrics["total-record-failures"] == 6


def test_preflight_and_broker_say_the_same(bootstrap):
    """For each poison kind that the broker names by record, the pre-flight's code and message are
    the broker's own (the one catalogue)."""
    for kind in ("nokey", "future"):
        said = {}
        for preflight in (False, True):
            topic = make_poison_topic(bootstrap, kind, f"same-{kind}-{preflight}")
            with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "preflight": preflight}) as p:
                report = p.produce(poisoned(kind, n=10), topic=topic)
            (c,) = report.culprits
            said[preflight] = (c.error.code, re.sub(r"\[.*\]", "[window]", c.error.message.replace(topic, "T")))
        assert said[False] == said[True], kind


def test_tolerance_none_fails_the_culprits_and_delivers_the_rest(bootstrap):
    topic = make_poison_topic(bootstrap, "nokey", "poison-none")
    recs = poisoned("nokey", n=30)
    with Producer({"bootstrap.servers": bootstrap, "preflight": False}) as producer:
        with pytest.raises(ProduceFailedError) as caught:
            producer.produce(recs, topic=topic)
    report = caught.value.report
    assert report.counts == {"delivered": 27, "dropped": 0, "dead_lettered": 0, "failed": 3}
    assert all(c.error.code == kb_errors.CODE["INVALID_RECORD"] for c in report.culprits)
    assert "row 9" in str(caught.value)
    assert len(consume_all(bootstrap, topic, 27)) == 27


def test_handler_continue_then_fail(bootstrap):
    """KIP-210: the handler sees each refused record with its error; after its first FAIL it is not
    asked again and the later culprits fail too; the call raises with the full report."""
    topic = make_poison_topic(bootstrap, "nokey", "poison-handler")
    seen = []

    def handler(record, error):
        seen.append((record["value"], error.name))
        return kb_errors.FAIL if len(seen) == 2 else kb_errors.CONTINUE
    recs = poisoned("nokey", n=40)
    with Producer({"bootstrap.servers": bootstrap, "preflight": False, "errors.tolerance": "all", "linger.ms": 100},
                  handler=handler) as producer:
        with pytest.raises(ProduceFailedError) as caught:
            producer.produce(recs, topic=topic)
    report = caught.value.report
    assert [v for v, _ in seen] == [b"poison-9", b"poison-19"]
    assert {n for _, n in seen} == {"INVALID_RECORD"}
    assert report.counts == {"delivered": 36, "dropped": 1, "dead_lettered": 0, "failed": 3}
    assert report.conserved()


def test_dead_letter_topic_carries_connects_headers(bootstrap):
    topic = make_poison_topic(bootstrap, "nokey", "poison-dlq")
    dlq = "poison-dlq-letters"
    create_topic(bootstrap, dlq)
    recs = poisoned("nokey", n=50)
    recs[19]["headers"] = [("trace", b"t-19")]
    with Producer({"bootstrap.servers": bootstrap, "preflight": False, "errors.tolerance": "all",
                   "errors.deadletterqueue.topic.name": dlq}) as producer:
        report = producer.produce(recs, topic=topic)
        metrics = producer.metrics_dict()
    assert report.counts == {"delivered": 45, "dropped": 0, "dead_lettered": 5, "failed": 0}
    assert metrics["deadletterqueue-produce-requests"] == 5 and metrics["deadletterqueue-produce-failures"] == 0
    letters = consume_all(bootstrap, dlq, 5)
    assert [v for _, _, _, v, _, _ in letters] == [b"poison-%d" % i for i in (9, 19, 29, 39, 49)]
    headers = dict(letters[1][4])
    assert headers["trace"] == b"t-19"  # the record's own headers, then Connect's
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.stage"] == b"KAFKA_PRODUCE"
    assert headers["__connect.errors.exception.class.name"] == b"org.apache.kafka.common.InvalidRecordException"
    assert headers["__connect.errors.exception.message"].startswith(b"Compacted topic cannot accept message without key")
    assert headers["__pykbatch.errors.record.index"] == b"19"
    assert len(consume_all(bootstrap, topic, 45)) == 45


def test_too_large_record_found_by_splitting(bootstrap):
    """Without the pre-flight the broker refuses the whole batch (MESSAGE_TOO_LARGE names no
    record): the producer splits it, as Kafka's does, until the one record too large is alone."""
    topic = make_poison_topic(bootstrap, "large", "poison-split")
    recs = [{"key": b"k%d" % i, "value": (b"p" * 3000 if i == 13 else b"v%d" % i)} for i in range(40)]
    with Producer({"bootstrap.servers": bootstrap, "preflight": False, "errors.tolerance": "all",
                   "batch.size": 100000, "linger.ms": 100}) as producer:
        report = producer.produce(recs, topic=topic)
        assert producer.metrics["batch-splits"] >= 1
    assert [c.row for c in report.culprits] == [13]
    assert report.culprits[0].error.name == "MESSAGE_TOO_LARGE"
    got = consume_all(bootstrap, topic, 39)
    assert [v for _, _, _, v, _, _ in got] == [r["value"] for i, r in enumerate(recs) if i != 13]


def test_conservation_with_one_percent_poison(bootstrap):
    """delivered + dropped + dead-lettered == input over many records with 1% poison, every
    dead letter naming its culprit, every good record read back once."""
    n = 1_000_000
    topic = make_poison_topic(bootstrap, "nokey", "conserve")
    dlq = "conserve-dlq"
    create_topic(bootstrap, dlq)
    keys = pa.array([None if i % 100 == 37 else b"k%d" % i for i in range(n)], pa.binary())
    values = pa.array([b"v%08d" % i for i in range(n)], pa.binary())
    with Producer({"bootstrap.servers": bootstrap, "preflight": False, "errors.tolerance": "all",
                   "errors.deadletterqueue.topic.name": dlq, "linger.ms": 20, "batch.size": 262144}) as producer:
        report = producer.produce_arrow(pa.table({"key": keys, "value": values}), topic=topic)
    poison = n // 100
    assert report.counts == {"delivered": n - poison, "dropped": 0, "dead_lettered": poison, "failed": 0}
    assert report.conserved()
    got = consume_all(bootstrap, topic, n - poison, quiet_s=1)
    assert len(got) == n - poison and len({v for *_, v, _, _ in got}) == n - poison
    letters = consume_all(bootstrap, dlq, poison, quiet_s=1)
    assert sorted(v for *_, v, _, _ in letters) == [b"v%08d" % i for i in range(n) if i % 100 == 37]
    assert {dict(h)["__connect.errors.topic"] for *_, h, _ in letters} == {topic.encode()}
    # each dead letter names its culprit: the row it was, and the broker's words for why
    assert all(dict(h)["__pykbatch.errors.record.index"] == v[1:].lstrip(b"0").rjust(1, b"0")
               for *_, v, h, _ in letters)
    assert {dict(h)["__connect.errors.exception.message"] for *_, h, _ in letters} == \
        {f"Compacted topic cannot accept message without key in topic partition {topic}-0".encode()}


def test_cli_produce_names_every_refused_record(bootstrap, tmp_path, capsys):
    """``pykbatch produce``: exit 0 when all landed, 1 (never 'ok') when a record was refused --
    each named with its rule, code and message -- and 2 when it cannot run."""
    from pykbatch.commands import main
    topic = make_poison_topic(bootstrap, "nokey", "cli-produce")
    lines = tmp_path / "in.txt"
    lines.write_bytes(b"k1\tgood-1\nk2\tgood-2\n")
    assert main(["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--input", str(lines),
                 "--parse-key"]) == 0
    assert "2 records: 2 delivered" in capsys.readouterr().out
    table = as_table([{"key": b"k", "value": b"a", "headers": [], "timestamp": NOW},
                      {"key": None, "value": b"poison", "headers": [], "timestamp": NOW}])
    import pyarrow.parquet as pq
    pq.write_table(table, tmp_path / "in.parquet")
    status = main(["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--input",
                   str(tmp_path / "in.parquet"), "--errors-tolerance", "all"])
    out = capsys.readouterr().out
    assert status == 1 and "NOT all delivered" in out and " ok" not in out
    assert "record 1: dropped -- INVALID_RECORD (87) [record.compacted_no_key]" in out
    assert main(["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--input",
                 str(tmp_path / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["produce", "--bootstrap-server", bootstrap, "--topic", "no-such-topic", "--input", str(lines)]) == 2
    assert "does not exist" in capsys.readouterr().err
    got = consume_all(bootstrap, topic, 3)
    assert [v for *_, v, _, _ in got] == [b"good-1", b"good-2", b"a"]


def test_the_produce_pages_examples_run(bootstrap):
    """docs/produce.md's examples, in order, against the session broker (its "localhost:9092")."""
    from tests.test_docs import blocks
    create_topic(bootstrap, "doc-orders")  # the page's "orders", renamed: docs/live.md's test has that one
    create_topic(bootstrap, "doc-orders-dlq")
    namespace: dict = {"__name__": "docs_produce"}
    for code in blocks("produce.md", "python"):
        code = code.replace("localhost:9092", bootstrap).replace('"orders', '"doc-orders')
        exec(compile(code, "docs/produce.md", "exec"), namespace)
    assert namespace["report"].conserved()
    assert namespace["outcome"].outcome == "delivered"
    got = consume_all(bootstrap, "doc-orders", 6, read_committed=True)
    assert b"in a transaction" in [v for *_, v, _, _ in got]


def test_errors_log_has_record_bytes_only_when_asked(bootstrap, caplog):
    """errors.log.enable logs KIP-298's error context for each refused record; the record's bytes
    appear only with errors.log.include.messages -- and never in the connection layer's DEBUG logs."""
    import base64
    import logging
    topic = make_poison_topic(bootstrap, "nokey", "poison-logged")
    secret = b"card-4111111111111111"
    recs = [{"key": b"k", "value": b"fine"}, {"key": None, "value": secret}]
    for include in (False, True):
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "errors.log.enable": "true",
                           "errors.log.include.messages": str(include).lower(), "preflight": False}) as producer:
                report = producer.produce(recs, topic=topic)
        assert report.counts["dropped"] == 1
        logged = [r.getMessage() for r in caplog.records if r.name == "pykbatch.errors"]
        assert len(logged) == 1 and "Compacted topic cannot accept message without key" in logged[0]
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert (base64.b64encode(secret).decode() in text) == include
        assert secret.decode() not in text  # raw bytes never, not even in kafka-python's wire logs


def test_cli_produce_keeps_its_verdict_when_the_reader_goes_away(bootstrap, tmp_path, monkeypatch):
    """``pykbatch produce ... | head -1`` on refused records still exits 1: a closed pipe silences
    the report, never the damage."""
    from pykbatch.commands import main
    topic = make_poison_topic(bootstrap, "nokey", "cli-closed-pipe")
    lines = tmp_path / "in.txt"
    lines.write_bytes(b"no-key-1\nno-key-2\n")

    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError

        def fileno(self):
            return os.open(os.devnull, os.O_WRONLY)
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert main(["produce", "--bootstrap-server", bootstrap, "--topic", topic, "--input", str(lines),
                 "--errors-tolerance", "all"]) == 1
