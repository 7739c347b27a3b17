"""The tiered-storage reader (pykbatch.tiered, kafka-segment over a remote store) against what a
user has today, on the same bytes (issue 13's targets):

1. Spark, local[2]: kafka-segment over a LocalTieredStorage root (planned from the remote log
   metadata) vs kafka-segment over broker partition directories holding the same .log bytes:
   target >= 1.0x the rate.
2. S3 (moto's server on 127.0.0.1): every record of the store read by the tiered reader vs a
   plain s3fs read of the same .log objects (bytes only, nothing decoded): target >= 0.5x.
3. A narrow offset range over S3: bytes fetched vs the bytes of the batches in range plus their
   index files: target <= 2x.

    PYTHONPATH=. python benchmarks/tiered_source.py [--partitions 2] [--segments 4] [--mib 16] [--repeats 3]
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tiered_store import TOPIC, write_store  # noqa: E402


def timed(cases: dict, repeats: int) -> dict:
    """name -> median wall time (sparkbench's interleaved runs after a warm-up)."""
    from sparkbench import time_cases
    return {name: statistics.median(ts) for name, ts in time_cases(cases, repeats).items()}


def spark_rates(store, meta, broker, repeats: int, total: int) -> None:
    from sparkbench import local_session
    spark = local_session()
    agg = ("count(*) as n", "sum(length(value)) as v")
    cases = {
        "kafka-segment, broker dirs": lambda: spark.read.format("kafka-segment").load(str(broker))
        .selectExpr(*agg).collect(),
        "kafka-segment, tiered store": lambda: spark.read.format("kafka-segment")
        .option("remoteLogMetadata", str(meta)).load(str(store)).selectExpr(*agg).collect(),
    }
    a = cases["kafka-segment, broker dirs"]()[0]
    b = cases["kafka-segment, tiered store"]()[0]
    assert (a.n, a.v) == (b.n, b.v), (a, b)
    med = timed(cases, repeats)
    print(f"1. Spark local[2], {total / 2**20:.0f} MiB of .log, {a.n} records, medians of {repeats}")
    for name, t in med.items():
        print(f"   {name:30} {t:6.2f} s  {total / t / 2**20:7.1f} MiB/s")
    ratio = med["kafka-segment, broker dirs"] / med["kafka-segment, tiered store"]
    print(f"   tiered / today's rate: {ratio:.2f}x (target >= 1.0)")
    spark.stop()


def s3_rates(store, meta, repeats: int) -> None:
    import s3fs

    from pykbatch import tiered
    from pykbatch.tiered.tables import partition_tables
    from tests.s3_server import S3Server
    server = S3Server()
    server.start()
    try:
        url = server.upload(store, "bench", "tiered")
        opts = server.storage_options()
        fs = s3fs.S3FileSystem(**opts)
        logs = [p for p in fs.find("bench/tiered") if p.endswith(".log")]
        total = sum(fs.size(p) for p in logs)

        def plain():
            return sum(len(fs.cat_file(p)) for p in logs)

        def ours():
            topic = tiered.TieredTopicStore(tiered.open_store(url, **opts), [str(meta)])
            return sum(t.num_rows for part in topic.partitions() for t in partition_tables(part))

        med = timed({"s3fs: cat every .log object": plain, "tiered reader: every record": ours}, repeats)
        print(f"2. S3 (moto server on loopback), {total / 2**20:.0f} MiB of .log, medians of {repeats}")
        for name, t in med.items():
            print(f"   {name:30} {t:6.2f} s  {total / t / 2**20:7.1f} MiB/s")
        print(f"   tiered / plain s3fs rate: {med['s3fs: cat every .log object'] / med['tiered reader: every record']:.2f}x"
              " (target >= 0.5)")
        narrow(url, opts, meta)
    finally:
        server.stop()


def narrow(url, opts, meta) -> None:
    """Bytes fetched for 100 offsets in the middle of the log (every request goes through the
    store's ``read``)."""
    import pykbatch as kb
    from pykbatch import tiered
    from pykbatch.tiered.tables import partition_tables
    store = tiered.open_store(url, **opts)
    fetched = []
    plain_read = store.read

    def counting(path, start=0, end=None):
        data = plain_read(path, start, end)
        fetched.append((path, len(data)))
        return data
    topic = tiered.TieredTopicStore(store, [str(meta)])
    part = [p for p in topic.partitions() if p.partition.partition == 0][0]
    mid = part.pieces[len(part.pieces) // 2]
    first = (mid.start + mid.end) // 2
    store.read = counting
    try:
        rows = sum(t.num_rows for t in partition_tables(part, start=first, end=first + 99))
    finally:
        store.read = plain_read
    in_range = sum(b.size for b in kb.iter_batches(store.read(mid.path), verify_crc=False)
                   if b.last_offset >= first and b.base_offset <= first + 99)
    index = store.fs.size(mid.obj.files[".index"])
    got = sum(n for _, n in fetched)
    print(f"3. offsets {first}-{first + 99} of {TOPIC}-0 ({rows} records) over S3: fetched {got} bytes in "
          f"{len(fetched)} request(s); batches in range {in_range} + index {index} = {in_range + index}; "
          f"{got / (in_range + index):.2f}x (target <= 2)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--workload", default="A", help="benchmarks/workloads.py: A (1000 x 100 B records per batch), B, C")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store, meta, broker = write_store(Path(tmp), args.partitions, args.segments, args.mib, args.workload)
        print(f"workload {args.workload}, {args.partitions} partitions x {args.segments} segments x {args.mib} MiB")
        total = sum(p.stat().st_size for p in store.rglob("*.log"))
        if not args.no_spark:
            spark_rates(store, meta, broker, args.repeats, total)
        s3_rates(store, meta, args.repeats)


if __name__ == "__main__":
    main()
