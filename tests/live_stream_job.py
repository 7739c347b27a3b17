"""A streaming query of kafka-kbatch into Parquet, run as its own process so a test can kill it
(SIGKILL: no clean stop) and start it again on the same checkpoint.

    python tests/live_stream_job.py BOOTSTRAP TOPIC OUT CHECKPOINT MODE
MODE: "run" (a trigger every 200 ms until killed) or "finish" (availableNow: everything, then exit).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(bootstrap, topic, out, checkpoint, mode):
    import spark_udfs
    from spark_udfs.session import quiet_session
    spark = quiet_session("local[2]", "kafka-kbatch-stream", **{"spark.sql.shuffle.partitions": "2"})
    spark_udfs.register(spark)
    stream = (spark.readStream.format("kafka-kbatch").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150")
              .option("errors.tolerance", "all").load())
    writer = stream.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
    writer = writer.trigger(availableNow=True) if mode == "finish" else writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    print("STARTED", flush=True)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
