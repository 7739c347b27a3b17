"""The kafka-segment data source, validating inside its reader, against Spark's binaryFile over
the same files (targets: >= 2x binaryFile's byte rate header-only; one row per record >= 1.3x,
counted and written to Parquet), local[2], medians (binaryFile's runs vary most: each file is one row, a 64 MiB
allocation the JVM's collector sometimes handles at once and sometimes not; the spread is printed).

    python benchmarks/segment_source.py [--files 8] [--mib 64] [--repeats 3]
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from segment_memory import write_segment  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from sparkbench import local_session, time_cases
    # binaryFile holds each whole file as one row: 1 GiB of heap is not enough for two 64 MiB
    # files in flight plus their copies (java.lang.OutOfMemoryError at the default).
    spark = local_session(**{"spark.driver.memory": "3g"})
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as out:
        total = 0
        for i in range(args.files):
            part = Path(tmp) / f"orders-{i}"
            part.mkdir()
            write_segment(part / "00000000000000000000.log", args.mib * 2**20)
            total += (part / "00000000000000000000.log").stat().st_size
        cases = {
            "binaryFile: sum(length(content))": lambda: spark.read.format("binaryFile")
            .option("pathGlobFilter", "*.log").option("recursiveFileLookup", "true").load(tmp)
            .selectExpr("sum(length(content))").collect(),
            "kafka-segment batches + validate": lambda: spark.read.format("kafka-segment")
            .option("mode", "batches").option("validate", "true").load(tmp).selectExpr("count_if(batch_ok)")
            .collect(),
            "kafka-segment records + validate": lambda: spark.read.format("kafka-segment")
            .option("validate", "true").load(tmp).selectExpr("count_if(batch_ok)").collect(),
            "kafka-segment records: count()": lambda: spark.read.format("kafka-segment").load(tmp).count(),
            "kafka-segment records to Parquet": lambda: spark.read.format("kafka-segment").load(tmp)
            .write.mode("overwrite").parquet(os.path.join(out, "records")),
            "binaryFile to Parquet": lambda: spark.read.format("binaryFile")
            .option("pathGlobFilter", "*.log").option("recursiveFileLookup", "true").load(tmp)
            .write.mode("overwrite").parquet(os.path.join(out, "files")),
        }
        times = time_cases(cases, args.repeats)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"{args.files} segments x {args.mib} MiB = {total / 2**20:.0f} MiB, local[2], medians of {args.repeats}")
    for name, t in med.items():
        print(f"  {name:36} {t:6.2f} s  {total / t / 1e9:5.2f} GB/s   (runs {min(times[name]):.2f}-"
              f"{max(times[name]):.2f} s)")
    base = med["binaryFile: sum(length(content))"]
    rows = [("header-only", base, "kafka-segment batches + validate", 2.0),
            ("a row per record, validated", base, "kafka-segment records + validate", 1.3),
            ("a row per record, count()", base, "kafka-segment records: count()", 1.3),
            ("a row per record, to Parquet", med["binaryFile to Parquet"], "kafka-segment records to Parquet", 1.3)]
    for what, theirs, case, target in rows:
        ratio = theirs / med[case]
        print(f"  byte rate vs binaryFile, {what}: {ratio:.2f}x (target >= {target}) "
              f"{'met' if ratio >= target else 'NOT MET'}")
    spark.stop()


if __name__ == "__main__":
    main()
