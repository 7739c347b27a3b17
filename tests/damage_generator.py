"""Damage drawn at random on a real broker's disk, for the live reader's invariant.

Each case is one topic: its segment size, codec mix, transactions (committed and aborted), compaction,
the damage (kind and position) and the reader's start offset, fetch size and isolation level are
drawn from the case's seed.  Every case's topic is written by real clients (kafka-python;
confluent-kafka for transactions), the broker is stopped once, every case is damaged, and the broker
started again serves them all.  What a case expects is computed from the batches on disk and the
damage (which offsets can no longer be read), never from pykbatch's report.

A zeroed header, or a length that lands inside the next batch, goes into a closed segment: a broker
refuses to start on an active segment whose walk meets one (``closed_only``; found by bisecting the
cases of a run whose broker would not start again).  ``pinned()`` holds the cases an operator found by hand, as found.

Kinds of damage: ``crc`` (a byte of the records), ``zeros`` (a stretch of the header zeroed),
``length`` (the batch length lies: larger than the segment, or a little), ``codec`` (a compressed
payload replaced by garbage, the CRC made to match), ``truncate`` (the segment cut inside the batch),
``control`` (a transaction marker's CRC broken).  Positions: offset 0, a segment's first batch, its
last, the log's last, or any batch.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field

from tests.live_damage import (
    BATCH, OnDisk, batches_on_disk, create_topic, fix_crc, key_of, produce_batches, value_of,
)

KINDS = ("crc", "zeros", "length", "codec", "truncate", "control")
# damage after which the broker's own scan cannot reach the sound batches behind it in the segment
SHADOWING = ("zeros", "length", "truncate")
SEGMENT_BYTES = (16384, 40000, 1 << 30)
FETCH_BYTES = (4096, 40000, 1 << 20)


@dataclass
class Case:
    seed: int
    topic: str
    batches: int
    segment_bytes: int
    compressed: frozenset
    transactional: bool
    aborted: frozenset  # batch indexes written in aborted transactions
    compacted: bool
    kind: str
    where: str
    isolation: str
    fetch_bytes: int
    start: str  # "earliest", "damage" (a reader resuming inside the damage) or "any" offset
    target: int | None = None  # a pinned case: the batch index to damage
    start_at: int | None = None  # a pinned case: the reader's first offset
    lie: int | None = None  # a pinned case: the batch length claimed
    on_disk: list = field(default_factory=list)  # OnDisk of every batch (data and markers)
    damaged: int = -1  # index into on_disk
    extra: dict = field(default_factory=dict)

    def replay(self) -> str:
        return (f"case seed {self.seed}: {self.kind} at {self.where} of {self.batches} batches, segment "
                f"{self.segment_bytes} B, fetch {self.fetch_bytes} B, {self.isolation}, start {self.start}, "
                f"compacted={self.compacted}, transactional={self.transactional}")


def draw(seed: int, prefix: str = "gen", kinds=KINDS) -> Case:
    rng = random.Random(seed)
    kind = rng.choice(kinds)
    batches = rng.randrange(8, 36)
    segment_bytes = rng.choice(SEGMENT_BYTES)
    lie = rng.choice((100 << 20, None)) if kind == "length" else None  # None: a little more than the batch
    if closed_only(kind, lie):  # two segments at least, so that one is closed
        segment_bytes, batches = SEGMENT_BYTES[0], max(batches, 16)
    transactional = kind == "control" or rng.random() < 0.15
    compressed = frozenset(i for i in range(batches) if rng.random() < (0.5 if kind == "codec" else 0.15))
    if kind == "codec" and not compressed:
        compressed = frozenset({rng.randrange(batches)})
    aborted = frozenset(i for i in range(batches) if transactional and rng.random() < 0.3)
    return Case(seed, f"{prefix}-{seed}", batches, segment_bytes, compressed, transactional, aborted,
                compacted=rng.random() < 0.2, kind=kind,
                where=rng.choice(("first", "segment_start", "segment_end", "last", "any", "any")),
                isolation=rng.choice(("read_uncommitted", "read_committed")), fetch_bytes=rng.choice(FETCH_BYTES),
                start=rng.choice(("earliest", "earliest", "damage", "any")), lie=lie)


def write(bootstrap: str, case: Case) -> None:
    config = {"internal.segment.bytes": case.segment_bytes}
    if case.compacted:  # nothing to clean (every key is new), and nothing cleaned for a day
        config.update({"cleanup.policy": "compact", "min.compaction.lag.ms": 86_400_000})
    create_topic(bootstrap, case.topic, **config)
    if not case.transactional:
        produce_batches(bootstrap, case.topic, case.batches, compressed=case.compressed)
        return
    from confluent_kafka import Producer
    producers = {}
    for i in range(case.batches):
        codec = "lz4" if i in case.compressed else "none"
        if codec not in producers:
            producers[codec] = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{case.topic}-{codec}",
                                         "compression.type": codec, "linger.ms": 10_000, "batch.size": 1 << 20})
            producers[codec].init_transactions(30)
        p = producers[codec]
        p.begin_transaction()
        for j in range(BATCH):
            offset_hint = i * BATCH + j
            p.produce(case.topic, key=b"t%d" % offset_hint, value=value_of(offset_hint), partition=0)
        p.flush(30)
        (p.abort_transaction if i in case.aborted else p.commit_transaction)(30)
    for p in producers.values():
        p.flush(30)


def closed_only(kind: str, lie: int | None) -> bool:
    """Damage a broker cannot start on in its active segment (it walks that segment's tail to find
    the log's end, and refuses to start on a header it cannot read there): a zeroed header, a
    length that lands inside the next batch.  A length past the segment's end only ends the walk."""
    return kind == "zeros" or (kind == "length" and lie is None)


def pinned(prefix: str = "pinned") -> list[Case]:
    """The cases an operator found by hand (issue 33), kept as they were found."""
    def case(n, kind, batches, segment_bytes, fetch_bytes, target, start_at=None, lie=None, stretch=8):
        return Case(-n, f"{prefix}-{n}", batches, segment_bytes, frozenset(), False, frozenset(), False, kind, "pinned",
                    "read_uncommitted", fetch_bytes, "earliest" if start_at is None else "pinned", target=target,
                    start_at=start_at, lie=lie, extra={"stretch": stretch})
    return [
        # one segment of Kafka's default size, the batch at 500 claims 100 MiB, 4 KiB fetches: the
        # broker answers nothing and no error below a high watermark of 1000 (the reader polled forever)
        case(1, "length", 50, 1 << 30, 4096, 25, lie=100 << 20),
        case(2, "length", 50, 1 << 30, 4096, 25, start_at=500, lie=100 << 20),  # resuming at 500 got nothing
        # a fetch at 227 inside a batch whose header was zeroed is answered from 240
        case(3, "zeros", 30, 16384, 1 << 20, 11, start_at=227),
        # a lying length in small segments: a fetch at 500 answered from 560
        case(4, "length", 40, 16384, 1 << 20, 25, start_at=500, lie=3 << 20),
        # a closed segment cut inside a batch, later segments intact
        case(5, "truncate", 40, 16384, 4096, 10),
        # a reader resuming inside a sound batch (236 of 220-239) whose successor's base offset was
        # zeroed: the broker answers every fetch from 221 to 239 from 260, and 220 with the batch
        # (found by the generator, seed 501582)
        case(6, "zeros", 33, 16384, 4096, 12, start_at=236),
        # the same with the successor's size zeroed too: every fetch from 141 to 159 answered
        # CORRUPT_MESSAGE, 140 with the batch (seed 701795)
        case(7, "zeros", 33, 16384, 4096, 8, start_at=152, stretch=12),
    ]


def choose(case: Case, on_disk: list[OnDisk], rng: random.Random) -> int:
    """The index of the batch to damage, as the case's kind and position say."""
    if case.target is not None:
        return case.target
    if case.kind == "control":
        pool = [i for i, b in enumerate(on_disk) if b.is_control]
    elif case.kind == "codec":
        pool = [i for i, b in enumerate(on_disk) if b.compression != "none"]
    else:
        pool = [i for i, b in enumerate(on_disk) if not b.is_control]
    if closed_only(case.kind, case.lie):
        active = on_disk[-1].path
        pool = [i for i in pool if on_disk[i].path != active]
        assert pool, f"{case.replay()}: no closed segment to damage"
    if case.where == "first":
        picks = pool[:1]
    elif case.where == "last":
        picks = pool[-1:]
    elif case.where == "segment_start":
        picks = [i for i in pool if i == 0 or on_disk[i - 1].path != on_disk[i].path]
    elif case.where == "segment_end":
        picks = [i for i in pool if i + 1 == len(on_disk) or on_disk[i + 1].path != on_disk[i].path]
    else:
        picks = pool
    return rng.choice(picks or pool)


def damage(case: Case, partition_dir) -> None:
    """Damages the case's topic on disk (the broker is stopped)."""
    rng = random.Random(case.seed * 7919 + 1)
    case.on_disk = batches_on_disk(partition_dir)
    i = case.damaged = choose(case, case.on_disk, rng)
    b = case.on_disk[i]
    data = bytearray(b.path.read_bytes())
    s, size = b.position, b.size
    if case.kind in ("crc", "control"):
        data[s + 61 + rng.randrange(0, size - 61)] ^= 1 << rng.randrange(8)
    elif case.kind == "zeros":
        stretch = case.extra.get("stretch") or rng.choice((8, 12, 21, 61, size))
        if stretch == 8 and b.base_offset == 0:  # a zero base offset zeroed is no damage
            stretch = 12
        data[s:s + stretch] = bytes(stretch)
        case.extra["stretch"] = stretch
    elif case.kind == "length":
        lie = case.lie or size + rng.randrange(1, 4 * size)
        struct.pack_into(">i", data, s + 8, lie - 12)
        case.extra["claimed"] = lie
    elif case.kind == "codec":
        data[s + 61:s + size] = rng.randbytes(size - 61)
        fix_crc(data, s)
    elif case.kind == "truncate":
        cut = s + rng.randrange(1, size)
        del data[cut:]
        case.extra["cut"] = cut
    b.path.write_bytes(bytes(data))


@dataclass
class Expectation:
    """What the damage leaves, from the plan: every offset of the log and what it is."""
    written: dict  # offset -> (key, value) of every data record
    control: set  # offsets of transaction markers
    aborted: set  # offsets of records in aborted transactions
    damaged: set  # offsets of the damaged batch
    shadow: set  # offsets of sound batches the broker's own scan may not reach past the damage
    held_ok: set  # transactional offsets a reader under read_committed may hold (after an unreadable entry)


def expectation(case: Case) -> Expectation:
    on_disk = case.on_disk
    written, control, aborted = {}, set(), set()
    data_index = 0
    for b in on_disk:
        offsets = range(b.base_offset, b.last_offset + 1)
        if b.is_control:
            control |= set(offsets)
            continue
        for j, o in enumerate(offsets):
            n = data_index * BATCH + j
            written[o] = (b"t%d" % n, value_of(n)) if case.transactional else (key_of(o), value_of(o))
        if case.transactional and data_index in case.aborted:
            aborted |= set(offsets)
        data_index += 1
    d = on_disk[case.damaged]
    damaged = set(range(d.base_offset, d.last_offset + 1))
    shadow = set()
    if case.kind in SHADOWING:
        shadow = {o for b in on_disk[case.damaged + 1:] if b.path == d.path
                  for o in range(b.base_offset, b.last_offset + 1)}
    held_ok = set()
    if case.transactional:  # any unreadable entry may have been a producer's ABORT marker
        held_ok = {o for b in on_disk[case.damaged + 1:] if not b.is_control
                   for o in range(b.base_offset, b.last_offset + 1)}
    return Expectation(written, control, aborted, damaged, shadow, held_ok)


def start_offset(case: Case) -> int | str:
    if case.start_at is not None:
        return case.start_at
    if case.start == "earliest":
        return "earliest"
    if case.start == "any":
        return random.Random(case.seed).randrange(0, case.on_disk[-1].last_offset + 1)
    d = case.on_disk[case.damaged]
    return d.base_offset + random.Random(case.seed).randrange(0, d.last_offset - d.base_offset + 1)
