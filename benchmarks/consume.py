"""Consuming a healthy topic from a local broker: pykbatch's live reader (to Arrow at 8 MiB and at
the consumers' default 1 MiB partition fetches, to Python objects; validation on) beside
confluent-kafka's ``consume(num_messages=...)``, aiokafka's ``getmany`` and kafka-python's
``poll``, and beside an earlier pykbatch (``--baseline REV``, built in a worktree: the same reads
in a process of its own), measured interleaved in one run, the consumers pinned to one core (the
local broker kept off it), medians of wall time to read every record once.

    python benchmarks/consume.py [--records 1000000] [--repeats 5] [--bootstrap HOST:PORT]
                                 [--baseline 93446ba] [--codecs lz4,zstd]

``--codecs``: the same records in topics compressed with each codec, read to Arrow, against the
bare cost of their decompression (every batch's payload through the codec, from the broker's log
files: local broker only) plus reading the uncompressed topic; issue 35's target is <= 1.1x.

With --group, a member of a consumer group on each side (issue 38): pykbatch's Reader in a KIP-848
group (``group.id`` with ``subscribe``: joined, assigned by the coordinator, auto-commit on) to
Arrow beside confluent-kafka's consumer in a KIP-848 group (``group.protocol=consumer``, subscribe,
auto-commit on), each in a new group every run, joining included; target >= 4x.

With --spark it also sets pykbatch's ``kafka-kbatch`` source beside Spark's own Kafka source
(spark-sql-kafka from Maven Central, tests/kafka_harness/spark-kafka) in one local[2] session: a
count and a Parquet write of the topic, medians, and the ratio.

Without --bootstrap it starts the test harness's broker (Kafka 4.3.1 from Maven Central) in a
temporary directory.  Records: 100-byte values, 8-byte keys, produced by confluent-kafka in
batches of up to 10,000.  Targets (issue 25): to Arrow >= 4x confluent-kafka and >= 1 M records/s;
to objects >= 1.5x confluent-kafka.  Issue 35: to Arrow >= 4 M records/s and >= 1.4x 93446ba (8 MiB
fetches), >= 3 M records/s at 1 MiB fetches, objects >= 1 M records/s.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import local_broker  # noqa: E402
TOPIC = "bench-consume"


def produce(bootstrap: str, n: int, topic: str = TOPIC, codec: str = "none") -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "batch.size": 1 << 20, "compression.type": codec})
    value = bytes(range(100))
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"%08d" % i, value=value)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def pykbatch_arrow(bootstrap: str, n: int, topic: str = TOPIC, fetch: int = 8 << 20) -> int:
    from pykbatch.live import Reader
    with Reader({"bootstrap.servers": bootstrap}, subscribe=topic, starting_offsets="earliest",
                ending_offsets="latest", max_partition_fetch_bytes=fetch) as r:
        return r.read().num_rows


def pykbatch_arrow_default(bootstrap: str, n: int) -> int:
    return pykbatch_arrow(bootstrap, n, fetch=1 << 20)


# the same read by an earlier pykbatch, in a process of its own: the seconds the second of two
# reads took, measured there (the first pays what a process pays once, as the others' warm-up does)
BASELINE_READ = """
import json, time
from pykbatch.live import Reader
for _ in range(2):
    t = time.perf_counter()
    with Reader({{"bootstrap.servers": {bootstrap!r}}}, subscribe={topic!r}, starting_offsets="earliest",
                ending_offsets="latest", max_partition_fetch_bytes={fetch}) as r:
        n = r.read().num_rows
    elapsed = time.perf_counter() - t
