"""kafka-kbatch as a Spark sink, on the session's broker: the same poison DataFrame (rows with no
key, for a compacted topic) fails Spark's built-in Kafka sink and completes with pykbatch's --
every other row delivered, the culprits dead-lettered -- in a batch write and a streaming query."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import kafka_tools
from tests.live_damage import create_topic
from tests.test_live_produce import consume_all

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))]
pytest.importorskip("confluent_kafka")
ROOT = Path(__file__).resolve().parents[1]
ROWS, POISON_EVERY = 5000, 100  # rows whose id % 100 == 7 have no key


@pytest.fixture(scope="module")
def registered(spark):
    import spark_udfs
    spark_udfs.register(spark)
    return spark


def poison_frame(spark):
    return spark.range(0, ROWS).selectExpr(
        f"CASE WHEN id % {POISON_EVERY} = 7 THEN NULL ELSE CAST(id AS STRING) END AS key",
        "CAST(id AS STRING) AS value")


def good_values():
    return sorted(str(i).encode() for i in range(ROWS) if i % POISON_EVERY != 7)


SPARK_SINK = """
import sys
from spark_udfs.session import quiet_session
spark = quiet_session("local[2]", "spark-kafka-sink-contrast", **{"spark.jars": sys.argv[3]})
df = spark.range(0, %d).selectExpr("CASE WHEN id %% %d = 7 THEN NULL ELSE CAST(id AS STRING) END AS key",
                                   "CAST(id AS STRING) AS value")
df.write.format("kafka").option("kafka.bootstrap.servers", sys.argv[1]).option("topic", sys.argv[2]).save()
print("WROTE", flush=True)
""" % (ROWS, POISON_EVERY)


def test_sparks_own_kafka_sink_fails_the_poison_frame(kafka_broker):
    """The contrast: the Java producer under Spark's sink fails every record of a batch holding a
    keyless record for a compacted topic, and the task (then the job) fails."""
    try:
        jars = kafka_tools.spark_kafka_jars()
    except RuntimeError as exc:
        pytest.skip(f"Spark's Kafka sink could not be fetched from Maven Central: {exc}")
    topic = "spark-sink-contrast"
    create_topic(kafka_broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", SPARK_SINK, kafka_broker.bootstrap, topic, jars], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "WROTE" not in proc.stdout, proc.stdout[-2000:]
    # every innocent record of the batch fails with the culprit (KIP-467's client side not done)
    assert "part of a batch which had one more more invalid records" in proc.stderr, proc.stderr[-3000:]


def test_kafka_kbatch_sink_delivers_every_other_row(registered, kafka_broker):
    topic, dlq = "spark-sink-ours", "spark-sink-ours-dlq"
    create_topic(kafka_broker.bootstrap, topic, partitions=2, **{"cleanup.policy": "compact"})
    create_topic(kafka_broker.bootstrap, dlq)
    (poison_frame(registered).write.format("kafka-kbatch").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
     .option("topic", topic).option("errors.tolerance", "all").option("errors.deadletterqueue.topic.name", dlq)
     .mode("append").save())
    got = consume_all(kafka_broker.bootstrap, topic, len(good_values()))
    assert sorted(v for *_, v, _, _ in got) == good_values()
    letters = consume_all(kafka_broker.bootstrap, dlq, ROWS // POISON_EVERY)
    assert sorted(v for *_, v, _, _ in letters) == sorted(str(i).encode() for i in range(ROWS) if i % POISON_EVERY == 7)
    assert {dict(h)["__connect.errors.exception.class.name"] for *_, h, _ in letters} == \
        {b"org.apache.kafka.common.InvalidRecordException"}


def test_a_batch_write_exactly_once_is_named_and_a_rerun_under_its_name_writes_nothing(registered, kafka_broker):
    """df.write with deliveryGuarantee=exactly_once: refused without transactionalIdPrefix (on the
    driver, naming it); with one, the good rows once and the culprits in the dead letters, in each
    task's transaction; the same job again under the same name adds nothing, under a new name it
    writes again."""
    bootstrap = kafka_broker.bootstrap
    topic, dlq = "spark-sink-eos", "spark-sink-eos-dlq"
    create_topic(bootstrap, topic, partitions=2, **{"cleanup.policy": "compact"})
    create_topic(bootstrap, dlq)

    def write(**extra):
        (poison_frame(registered).repartition(3).write.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("errors.tolerance", "all").option("errors.deadletterqueue.topic.name", dlq)
         .option("deliveryGuarantee", "exactly_once").options(**extra).mode("append").save())
    with pytest.raises(Exception, match="needs transactionalIdPrefix"):
        write()
    write(transactionalIdPrefix="nightly-1")
    write(transactionalIdPrefix="nightly-1")  # a rerun: every task finds its batch written
    once = consume_all(bootstrap, topic, len(good_values()), read_committed=True)
    assert sorted(v for *_, v, _, _ in once) == good_values()
    assert len(consume_all(bootstrap, dlq, ROWS // POISON_EVERY, read_committed=True)) == ROWS // POISON_EVERY
    write(transactionalIdPrefix="nightly-2")
    twice = consume_all(bootstrap, topic, 2 * len(good_values()), read_committed=True)
    assert sorted(v for *_, v, _, _ in twice) == sorted(good_values() * 2)


def test_batch_jobs_from_a_group_go_on_where_the_last_committed_and_a_shuffle_is_refused(registered, kafka_broker):
    """Read-process-write in batch: a job reading kafka-kbatch from its group's committed offsets
    and writing with sourceOffsetsGroup commits them in its transactions, so the next job (a new
    name) reads only what came after; the output holds each row once and the group ends at the
    input's end.  A job whose shuffle spreads a source partition over two tasks is refused."""
    from pyspark.sql.functions import struct

    from pykbatch.live import Cluster, TopicPartition
    from tests.live_damage import produce_batches, value_of
    bootstrap = kafka_broker.bootstrap
    source, output, group = "rpw-batch-in", "rpw-batch-out", "rpw-batch"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, output, partitions=2)

    def job(name, shuffle=False):
        df = (registered.read.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "committed").option("kafka.group.id", group)
              .load().select("key", "value", struct("topic", "partition", "offset").alias("source")))
        if shuffle:
            df = df.repartition(2, "value")
        (df.write.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap).option("topic", output)
         .option("deliveryGuarantee", "exactly_once").option("transactionalIdPrefix", name)
         .option("sourceOffsetsGroup", group).mode("append").save())

    produce_batches(bootstrap, source, 3, partition=0)
    produce_batches(bootstrap, source, 2, partition=1, first_offset=1000)
    job("rpw-1")
    produce_batches(bootstrap, source, 2, partition=0, first_offset=60)
    job("rpw-2")
    job("rpw-3")  # nothing new: nothing read, nothing written
    want = sorted([value_of(o) for o in range(100)] + [value_of(1000 + o) for o in range(40)])
    got = consume_all(bootstrap, output, len(want), read_committed=True)
    assert sorted(v for *_, v, _, _ in got) == want
    tps = [TopicPartition(source, 0), TopicPartition(source, 1)]
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        assert cluster.committed(group, tps) == {tps[0]: 100, tps[1]: 40}
    produce_batches(bootstrap, source, 3, partition=1, first_offset=1040)
    with pytest.raises(Exception, match="was written by two tasks of one batch"):
        job("rpw-4", shuffle=True)


