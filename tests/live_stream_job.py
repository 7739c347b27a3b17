"""A streaming query of kafka-kbatch into Parquet, run as its own process so a test can kill it
(SIGKILL: no clean stop) and start it again on the same checkpoint.

    python tests/live_stream_job.py BOOTSTRAP TOPIC OUT CHECKPOINT MODE [MASTER]
OUT: a Parquet folder, ``kafka-kbatch:GUARANTEE:TOPIC`` -- kafka-kbatch's sink into TOPIC with
deliveryGuarantee GUARANTEE (exactly_once or at_least_once) --,
``kafka-kbatch:exactly_once:TOPIC:GROUP`` -- read-process-write: the source's offsets committed to
GROUP in the sink's transactions, a new checkpoint starting from GROUP's offsets, transactional
ids prefixed GROUP, transactions timing out after 10 s, micro-batches of 60 offsets (200 in "finish")
-- or ``kafka:TOPIC``, Spark's own Kafka
sink (its jars from Maven Central through tests/kafka_tools).  MASTER: local[2] unless given
(``local-cluster[2,1,1024]``: executors in JVMs of their own).
MODE: "run" (a trigger every 200 ms until killed) or "finish" (the same, stopped cleanly once the
checkpoint's last committed batch ends at the topic's latest offsets).  Not Trigger.AvailableNow:
restarted with an uncommitted batch in its checkpoint, Spark 4.3 runs that batch again and stops
there for a Python data source.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(bootstrap, topic, out, checkpoint, mode, master="local[2]"):
    import spark_udfs
    from spark_udfs.session import quiet_session
    conf = {"spark.sql.shuffle.partitions": "2"}
    if out.startswith("kafka:"):
        from tests import kafka_tools
        conf["spark.jars"] = kafka_tools.spark_kafka_jars()
    spark = quiet_session(master, "kafka-kbatch-stream", **conf)
    spark_udfs.register(spark)
    group = out.split(":")[3] if out.startswith("kafka-kbatch:") and out.count(":") == 3 else None
    # read-process-write: more, smaller micro-batches to kill the job in; the run to the end goes faster
    per_trigger = "150" if group is None else ("60" if mode == "run" else "200")
    source = (spark.readStream.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("maxOffsetsPerTrigger", per_trigger).option("errors.tolerance", "all"))
    if group is None:
        stream = source.option("startingOffsets", "earliest").load()
    else:  # where the group's committed offsets say the output ends
        stream = source.option("startingOffsets", "committed").option("kafka.group.id", group).load()
    if group is not None:
        from pyspark.sql.functions import struct
        _, guarantee, output, _ = out.split(":")
        writer = (stream.select("key", "value", struct("topic", "partition", "offset").alias("source"))
                  .writeStream.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", output).option("deliveryGuarantee", guarantee)
                  .option("sourceOffsetsGroup", group).option("transactionalIdPrefix", group)
                  .option("kafka.transaction.timeout.ms", "10000").option("checkpointLocation", checkpoint))
    elif out.startswith("kafka-kbatch:"):
        _, guarantee, output = out.split(":", 2)
        writer = (stream.select("key", "value").writeStream.format("kafka-kbatch")
                  .option("kafka.bootstrap.servers", bootstrap).option("topic", output)
                  .option("deliveryGuarantee", guarantee).option("checkpointLocation", checkpoint))
    elif out.startswith("kafka:"):
        writer = (stream.select("key", "value").writeStream.format("kafka")
                  .option("kafka.bootstrap.servers", bootstrap).option("topic", out.split(":", 1)[1])
                  .option("checkpointLocation", checkpoint))
    else:
        writer = stream.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
    query = writer.trigger(processingTime="200 milliseconds").start()
    print("STARTED", flush=True)
    if mode == "finish":
        import json
        import time
        from pathlib import Path

        from spark_udfs.live_source import Options, resolve
        latest = resolve(Options.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=True),
                         "latest")
        ck = Path(checkpoint)
        while query.isActive:
            done = sorted(int(p.name) for p in (ck / "commits").glob("*") if p.name.isdigit())
            if done and json.loads((ck / "offsets" / str(done[-1])).read_text().splitlines()[-1]) == latest:
                break
            time.sleep(0.3)
        query.stop()
    else:
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
