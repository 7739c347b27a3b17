"""What a killed and restarted streaming query leaves in its output topic, sink by sink: Spark's own
Kafka sink, kafka-kbatch at least once, kafka-kbatch exactly once -- the same input (2 partitions),
the same drawn kill points for each (the driver and its Python workers SIGKILLed after a drawn
number of committed micro-batches and a drawn delay into the next), restarted on the checkpoint
each time, then run to the end; the output read with read_committed (librdkafka).

    python benchmarks/sink_kills.py [--runs 3] [--kills 3] [--seed N]

Prints, per sink: rows expected, rows read, duplicated rows, missing rows (issue 37's measured
contrast; the test of the exactly-once sink is tests/test_live_spark.py).
"""
from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks import local_broker  # noqa: E402

SINKS = {"Spark's kafka sink": "kafka:{out}", "kafka-kbatch at_least_once": "kafka-kbatch:at_least_once:{out}",
         "kafka-kbatch exactly_once": "kafka-kbatch:exactly_once:{out}"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--bootstrap", default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {seed}")
    with local_broker.broker(args.bootstrap) as bootstrap:
        measure(bootstrap, seed, args.runs, args.kills)


def measure(bootstrap: str, seed: int, runs: int, kills: int) -> None:
    from tests.live_damage import BATCH, create_topic, produce_batches, value_of
    from tests.test_live_produce import consume_all
    from tests.test_live_spark import run_job
    totals = {name: collections.Counter() for name in SINKS}
    for run in range(runs):
        source = f"kills-in-{seed}-{run}"
        create_topic(bootstrap, source, partitions=2)
        produce_batches(bootstrap, source, 30, partition=0)
        produce_batches(bootstrap, source, 30, partition=1, first_offset=1_000_000)
        want = collections.Counter([value_of(o) for o in range(30 * BATCH)]
                                   + [value_of(1_000_000 + o) for o in range(30 * BATCH)])
        rng = random.Random(seed * 1000 + run)
        points = []
        commits = 0
        for _ in range(kills):
            commits += rng.randrange(1, 4)
            points.append((commits, rng.uniform(0, 0.8)))
        for i, (name, sink) in enumerate(SINKS.items()):
            out = f"kills-out-{seed}-{run}-{i}"
            create_topic(bootstrap, out, partitions=2)
            with tempfile.TemporaryDirectory() as tmp:
                checkpoint = Path(tmp) / "checkpoint"
                for after, delay in points:
                    run_job(bootstrap, source, sink.format(out=out), checkpoint, "run", kill_after_commits=after,
                            kill_delay=delay, timeout=600)
                run_job(bootstrap, source, sink.format(out=out), checkpoint, "finish", timeout=600)
            got = collections.Counter(v for *_, v, _, _ in consume_all(bootstrap, out, sum(want.values()),
                                                                        read_committed=True))
            t = totals[name]
            t["expected"] += sum(want.values())
            t["read"] += sum(got.values())
            t["duplicated"] += sum(n - 1 for v, n in got.items() if n > 1)
            t["missing"] += sum(1 for v in want if v not in got)
            print(f"run {run} {name}: {dict(t)}", flush=True)
    print(f"{runs} run(s), {kills} kills each, seed {seed}")
    for name, t in totals.items():
        print(f"  {name:28s} expected {t['expected']:7d}  read {t['read']:7d}  duplicated {t['duplicated']:6d}  "
              f"missing {t['missing']:5d}")


if __name__ == "__main__":
    main()
