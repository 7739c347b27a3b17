"""read_committed on the session's real broker: pykbatch's live reader against librdkafka's
read_committed consumer on a topic of committed, aborted and still-open transactions from two
producers between plain records; and a damaged ABORT marker, whose decision pykbatch never guesses."""
from __future__ import annotations

import time

import pytest

from pykbatch.live import Reader
from pykbatch.policy import ErrorPolicy
from tests import kafka_tools
from tests.live_damage import batches_on_disk, create_topic, damage, wait_until_served

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "live-txn"


def transactional(bootstrap, tid):
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    return p


def transaction(p, topic, values, commit):
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v)
    p.flush(30)  # on the broker before the outcome: an abort leaves records and a marker behind
    (p.commit_transaction if commit else p.abort_transaction)(30)


def librdkafka_read_committed(bootstrap, topic, quiet_s=3.0) -> list[tuple[int, bytes]]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{topic}-{time.time()}",
                                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    got, last, deadline = [], None, time.monotonic() + 60
    try:  # until quiet for quiet_s after the first record (or a minute without one)
        while time.monotonic() < deadline and (last is None or time.monotonic() - last < quiet_s):
            for m in c.consume(num_messages=500, timeout=0.5):
                assert not m.error(), m.error()
                got.append((m.offset(), m.value()))
                last = time.monotonic()
    finally:
        c.close()
    return got


@pytest.fixture(scope="module")
def transactions(kafka_broker):
    bootstrap = kafka_broker.bootstrap
    create_topic(bootstrap, TOPIC)
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    a, b = transactional(bootstrap, "live-a"), transactional(bootstrap, "live-b")
    for round_ in range(3):
        transaction(a, TOPIC, [b"a%d-%d" % (round_, i) for i in range(7)], commit=round_ != 1)
        plain.produce(TOPIC, value=b"plain-%d" % round_)
        plain.flush(30)
        transaction(b, TOPIC, [b"b%d-%d" % (round_, i) for i in range(5)], commit=round_ != 2)
    # a transaction left open: nothing at or after its first offset is stable yet
    a.begin_transaction()
    a.produce(TOPIC, value=b"open")
    a.flush(30)
    plain.produce(TOPIC, value=b"after-open")
    plain.flush(30)
    yield bootstrap
    a.abort_transaction(30)


def test_read_committed_equals_librdkafka(transactions):
    bootstrap = transactions
    theirs = librdkafka_read_committed(bootstrap, TOPIC)
    with Reader({"bootstrap.servers": bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets="latest", isolation_level="read_committed") as reader:
        table = reader.read()
    ours = list(zip(table.column("offset").to_pylist(), table.column("value").to_pylist()))
    assert ours == theirs
    values = {v for _, v in ours}
    assert b"a0-0" in values and b"a1-0" not in values and b"b2-0" not in values  # aborted: left out
    assert b"open" not in values and b"after-open" not in values  # at or past the last stable offset
    assert reader.skips == []


def test_read_uncommitted_sees_everything_but_markers(transactions):
    bootstrap = transactions
    with Reader({"bootstrap.servers": bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets="latest") as reader:
        values = reader.read().column("value").to_pylist()
    assert b"a1-0" in values and b"open" in values and b"after-open" in values
    assert len(values) == 3 * 7 + 3 + 3 * 5 + 2


def test_a_damaged_abort_marker_holds_back_what_it_would_decide(kafka_broker):
    """Producer P aborts a transaction, then commits the next; P's ABORT marker is damaged on disk.
    A reader cannot tell whether the unreadable entry ended P's aborted transaction, so the
    committed transaction's records are held back and reported, never guessed."""
    bootstrap, topic = kafka_broker.bootstrap, "live-txn-marker"
    create_topic(bootstrap, topic, **{"internal.segment.bytes": 4096})
    p = transactional(bootstrap, "live-marker")
    transaction(p, topic, [b"aborted-%d" % i for i in range(5)], commit=False)
    transaction(p, topic, [b"committed-%d" % i for i in range(5)], commit=True)
    filler = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 10})
    for i in range(200):  # later segments: the marker's segment is closed
        filler.produce(topic, value=b"filler-%03d" % i + b"." * 60)
    filler.flush(30)
    kafka_broker.stop()
    try:
        on_disk = batches_on_disk(kafka_broker.data / f"{topic}-0")
        (abort,) = [b for b in on_disk[:4] if b.last_offset == b.base_offset and b.base_offset == 5]
        damage(abort, "flip")
    finally:
        kafka_broker.start()
    wait_until_served(bootstrap, topic)
    with Reader({"bootstrap.servers": bootstrap}, subscribe=topic, starting_offsets="earliest",
                ending_offsets="latest", isolation_level="read_committed",
                policy=ErrorPolicy(tolerance="all")) as reader:
        values = reader.read().column("value").to_pylist()
        skips = [(s.first_offset, s.last_offset, s.rule, s.held) for s in reader.skips]
    assert not any(v.startswith(b"aborted") for v in values)
    assert not any(v.startswith(b"committed") for v in values)  # held back, not guessed
    assert sum(v.startswith(b"filler") for v in values) == 200
    assert skips == [(5, 5, "batch.crc_mismatch", False), (6, 10, "consumer.marker_unreadable", True)]


@pytest.mark.spark
def test_the_spark_source_reads_committed_as_librdkafka_does(transactions, spark):
    import spark_udfs
    spark_udfs.register(spark)
    bootstrap = transactions
    df = (spark.read.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
          .option("kafka.isolation.level", "read_committed").load())
    ours = [(r.offset, r.value) for r in df.select("offset", "value").orderBy("offset").collect()]
    assert ours == [(o, bytes(v)) for o, v in librdkafka_read_committed(bootstrap, TOPIC)]
