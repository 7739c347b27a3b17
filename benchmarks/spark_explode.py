"""Batches -> one row per record in Spark: which path should explode_records take? Measures, on
the same cached DataFrame of producer batches (workload A, B or C, one batch per row), local[2]:

- explode_records (mapInArrow over pykbatch.arrow.explode_batch), as shipped;
- kbatch_records, the SQL Arrow UDTF over a TABLE argument (same column function);
- kbatch_decode (arrow_udf -> array<struct>) + Spark's explode;
- a row-at-a-time Python UDTF yielding a tuple per record (pykbatch's iterator, no Arrow; only
  id, offset, key and value, fewer columns than the others give);
- Spark's own scan of the column, the floor.

    python benchmarks/spark_explode.py [--shape A|B|C] [--rows 2000] [--repeats 5]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=("A", "B", "C"), default="B")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from pyspark.sql.functions import explode, udtf

    import spark_udfs
    from sparkbench import local_session, time_cases
    from workloads import WORKLOADS, build

    spark = local_session(**{"spark.sql.execution.arrow.maxRecordsPerBatch": "200",
                             "spark.sql.execution.arrow.maxBytesPerBatch": "16m"})
    one = build(args.shape, batches=1, as_produced=True)
    records = WORKLOADS[args.shape]["records"] * args.rows
    df = spark.createDataFrame([(i, one) for i in range(args.rows)], "id int, value binary").repartition(2).cache()
    df.count()
    df.createOrReplaceTempView("raw")

    @udtf(returnType="id int, offset bigint, key binary, value binary")
    class RowRecords:
        def eval(self, row):
            import pykbatch as kb
            for batch in kb.iter_batches(row["value"]):
                for r in batch:
                    yield row["id"], r.offset, r.key, r.value

    spark.udtf.register("row_records", RowRecords)
    cases = {
        "Spark scan: sum(length(value))": lambda: df.selectExpr("sum(length(value))").collect(),
        "explode_records (mapInArrow)": lambda: spark_udfs.explode_records(df, "value")
        .selectExpr("count(*)", "sum(length(value))").collect(),
        "kbatch_records (SQL Arrow UDTF)": lambda: spark.sql(
            "SELECT count(*), sum(length(value)) FROM kbatch_records(TABLE(SELECT id, value FROM raw))").collect(),
        "kbatch_decode + explode": lambda: df.select(explode(spark_udfs.kbatch_decode("value")).alias("r"))
        .selectExpr("count(*)", "sum(length(r.value))").collect(),
        "row-at-a-time Python UDTF, 4 columns": lambda: spark.sql(
            "SELECT count(*), sum(length(value)) FROM row_records(TABLE(raw))").collect(),
    }
    counts = {name: run()[0][0] for name, run in cases.items()}  # every path must give every record
    assert all(n == records for name, n in counts.items() if not name.startswith("Spark scan")), counts
    times = time_cases(cases, args.repeats)
    total = len(one) * args.rows
    print(f"workload {args.shape}: {args.rows} batches of ~{len(one)} bytes -> {records} records, local[2], "
          f"medians of {args.repeats}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:34} {t:6.2f} s  {total / t / 1e9:5.2f} GB/s  {records / t / 1e6:5.2f} Mrec/s")
    spark.stop()


if __name__ == "__main__":
    main()
