"""Decoding a large __consumer_offsets log: `pykbatch dump --offsets-decoder` beside Kafka's
kafka-dump-log --offsets-decoder (4.3.1) on the same file, same run: wall time and peak RSS
(issue 14's benchmark; 1 GiB by default).

    PYTHONPATH=. python benchmarks/internal_topics.py [--gib 1.0] [--no-kafka]

The log is what a busy group coordinator writes: offset commits (the bulk; every version's
fields), group metadata and tombstones, in batches of 200 records as the coordinator appends them.
"""
import argparse
import os
import random
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pykbatch as kb  # noqa: E402
from pykbatch.kafka import definitions  # noqa: E402
from segment_memory import run  # noqa: E402


def records(rng: random.Random, n: int, base: int) -> list:
    key_s, value_s = definitions.load("OffsetCommitKey"), definitions.load("OffsetCommitValue")
    gkey, gvalue = definitions.load("GroupMetadataKey"), definitions.load("GroupMetadataValue")
    out = []
    for i in range(n):
        group = f"group-{rng.randrange(500)}"
        if i % 50 == 49:  # group metadata, now and then a tombstone
            key = (2).to_bytes(2, "big") + gkey.encode({"group": group}, 0)
            value = None if i % 100 == 99 else (3).to_bytes(2, "big") + gvalue.encode(
                {"protocolType": "consumer", "generation": rng.randrange(100), "protocol": "range",
                 "leader": "member-1", "currentStateTimestamp": 1_700_000_000_000, "members": []}, 3)
        else:
            key = (1).to_bytes(2, "big") + key_s.encode(
                {"group": group, "topic": f"orders-{rng.randrange(40)}", "partition": rng.randrange(64)}, 0)
            value = (4).to_bytes(2, "big") + value_s.encode(
                {"offset": base + i, "leaderEpoch": 3, "metadata": "", "commitTimestamp": 1_700_000_000_000 + i,
                 "topicId": uuid.UUID(int=rng.getrandbits(128))}, 4)
        out.append({"key": key, "value": value, "timestamp": 1_700_000_000_000 + i})
    return out


def write_log(path: Path, size: int) -> int:
    rng = random.Random(14)
    template = [kb.build_batch(records(rng, 200, 0), base_offset=0) for _ in range(16)]
    n = 0
    with open(path, "wb") as f:
        written = 0
        while written < size:
            b = bytearray(template[n % len(template)])
            b[0:8] = (n * 200).to_bytes(8, "big")  # base offsets in order (the CRC does not cover them)
            f.write(b)
            written += len(b)
            n += 1
    return n * 200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--no-kafka", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "__consumer_offsets-0" / "00000000000000000000.log"
        log.parent.mkdir()
        n = write_log(log, int(args.gib * 2**30))
        size = log.stat().st_size
        print(f"__consumer_offsets log: {size / 2**20:.0f} MiB, {n} records")
        _, base_rss = run([sys.executable, "-c", "import pykbatch.commands"])
        plain, _ = run([sys.executable, "-m", "pykbatch", "dump", "--files", str(log), "--print-data-log",
                        "--no-progress"])
        print(f"pykbatch dump --print-data-log (keys and values as text, no decoder): {plain:.1f} s, "
              f"{n / plain / 1e3:.0f} k records/s")
        wall, rss = run([sys.executable, "-m", "pykbatch", "dump", "--files", str(log), "--offsets-decoder",
                         "--no-progress"])
        print(f"pykbatch dump --offsets-decoder: {wall:.1f} s, {n / wall / 1e3:.0f} k records/s, peak RSS {rss:.0f} MiB "
              f"({rss - base_rss:.0f} MiB above the interpreter)")
        if args.no_kafka:
            return
        from tests import kafka_tools
        if kafka_tools.unavailable():
            print(f"kafka-dump-log: skipped ({kafka_tools.unavailable()})")
            return
        java = ["java", "-Xmx1g", "-cp", kafka_tools.classpath(), "org.apache.kafka.tools.DumpLogSegments",
                "--offsets-decoder", "--files", str(log)]
        k_wall, k_rss = run(java)
        print(f"kafka-dump-log --offsets-decoder 4.3.1: {k_wall:.1f} s, {n / k_wall / 1e3:.0f} k records/s, "
              f"peak RSS {k_rss:.0f} MiB")
        print(f"ratio (Kafka's time / ours): {k_wall / wall:.2f}")


if __name__ == "__main__":
    main()
