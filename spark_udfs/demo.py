"""The demo job: the pipeline a user runs over raw Kafka record batches in Spark.

    python -m spark_udfs.demo [--batches 20] [--master local[2]]

1. validate every batch and print every culprit, with KIP-467's view of the failing ones;
2. repair: drop the culprit records and keep the rest of their batch (``kbatch_repair``, the
   client side of KIP-467 / KIP-1059), so one poison record does not sink its batch;
3. route what cannot be kept to dead letters with its error context: the dropped records, and
   the batches damaged as a whole (a CRC mismatch, a lying record count), through
   ``split_dead_letters`` with ``errors.tolerance=all`` (KIP-298);
4. print Connect's task error metrics and the record ledger: input = good + dead-lettered + skipped.

The sample (pykbatch.samples) is 20 producer batches of 10 JSON orders, four damaged on purpose:
a flipped bit (3), a lying key length (7), swapped offsets (11), a lying record count (15).
Rows hold one batch each.
"""
from __future__ import annotations

import argparse
import sys


def run(spark, n_batches: int = 20, show: bool = True) -> dict:
    """Runs the pipeline over the sample; returns its record ledger (what ``main`` prints)."""
    from pyspark.sql import functions as F

    import spark_udfs
    from pykbatch.samples import FAULTS, sample_batches
    from spark_udfs.dead_letters import ErrorPolicy, split_dead_letters

    def out(title, df, **kwargs):
        if show:
            print(f"\n== {title} ==")
            df.show(**kwargs)

    from spark_udfs import jvm
    from spark_udfs.functions import PATH_SETTING
    path = spark.conf.get(PATH_SETTING, None) or spark_udfs.register(spark)  # as the session has them, else anew
    if show:
        print("\n== pykbatch's Spark functions: " + (
            "the JVM path (the C core called from Spark's JVM, no Python worker) ==" if path == "jvm" else
            f"the Python path (Arrow UDFs): {jvm.unavailable_reason() or 'pykbatch jar not on this session'} =="))
    rows = [("orders", 0, i, b) for i, b in enumerate(sample_batches(n_batches))]
    raw = spark.createDataFrame(rows, "topic string, partition int, batch_id int, value binary")
    raw.createOrReplaceTempView("raw_batches")
    if show:
        print("\n== Planted faults ==")
        for i, what in FAULTS.items():
            if i < n_batches:
                print(f"  batch {i}: {what}")

    # 1. validate (once: the three views below read the same results)
    validated = spark.sql("SELECT batch_id, kbatch_validate(value) AS v FROM raw_batches").cache()
    validated.createOrReplaceTempView("validated")
    out("Validation summary", spark.sql("""
        SELECT v.ok, v.error_name, count(*) AS batches, sum(v.records) AS records_read
        FROM validated GROUP BY v.ok, v.error_name ORDER BY v.ok DESC, v.error_name"""), truncate=False)
    out("Every culprit", spark.sql("""
        SELECT batch_id, c.record_index, c.relative_offset, c.name, c.rule, c.position, c.message
        FROM validated LATERAL VIEW explode(v.culprits) AS c
        ORDER BY batch_id, c.position"""), truncate=70)
    out("KIP-467 view of the batches with record errors", spark.sql("""
        SELECT batch_id, v.error_code, v.error_records, v.error_message
        FROM validated WHERE size(v.error_records) > 0 ORDER BY batch_id"""), truncate=60, vertical=True)

    # 2. repair: culprit records out, the rest of their batch kept.  A batch damaged as a whole
    # cannot be repaired: its row keeps the original bytes so step 3 dead-letters it as it is.
    info = F.aggregate(spark_udfs.kbatch_batch_info("value"), F.lit(0), lambda acc, b: acc + b["record_count"])
    repaired = (raw.withColumn("input_records", info)
                .withColumn("r", spark_udfs.kbatch_repair("value"))
                .withColumn("value", F.when(F.col("r.unrepairable_batches") > 0, F.col("value"))
                            .otherwise(F.col("r.data")))
                .cache())
    dropped = (repaired.filter(F.col("r.unrepairable_batches") == 0)
               .select("topic", "partition", "batch_id", F.explode("r.dropped").alias("d"))
               .select("topic", "partition", "batch_id", "d.record_index", "d.offset", "d.key", "d.value", "d.code",
                       "d.rules", "d.message"))
    out("Dead letters: records dropped from their batches (the rest of each batch is kept)",
        dropped.select("batch_id", "record_index", "offset", "code", "rules", "message")
        .orderBy("batch_id", "record_index"), truncate=70)

    # 3. what still fails is a batch damaged as a whole: dead letters with KIP-298's error context
    split = split_dead_letters(repaired.drop("r"), "value", ErrorPolicy(tolerance="all"),
                               topic_col="topic", partition_col="partition")
    good, dead = split
    good_records = spark_udfs.explode_records(good.drop("input_records"), "value")
    out("Dead letters: batches damaged as a whole", dead.select(
        "batch_id", "input_records", "error_context.error_name", "error_context.exception_message",
        F.size("error_context.culprits").alias("culprits")).orderBy("batch_id"), truncate=60)
    out("Good records, per batch (batches 7 and 11 keep their good records)",
        good_records.groupBy("batch_id").agg(F.count("*").alias("records"), F.min("offset").alias("first_offset"),
                                             F.max("offset").alias("last_offset"))
        .filter(F.col("batch_id").isin(6, 7, 11, 12)).orderBy("batch_id"))

    ledger = {
        "input records": repaired.agg(F.sum("input_records")).first()[0],
        "good records": good_records.count(),
        "dead-lettered records (dropped from their batch)": dropped.count(),
        "dead-lettered records (in batches damaged as a whole)": dead.agg(F.sum("input_records")).first()[0] or 0,
        "skipped records": 0,  # dead_letter=True: nothing is skipped
    }
    metrics = split.metrics()
    repaired.unpersist()
    validated.unpersist()
    if show:
        print("\n== Connect's task error metrics (split_dead_letters counts rows: one batch each) ==")
        for name, value in metrics.items():
            print(f"  {name}: {value}")
        print("\n== Record ledger ==")
        for name, value in ledger.items():
            print(f"  {name}: {value}")
        verdict = "holds" if balanced(ledger) else "DOES NOT HOLD"
        print(f"  input = good + dead-lettered + skipped: {ledger['input records']} = {accounted(ledger)} "
              f"({verdict})")
    return ledger


def accounted(ledger: dict) -> int:
    """The records that came out: good, dead-lettered and skipped."""
    return sum(v for k, v in ledger.items() if k != "input records")


def balanced(ledger: dict) -> bool:
    """Whether every input record is accounted for (DESIGN.md's invariant)."""
    return accounted(ledger) == ledger["input records"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    from spark_udfs.session import quiet_session  # workers run this interpreter (and see pykbatch)
    spark = quiet_session(args.master, "pykbatch-demo", **{"spark.sql.shuffle.partitions": "2"})
    try:
        ledger = run(spark, args.batches)
    finally:
        spark.stop()
    return 0 if balanced(ledger) else 1


if __name__ == "__main__":
    sys.exit(main())
