"""`pykbatch validate --segment` and `pykbatch dump --to parquet` on a partition of many segments:
one core (`taskset -c 1 ... --jobs 1`) against two (`taskset -c 0,1`, the default job count), as
whole commands (start-up included) and in process (audit_partition / export_partition).

    PYTHONPATH=. python benchmarks/partition_cores.py [--segments 64] [--mib 16] [--workload A] [--repeats 5]

Target (issue 15): two cores >= 1.8x the one-core time.  The partition is one generated segment
copied with its offsets moved on (the base offset is outside the CRC), so it builds in seconds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pykbatch as kb  # noqa: E402
from pykbatch.log import segment_file_name  # noqa: E402
from tiered_store import _segments  # noqa: E402
from workloads import build  # noqa: E402

TARGET = 1.8


def write_partition(directory: Path, segments: int, mib: float, workload: str) -> int:
    """``segments`` copies of one ``mib`` MiB segment (with its .index), offsets consecutive (the
producer's sequence numbers restart in each copy: the producer audit reports that, as it should)."""
    directory.mkdir(parents=True)
    sample = build(workload, batches=4)
    data = build(workload, batches=max(1, int(mib * 2**20 / (len(sample) / 4))))
    base, last, log, index = next(_segments(data, len(data)))
    positions = [b.position for b in kb.iter_batches(log, verify_crc=False)]
    span = last - base + 1
    for k in range(segments):
        moved = bytearray(log)
        for b, position in zip(kb.iter_batches(log, verify_crc=False), positions):
            struct.pack_into(">q", moved, position, b.base_offset + k * span)
        (directory / segment_file_name(k * span, ".log")).write_bytes(moved)
        (directory / segment_file_name(k * span, ".index")).write_bytes(index)
    return segments * len(log)


def timed(argv, cpus: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(["taskset", "-c", cpus, sys.executable, "-m", "pykbatch", *argv], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


IN_PROCESS = """
import sys, time, statistics, shutil
from pykbatch.log.audit import audit_partition
from pykbatch.log.export import export_partition
from pykbatch.log import Partition
what, directory, out, jobs, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
paths = Partition(directory).segment_paths
def run():
    if what == "validate":
        audit = audit_partition(directory, jobs=jobs)
        assert not audit.culprit_count and not audit.overlaps  # (the copies restart producer 7's sequence)
    else:
        shutil.rmtree(out, ignore_errors=True)
        export_partition(paths, out, "parquet", jobs=jobs)
run()
times = []
for _ in range(repeats):
    t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
print(statistics.median(times))
"""


def in_process(what: str, directory: Path, out: Path, cpus: str, jobs: int, repeats: int) -> float:
    done = subprocess.run(["taskset", "-c", cpus, sys.executable, "-c", IN_PROCESS, what, str(directory), str(out),
                           str(jobs), str(repeats)], check=True, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    return float(done.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=64)
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--workload", default="A")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two cores")
    root = Path(tempfile.mkdtemp(prefix="pykbatch-cores-"))
    try:
        directory = root / "bench-0"
        size = write_partition(directory, args.segments, args.mib, args.workload)
        out = root / "out"
        print(f"partition: {args.segments} segments, {size / 2**20:.0f} MiB, workload {args.workload}")
        commands = {"validate --segment": ["validate", "--segment", str(directory)],
                    "dump --to parquet": ["dump", "--files", str(directory), "--to", "parquet", str(out)]}
        for name, argv in commands.items():
            what = name.split()[0]
            for label, one, two in (
                    ("command", timed(argv + ["--jobs", "1"], "1", args.repeats), timed(argv, "0,1", args.repeats)),
                    ("in process", in_process(what, directory, out, "1", 1, args.repeats),
                     in_process(what, directory, out, "0,1", 2, args.repeats))):
                ratio = one / two
                print(f"{name:20} {label:10}  one core {one:6.2f} s  two cores {two:6.2f} s  {ratio:.2f}x "
                      f"(target >= {TARGET}x) {'met' if ratio >= TARGET else 'NOT MET'}  "
                      f"{size / two / 2**30:.2f} GiB/s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