def test_kafka_kbatch_sink_tolerance_none_fails_the_task_naming_the_row(registered, kafka_broker):
    topic = "spark-sink-none"
    create_topic(kafka_broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    with pytest.raises(Exception, match="Compacted topic cannot accept message without key"):
        (poison_frame(registered).write.format("kafka-kbatch").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
         .option("topic", topic).mode("append").save())


def test_kafka_kbatch_sink_unknown_option_is_named(registered, kafka_broker):
    with pytest.raises(Exception, match="unknown option"):
        (poison_frame(registered).write.format("kafka-kbatch").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
         .option("topik", "x").mode("append").save())


def test_streaming_query_writes_through_the_sink(registered, kafka_broker, tmp_path):
    """writeStream: a file source's rows through kafka-kbatch (availableNow), poison rows dropped."""
    topic = "spark-sink-stream"
    create_topic(kafka_broker.bootstrap, topic, **{"cleanup.policy": "compact"})
    source = tmp_path / "in"
    poison_frame(registered).write.parquet(str(source))
    stream = registered.readStream.schema("key STRING, value STRING").parquet(str(source))
    query = (stream.writeStream.format("kafka-kbatch").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
             .option("topic", topic).option("errors.tolerance", "all")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    got = consume_all(kafka_broker.bootstrap, topic, len(good_values()))
    assert sorted(v for *_, v, _, _ in got) == good_values()


def test_current_timestamp_rows_are_written_and_overwrite_is_refused(registered, kafka_broker):
    """Spark's TimestampType carries microseconds (current_timestamp()): taken as Spark's own sink
    takes them (milliseconds); a topic cannot be overwritten, so that mode is refused, not ignored."""
    import time
    topic = "spark-sink-timestamps"
    create_topic(kafka_broker.bootstrap, topic)
    before = int(time.time() * 1000)
    frame = registered.range(0, 50).selectExpr("CAST(id AS STRING) AS value", "current_timestamp() AS timestamp")
    writer = frame.write.format("kafka-kbatch").option("kafka.bootstrap.servers", kafka_broker.bootstrap) \
        .option("topic", topic)
    writer.mode("append").save()
    got = consume_all(kafka_broker.bootstrap, topic, 50)
    assert sorted(v for *_, v, _, _ in got) == sorted(str(i).encode() for i in range(50))
    assert all(before - 1000 <= ts <= int(time.time() * 1000) for *_, ts in got)
    with pytest.raises(Exception, match="Save mode Overwrite not allowed"):
        writer.mode("overwrite").save()
    assert len(consume_all(kafka_broker.bootstrap, topic, 50)) == 50  # nothing appended by the refused write
