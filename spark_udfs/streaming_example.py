"""Structured Streaming with pykbatch: raw record batches arrive as files (here Parquet with a
``value`` column, as a Kafka topic carrying raw batches would land them); each micro-batch is
validated, the good batches exploded into records and the bad ones written to a dead-letter
sink with their error context.

    python -m spark_udfs.streaming_example INPUT_DIR OUTPUT_DIR
"""
import sys


def start(spark, input_dir: str, output_dir: str, *, available_now: bool = True):
    """Starts the query: records to OUTPUT_DIR/records, dead letters to OUTPUT_DIR/dead-letters."""
    from spark_udfs import explode_records
    from spark_udfs.dead_letters import ErrorPolicy, split_dead_letters

    policy = ErrorPolicy(tolerance="all")

    def process(micro_batch, batch_id):
        good, dead = split_dead_letters(micro_batch, "value", policy, topic_col="topic", partition_col="partition")
        explode_records(good, "value").write.mode("append").parquet(f"{output_dir}/records")
        dead.write.mode("append").parquet(f"{output_dir}/dead-letters")

    stream = spark.readStream.schema("topic string, partition int, value binary").parquet(input_dir)
    writer = stream.writeStream.foreachBatch(process).option("checkpointLocation", f"{output_dir}/_checkpoint")
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="10 seconds")
    return writer.start()


def main(argv=None):
    from spark_udfs.session import quiet_session
    argv = argv or sys.argv[1:]
    spark = quiet_session("local[2]", "pykbatch-streaming")
    start(spark, argv[0], argv[1]).awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