print(json.dumps([n, elapsed]))
"""


def baseline_contender(rev: str, fetch: int):
    from benchmarks import baseline

    def read(bootstrap: str, n: int):
        rows, seconds = baseline.run(rev, BASELINE_READ.format(bootstrap=bootstrap, topic=TOPIC, fetch=fetch))
        return rows, seconds
    return read


def pykbatch_objects(bootstrap: str, n: int) -> int:
    from pykbatch.live import Reader
    count = 0
    with Reader({"bootstrap.servers": bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets="latest", max_partition_fetch_bytes=8 << 20) as r:
        for poll in r.polls():
            count += len(poll.records())
    return count


def confluent(bootstrap: str, n: int) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    count = 0
    while count < n:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if not m.error():
                m.value()
                count += 1
    c.close()
    return count


def pykbatch_group_member(bootstrap: str, n: int, steady: bool = False):
    from pykbatch.live import Reader
    props = {"bootstrap.servers": bootstrap, "group.id": f"bench-member-{time.time_ns()}",
             "auto.offset.reset": "earliest", "max.partition.fetch.bytes": 8 << 20}
    count, first, base = 0, None, 0
    with Reader(props, subscribe=TOPIC) as r:
        while count < n:
            count += r.poll().table.num_rows
            if count and first is None:
                first, base = time.perf_counter(), count
        end = time.perf_counter()
    return (count, _per_all(end - first, count - base, count)) if steady else count


def confluent_group_member(bootstrap: str, n: int, steady: bool = False):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-member-{time.time_ns()}",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8 << 20})
    c.subscribe([TOPIC])
    count, first, base = 0, None, 0
    while count < n:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if not m.error():
                m.value()
                count += 1
        if count and first is None:
            first, base = time.perf_counter(), count
    end = time.perf_counter()
    c.close()
    return (count, _per_all(end - first, count - base, count)) if steady else count


def _per_all(seconds: float, read: int, n: int) -> float:
    """The seconds ``n`` records take at the rate of the ``read`` after a member's first answer."""
    return seconds * n / max(read, 1)


# joining included (a new group each run), and after each member's first answer (its reading alone;
# the records of that first answer left out on both sides)
GROUP_CONTENDERS = {"confluent-kafka consume": confluent_group_member, "pykbatch to Arrow": pykbatch_group_member,
                    "confluent-kafka, from its first record": lambda b, n: confluent_group_member(b, n, True),
                    "pykbatch to Arrow, from its first record": lambda b, n: pykbatch_group_member(b, n, True)}


def aiokafka_getmany(bootstrap: str, n: int) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=8 << 20,
                             fetch_max_bytes=52428800)
        await c.start()
        tp = TopicPartition(TOPIC, 0)
        c.assign([tp])
        c.seek(tp, 0)
        count = 0
        try:
            while count < n:
                batches = await c.getmany(timeout_ms=1000, max_records=100000)
                count += sum(len(v) for v in batches.values())
        finally:
            await c.stop()
        return count
    return asyncio.run(run())


def kafka_python(bootstrap: str, n: int) -> int:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=8 << 20,
                      fetch_max_bytes=52428800)
    tp = TopicPartition(TOPIC, 0)
    c.assign([tp])
    c.seek(tp, 0)
    count = 0
    while count < n:
        for records in c.poll(timeout_ms=1000, max_records=100000).values():
            count += len(records)
    c.close()
    return count


CONTENDERS = {"pykbatch to Arrow": pykbatch_arrow, "pykbatch to Arrow, 1 MiB": pykbatch_arrow_default,
              "pykbatch to objects": pykbatch_objects,
              "confluent-kafka consume": confluent, "aiokafka getmany": aiokafka_getmany,
              "kafka-python poll": kafka_python}


def arrow_file_source(bootstrap: str, directory: Path):
    """A Python data source handing Spark the topic's records as Arrow batches read from a
    memory-mapped Arrow file: what Spark's conversion of a Python source's batches costs with
    (almost) no reading work."""
    from pyspark.sql.datasource import DataSource, DataSourceReader
    from pyspark.sql.pandas.types import from_arrow_schema

    from pykbatch.live import Reader
    with Reader({"bootstrap.servers": bootstrap}, subscribe=TOPIC, starting_offsets="earliest",
                ending_offsets="latest") as r:
        table = r.read().drop_columns(["leader_epoch", "headers"])
    path = str(directory / "records.arrow")
    with pa.ipc.new_file(path, table.schema) as w:
        w.write_table(table, max_chunksize=50_000)
    schema = table.schema
    del table

    class FileReader(DataSourceReader):
        def read(self, partition):
            import pyarrow as pa
            f = pa.ipc.open_file(pa.memory_map(path))
            for i in range(f.num_record_batches):
                yield f.get_batch(i)

    class ArrowFileSource(DataSource):
        @classmethod
        def name(cls):
            return "arrow-file"

        def schema(self):
            return from_arrow_schema(schema)

        def reader(self, schema):
            return FileReader()
    return ArrowFileSource


