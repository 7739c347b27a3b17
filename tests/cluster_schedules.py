"""Drawn schedules of faults for a three-broker cluster (tests/kafka_cluster.py), Jepsen's way:
one fault at a time, each aimed at a role (a partition's leader, the active controller, any
node), lasting a drawn while, then healed; the schedule is printed with its seed so a failing
run can be replayed (``PYKBATCH_CLUSTER_SEED``).

Faults: ``kill`` (SIGKILL, started again when it ends), ``pause`` (SIGSTOP past the broker's
session timeout, then SIGCONT), and the client-side network faults of tests/fault_proxy.py
(``blackhole``, ``answers_lost``, ``drop``, ``delay``) between every client and the target.
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

KINDS = ("kill", "pause", "blackhole", "answers_lost", "drop", "delay")
TARGETS = ("leader", "controller", "any", "coordinator")  # coordinator: the workload's (else a leader)


@dataclass
class Fault:
    kind: str
    target: str
    after_s: float   # quiet time before it starts
    lasts_s: float

    def __str__(self) -> str:
        return f"{self.kind} {self.target} after {self.after_s:.1f}s for {self.lasts_s:.1f}s"


@dataclass
class Schedule:
    seed: int
    faults: list[Fault]
    log: list[str] = field(default_factory=list)  # what was done, to whom, when
    error: BaseException | None = None  # the injector's own failure (the cluster did not heal...)

    def __str__(self) -> str:
        return f"seed {self.seed}: " + "; ".join(map(str, self.faults))


def draw(seed: int, faults: int = 2, kinds: tuple[str, ...] = KINDS) -> Schedule:
    rng = random.Random(seed)
    out = []
    for _ in range(faults):
        kind = rng.choice(kinds)
        lasts = {"kill": rng.uniform(3, 8), "pause": rng.uniform(7, 9), "blackhole": rng.uniform(4, 8),
                 "answers_lost": rng.uniform(2, 5), "drop": rng.uniform(1, 4), "delay": rng.uniform(2, 5)}[kind]
        out.append(Fault(kind, rng.choice(TARGETS), rng.uniform(0.5, 2.5), lasts))
    return Schedule(seed, out)


def run(cluster, schedule: Schedule, topic: str, partitions: int, stop: threading.Event | None = None,
        coordinator=None) -> None:
    """The schedule's faults, one after another, on ``cluster``; each healed when it ends (a killed
    node started again), and the cluster waited for to be whole before the next.  A failure of
    the injector itself is kept in ``schedule.error`` (run is a thread's target)."""
    try:
        _run(cluster, schedule, topic, partitions, stop, coordinator)
    except BaseException as exc:  # noqa: BLE001 (the test raises it)
        schedule.error = exc
        cluster.heal()


def _run(cluster, schedule: Schedule, topic: str, partitions: int, stop: threading.Event | None,
         coordinator) -> None:
    start = time.monotonic()

    def say(text: str) -> None:
        schedule.log.append(f"{time.monotonic() - start:6.1f}s {text}")

    rng = random.Random(schedule.seed + 1)
    for f in schedule.faults:
        time.sleep(f.after_s)
        if stop is not None and stop.is_set():
            return
        if f.target == "coordinator" and coordinator is not None:
            node = coordinator()  # the group's or the transaction's, as the workload finds it
        elif f.target in ("leader", "coordinator"):
            node = cluster.leader(topic, rng.randrange(partitions))
        elif f.target == "controller":
            node = cluster.controller()
        else:
            node = rng.choice(sorted(cluster.nodes))
        say(f"{f.kind} node {node}")
        if f.kind == "kill":
            cluster.kill(node)
        elif f.kind == "pause":
            cluster.pause(node)
        elif f.kind == "delay":
            cluster.proxy(node).set("delay", delay_s=rng.uniform(0.05, 0.4))
        else:
            cluster.proxy(node).set(f.kind)
        time.sleep(f.lasts_s)
        say(f"heal node {node}")
        cluster.heal()
        cluster.wait_healthy(topics=(topic,))
        say("whole")
