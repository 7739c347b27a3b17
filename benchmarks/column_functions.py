"""The column functions behind the Spark UDFs, one core, no Spark: time per row of
validate_array (281-byte batches, clean or every 50th corrupt), repair_array, batch_info_array
and explode_batch (200 rows of one workload-A batch), medians.

    python benchmarks/column_functions.py [--repeats 21]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=21)
    args = ap.parse_args()
    import pyarrow as pa

    import pykbatch as kb
    from pykbatch.arrow import batch_info_array, explode_batch, repair_array, validate_array
    from workloads import build

    good = kb.build_batch([{"key": b"k", "value": b"x" * 100, "timestamp": 1}] * 2)
    bad = bytearray(good)
    bad[-3] ^= 1
    small_clean = pa.array([good] * 10_000, pa.binary())
    small_mixed = pa.array([bytes(bad) if i % 50 == 0 else good for i in range(10_000)], pa.binary())
    big = pa.RecordBatch.from_arrays([pa.array(range(200)), pa.array([build("A", 1, as_produced=True)] * 200,
                                                                     pa.binary())], names=["id", "value"])
    cases = {
        "validate_array, 281 B, clean": (lambda: validate_array(small_clean), 10_000),
        "validate_array, 281 B, 2% corrupt": (lambda: validate_array(small_mixed), 10_000),
        "repair_array, 127 KB, clean": (lambda: repair_array(big.column(1)), 200),
        "batch_info_array, 127 KB": (lambda: batch_info_array(big.column(1)), 200),
        "explode_batch, 127 KB": (lambda: explode_batch(big, "value", ["id"]), 200),
    }
    for name, (run, rows) in cases.items():
        ts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            run()
            ts.append(time.perf_counter() - t0)
        print(f"  {name:36} {statistics.median(ts) / rows * 1e6:8.2f} us/row")


if __name__ == "__main__":
    main()
