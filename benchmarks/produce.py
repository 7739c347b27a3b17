"""Producing to a local broker: pykbatch's producer from Arrow beside confluent-kafka's
``Producer`` (librdkafka) and kafka-python's ``KafkaProducer``, the same settings for all
(acks=all, idempotent, the same codec, linger.ms, batch.size), measured interleaved in one run.

    python benchmarks/produce.py [--records 1000000] [--repeats 3] [--codec none] [--bootstrap HOST:PORT]
    python benchmarks/produce.py --spark-only      # kafka-kbatch's sink (at least once, exactly once) vs Spark's own, local[2]

For each: end-to-end records/s (first record handed over -> every record acknowledged) and the
producing process's CPU seconds per million records (user + system of every thread, from
``resource.getrusage``: librdkafka's threads and pykbatch's network thread count), medians.
The producers run pinned to one core (the broker on the other).  Each run writes a fresh topic
of 3 partitions; records: 100-byte values, 8-byte keys (Kafka's partitioner spreads them).
Targets (issue 26): client CPU per record <= 0.25x confluent-kafka's; records/s >= 1.5x.

Without --bootstrap it starts the test harness's broker (Kafka from Maven Central) in a
temporary directory.
"""
from __future__ import annotations

import argparse
import itertools
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import local_broker  # noqa: E402
VALUE = bytes(range(100))
_topics = itertools.count()


def new_topic(bootstrap: str, who: str, partitions: int = 3) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"bench-produce-{who}-{next(_topics)}-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(name, max(3, partitions), 1)])[name].result(60)
    return name


def table(n: int) -> pa.Table:
    keys = pa.array([b"%08d" % i for i in range(n)], pa.binary())
    return pa.table({"key": keys, "value": pa.array([VALUE] * n, pa.binary())})


def pykbatch_arrow(bootstrap: str, topic: str, data: pa.Table, s: dict) -> int:
    from pykbatch.live import Producer
    with Producer({"bootstrap.servers": bootstrap, "compression.type": s["codec"], "linger.ms": s["linger"],
                   "batch.size": s["batch"], "acks": "all", "enable.idempotence": True}) as p:
        return p.produce_arrow(data, topic=topic).delivered_count


def confluent(bootstrap: str, topic: str, data: pa.Table, s: dict) -> int:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": s["codec"], "linger.ms": s["linger"],
                  "batch.size": s["batch"], "acks": "all", "enable.idempotence": True,
                  "partitioner": "murmur2_random", "queue.buffering.max.messages": 2_000_000})
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1
    keys = data.column("key").to_pylist()
    for k in keys:
        while True:
            try:
                p.produce(topic, VALUE, k, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(300)
    return delivered[0]


def kafka_python(bootstrap: str, topic: str, data: pa.Table, s: dict) -> int:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=s["linger"],
                      batch_size=s["batch"], compression_type=None if s["codec"] == "none" else s["codec"])
    futures = [p.send(topic, VALUE, k) for k in data.column("key").to_pylist()]
    p.flush(300)
    n = sum(1 for f in futures if f.succeeded())
    p.close()
    return n


def spark_compare(bootstrap: str, n: int, repeats: int, batch: int) -> None:
    """The same DataFrame through Spark's own Kafka sink and through kafka-kbatch, local[2]."""
    from spark_udfs.session import quiet_session
    from tests import kafka_tools

    import spark_udfs
    spark = quiet_session("local[2]", "bench-produce", **{"spark.jars": kafka_tools.spark_kafka_jars()})
    spark_udfs.register(spark)
    df = spark.range(0, n).selectExpr("CAST(lpad(CAST(id AS STRING), 8, '0') AS BINARY) AS key",
                                      f"unhex(repeat('ab', {len(VALUE)})) AS value").cache()
    df.count()
    # read-process-write: each row names a source record (a 2-partition topic: one per Spark partition)
    source = new_topic(bootstrap, "rpw-source", partitions=df.rdd.getNumPartitions())
    sourced = df.selectExpr("key", "value", f"named_struct('topic', '{source}', 'partition', spark_partition_id(), "
                            "'offset', monotonically_increasing_id()) AS source").cache()
    sourced.count()  # cached as df is: the sinks compared, not the making of their input
    eos = {"deliveryGuarantee": "exactly_once"}
    sinks = {"Spark's kafka sink": ("kafka", {}, df), "kafka-kbatch sink": ("kafka-kbatch", {}, df),
             "kafka-kbatch exactly_once": ("kafka-kbatch", eos, df),
             "exactly_once + source offsets": ("kafka-kbatch", {**eos, "sourceOffsetsGroup": "bench-rpw"}, sourced)}
    times: dict[str, list[float]] = {name: [] for name in sinks}
    for r in range(repeats):
        for name, (fmt, extra, frame) in sinks.items():
            topic = new_topic(bootstrap, fmt)
            if extra:  # a batch write's job name: each repeat a job of its own (a rerun under one writes nothing)
                extra = {**extra, "transactionalIdPrefix": f"bench-{topic}"}
            t0 = time.perf_counter()
            (frame.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("kafka.acks", "all").option("kafka.enable.idempotence", "true")
             .option("kafka.batch.size", batch).option("kafka.linger.ms", "5").options(**extra).mode("append").save())
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"Spark local[2], {n:,} rows (100 B values), acks=all, idempotent, batch.size {batch} for both; "
          f"medians of {repeats}")
    for name, t in med.items():
        print(f"  {name:26s} {n / t / 1e6:6.3f} M rows/s")
    ratio = med["Spark's kafka sink"] / med["kafka-kbatch sink"]
    print(f"target: kafka-kbatch sink >= 1.0x Spark's: {ratio:.2f}x")
    eos, at_least_once, theirs = med["kafka-kbatch exactly_once"], med["kafka-kbatch sink"], med["Spark's kafka sink"]
    print(f"targets (issue 37): exactly_once >= 0.8x kafka-kbatch at-least-once: {at_least_once / eos:.2f}x; "
          f">= 1.0x Spark's (at-least-once) kafka sink: {theirs / eos:.2f}x")
    print(f"read-process-write (source offsets committed in the transactions) vs exactly_once alone: "
          f"{eos / med['exactly_once + source offsets']:.2f}x")
    spark.stop()


