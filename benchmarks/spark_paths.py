"""Which PySpark path should carry the validation UDF? Measures kbatch_validate as shipped
(arrow_udf over the column's Arrow buffers) against the same work as a pandas_udf, plus
Spark's own scan of the column as the floor, in one local session.

    python benchmarks/spark_paths.py [--rows 4000] [--repeats 5]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import pandas as pd
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.pandas.types import from_arrow_type

    import pykbatch as kb
    import spark_udfs
    from pykbatch.arrow import VALIDATION
    from workloads import build

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    one = build("B", batches=1)  # ~110 KB batch of 100 records
    df = spark.createDataFrame([(i, one) for i in range(args.rows)], "id int, value binary").cache()
    df.count()
    total_bytes = len(one) * args.rows

    def validate_rows(values: pd.Series) -> pd.DataFrame:
        out = []
        for v in values:
            r = kb.validate(v)
            out.append({"ok": r.ok, "error_code": r.error_code, "error_name": r.error_name,
                        "error_message": r.error_message,
                        "error_records": [{"batch_index": i, "message": m} for i, m in r.error_records],
                        "culprits": [c.as_dict() for c in r.culprits], "culprit_count": r.culprit_count,
                        "records": r.records,
                        "truncated_tail_position": r.truncated_tail.position if r.truncated_tail else None})
        return pd.DataFrame(out)

    pandas_validate = pandas_udf(validate_rows, from_arrow_type(VALIDATION))
    cases = {
        "Spark scan: sum(length(value))": lambda: df.selectExpr("sum(length(value))").collect(),
        "arrow_udf kbatch_validate": lambda: df.select(spark_udfs.kbatch_validate("value").alias("v"))
        .selectExpr("sum(v.records)").collect(),
        "pandas_udf (same work)": lambda: df.select(pandas_validate("value").alias("v"))
        .selectExpr("sum(v.records)").collect(),
    }
    times = {name: [] for name in cases}
    for name, run in cases.items():
        run()  # warm-up: workers start, module loads
    for _ in range(args.repeats):
        for name, run in cases.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    print(f"{args.rows} rows x {len(one)} bytes = {total_bytes / 1e6:.0f} MB, local[2], medians of {args.repeats}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:34} {t:6.2f} s  {total_bytes / t / 1e9:5.2f} GB/s")
    spark.stop()


if __name__ == "__main__":
    main()
