"""Dumping and validating a large segment: peak RSS above the interpreter's baseline, and the
dump's throughput beside Kafka's own kafka-dump-log on the same file (its JVM start-up measured
apart, on an empty file).

    python benchmarks/segment_memory.py [--gib 1.0] [--deep] [--no-kafka]

Targets: the dump's peak RSS under 150 MB above baseline for a >= 1 GiB segment; validate's
within the dump's (issue 23: the pages a validation has passed are handed back).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workloads import build  # noqa: E402


def write_segment(path: Path, size: int) -> int:
    """Workload B's ~110 KB batch (100 records of 1 KiB) repeated, base offsets patched in place
    (the CRC does not cover them); returns the number of batches."""
    batch = bytearray(build("B", batches=1))
    n = 0
    with open(path, "wb") as f:
        written = 0
        while written < size:
            batch[0:8] = (n * 100).to_bytes(8, "big")
            f.write(batch)
            written += len(batch)
            n += 1
    return n


def run(argv: list) -> tuple:
    """Runs a command with stdout discarded: (wall seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--deep", action="store_true", help="--deep-iteration (a line per record)")
    ap.add_argument("--no-kafka", action="store_true")
    args = ap.parse_args()
    flags = ["--deep-iteration"] if args.deep else []
    with tempfile.TemporaryDirectory() as tmp:
        seg = Path(tmp) / "00000000000000000000.log"
        batches = write_segment(seg, int(args.gib * 2**30))
        size = seg.stat().st_size
        empty = Path(tmp) / "empty" / "00000000000000000000.log"
        empty.parent.mkdir()
        empty.write_bytes(b"")
        print(f"segment: {size / 2**20:.0f} MiB, {batches} batches, {batches * 100} records; flags {flags}")

        _, base_rss = run([sys.executable, "-c", "import pykbatch.commands"])
        wall, rss = run([sys.executable, "-m", "pykbatch", "dump", "--files", str(seg), "--no-progress", *flags])
        print(f"pykbatch dump: {wall:.2f} s, {size / 2**20 / wall:.0f} MiB/s, peak RSS {rss:.0f} MiB, "
              f"{rss - base_rss:.0f} MiB above the interpreter's {base_rss:.0f} MiB (target < 150)")
        v_wall, v_rss = run([sys.executable, "-m", "pykbatch", "validate", str(seg)])
        print(f"pykbatch validate: {v_wall:.2f} s, {size / 2**20 / v_wall:.0f} MiB/s, peak RSS {v_rss:.0f} MiB, "
              f"{v_rss - base_rss:.0f} MiB above the interpreter's (target: within the dump's "
              f"{rss - base_rss:.0f}: {'met' if v_rss <= rss else 'NOT met'})")
        if args.no_kafka:
            return
        from tests import kafka_tools
        if kafka_tools.unavailable():
            print(f"kafka-dump-log: skipped ({kafka_tools.unavailable()})")
            return
        java = ["java", "-Xmx1g", "-cp", kafka_tools.classpath(), "org.apache.kafka.tools.DumpLogSegments", "--files"]
        start_wall, start_rss = run(java + [str(empty)])
        k_wall, k_rss = run(java + [str(seg), *flags])
        print(f"kafka-dump-log 4.3.1: {k_wall:.2f} s including {start_wall:.2f} s JVM start-up "
              f"({size / 2**20 / max(k_wall - start_wall, 1e-9):.0f} MiB/s without it), peak RSS {k_rss:.0f} MiB")
        print(f"ratio (Kafka's time / ours): {k_wall / wall:.2f} with start-up, "
              f"{(k_wall - start_wall) / wall:.2f} without")


if __name__ == "__main__":
    main()
