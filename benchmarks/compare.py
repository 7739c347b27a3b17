"""Print pykbatch beside aiokafka's compiled reader and kafka-python on workloads A/B/C,
measured interleaved in one process (medians of thread CPU time), with the issue's targets.

    python benchmarks/compare.py [--repeats 9]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crc32c as crc32c_ref  # noqa: E402

import pykbatch as kb  # noqa: E402
from readers import READERS  # noqa: E402
from workloads import WORKLOADS, build, record_count  # noqa: E402


def measure(fn, data, repeats):
    """Median seconds of thread CPU time over `repeats` runs (after one warm-up)."""
    fn(data)
    times = []
    for _ in range(repeats):
        t0 = time.thread_time()
        fn(data)
        times.append(time.thread_time() - t0)
    return statistics.median(times)


def crc_table(repeats):
    blob = os.urandom(1 << 20)
    loops = 200

    def ours(b):
        for _ in range(loops):
            kb.crc32c(b)

    def ref(b):
        for _ in range(loops):
            crc32c_ref.crc32c(b)
    t_ours, t_ref = measure(ours, blob, repeats), measure(ref, blob, repeats)
    gbs = lambda t: loops * len(blob) / t / 1e9  # noqa: E731
    print(f"CRC32C 1 MiB: pykbatch {gbs(t_ours):.1f} GB/s ({kb.native_info()['crc32c']}), "
          f"crc32c package {gbs(t_ref):.1f} GB/s -> ratio {t_ref / t_ours:.2f} (target >= 0.90)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    print(f"pykbatch {kb.__version__}, native {kb.native_info()}")
    crc_table(args.repeats)
    print()
    print(f"{'workload':9} {'reader':20} {'Mrec/s':>8} {'GB/s':>7} {'vs aiokafka':>12}")
    for name in WORKLOADS:
        data = build(name)
        n = record_count(name)
        times = {}
        for _ in range(3):  # interleave readers: noise hits them alike
            for reader, fn in READERS.items():
                t = measure(fn, data, max(args.repeats // 3, 1))
                times.setdefault(reader, []).append(t)
        med = {r: statistics.median(ts) for r, ts in times.items()}
        for reader, t in med.items():
            ratio = med["aiokafka (C ext)"] / t
            print(f"{name:9} {reader:20} {n / t / 1e6:8.2f} {len(data) / t / 1e9:7.2f} {ratio:11.2f}x")
        print(f"{name:9} targets: validate >= 10x aiokafka ({med['aiokafka (C ext)'] / med['pykbatch.validate']:.1f}x), "
              f"objects >= 2x ({med['aiokafka (C ext)'] / med['pykbatch objects']:.1f}x, "
              f"tuples {med['aiokafka (C ext)'] / med['pykbatch tuples']:.1f}x), "
              f"to_arrow >= 5x ({med['aiokafka (C ext)'] / med['pykbatch.to_arrow']:.1f}x, "
              f"zero_copy {med['aiokafka (C ext)'] / med['to_arrow zero_copy']:.1f}x)")
        print()


if __name__ == "__main__":
    main()
