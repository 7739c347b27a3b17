"""The kafka-segment data source, validating inside its reader, against Spark's binaryFile over
the same files (targets: >= 2x binaryFile's byte rate header-only; one row per record >= 1.3x,
counted and written to Parquet), local[2], medians (binaryFile's runs vary most: each file is one row, a 64 MiB
allocation the JVM's collector sometimes handles at once and sometimes not; the spread is printed).

    python benchmarks/segment_source.py [--files 8] [--mib 64] [--repeats 3] [--jvm]

The kafka-segment cases are the Python source's (registered as kafka-segment-python where pykbatch's
jar is on the classpath, whose JVM reader then holds the name).  --jvm adds the JVM reader (the C core
called from Spark's JVM, columnar batches over its buffers) and issue 36's targets: one row per
record counted >= 3x the Python source and >= 3x binaryFile's byte rate, to Parquet >= 1.5x the
Python source.  --tiered (with --jvm) also reads the same segments laid out as a tiered store
(LocalTieredStorage's folders, no metadata: the listing trusted), on both readers, read_committed.
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
    ap.add_argument("--jvm", action="store_true", help="also the JVM reader (pykbatch's jar)")
    ap.add_argument("--tiered", action="store_true", help="with --jvm: also the segments as a tiered store")
    args = ap.parse_args()
    from sparkbench import local_session, time_cases
    # binaryFile holds each whole file as one row: 1 GiB of heap is not enough for two 64 MiB
    # files in flight plus their copies (java.lang.OutOfMemoryError at the default).
    spark = local_session(**{"spark.driver.memory": "3g"})
    from spark_udfs import jvm
    from spark_udfs.segment_source import NAME, PYTHON_NAME
    on_jvm = jvm.loaded(spark)
    if args.jvm and not on_jvm:
        sys.exit(f"--jvm: no JVM path here: {jvm.unavailable_reason() or 'the jar is not on the classpath'}")
    python_source = PYTHON_NAME if on_jvm else NAME
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as out, \
            tempfile.TemporaryDirectory() as store:
        total = 0
        for i in range(args.files):
            part = Path(tmp) / f"orders-{i}"
            part.mkdir()
            write_segment(part / "00000000000000000000.log", args.mib * 2**20)
            total += (part / "00000000000000000000.log").stat().st_size
            if args.tiered:  # the same bytes as LocalTieredStorage keeps an upload: <topic>-<p>-<id>/<offset>-<id>.log
                upload = Path(store) / f"orders-{i}-{'T' * 22}"
                upload.mkdir(parents=True)
                os.link(part / "00000000000000000000.log", upload / f"{0:020d}-{'U' * 22}.log")
        cases = {
            "binaryFile: sum(length(content))": lambda: spark.read.format("binaryFile")
            .option("pathGlobFilter", "*.log").option("recursiveFileLookup", "true").load(tmp)
            .selectExpr("sum(length(content))").collect(),
            "kafka-segment batches + validate": lambda: spark.read.format(python_source)
            .option("mode", "batches").option("validate", "true").load(tmp).selectExpr("count_if(batch_ok)")
            .collect(),
            "kafka-segment records + validate": lambda: spark.read.format(python_source)
            .option("validate", "true").load(tmp).selectExpr("count_if(batch_ok)").collect(),
            "kafka-segment records: count()": lambda: spark.read.format(python_source).load(tmp).count(),
            "kafka-segment records to Parquet": lambda: spark.read.format(python_source).load(tmp)
            .write.mode("overwrite").parquet(os.path.join(out, "records")),
            "binaryFile to Parquet": lambda: spark.read.format("binaryFile")
            .option("pathGlobFilter", "*.log").option("recursiveFileLookup", "true").load(tmp)
            .write.mode("overwrite").parquet(os.path.join(out, "files")),
        }
        if args.jvm:
            cases.update({
                "JVM records + validate": lambda: spark.read.format(NAME).option("validate", "true").load(tmp)
                .selectExpr("count_if(batch_ok)").collect(),
                "JVM records: count()": lambda: spark.read.format(NAME).load(tmp).count(),
                "JVM batches + validate": lambda: spark.read.format(NAME).option("mode", "batches")
                .option("validate", "true").load(tmp).selectExpr("count_if(batch_ok)").collect(),
                "JVM records to Parquet": lambda: spark.read.format(NAME).load(tmp)
                .write.mode("overwrite").parquet(os.path.join(out, "jvm")),
            })
        if args.jvm and args.tiered:
            def tiered(source):
                return spark.read.format(source).option("isolationLevel", "read_committed").load(store)
            cases.update({
                "tiered: Python source count()": lambda: tiered(python_source).count(),
                "tiered: JVM count()": lambda: tiered(NAME).count(),
                "tiered: Python source to Parquet": lambda: tiered(python_source).write.mode("overwrite")
                .parquet(os.path.join(out, "tiered-python")),
                "tiered: JVM to Parquet": lambda: tiered(NAME).write.mode("overwrite")
                .parquet(os.path.join(out, "tiered-jvm")),
            })
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
    if args.jvm:
        for what, theirs, case, target in (
                ("count() vs the Python source", med["kafka-segment records: count()"], "JVM records: count()", 3.0),
                ("count() vs binaryFile's byte rate", base, "JVM records: count()", 3.0),
                ("to Parquet vs the Python source", med["kafka-segment records to Parquet"],
                 "JVM records to Parquet", 1.5),
                ("validated vs the Python source", med["kafka-segment records + validate"], "JVM records + validate",
                 None),
                ("header-only, validated, vs the Python source", med["kafka-segment batches + validate"],
                 "JVM batches + validate", None)):
            ratio = theirs / med[case]
            verdict = "" if target is None else f" (target >= {target}) {'met' if ratio >= target else 'NOT MET'}"
            print(f"  JVM reader, {what}: {ratio:.2f}x{verdict}")
        if args.tiered:
            for what in ("count()", "to Parquet"):
                print(f"  JVM reader, a tiered store read_committed, {what} vs the Python source: "
                      f"{med[f'tiered: Python source {what}'] / med[f'tiered: JVM {what}']:.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
