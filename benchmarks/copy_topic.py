"""Copying a topic exactly once: ``pykbatch.live.copy.copy_topic`` beside the copy loop Kafka's
documentation gives for exactly-once consume-transform-produce, written with confluent-kafka
(librdkafka): a read_committed consumer, a transactional producer, the consumer's offsets sent to
each transaction (``send_offsets_to_transaction``), a commit every second or 50,000 records -- the
same source topic (3 partitions, 100-byte values, 8-byte keys, one header), the same transaction
bounds, measured interleaved in one run, medians.

    python benchmarks/copy_topic.py [--records 300000] [--repeats 3] [--bootstrap HOST:PORT]

Prints records/s end to end (start -> the last transaction committed) for each and their ratio.
Without --bootstrap it starts the test harness's broker in a temporary directory.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import local_broker  # noqa: E402

VALUE = bytes(range(100))
COMMIT_MS, MAX_RECORDS = 1000, 50_000
_runs = itertools.count()


def source_topic(bootstrap: str, records: int) -> str:
    import pyarrow as pa
    from confluent_kafka.admin import AdminClient, NewTopic

    from pykbatch.live import Producer
    name = f"bench-copy-src-{int(time.time())}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(60)
    data = pa.table({"key": pa.array([b"%08d" % i for i in range(records)], pa.binary()),
                     "value": pa.array([VALUE] * records, pa.binary()),
                     "headers": pa.array([[{"key": "h", "value": b"1"}]] * records,
                                         pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 18}) as p:
        p.produce_arrow(data, topic=name)
    return name


def pykbatch_copy(bootstrap: str, source: str, records: int) -> int:
    from pykbatch.live.copy import copy_topic
    run = next(_runs)
    report = copy_topic({"bootstrap.servers": bootstrap}, source, f"{source}-pykbatch-{run}",
                        commit_interval_ms=COMMIT_MS, max_transaction_records=MAX_RECORDS,
                        producer={"linger.ms": 20, "batch.size": 1 << 18})
    return sum(p.copied_now for p in report.partitions.values())


def confluent_copy(bootstrap: str, source: str, records: int) -> int:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    run = next(_runs)
    dest, group = f"{source}-confluent-{run}", f"bench-copy-{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(dest, 3, 1)])[dest].result(60)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([__import__("confluent_kafka").TopicPartition(source, p) for p in range(3)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-copy-{run}",
                         "linger.ms": 20, "batch.size": 1 << 18, "queue.buffering.max.messages": 1_000_000})
    producer.init_transactions(60)
    copied, in_txn, started = 0, 0, time.monotonic()
    producer.begin_transaction()
    while copied < records:
        for m in consumer.consume(10_000, 1.0):
            if m.error():
                continue
            while True:
                try:
                    producer.produce(dest, m.value(), m.key(), partition=m.partition(), headers=m.headers(),
                                     timestamp=m.timestamp()[1])
                    break
                except BufferError:
                    producer.poll(0.01)
            copied += 1
            in_txn += 1
        if in_txn >= MAX_RECORDS or (time.monotonic() - started) * 1000 >= COMMIT_MS or copied >= records:
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
            in_txn, started = 0, time.monotonic()
            if copied < records:
                producer.begin_transaction()
    consumer.close()
    return copied


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bootstrap", default=None)
    args = ap.parse_args()
    with local_broker.broker(args.bootstrap) as bootstrap:
        source = source_topic(bootstrap, args.records)
        rates: dict[str, list[float]] = {"pykbatch copy": [], "confluent-kafka EOS loop": []}
        for _ in range(args.repeats):
            for name, fn in (("pykbatch copy", pykbatch_copy), ("confluent-kafka EOS loop", confluent_copy)):
                began = time.perf_counter()
                n = fn(bootstrap, source, args.records)
                took = time.perf_counter() - began
                assert n == args.records, (name, n)
                rates[name].append(n / took)
                print(f"{name}: {n / took / 1e3:.0f} k records/s", flush=True)
        med = {k: statistics.median(v) for k, v in rates.items()}
        for k, v in med.items():
            print(f"median {k}: {v / 1e3:.0f} k records/s")
        print(f"pykbatch copy / confluent-kafka EOS loop: {med['pykbatch copy'] / med['confluent-kafka EOS loop']:.2f}x")


if __name__ == "__main__":
    main()