def spark_compare(bootstrap: str, n: int, repeats: int) -> None:
    """kafka-kbatch vs Spark's Kafka source on the same topic, one session (local[2])."""
    import shutil

    from spark_udfs import register
    from spark_udfs.session import quiet_session
    from tests import kafka_tools
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = quiet_session("local[2]", "consume-bench", **{"spark.jars": kafka_tools.spark_kafka_jars(),
                                                          "spark.sql.shuffle.partitions": "2"})
    register(spark)
    out = Path(tempfile.mkdtemp(prefix="pykbatch-bench-parquet-"))

    def frame(fmt):
        return (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
                .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())

    spark.dataSource.register(arrow_file_source(bootstrap, out))
    cases = {}
    for fmt in ("kafka", "kafka-kbatch", "arrow-file"):
        cases[f"{fmt} count"] = lambda fmt=fmt: frame(fmt).count()
        cases[f"{fmt} parquet"] = lambda fmt=fmt: frame(fmt).write.mode("overwrite").parquet(str(out / fmt))
    for fn in cases.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"Spark local[2], {n:,} records, medians of {repeats}")
    for what in ("count", "parquet"):
        theirs, ours, floor = med[f"kafka {what}"], med[f"kafka-kbatch {what}"], med[f"arrow-file {what}"]
        print(f"  {what:8s} Spark's kafka {n / theirs / 1e6:6.3f} M/s   kafka-kbatch {n / ours / 1e6:6.3f} M/s   "
              f"ratio {theirs / ours:5.2f}x   (a Python source handing Spark the same Arrow batches from a mapped file: "
              f"{n / floor / 1e6:6.3f} M/s)")
    spark.stop()
    shutil.rmtree(out, ignore_errors=True)


def bare_decompression(bootstrap: str, topic: str) -> float | None:
    """Seconds to decompress every batch payload of ``topic`` (its log files, read beforehand),
    through the codec as pykbatch calls it: the floor of reading a compressed topic."""
    from benchmarks import local_broker
    from pykbatch import codecs, iter_batches
    where = local_broker.log_dir(bootstrap)
    if where is None:
        return None
    payloads = []
    for log in sorted((where / f"{topic}-0").glob("*.log")):
        data = log.read_bytes()
        for b in iter_batches(data, verify_crc=False):
            payloads.append((codecs.CODEC_IDS[b.compression], memoryview(data)[b.position + 61:b.position + b.size]))
    scratch = codecs.Scratch(codecs.DEFAULT_MAX_DECOMPRESSED)
    t0 = time.perf_counter()
    for codec, payload in payloads:
        scratch.decompress(codec, 2, payload)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--bootstrap")
    ap.add_argument("--core", type=int, default=1, help="the core the consumers run on")
    ap.add_argument("--skip", action="append", default=[], help="a contender to leave out (slow peers)")
    ap.add_argument("--baseline", help="an earlier revision of pykbatch to measure in the same run (e.g. 93446ba)")
    ap.add_argument("--codecs", default="", help="compressed topics to read too, e.g. lz4,zstd")
    ap.add_argument("--spark", action="store_true", help="also kafka-kbatch vs Spark's Kafka source")
    ap.add_argument("--spark-only", action="store_true")
    ap.add_argument("--group", action="store_true", help="group members only: pykbatch's Reader in a KIP-848 group "
                                                           "against confluent-kafka's (issue 38)")
    args = ap.parse_args()
    with local_broker.broker(args.bootstrap, client_core=args.core) as bootstrap:
        run(args, bootstrap)


