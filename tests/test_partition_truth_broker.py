"""One verdict of a partition a real broker wrote, with drawn damage (tests/test_partition_truth.py's
checks, on Kafka 4.3.1's own files instead of files laid out by tests/partition_damage.py).

kafka-python (every codec, headers, null keys and values) and confluent-kafka (librdkafka:
idempotent, and transactional with commits and aborts) produce to a topic whose segments roll every
100 ms; the broker is stopped cleanly and its partition directory copied (segments, indexes,
.txnindex, producer snapshots, checkpoints as the broker leaves them).  What was written is the
producers' own record -- each record's offset from its delivery report, its key, value, headers and
timestamp as sent -- and the batches' places in the files are read with this module's own parse of
the v2 framing (never pykbatch's).  Then, per case, damage drawn from tests/partition_damage.KINDS
on a copy.  PYKBATCH_PARTITION_SEED replays a run; PYKBATCH_BROKER_CASES sets how many cases."""
from __future__ import annotations

import os
import random
import shutil
import struct
import time

import pytest

from pykbatch.config import ValidationConfig
from pykbatch.log.audit import audit_partition
from tests.partition_damage import CODECS, Case, OnDisk, Written, damaged
from tests.test_partition_truth import SEED, assert_kafka_reads_the_repairs, assert_one_verdict

CASES = int(os.environ.get("PYKBATCH_BROKER_CASES", "30"))
TOPIC = "truth-real"
COMPACTED = "truth-compacted"


def _produce(bootstrap: str, topic: str) -> dict:
    """offset -> Written: what the producers sent to ``topic``, at the offsets the broker gave
    them.  For the compacted topic every record has a key, from few, and some are tombstones."""
    from kafka import KafkaProducer
    rng = random.Random(20261207)
    written: dict = {}
    clock = 1_700_000_000_000
    compacted = topic == COMPACTED

    def record(i: int):
        key = b"key-%d" % rng.randrange(8 if compacted else 40)
        if not compacted and i % 7 == 3:
            key = None
        value = None if i % 13 == 0 and key is not None else rng.randbytes(rng.randint(0, 300))
        headers = [("h", b"x"), ("e", b"")] if i % 5 == 0 else []
        return key, value, headers

    n = 0
    for round_, codec in enumerate(list(CODECS) * 2):  # a segment or more per round (segment.ms 100)
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                          linger_ms=5)
        futures = []
        for _ in range(rng.randint(5, 25)):
            key, value, headers = record(n)
            ts = clock + n
            futures.append((p.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts),
                            key, value, tuple(headers), ts))
            n += 1
            if rng.random() < 0.2:
                p.flush()
        p.flush()
        for future, key, value, headers, ts in futures:
            written[future.get(30).offset] = Written(future.get(30).offset, key, value, headers, ts)
        p.close()
        _confluent(bootstrap, topic, rng, written, round_, clock + 10_000 + 100 * round_)
        time.sleep(0.15)
    return written


def _confluent(bootstrap: str, topic: str, rng: random.Random, written: dict, round_: int, ts: int) -> None:
    """librdkafka's batches: idempotent, or a transaction that commits or aborts."""
    from confluent_kafka import Producer
    sent = []

    def delivered(err, msg, headers):
        assert err is None, err
        sent.append((msg, headers))  # a delivery report does not carry the headers sent

    codec = rng.choice(["none", "gzip", "snappy", "lz4", "zstd"])
    style = rng.choice(["idempotent", "commit", "abort"])
    conf = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5}
    if style == "idempotent":
        conf["enable.idempotence"] = True
    else:
        conf["transactional.id"] = f"{topic}-{round_}"
    p = Producer(conf)
    if style != "idempotent":
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(rng.randint(3, 15)):
        key = b"c-%d" % rng.randrange(8 if topic == COMPACTED else 40)
        value = rng.randbytes(rng.randint(0, 200))
        headers = [("lib", b"rdkafka")] if i % 4 == 0 else []
        p.produce(topic, key=key, value=value, headers=headers, timestamp=ts + i,
                  on_delivery=lambda err, msg, h=tuple(headers): delivered(err, msg, h))
    p.flush(30)
    if style == "commit":
        p.commit_transaction(30)
    elif style == "abort":
        p.abort_transaction(30)
    for m, headers in sent:
        written[m.offset()] = Written(m.offset(), m.key(), m.value(), headers, m.timestamp()[1])


