"""Backfill a tiered topic into a table: every record the broker would serve (read_committed by
default) from the remote store (and the broker's disk when given), appended to a Parquet table
partitioned by topic and partition, idempotent on rerun (rows keyed by topic, partition,
offset: a rerun adds only the offsets the table lacks); batches that fail validation go to a
dead-letter table with their error, never into the data.

    python -m spark_udfs.backfill s3://bucket/kafka-tiered --metadata /mnt/kafka/__remote_log_metadata-0 \\
        --table /lake/orders --dead-letters /lake/orders_dead --topic orders \\
        --option fs.client_kwargs.endpoint_url=http://127.0.0.1:9000

    from spark_udfs.backfill import backfill
    report = backfill(spark, "s3://bucket/kafka-tiered", "/lake/orders", "/lake/orders_dead",
                      remoteLogMetadata="/mnt/kafka/__remote_log_metadata-0")

Iceberg: Apache Iceberg publishes Spark runtimes up to Spark 4.1 (``iceberg-spark-runtime-4.1_2.13``),
which does not load in Spark 4.3 (``IncompatibleClassChangeError``: Spark's ``View`` became a
class); ``key_merge_sql`` gives the MERGE statement to use with a runtime that matches.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

KEY = ("topic", "partition", "offset")
DEAD_KEY = ("topic", "partition", "base_offset")


@dataclass
class BackfillReport:
    appended: int  # records added to the table by this run
    already_there: int  # records in range the table already held
    dead_batches: int  # failing batches added to the dead-letter table by this run


def _exists(spark, path: str) -> bool:
    if "://" not in path or path.startswith("file://"):
        return os.path.isdir(path.replace("file://", "")) and any(
            n.endswith(".parquet") for _, _, fs in os.walk(path.replace("file://", "")) for n in fs)
    jvm = spark._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    return hpath.getFileSystem(spark._jsc.hadoopConfiguration()).exists(hpath)


def backfill(spark, store: str, table: str, dead_letters: str, *, isolation: str = "read_committed",
             topics=None, **options) -> BackfillReport:
    """Appends the records of ``store`` missing from the Parquet table ``table`` (and the failing
    batches missing from ``dead_letters``).  ``options``: kafka-segment's (remoteLogMetadata,
    localDirs, fs.*, startingOffset ...)."""
    from pyspark.sql import functions as F

    def reader(mode: str):
        r = spark.read.format("kafka-segment").option("isolationLevel", isolation).option("validate", "true") \
            .option("mode", mode)
        for k, v in options.items():
            r = r.option(k, str(v))
        df = r.load(store)
        return df.where(F.col("topic").isin(list(topics))) if topics else df

    dead = _append_new(spark, reader("batches").where(~F.col("batch_ok")), dead_letters, DEAD_KEY)
    records = reader("records").where(F.col("batch_ok")).drop("batch_ok", "batch_error")
    total = records.count() if _exists(spark, table) else None
    appended = _append_new(spark, records, table, KEY)
    return BackfillReport(appended, 0 if total is None else total - appended, dead)


def _append_new(spark, rows, path: str, key) -> int:
    """Appends the rows whose ``key`` the Parquet table at ``path`` lacks; returns how many."""
    if _exists(spark, path):
        rows = rows.join(spark.read.parquet(path).select(*key), list(key), "left_anti")
    rows = rows.cache()
    n = rows.count()
    if n:
        rows.write.mode("append").partitionBy("topic", "partition").parquet(path)
    rows.unpersist()
    return n


def key_merge_sql(target: str, source_view: str) -> str:
    """The idempotent MERGE for a table format that has it (Iceberg, Delta): insert the rows
    whose (topic, partition, offset) the table lacks."""
    on = " and ".join(f"t.`{k}` = s.`{k}`" for k in KEY)
    return f"MERGE INTO {target} t USING {source_view} s ON {on} WHEN NOT MATCHED THEN INSERT *"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spark_udfs.backfill", description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--table", required=True)
    ap.add_argument("--dead-letters", required=True)
    ap.add_argument("--metadata", action="append", default=[], help="__remote_log_metadata paths")
    ap.add_argument("--local-dir", action="append", default=[], help="broker log directories")
    ap.add_argument("--topic", action="append", default=None)
    ap.add_argument("--isolation-level", default="read_committed")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a kafka-segment option")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args(argv)
    from .session import quiet_session
    spark = quiet_session(args.master, "pykbatch-backfill")
    options = dict(o.split("=", 1) for o in args.option)
    if args.metadata:
        options["remoteLogMetadata"] = ",".join(args.metadata)
    if args.local_dir:
        options["localDirs"] = ",".join(args.local_dir)
    report = backfill(spark, args.store, args.table, args.dead_letters, isolation=args.isolation_level,
                      topics=args.topic, **options)
    print(f"appended {report.appended} record(s); {report.already_there} already in {args.table}; "
          f"{report.dead_batches} failing batch(es) to {args.dead_letters}")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