def run(args, bootstrap: str) -> None:
    produce(bootstrap, args.records)
    codecs_asked = [c for c in args.codecs.split(",") if c]
    for codec in codecs_asked:
        produce(bootstrap, args.records, f"{TOPIC}-{codec}", codec)
    if args.spark or args.spark_only:
        spark_compare(bootstrap, args.records, args.repeats)
        if args.spark_only:
            return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})  # the consumers' threads inherit it: one core for all
    contenders = {k: v for k, v in (GROUP_CONTENDERS if args.group else CONTENDERS).items() if k not in args.skip}
    if args.baseline:
        contenders[f"pykbatch {args.baseline} to Arrow"] = baseline_contender(args.baseline, 8 << 20)
        contenders[f"pykbatch {args.baseline} to Arrow, 1 MiB"] = baseline_contender(args.baseline, 1 << 20)
    for codec in codecs_asked:
        contenders[f"pykbatch to Arrow, {codec}"] = (
            lambda bootstrap, n, codec=codec: pykbatch_arrow(bootstrap, n, f"{TOPIC}-{codec}"))
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for name, fn in contenders.items():  # warm-up (imports, connections, the baseline's build)
        got = fn(bootstrap, args.records)
        assert (got[0] if isinstance(got, tuple) else got) == args.records, name
    for _ in range(args.repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            got = fn(bootstrap, args.records)
            elapsed = time.perf_counter() - t0
            if isinstance(got, tuple):  # measured in its own process
                got, elapsed = got
            times[name].append(elapsed)
            assert got == args.records, (name, got)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.get("confluent-kafka consume")
    print(f"{args.records:,} records of 100 B, one partition, medians of {args.repeats} (core {args.core})")
    for name, t in med.items():
        ratio = f"{base / t:5.2f}x confluent-kafka" if base else ""
        print(f"  {name:34s} {args.records / t / 1e6:6.3f} M records/s  {ratio}")
    arrow = args.records / med["pykbatch to Arrow"] / 1e6
    if args.group:
        steady = med["confluent-kafka, from its first record"] / med["pykbatch to Arrow, from its first record"]
        print(f"issue 38 (group members, KIP-848): to Arrow >= 4x confluent-kafka's member: joining included "
              f"{base / med['pykbatch to Arrow']:.2f}x ({arrow:.2f} M/s), from the first record {steady:.2f}x")
        return
    if base:
        print(f"targets: to Arrow >= 4x and >= 1 M/s: {base / med['pykbatch to Arrow']:.2f}x, {arrow:.2f} M/s; "
              f"to objects >= 1.5x: {base / med['pykbatch to objects']:.2f}x")
    print(f"issue 35: to Arrow >= 4 M/s: {arrow:.2f} M/s; at 1 MiB fetches >= 3 M/s: "
          f"{args.records / med['pykbatch to Arrow, 1 MiB'] / 1e6:.2f} M/s; objects >= 1 M/s: "
          f"{args.records / med['pykbatch to objects'] / 1e6:.2f} M/s")
    if args.baseline:
        print(f"  against {args.baseline} (>= 1.4x): {med[f'pykbatch {args.baseline} to Arrow'] / med['pykbatch to Arrow']:.2f}x "
              f"at 8 MiB, {med[f'pykbatch {args.baseline} to Arrow, 1 MiB'] / med['pykbatch to Arrow, 1 MiB']:.2f}x at 1 MiB")
    for codec in codecs_asked:
        bare = bare_decompression(bootstrap, f"{TOPIC}-{codec}")
        if bare is None:
            print(f"  {codec}: bare decompression needs the local broker's log files (no --bootstrap)")
            continue
        floor = bare + med["pykbatch to Arrow"]
        print(f"  {codec} topic to Arrow {med[f'pykbatch to Arrow, {codec}']:.3f} s against bare decompression "
              f"{bare:.3f} s + the uncompressed read {med['pykbatch to Arrow']:.3f} s: "
              f"{med[f'pykbatch to Arrow, {codec}'] / floor:.2f}x (<= 1.1x)")


if __name__ == "__main__":
    main()
