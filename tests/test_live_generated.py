"""The live reader's promise on generated damage (tests/damage_generator.py): for every drawn case,
against the session's real broker, the reader finishes (never stuck), every offset from its start to
its end is delivered, inside a named skip, or explained by Kafka's semantics (a transaction marker,
an aborted record under read_committed, compaction on a compacted topic), each delivered record is
the one written, and no sound record the broker can serve is lost.

PYKBATCH_DAMAGE_CASES sets the number of cases (default 150), PYKBATCH_DAMAGE_SEED the first
seed (default: fixed under CI, random elsewhere); each case's seed is in its test id, and
``PYKBATCH_DAMAGE_SEED=<seed> PYKBATCH_DAMAGE_CASES=1`` replays one (PYKBATCH_DAMAGE_KINDS=crc,zeros
narrows the kinds drawn).
"""
from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from pykbatch.live import Reader, TopicPartition
from pykbatch.policy import ErrorPolicy
from tests import kafka_tools
from tests.damage_generator import KINDS, Case, damage, draw, expectation, pinned, start_offset, write
from tests.live_damage import wait_until_served

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))

CASES = int(os.environ.get("PYKBATCH_DAMAGE_CASES", "150"))
FIRST_SEED = int(os.environ.get("PYKBATCH_DAMAGE_SEED") or (20261126 if os.environ.get("CI") else
                                                            random.randrange(1 << 30)))
KINDS = tuple(os.environ.get("PYKBATCH_DAMAGE_KINDS", ",".join(KINDS)).split(","))  # a replay may narrow them
SEEDS = [c.seed for c in pinned()] + list(range(FIRST_SEED, FIRST_SEED + CASES))
print(f"\ntests/test_live_generated.py: {CASES} cases from seed {FIRST_SEED} "
      f"(replay: PYKBATCH_DAMAGE_SEED={FIRST_SEED} PYKBATCH_DAMAGE_CASES={CASES})")


@pytest.fixture(scope="module")
def generated(kafka_broker) -> dict[int, Case]:
    """Every case written, damaged during one stop of the broker, and served again."""
    cases = {c.seed: c for c in pinned()}
    cases.update({seed: draw(seed, kinds=KINDS) for seed in SEEDS if seed >= 0})
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda c: write(kafka_broker.bootstrap, c), cases.values()))
    kafka_broker.stop()
    try:
        for case in cases.values():
            damage(case, kafka_broker.data / f"{case.topic}-0")
    finally:
        kafka_broker.start()
    for case in cases.values():
        wait_until_served(kafka_broker.bootstrap, case.topic)
    return cases


def read(bootstrap: str, case: Case):
    start = start_offset(case)
    with Reader({"bootstrap.servers": bootstrap}, subscribe=case.topic,
                starting_offsets=start if start == "earliest" else {case.topic: {"0": start}},
                ending_offsets="latest", isolation_level=case.isolation, policy=ErrorPolicy(tolerance="all"),
                fail_on_data_loss=False,  # a start drawn past a log that truncation made shorter
                max_partition_fetch_bytes=case.fetch_bytes, fetch_max_bytes=max(case.fetch_bytes, 1 << 16)) as reader:
        began = time.monotonic()
        table = reader.read(timeout_s=90)
        assert reader.finished, f"stuck: at {reader.positions()} after {time.monotonic() - began:.0f} s"
        return table, reader


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" if s >= 0 else f"pinned-{-s}" for s in SEEDS])
def test_every_offset_is_accounted_for(generated, kafka_broker, seed):
    case = generated[seed]
    table, reader = read(kafka_broker.bootstrap, case)
    tp = TopicPartition(case.topic, 0)
    check(case, table, reader.skips, reader.accounting()[tp], reader.positions()[tp])


def test_one_reader_over_many_damaged_topics_in_small_responses(generated, kafka_broker):
    """Many damaged partitions in one reader, responses far smaller than what each partition has:
    partitions are cut short, answered empty or left out of a session's answer because the response
    was full, which is not damage -- and every partition still holds to the invariant."""
    cases = [c for c in generated.values() if c.isolation == "read_uncommitted" and c.start_at is None
             and c.start == "earliest"][:25]
    with Reader({"bootstrap.servers": kafka_broker.bootstrap}, subscribe=",".join(c.topic for c in cases),
                starting_offsets="earliest", ending_offsets="latest", policy=ErrorPolicy(tolerance="all"),
                max_partition_fetch_bytes=8192, fetch_max_bytes=20000) as reader:
        table = reader.read(timeout_s=300)
        assert reader.finished, f"stuck: {reader.positions()}"
        metrics = reader.metrics.as_dict()
    assert metrics["solo-fetches"] > 0, "no partition was cut short by a full response: the case is not exercised"
    import pyarrow.compute as pc
    for c in cases:
        tp = TopicPartition(c.topic, 0)
        mine = table.filter(pc.equal(table.column("topic"), c.topic))
        check(c, mine, [s for s in reader.skips if s.topic == c.topic], reader.accounting()[tp],
              reader.positions()[tp])


def check(case: Case, table, skips, ledger, position: int) -> None:
    """The invariant for one case's partition: ``table`` delivered, ``skips`` named."""
    why = case.replay()
    want = expectation(case)
    first, end = ledger.start, ledger.next
    assert end == position, why
    rows = table.select(["offset", "key", "value"]).to_pylist()
    delivered = [r["offset"] for r in rows]
    assert delivered == sorted(set(delivered)), f"each record once, in order ({why})"
    assert ledger.delivered == len(delivered), why
    committed = case.isolation == "read_committed"
    # each delivered record is the one written, and one a consumer at this level receives
    for r in rows:
        o = r["offset"]
        assert o in want.written and (r["key"], r["value"]) == want.written[o], f"offset {o}: not as written ({why})"
        assert not (committed and o in want.aborted), f"offset {o}: an aborted record delivered ({why})"
        assert o not in want.damaged, f"offset {o}: read from damaged bytes ({why})"
    skipped: set[int] = set()
    for s in skips:
        span = set(range(s.first_offset, s.last_offset + 1))
        assert not span & skipped, f"skips overlap at {sorted(span & skipped)[:5]} ({why})"
        skipped |= span
    got = set(delivered)
    assert not got & skipped, f"offsets both delivered and skipped: {sorted(got & skipped)[:5]} ({why})"
    # every offset of [first, end): delivered, skipped with a name, or explained by Kafka's semantics
    explained = want.control | (want.aborted if committed else set())
    unaccounted = set(range(first, end)) - got - skipped - explained
    if case.compacted:  # a compacted log may miss any offset: only a damaged one may be missing here
        assert unaccounted <= want.damaged | want.shadow, f"{sorted(unaccounted)[:10]} ({why})"
        assert len(unaccounted) <= ledger.compacted, why
    else:
        assert not unaccounted, f"offsets lost without a name: {sorted(unaccounted)[:10]}... ({why})"
    # no sound record the broker serves is lost: only the damaged batch, what its damage hides from
    # the broker's own scan, and under read_committed records held after an unreadable marker
    sound = {o for o in want.written if first <= o < end} - want.damaged - want.shadow
    if committed:
        sound -= want.aborted
        held = {o for s in skips if s.held for o in range(s.first_offset, s.last_offset + 1)}
        assert held <= want.held_ok | want.damaged, f"held without cause: {sorted(held)[:5]} ({why})"
        sound -= held
    lost = sound - got
    assert not lost, f"sound records not delivered: {sorted(lost)[:10]} ({why})"
