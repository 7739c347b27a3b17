"""Which PySpark path should carry the validation UDF? Measures kbatch_validate as shipped
(arrow_udf over the column's Arrow buffers) against the same work as a pandas_udf, plus
Spark's own scan of the column as the floor, in one local session.

    python benchmarks/spark_paths.py [--shape small|A|B|C] [--rows N] [--repeats 5] [--jvm]

A, B, C: rows of one producer batch of workload A (1,000 records of ~100 B, ~127 KB),
B (100 records of ~1 KiB with 2 headers, ~110 KB) or C (10 records of ~10 KiB, ~103 KB);
small: rows of one ~200-byte batch, every 50th row corrupt (per-row costs and culprit structs
show here). The row-at-a-time cases are measured twice: kafka-python's work, and a UDF that
does nothing, which is the ceiling any row-at-a-time UDF can reach on this DataFrame. An Arrow
UDF returning kbatch_validate's struct without validating shows what the result type alone costs.
--jvm adds the JVM function (the C core called from Spark's JVM: spark_udfs.jvm) and issue 36's
targets: >= 2x the identity Arrow UDF on small rows, >= 2x the Arrow UDF kbatch_validate on
100 KB batches.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=("small", "A", "B", "C"), default="B")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch-bytes", default="16m", help="spark.sql.execution.arrow.maxBytesPerBatch")
    ap.add_argument("--jvm", action="store_true", help="also the JVM function (pykbatch's jar)")
    ap.add_argument("--more", action="store_true",
                    help="with --jvm: also kbatch_repair, kbatch_batch_info and kbatch_decode, Arrow UDF vs JVM")
    args = ap.parse_args()
    import numpy as np
    import pandas as pd
    from pyspark.sql.functions import pandas_udf
    from pyspark.sql.pandas.types import from_arrow_type

    import pykbatch as kb
    from pykbatch.arrow import VALIDATION, validate_array
    from sparkbench import jvm_function, local_session, python_function, time_cases
    from workloads import build

    spark = local_session(jvm=True if args.jvm else None, **{
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000" if args.shape == "small" else "200",
        "spark.sql.execution.arrow.maxBytesPerBatch": args.batch_bytes})
    if args.shape != "small":
        rows = args.rows or 3000
        one = build(args.shape, batches=1, as_produced=True)
        values = [one] * rows
    else:
        rows = args.rows or 300_000
        good = kb.build_batch([{"key": b"k", "value": b"x" * 100, "timestamp": 1}] * 2)
        bad = bytearray(good)
        bad[-3] ^= 1
        values = [bytes(bad) if i % 50 == 0 else good for i in range(rows)]
    args.rows = rows
    df = spark.createDataFrame(list(enumerate(values)), "id int, value binary").cache()
    df.count()
    total_bytes = sum(map(len, values))
    one = values[0]

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

    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.functions import arrow_udf, udf

    @arrow_udf("boolean")
    def identity(value: pa.Array) -> pa.Array:
        """The floor for an Arrow UDF: same rows in and out, no work."""
        return pc.is_valid(value)

    clean = validate_array(pa.array([kb.build_batch([(b"k", b"v")])], pa.binary()))

    @arrow_udf(from_arrow_type(VALIDATION))
    def same_shape(value: pa.Array) -> pa.Array:
        """kbatch_validate's result type without the work: what the output struct alone costs."""
        return clean.take(pa.array(np.zeros(len(value), np.int32)))

    def kafka_python_rows(value):
        """The same check row at a time with kafka-python: CRC, then every record walked."""
        from kafka.record.default_records import DefaultRecordBatch
        try:
            b = DefaultRecordBatch(bytes(value))
            return b.validate_crc() and sum(1 for _ in b) >= 0
        except Exception:
            return False
    kafka_python = udf(kafka_python_rows, "boolean", useArrow=False)
    row_noop = udf(lambda value: value is not None, "boolean", useArrow=False)

    python_validate = python_function("kbatch_validate")
    cases = {
        "identity arrow_udf (same rows)": lambda: df.select(identity("value").alias("v"))
        .selectExpr("count_if(v)").collect(),
        "arrow_udf, result struct, no work": lambda: df.select(same_shape("value").alias("v"))
        .selectExpr("sum(v.records)").collect(),
        "Spark scan: sum(length(value))": lambda: df.selectExpr("sum(length(value))").collect(),
        "arrow_udf kbatch_validate": lambda: df.select(python_validate("value").alias("v"))
        .selectExpr("sum(v.records)").collect(),
        "pandas_udf (same work)": lambda: df.select(pandas_validate("value").alias("v"))
        .selectExpr("sum(v.records)").collect(),
        "row-at-a-time udf, kafka-python": lambda: df.select(kafka_python("value").alias("v"))
        .selectExpr("count_if(v)").collect(),
        "row-at-a-time udf, no work": lambda: df.select(row_noop("value").alias("v"))
        .selectExpr("count_if(v)").collect(),
    }
    if args.jvm:
        jvm_validate = jvm_function("kbatch_validate")
        cases["JVM kbatch_validate"] = lambda: df.select(jvm_validate("value").alias("v")) \
            .selectExpr("sum(v.records)").collect()
    more = ("kbatch_repair", "kbatch_batch_info", "kbatch_decode") if args.jvm and args.more else ()
    for name in more:  # each function's work summed, so no column is pruned away
        touch = {"kbatch_repair": "sum(length(v.data))", "kbatch_batch_info": "sum(size(v))",
                 "kbatch_decode": "sum(size(v))"}[name]
        for path, fn in (("arrow_udf", python_function(name)), ("JVM", jvm_function(name))):
            cases[f"{path} {name}"] = lambda fn=fn, touch=touch: df.select(fn("value").alias("v")) \
                .selectExpr(touch).collect()
    times = time_cases(cases, args.repeats)
    print(f"{args.shape}: {args.rows} rows of ~{len(one)} bytes = {total_bytes / 1e6:.0f} MB, local[2], "
          f"medians of {args.repeats}")
    for name, ts in times.items():
        t = statistics.median(ts)
        print(f"  {name:34} {t:6.2f} s  {total_bytes / t / 1e9:5.2f} GB/s")
    med = {name: statistics.median(ts) for name, ts in times.items()}
    ours = med["arrow_udf kbatch_validate"]
    per_run = [i / v for i, v in zip(times["identity arrow_udf (same rows)"], times["arrow_udf kbatch_validate"])]
    print(f"  kbatch_validate / identity arrow_udf, each run: {' '.join(f'{r:.2f}' for r in per_run)} "
          f"(target >= 0.9 in every run) {'met' if min(per_run) >= 0.9 else 'NOT MET'}")
    print(f"  kbatch_validate throughput / identity arrow_udf: {med['identity arrow_udf (same rows)'] / ours:.2f} "
          f"(median); x row-at-a-time kafka-python: {med['row-at-a-time udf, kafka-python'] / ours:.1f} "
          f"(target >= 50); x row-at-a-time no-op udf: {med['row-at-a-time udf, no work'] / ours:.1f} "
          f"(what the row-at-a-time hop alone accounts for)")
    if args.jvm:
        jvm = med["JVM kbatch_validate"]
        vs_identity = [i / j for i, j in zip(times["identity arrow_udf (same rows)"], times["JVM kbatch_validate"])]
        vs_today = [p / j for p, j in zip(times["arrow_udf kbatch_validate"], times["JVM kbatch_validate"])]
        want, base = (vs_identity, "identity arrow_udf") if args.shape == "small" else (vs_today, "arrow_udf kbatch_validate")
        print(f"  JVM kbatch_validate x identity arrow_udf: {med['identity arrow_udf (same rows)'] / jvm:.2f}, "
              f"x arrow_udf kbatch_validate (today): {ours / jvm:.2f} (medians)")
        print(f"  JVM / {base}, each run: {' '.join(f'{r:.2f}' for r in want)} (issue 36 target >= 2 on the median) "
              f"{'met' if statistics.median(want) >= 2 else 'NOT MET'}")
    for name in more:
        ratios = [p / j for p, j in zip(times[f"arrow_udf {name}"], times[f"JVM {name}"])]
        print(f"  JVM {name} x its arrow_udf: {statistics.median(ratios):.2f} (median; each run "
              f"{' '.join(f'{r:.2f}' for r in ratios)})")
    spark.stop()
    body_ratio(values, kafka_python_rows, args.repeats)


def body_ratio(values, kafka_python_rows, repeats):
    """The UDF bodies alone, one core, no Spark: kafka-python row by row against validate_array
    over the same rows as one Arrow array (what each UDF does once its input has arrived)."""
    import pyarrow as pa

    from pykbatch.arrow import validate_array
    sample = values[:max(1, min(len(values), 20_000_000 // len(values[0]), 20_000))]
    column = pa.array(sample, pa.binary())

    def median_time(fn):
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)
    theirs = median_time(lambda: [kafka_python_rows(v) for v in sample])
    ours = median_time(lambda: validate_array(column))
    print(f"  UDF bodies alone, {len(sample)} rows, one core: kafka-python {theirs / len(sample) * 1e6:.1f} us/row, "
          f"validate_array {ours / len(sample) * 1e6:.2f} us/row: {theirs / ours:.0f}x")


if __name__ == "__main__":
    main()
