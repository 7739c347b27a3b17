"""Memory of a validation whose every batch is a culprit, beside a sound log of the same size.

    python benchmarks/culprit_memory.py [--mib 256] [--repeats 3]

A log of one batch repeated (its offsets go back at every batch after the first: each one a
``log.offsets_not_increasing`` culprit) and the same batches with increasing offsets, validated by
``pykbatch validate`` in its own process; peak RSS of each (median of the repeats) and their ratio.
Target (issue 53): the culprits' log within 1.2x the sound log's peak RSS -- what is kept for the
report is bounded (``--max-culprits``, the rest counted), whatever the number of culprits.
"""
import argparse
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pykbatch as kb  # noqa: E402


def write_logs(folder: Path, size: int) -> tuple:
    batch = kb.build_batch([{"key": b"k%d" % i, "value": b"v" * 100, "timestamp": 1000 + i} for i in range(20)])
    n = size // len(batch)
    repeated, sound = folder / "repeated" / "00000000000000000000.log", folder / "sound" / "00000000000000000000.log"
    for path in (repeated, sound):
        path.parent.mkdir()
    with open(repeated, "wb") as bad, open(sound, "wb") as good:  # a batch at a time: the children's
        for i in range(n):                                             # peak is measured, and a fork starts
            bad.write(batch)                                           # with this process's
            good.write(struct.pack(">q", i * 20) + batch[8:])
    return repeated, sound, n


def peak_rss_mib(path: Path) -> tuple:
    """(peak RSS in MiB, exit status) of ``pykbatch validate path`` in its own process."""
    proc = subprocess.Popen([sys.executable, "-m", "pykbatch", "validate", "--no-progress", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repeated, sound, n = write_logs(Path(tmp), args.mib << 20)
        culprits = [peak_rss_mib(repeated) for _ in range(args.repeats)]
        clean = [peak_rss_mib(sound) for _ in range(args.repeats)]
    assert all(status == 1 for _, status in culprits) and all(status == 0 for _, status in clean)
    bad, good = statistics.median(r for r, _ in culprits), statistics.median(r for r, _ in clean)
    print(f"{args.mib} MiB, {n} batches ({n - 1} culprits in the repeated log), medians of {args.repeats}:")
    print(f"  sound log       peak RSS {good:7.1f} MiB")
    print(f"  every batch bad peak RSS {bad:7.1f} MiB   ratio {bad / good:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