def _layout(directory, written: dict) -> tuple[list, list]:
    """The segments' base offsets and their batches' places, by this module's parse of the framing
    (base offset, size, attributes, last offset delta), each batch holding the records written at
    its offsets that kafka-python reads in it (the cleaner removed the others)."""
    from kafka.record import MemoryRecords
    logs = sorted(p for p in os.listdir(directory) if p.endswith(".log"))
    segments, batches = [], []
    for s, name in enumerate(logs):
        segments.append(int(name[:-4]))
        data = open(os.path.join(directory, name), "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            attributes = struct.unpack_from(">h", data, pos + 21)[0]
            last = base + struct.unpack_from(">i", data, pos + 23)[0]
            control = bool(attributes & 0x20)
            codec = next(c for c, i in CODECS.items() if i == attributes & 7)
            present = set()
            if not control:
                batch = MemoryRecords(data[pos:pos + length + 12]).next_batch()
                present = {r.offset for r in batch}
            records = [written[o] for o in sorted(present)]
            batches.append(OnDisk(s, pos, length + 12, base, last, codec, control, records))
            pos += length + 12
        assert pos == len(data), (name, pos, len(data))  # a clean shutdown leaves whole batches
    return segments, batches


@pytest.fixture(scope="module")
def broker_partitions(kafka_broker, tmp_path_factory):
    """topic -> (directory, segment base offsets, batches, compacted) of the two topics, as a
    clean shutdown leaves them."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    cleaned = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
               "delete.retention.ms": "100"}
    kept = {"segment.ms": "100", "retention.ms": "-1"}  # records stamped 2023: time retention would delete them
    topics = [NewTopic(TOPIC, 1, 1, config=kept), NewTopic(COMPACTED, 1, 1, config={**kept, **cleaned})]
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)
    written = {topic: _produce(kafka_broker.bootstrap, topic) for topic in (TOPIC, COMPACTED)}
    time.sleep(4)  # the cleaner (backoff 200 ms) over the compacted topic's rolled segments
    copy = kafka_broker.snapshot(tmp_path_factory.mktemp("truth-real"), (TOPIC, COMPACTED, "__cluster_metadata"))
    out = {}
    for topic in (TOPIC, COMPACTED):
        directory = copy / f"{topic}-0"
        segments, batches = _layout(directory, written[topic])
        assert len(segments) >= 2 and (topic == COMPACTED or any(b.control for b in batches)), (topic, segments)
        held = {r.offset for b in batches for r in b.records}
        if topic == TOPIC:
            assert held == set(written[topic]), "every record written is in the copied partition"
        else:  # the cleaner ran: records removed, the newest of each key kept
            assert held < set(written[topic]), "the cleaner removed nothing"
        out[topic] = (directory, segments, batches, topic == COMPACTED)
    return out


@pytest.fixture(params=[TOPIC, COMPACTED])
def broker_partition(request, broker_partitions):
    return broker_partitions[request.param]


def test_the_broker_wrote_what_the_producers_sent(broker_partition):
    """The generator's record holds: kafka-python reads every batch of the copy back as sent."""
    from kafka.record import MemoryRecords
    directory, segments, batches, _ = broker_partition
    by_offset = {r.offset: r for b in batches for r in b.records}
    seen = 0
    for name in sorted(p for p in os.listdir(directory) if p.endswith(".log")):
        records = MemoryRecords(open(directory / name, "rb").read())
        while records.has_next():
            batch = records.next_batch()
            if batch.is_control_batch:
                continue
            for r in batch:
                w = by_offset[r.offset]
                assert (r.key, r.value, tuple((k, v) for k, v in r.headers), r.timestamp) == \
                    (w.key, w.value, w.headers, w.timestamp), r.offset
                seen += 1
    assert seen == len(by_offset)


def test_the_brokers_transaction_indexes_are_what_its_log_aborted(broker_partition):
    """The check of the .txnindex files against the log (pykbatch/log/txn_index.py) on the
    broker's own: every entry is one the log supports, none missing -- and there are entries."""
    from pykbatch.log.indexes import TxnIndex
    directory, _, _, compacted = broker_partition
    audit = audit_partition(str(directory), ValidationConfig(origin="log", topic_partition="t-0",
                                                             compacted=compacted))
    assert audit.index_problems == [] and audit.ok
    entries = [e for p in sorted(directory.glob("*.txnindex")) for e in TxnIndex.from_file(str(p)).entries]
    aborted = [t for t in audit.producers.completed_transactions if t.is_aborted]
    assert aborted and (compacted or len(entries) == len(aborted)), (entries, aborted)


def test_the_cli_takes_a_topics_compaction_from_the_kraft_metadata_beside_it(broker_partition):
    """Without --compacted, validate --segment, dump and repair read the topic's cleanup.policy
    from the broker's metadata log in the same log directory (pykbatch/log/cleanup_policy.py): the
    cleaner's gaps in the compacted topic are not damage, and the other topic is not taken as
    compacted.  A copy of the partition alone (no metadata beside it) is not read as compacted."""
    from pykbatch.log.cleanup_policy import cleanup_policy
    from tests.test_damage_contract import run
    directory, _, _, compacted = broker_partition
    assert (directory.parent / "__cluster_metadata-0").is_dir()
    policy = cleanup_policy(str(directory))
    assert policy is not None and policy.compacted == compacted, policy
    status, out, err = run(["validate", "--segment", str(directory)])
    assert status == 0, (out, err)
    assert ("cleanup.policy=compact" in err) == compacted, err
    status, _, err = run(["dump", "--files", str(directory)])
    assert status == 0, err
    if compacted:  # the cleaner's gaps, read without the metadata: named as offsets missing
        alone = directory.parent.parent / "alone" / directory.name
        shutil.copytree(directory, alone)
        assert cleanup_policy(str(alone)) is None
        status, out, _ = run(["validate", "--segment", str(alone)])
        assert status == 1 and "log.offset_gap" in out, out


def _drawn(broker_partition, seed: int, target) -> Case:
    """The broker's partition copied to ``target``, with damage drawn by ``seed``."""
    directory, segments, batches, compacted = broker_partition
    shutil.copytree(directory, target)
    return damaged(Case(seed, target, list(segments), [OnDisk(**vars(b)) for b in batches], compacted=compacted),
                   seed)


@pytest.mark.parametrize("case", range(CASES))
def test_every_tool_gives_a_broker_written_partition_one_verdict(broker_partition, case, tmp_path):
    print(f"PYKBATCH_PARTITION_SEED={SEED} case {case} (broker-written)")
    c = _drawn(broker_partition, SEED * 1000 + 700 + case, tmp_path / "t-0")
    print(c.describe())
    assert_one_verdict(c, tmp_path)


def test_kafka_reads_each_repaired_broker_written_partition_as_written(broker_partition, tmp_path):
    """tests/test_partition_truth.py's UnifiedLog check of the repairs, on the broker's own files
    damaged (librdkafka's transactions, kafka-python's codecs)."""
    print(f"PYKBATCH_PARTITION_SEED={SEED}")
    assert_kafka_reads_the_repairs((_drawn(broker_partition, SEED * 1000 + 900 + case,
                                           tmp_path / f"case{case}" / "t-0") for case in range(CASES)), tmp_path)


SPARK_CASES = int(os.environ.get("PYKBATCH_BROKER_SPARK_CASES", "2"))


@pytest.mark.spark
def test_kafka_segment_gives_a_broker_written_partition_one_verdict_on_both_paths(broker_partition, spark, tmp_path):
    """Spark's kafka-segment, JVM and Python paths, on drawn damage to the broker's partitions
    (tests/test_partition_truth_spark.py's checks: the same rows on both paths and under any cut,
    a row for every range that cannot be read, every untouched record read as written)."""
    pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")
    from tests.test_partition_truth_spark import assert_both_paths_give_the_one_verdict
    print(f"PYKBATCH_PARTITION_SEED={SEED} (broker-written, Spark)")
    for case in range(SPARK_CASES):
        seed = SEED * 1000 + 900 + case
        c = _drawn(broker_partition, seed, tmp_path / f"case{case}" / "t-0")
        print(case, c.describe())
        assert_both_paths_give_the_one_verdict(spark, c, random.Random(seed))
