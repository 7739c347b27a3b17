"""Compressed workloads A/B/C per codec: pykbatch beside aiokafka and kafka-python, and beside the
bare decompression of the same payloads with the same codec library.  Target: validating the
compressed batches takes at most 1.05x (bare decompression + validating the same records
uncompressed), i.e. the codec layer adds nothing but the decompression itself.

    OPENBLAS_NUM_THREADS=1 taskset -c 1 python benchmarks/compressed.py [--repeats 5] [--codecs gzip,snappy,lz4,zstd]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pykbatch as kb  # noqa: E402
from compare import measure  # noqa: E402
from pykbatch import codecs  # noqa: E402
from readers import aiokafka_compiled, kafka_python  # noqa: E402
from workloads import WORKLOADS, build  # noqa: E402


def recompress(data: bytes, codec: str) -> bytes:
    return kb.encode(_with_codec(b, codec) for b in kb.iter_batches(data))


class _with_codec:
    """A decoded batch presented with another codec in its attributes (encode compresses it)."""

    def __init__(self, batch, codec):
        self._b = batch
        self.attributes = (batch.attributes & ~7) | kb._native.COMPRESSION_NAMES.index(codec)

    def __getattr__(self, name):
        return getattr(self._b, name)

    def __iter__(self):
        return iter(self._b)


def bare_decompress(data: bytes):
    """Decompress every payload with pykbatch's codec layer and nothing else."""
    scratch = codecs.Scratch()
    view = memoryview(data)
    for b in kb.iter_batches(data, verify_crc=False):
        scratch.decompress(b.attributes & 7, 2, view[b.position + 61:b.position + b.size])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--codecs", default="gzip,snappy,lz4,zstd")
    args = ap.parse_args()
    readers = {
        "bare decompression": bare_decompress,
        "pykbatch.validate": lambda d: kb.validate(d, kb.ValidationConfig(origin="log")).records,
        "pykbatch tuples": lambda d: sum(1 for b in kb.iter_batches(d) for _ in b.tuples()),
        "pykbatch.to_arrow": lambda d: kb.to_arrow(d).num_rows,
        "aiokafka (C ext)": aiokafka_compiled,
        "kafka-python": kafka_python,
    }
    print(f"{'codec':7} {'wl':3} {'reader':20} {'ms':>8} {'vs bare':>8} {'vs aiokafka':>12}")
    validate_plain = readers["pykbatch.validate"]
    for codec in args.codecs.split(","):
        for name in WORKLOADS:
            plain = build(name)
            data = recompress(plain, codec)
            times = {r: [] for r in readers}
            times["uncompressed validate"] = []
            for _ in range(2):
                for r, fn in readers.items():
                    times[r].append(measure(fn, data, max(args.repeats // 2, 1)))
                times["uncompressed validate"].append(measure(validate_plain, plain, max(args.repeats // 2, 1)))
            med = {r: statistics.median(ts) for r, ts in times.items()}
            for r, t in med.items():
                print(f"{codec:7} {name:3} {r:20} {t * 1e3:8.2f} {t / med['bare decompression']:8.2f} "
                      f"{med['aiokafka (C ext)'] / t:11.2f}x")
            yardstick = med["bare decompression"] + med["uncompressed validate"]
            ratio = med["pykbatch.validate"] / yardstick
            print(f"{codec:7} {name:3} target: validate / (bare decompression + uncompressed validate) "
                  f"{ratio:.2f} (<= 1.05) {'met' if ratio <= 1.05 else 'NOT MET'}")
        print()


if __name__ == "__main__":
    main()