CONTENDERS = {"pykbatch from Arrow": pykbatch_arrow, "confluent-kafka Producer": confluent,
              "kafka-python KafkaProducer": kafka_python}


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--linger", type=int, default=5)
    ap.add_argument("--batch", type=int, default=512 * 1024)
    ap.add_argument("--bootstrap")
    ap.add_argument("--core", type=int, default=1, help="the core the producers run on")
    ap.add_argument("--kafka-python-records", type=int, default=200_000,
                    help="kafka-python is measured on fewer records (it is slow); figures are per record")
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--spark", action="store_true", help="also kafka-kbatch's sink vs Spark's own Kafka sink")
    ap.add_argument("--spark-only", action="store_true")
    args = ap.parse_args()
    with local_broker.broker(args.bootstrap) as bootstrap:
        run(args, bootstrap)


def run(args, bootstrap: str) -> None:
    settings = {"codec": args.codec, "linger": args.linger, "batch": args.batch}
    if args.spark or args.spark_only:
        spark_compare(bootstrap, args.records, args.repeats, args.batch)
        if args.spark_only:
            return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})
    contenders = {k: v for k, v in CONTENDERS.items() if k not in args.skip}
    sizes = {k: (args.kafka_python_records if k.startswith("kafka-python") else args.records) for k in contenders}
    data = {n: table(n) for n in set(sizes.values())}
    walls: dict[str, list[float]] = {k: [] for k in contenders}
    cpus: dict[str, list[float]] = {k: [] for k in contenders}
    for name, fn in contenders.items():  # warm-up: imports, connections, JIT of nothing
        fn(bootstrap, new_topic(bootstrap, "warm"), data[sizes[name]].slice(0, 10_000), settings)
    for _ in range(args.repeats):
        for name, fn in contenders.items():
            topic = new_topic(bootstrap, name.split()[0])
            c0, t0 = cpu_seconds(), time.perf_counter()
            got = fn(bootstrap, topic, data[sizes[name]], settings)
            walls[name].append(time.perf_counter() - t0)
            cpus[name].append(cpu_seconds() - c0)
            assert got == sizes[name], (name, got)
    print(f"100 B values, 8 B keys, 3 partitions, acks=all, idempotent, codec {args.codec}, linger.ms "
          f"{args.linger}, batch.size {args.batch}; medians of {args.repeats} (producers on core {args.core})")
    rate = {k: sizes[k] / statistics.median(v) for k, v in walls.items()}
    cpu = {k: statistics.median(v) / sizes[k] * 1e6 for k, v in cpus.items()}
    base = "confluent-kafka Producer"
    for name in contenders:
        ratio = (f"  {rate[name] / rate[base]:5.2f}x records/s, {cpu[name] / cpu[base]:5.2f}x CPU of confluent-kafka"
                 if base in rate else "")
        print(f"  {name:28s} {rate[name] / 1e6:6.3f} M records/s  {cpu[name]:6.3f} CPU s per M records{ratio}")
    if base in rate and "pykbatch from Arrow" in rate:
        ours = "pykbatch from Arrow"
        print(f"targets: CPU per record <= 0.25x confluent-kafka: {cpu[ours] / cpu[base]:.2f}x; "
              f"records/s >= 1.5x: {rate[ours] / rate[base]:.2f}x")


if __name__ == "__main__":
    main()
