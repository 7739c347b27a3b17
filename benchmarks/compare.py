"""Print pykbatch beside aiokafka's compiled reader and kafka-python on workloads A/B/C,
measured interleaved in one process (medians of thread CPU time, the garbage collector off while
timing, as timeit does), with each row's target.

    taskset -c 1 python benchmarks/compare.py [--repeats 9] [--baseline 93446ba]

``--baseline REV``: ``to_arrow`` and ``validate`` (origin log) back to back on A, B and C also by that
earlier revision (built in a worktree, ``benchmarks/baseline.py``), in turns with this one, and the
ratio of their medians.
"""
import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crc32c as crc32c_ref  # noqa: E402

import pykbatch as kb  # noqa: E402
from readers import READERS  # noqa: E402
from workloads import WORKLOADS, build, record_count  # noqa: E402


def measure(fn, data, repeats, before=None):
    """Median seconds of thread CPU time over `repeats` runs of ``fn(data)`` (after one warm-up;
    with ``before``: each run right after an untimed ``before(data)``), without the cyclic
    garbage collector: a collection owed to one reader's objects would land in whichever reader
    happens to allocate next."""
    fn(data)
    times = []
    gc.disable()
    try:
        for _ in range(repeats):
            if before is not None:
                before(data)
            t0 = time.thread_time()
            fn(data)
            times.append(time.thread_time() - t0)
    finally:
        gc.enable()
    return statistics.median(times)


# (workload, reader, what, target, unit): each row printed with its target and whether it is met
TARGETS = [
    ("A", "pykbatch.validate", "vs aiokafka", 10.0, "x"),
    ("A", "pykbatch objects", "Mrec/s", 7.0, ""), ("A", "pykbatch objects", "vs aiokafka", 2.2, "x"),
    ("B", "pykbatch objects", "vs aiokafka", 2.5, "x"),
    ("B", "pykbatch.to_arrow", "GB/s", 5.0, ""), ("C", "pykbatch.to_arrow", "GB/s", 8.0, ""),
    ("A", "pykbatch.to_arrow", "vs aiokafka", 5.0, "x"),
]


def kb_validate_log(data):
    return kb.validate(data, kb.ValidationConfig(origin="log")).ok


def bare_copy(data):
    """The yardstick for a copying reader: the input copied once into fresh memory, nothing else."""
    return len(bytearray(data))


def target_lines(name, med, n, size):
    for wl, reader, what, target, unit in TARGETS:
        if wl != name:
            continue
        t = med[reader]
        value = {"Mrec/s": n / t / 1e6, "GB/s": size / t / 1e9, "vs aiokafka": med["aiokafka (C ext)"] / t}[what]
        yield (f"{name:9} target: {reader} {what} {value:.2f}{unit} (>= {target}{unit}) "
               f"{'met' if value >= target else 'NOT MET'}")


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


# a call back to back in an earlier revision: the workload's bytes from a file, median CPU seconds
BASELINE_CALL = """
import gc, json, statistics, time
import pykbatch as kb
data = open({path!r}, "rb").read()
{call}
gc.disable()
times = []
for _ in range({calls}):
    t0 = time.thread_time()
    {call}
    times.append(time.thread_time() - t0)
print(json.dumps(statistics.median(times)))
"""
# what --baseline measures in both revisions: (label, this tree's function, the same call as code)
BASELINE_CALLS = (
    ("to_arrow", lambda data: kb.to_arrow(data), "kb.to_arrow(data)"),
    ("validate (log)", kb_validate_log, "kb.validate(data, kb.ValidationConfig(origin='log'))"),
)


def against_baseline(rev: str, rounds: int = 3, calls: int = 30) -> None:
    """to_arrow and validate (origin log) on A, B and C, this tree and ``rev`` in turns (each a
    median of ``calls`` calls)."""
    import tempfile

    from baseline import run
    for name in ("A", "B", "C"):
        data = build(name)  # a log's offsets, one batch after another
        with tempfile.NamedTemporaryFile(suffix=f".{name}.bin") as f:
            f.write(data)
            f.flush()
            for label, fn, code in BASELINE_CALLS:
                ours, theirs = [], []
                for _ in range(rounds):
                    ours.append(measure(fn, data, calls))
                    theirs.append(run(rev, BASELINE_CALL.format(path=f.name, calls=calls, call=code)))
                o, t = statistics.median(ours), statistics.median(theirs)
                print(f"{name:9} {label} back to back: this tree {len(data) / o / 1e9:.2f} GB/s, {rev} "
                      f"{len(data) / t / 1e9:.2f} GB/s -> {t / o:.2f}x (medians of {rounds} turns)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--baseline", help="an earlier revision to measure to_arrow and validate against in the same run")
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
        for line in target_lines(name, med, n, len(data)):
            print(line)
        if name in ("B", "C"):
            # what memory allows when the output lands in memory other work has just evicted:
            # to_arrow and a bare copy of its input, each right after a validate pass
            cold, copy = (measure(fn, data, args.repeats, before=kb_validate_log)
                          for fn in (READERS["pykbatch.to_arrow"], bare_copy))
            print(f"{name:9} after a validate pass: pykbatch.to_arrow {len(data) / cold / 1e9:.2f} GB/s, a bare copy "
                  f"of the input {len(data) / copy / 1e9:.2f} GB/s (to_arrow takes {cold / copy:.2f}x the copy's time)")
            # the interleaved figure above meets caches the other readers emptied; this one is
            # to_arrow called back to back, as a loop over fetched data calls it
            # (30 calls: on this VM the first ~10 after other work run 1.5-2x slower while caches refill)
            alone = measure(READERS["pykbatch.to_arrow"], data, max(args.repeats, 30))
            target = {"B": 5.0, "C": 8.0}[name]
            gbs = len(data) / alone / 1e9
            print(f"{name:9} target: pykbatch.to_arrow back to back GB/s {gbs:.2f} (>= {target}) "
                  f"{'met' if gbs >= target else 'NOT MET'}")
        print()
    if args.baseline:
        against_baseline(args.baseline)


if __name__ == "__main__":
    main()
