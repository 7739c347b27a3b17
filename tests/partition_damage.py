"""A generator of damaged partitions, and its own record of what was written.

A partition directory of 2-4 segments, each with its offset and time index, written batch by
batch as a broker lays them out (contiguous offsets, as a topic that is not compacted has them):
batches encoded by kafka-python's producer (every codec it has), idempotent and transactional
batches with their COMMIT or ABORT markers built by pykbatch as Kafka's coordinator writes them.
Then one or two kinds of damage drawn from ``KINDS``, at drawn places.  What each kind takes is
the generator's own knowledge (``Case.lost``: the offsets whose records cannot be read back,
``Case.damaged``: whether any tool may say "ok"), never a reading of pykbatch's report.
"""
from __future__ import annotations

import bisect
import os
import random
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

import pykbatch as kb
from pykbatch.log import segment_file_name

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
HEADER = 61  # a v2 batch's header
AT_CRC, AT_ATTRIBUTES, AT_PRODUCER = 17, 21, 43

KINDS = ("crc", "zero_header", "zero_batch", "length_past_end", "length_into_next", "garbage_payload",
         "cut_inside", "cut_at_boundary", "cut_last_inside", "cut_to_zero", "delete_segment", "delete_index",
         "backwards", "control", "txn_index", "snapshot")


@dataclass
class Written:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


@dataclass
class OnDisk:
    """One batch as written: its segment, place and offsets, its records (none for a marker)."""
    segment: int
    position: int
    size: int
    first: int
    last: int
    codec: str
    control: bool
    records: list = field(default_factory=list)
    magic: int = 2


@dataclass
class Case:
    seed: int
    directory: Path
    segments: list            # base offset of each segment, in order
    batches: list             # OnDisk, in offset order
    kinds: list = field(default_factory=list)
    lost: set = field(default_factory=set)
    """Offsets whose records the damage took (never delivered, named by some finding)."""
    damaged: bool = False
    """Some tool must say so: exit 1."""
    normal_tail: set = field(default_factory=set)
    """Offsets lost with the active segment's incomplete tail: missing, but normal."""
    compacted: bool = False
    """A compacted topic's partition (the cleaner removed records: their offsets are gaps)."""

    def held(self, b: OnDisk) -> set:
        """The offsets ``b`` holds: its whole range, or in a compacted topic its records' (and a
        marker's own)."""
        if self.compacted and not b.control:
            return {r.offset for r in b.records}
        return set(range(b.first, b.last + 1))

    def path(self, segment: int, suffix: str = ".log") -> Path:
        return self.directory / segment_file_name(self.segments[segment], suffix)

    def of_segment(self, segment: int) -> list:
        return [b for b in self.batches if b.segment == segment]

    @property
    def records(self) -> dict:
        return {r.offset: r for b in self.batches for r in b.records}

    def describe(self) -> str:
        return f"seed {self.seed}: {', '.join(self.kinds)} ({len(self.segments)} segments, {len(self.batches)} batches)"


def _records(rng: random.Random, first: int, n: int, clock: int) -> list:
    out = []
    for i in range(n):
        key = None if rng.random() < 0.15 else b"key-%d" % rng.randrange(50)
        value = None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, 120))
        headers = tuple((f"h{j}", None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 8)))
                        for j in range(rng.choice([0, 0, 1, 2])))
        out.append(Written(first + i, key, value, headers, clock + i * rng.randint(0, 3)))
    return out


def _plain(records: list, codec: str) -> bytes:
    """A batch as kafka-python's producer encodes it."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec], is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, r in enumerate(records):
        b.append(i, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(b.build())


def _producer_batch(records: list, codec: str, pid: int, seq: int, txn: bool) -> bytes:
    return kb.build_batch([{"key": r.key, "value": r.value, "headers": r.headers, "timestamp": r.timestamp}
                           for r in records], producer_id=pid, producer_epoch=0, base_sequence=seq,
                          is_transactional=txn, compression=codec)


def _marker(pid: int, commit: bool, timestamp: int) -> bytes:
    key = b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
    return kb.build_batch([{"key": key, "value": b"\x00\x00\x00\x00\x00\x03", "timestamp": timestamp}],
                          producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)


# Magic 0/1 partitions: kafka-python's legacy encoder writes what a broker of that format kept.
# Drawn first on 2026-12-07 (seeds 91, 94: 63 of 1300 failed), each class fixed since: a wrapper's
# raw inner messages (compressors keep incompressible values verbatim; a message's offset and size
# are outside its CRC) taken for entries by a resync (a lying size ends a legacy message where its
# key and value lengths do; a cut one is not resynced; an unfollowed candidate gives way to a later
# followed one of a higher offset; no negative offsets); a wrapper's offsets known from its records
# once read (order culprits, gaps before it, a first in its segment from the segment's base).
# A v1 topic a real broker wrote (the conformance corpus: ../shared, absent from a user's clone, where
# the synthetic v1 is drawn instead): its messages, read by kafka-python, moved to the drawn offsets
CORPUS_V1 = Path("conformance/segments/xpxwo100+bullShit/tmp/kafka-logs/foo-0/00000000000000000000.log")
LEGACY_HEADER = {0: 18, 1: 26}  # offset, size, crc, magic, attributes (v1: timestamp)
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")


def _legacy(records: list, codec: str, magic: int) -> list:
    """Log entries of v0/v1 messages as a broker of that format keeps them: uncompressed, one
    entry per record at its offset; compressed, one wrapper whose offset is its last record's
    (the inner offsets relative under v1, absolute under v0); kafka-python's encoder."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    if codec == "none":
        out = []
        for r in records:
            b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
            b.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value)
            out.append((bytes(b.build()), [r]))
        return out
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=CODECS[codec], batch_size=1 << 20)
    for i, r in enumerate(records):
        b.append(i if magic == 1 else r.offset, timestamp=r.timestamp, key=r.key, value=r.value)
    wrapper = bytearray(records[-1].offset.to_bytes(8, "big") + bytes(b.build())[8:])
    if magic == 1:  # the broker stamps a v1 wrapper with its records' newest time (CreateTime)
        struct.pack_into(">q", wrapper, 18, max(r.timestamp for r in records))
        struct.pack_into(">I", wrapper, 12, zlib.crc32(wrapper[16:]))
    return [(bytes(wrapper), records)]


_corpus: list = []


def _corpus_messages() -> list:
    """(raw entry, Written with offset 0) of each message of CORPUS_V1; empty where it is absent."""
    if not _corpus:
        from kafka.record.memory_records import MemoryRecords
        from tests.conftest import SHARED
        path = SHARED / CORPUS_V1
        if not path.exists():
            return []
        data = path.read_bytes()
        records = MemoryRecords(data)
        pos = 0
        while (b := records.next_batch()) is not None:
            size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
            (r,) = list(b)
            _corpus.append((data[pos:pos + size], Written(0, r.key, r.value, (), r.timestamp)))
            pos += size
    return _corpus


def _at(batch: bytes, base_offset: int) -> bytes:
    return base_offset.to_bytes(8, "big", signed=True) + batch[8:]


def write(seed: int, directory: Path) -> Case:
    """A sound partition: its files on disk, and the generator's record of them."""
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    case = Case(seed, directory, [], [])
    offset, clock, pid, seq = 0, 1_700_000_000_000, 4000, 0
    # the message format, drawn apart so each seed's v2 partitions stay as they were: mostly v2, or a
    # topic of an old format (v0, v1), or one upgraded (its first segments v1, the rest v2);
    # PYKBATCH_PARTITION_LEGACY=0 draws v2 only
    formats = ["v2"] * 5 + ([] if os.environ.get("PYKBATCH_PARTITION_LEGACY") == "0" else ["v0", "v1", "upgrade"])
    fmt = random.Random(seed * 31 + 7).choice(formats)
    corpus = _corpus_messages() if fmt == "v1" and random.Random(seed * 37 + 11).random() < 0.5 else []
    segments = rng.randint(2, 4)
    for s in range(segments):
        magic = {"v0": 0, "v1": 1, "upgrade": 1 if s < segments // 2 else 2}.get(fmt, 2)
        case.segments.append(offset)
        log, index, timeindex, txnindex = bytearray(), bytearray(), bytearray(), bytearray()
        max_ts = -1
        for _ in range(rng.randint(2, 6)):
            codec = rng.choice(list(CODECS))
            records = _records(rng, offset, rng.randint(1, 6), clock)
            clock += 50
            style = rng.choice(["plain", "plain", "idempotent", "transactional"])
            if corpus:  # a run of the real broker's messages, at these offsets
                codec, start = "none", rng.randrange(len(corpus))
                picked = [corpus[(start + i) % len(corpus)] for i in range(len(records))]
                entries = [(_at(raw, r.offset), [Written(r.offset, w.key, w.value, (), w.timestamp)], False)
                           for (raw, w), r in zip(picked, records)]
            elif magic < 2:  # no headers, no producer ids; v0 no timestamps
                codec = codec if codec in LEGACY_CODECS else "gzip"
                records = [Written(r.offset, r.key, r.value, (), r.timestamp if magic else -1) for r in records]
                entries = [(raw, recs, False) for raw, recs in _legacy(records, codec, magic)]
            elif style == "plain":
                entries = [(_plain(records, codec), records, False)]
            else:
                entries = [(_producer_batch(records, codec, pid, seq, style == "transactional"), records, False)]
                seq += len(records)
            if style == "transactional" and magic == 2:
                commit = rng.random() < 0.6
                entries.append((_marker(pid, commit, clock), [], True))
                if not commit:  # Kafka's entry: (producer, first offset, marker offset, last stable offset)
                    marker = offset + len(records)
                    txnindex += struct.pack(">hqqqq", 0, pid, offset, marker, marker + 1)
            for raw, recs, control in entries:
                raw = _at(raw, offset) if magic == 2 else raw
                last = offset + max(len(recs), 1) - 1
                if len(log) and rng.random() < 0.5:  # an index entry, as the broker adds one now and then
                    index += struct.pack(">ii", last - case.segments[-1], len(log))
                    ts = max((r.timestamp for r in recs), default=clock)
                    if ts > max_ts and magic > 0:
                        timeindex += struct.pack(">qi", ts, last - case.segments[-1])
                        max_ts = ts
                case.batches.append(OnDisk(s, len(log), len(raw), offset, last, codec, control, recs, magic))
                log += raw
                offset = last + 1
        case.path(s).write_bytes(log)
        case.path(s, ".index").write_bytes(index)
        case.path(s, ".timeindex").write_bytes(timeindex)
        if txnindex:  # as Kafka, only where a transaction was aborted
            case.path(s, ".txnindex").write_bytes(txnindex)
    return case


def _patch(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def _recrc(path: Path, batch: OnDisk) -> None:
    data = path.read_bytes()
    if batch.magic < 2:  # CRC-32 of the message from its magic byte on, before it
        crc = zlib.crc32(data[batch.position + 16:batch.position + batch.size])
        _patch(path, batch.position + 12, struct.pack(">I", crc))
        return
    crc = crc32c.crc32c(data[batch.position + AT_ATTRIBUTES:batch.position + batch.size])
    _patch(path, batch.position + AT_CRC, struct.pack(">I", crc))


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def _unindex(case: Case, segment: int, batch: OnDisk) -> None:
    """The segment's index entries for ``batch`` and after it dropped."""
    base = case.segments[segment]
    index = case.path(segment, ".index").read_bytes()
    kept = [index[i:i + 8] for i in range(0, len(index), 8)
            if struct.unpack(">ii", index[i:i + 8])[1] < batch.position]
    case.path(segment, ".index").write_bytes(b"".join(kept))
    times = case.path(segment, ".timeindex").read_bytes()
    kept = [times[i:i + 12] for i in range(0, len(times), 12)
            if struct.unpack(">qi", times[i:i + 12])[1] + base < batch.first]
    case.path(segment, ".timeindex").write_bytes(b"".join(kept))


def damage(case: Case, rng: random.Random, kind: str) -> bool:
    """Applies ``kind`` at a drawn place; False when this partition has no place for it."""
    last_segment = len(case.segments) - 1
    closed = [s for s in range(last_segment) if case.path(s).exists() and case.path(s).stat().st_size]
    alive = [b for b in case.batches if case.path(b.segment).exists()
             and b.position + b.size <= case.path(b.segment).stat().st_size and b.first not in case.lost]
    if kind in ("crc", "zero_header", "zero_batch", "length_past_end", "garbage_payload", "control", "backwards",
                "length_into_next"):
        pool = {
            "garbage_payload": [b for b in alive if b.codec != "none" and not b.control],
            "control": [b for b in alive if b.control],
            "backwards": [b for b in alive if b.position > 0],
            "length_into_next": [b for b in alive if any(n.segment == b.segment and n.position == b.position + b.size
                                                         for n in alive)],
            # the active segment's last batch zeroed is a preallocated tail: nothing tells it from one
            "zero_batch": [b for b in alive if b is not case.batches[-1]],
        }.get(kind, alive)
        if not pool:
            return False
        b = rng.choice(pool)
        path = case.path(b.segment)
        if (kind == "crc" or kind == "control") and b.magic < 2:  # a byte the CRC-32 covers, after the magic
            at = b.position + rng.randrange(17, b.size)
            data = path.read_bytes()
            _patch(path, at, bytes([data[at] ^ (1 << rng.randrange(8))]))
        elif kind == "crc" or kind == "control":
            # an empty batch (the cleaner keeps them for producer state): a byte of its producer fields
            # or record count (the CRC covers them; its offsets and timestamps stay as written)
            at = b.position + (rng.randrange(HEADER, b.size) if b.size > HEADER else rng.randrange(AT_PRODUCER,
                                                                                                  HEADER))
            data = path.read_bytes()
            _patch(path, at, bytes([data[at] ^ (1 << rng.randrange(8))]))
        elif kind == "zero_header":
            _patch(path, b.position, bytes(HEADER if b.magic == 2 else LEGACY_HEADER[b.magic]))
        elif kind == "zero_batch":
            _patch(path, b.position, bytes(b.size))
        elif kind == "length_past_end":
            _patch(path, b.position + 8, struct.pack(">i", path.stat().st_size + rng.randint(1, 1 << 20)))
        elif kind == "length_into_next":  # its size claims part of the (intact) batch after it
            nxt = next(n for n in alive if n.segment == b.segment and n.position == b.position + b.size)
            _patch(path, b.position + 8, struct.pack(">i", b.size - 12 + rng.randint(1, nxt.size - 1)))
        elif kind == "garbage_payload" and b.magic < 2:  # the wrapper's value (after a null key and its length)
            start = LEGACY_HEADER[b.magic] + 8
            _patch(path, b.position + start, rng.randbytes(b.size - start))
            _recrc(path, b)
        elif kind == "garbage_payload":  # the codec cannot read it, the CRC says the bytes are as written
            _patch(path, b.position + HEADER, rng.randbytes(b.size - HEADER))
            _recrc(path, b)
        elif kind == "backwards":  # a base offset (outside the CRC) moved below the batch before it
            _patch(path, b.position, struct.pack(">q", max(0, b.first - rng.randint(1, 5))))
        case.lost.update(range(b.first, b.last + 1))
        case.damaged = True
        return True
    if kind in ("cut_inside", "cut_at_boundary", "cut_to_zero"):
        if not closed:
            return False
        s = rng.choice(closed)
        batches = [b for b in case.of_segment(s)]
        if kind == "cut_inside":
            b = batches[-1]
            cut = b.position + rng.randint(1, b.size - 1)
            gone = [b]
        elif kind == "cut_at_boundary":
            k = rng.randrange(len(batches))
            cut = batches[k].position
            gone = batches[k:]
        else:
            cut, gone = 0, batches
        _truncate(case.path(s), cut)
        for b in gone:
            case.lost.update(range(b.first, b.last + 1))
        case.damaged = True
        return True
    if kind == "cut_last_inside":
        batches = case.of_segment(last_segment)
        b = batches[-1]
        if b.first in case.lost or case.damaged:  # alone: the active segment's torn write, and nothing else
            return False
        _truncate(case.path(last_segment), b.position + rng.randint(1, b.size - 1))
        _unindex(case, last_segment, b)  # torn before the broker indexed it
        case.normal_tail.update(range(b.first, b.last + 1))
        return True
    if kind == "delete_segment":  # a middle one: without the first, the log just starts later (as retention
        middle = [s for s in closed if s >= 1]  # leaves it; only the log-start checkpoint could tell)
        if not middle:
            return False
        s = rng.choice(middle)
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            case.path(s, suffix).unlink(missing_ok=True)
        for b in case.of_segment(s):
            case.lost.update(range(b.first, b.last + 1))
        case.damaged = True
        return True
    if kind == "delete_index":
        if not closed:
            return False
        s = rng.choice(closed)
        case.path(s, rng.choice([".index", ".timeindex"])).unlink(missing_ok=True)
        case.damaged = True
        return True
    if kind == "txn_index":
        return _damage_txn_index(case, rng)
    if kind == "snapshot":  # a producer snapshot's byte flipped or its end cut (Kafka drops it and replays)
        snapshots = sorted(case.directory.glob("*.snapshot"))
        if not snapshots:
            return False
        path = rng.choice(snapshots)
        size = path.stat().st_size
        if rng.random() < 0.5 and size > 10:
            at = rng.randrange(size)
            _patch(path, at, bytes([path.read_bytes()[at] ^ (1 << rng.randrange(8))]))
        else:
            _truncate(path, rng.randrange(size))
        case.damaged = True
        return True
    raise ValueError(kind)


TXN_ENTRY = 34  # a .txnindex entry: version, producer id, first offset, last offset, last stable offset


def _damage_txn_index(case: Case, rng: random.Random) -> bool:
    """An aborted transaction's entry dropped, its file deleted, its first offset moved past its
    first record, its last offset off its marker, or its last stable offset raised: only entries
    whose transaction still holds a record, so a read_committed consumer would be misled."""
    held = sorted(case.records)
    pool = []
    for s in range(len(case.segments)):
        path = case.path(s, ".txnindex")
        if not path.exists() or not case.path(s).exists():
            continue
        data = path.read_bytes()
        for i in range(len(data) // TXN_ENTRY):
            _, _, first, last, _ = struct.unpack_from(">hqqqq", data, i * TXN_ENTRY)
            if any(first <= o < last for o in held[bisect.bisect_left(held, first):][:1]):
                pool.append((path, i, first, last))
    if not pool:
        return False
    path, i, first, last = rng.choice(pool)
    data = bytearray(path.read_bytes())
    how = rng.choice(["drop", "delete", "later", "off_marker", "stable"])
    at = i * TXN_ENTRY
    if how == "drop":
        del data[at:at + TXN_ENTRY]
    elif how == "later":
        struct.pack_into(">q", data, at + 10, last)
    elif how == "off_marker":
        struct.pack_into(">q", data, at + 18, last - 1)
    elif how == "stable":
        struct.pack_into(">q", data, at + 26, last + rng.randint(2, 1000))
    if how == "delete":
        path.unlink()
    else:
        path.write_bytes(bytes(data))
    case.damaged = True
    return True


def draw(seed: int, directory: Path) -> Case:
    """A partition written, then one or two kinds of damage at drawn places (a draw that finds
    no place for a kind draws another)."""
    return damaged(write(seed, directory), seed)


# offsets missing between segments, and nothing else: in a compacted topic the cleaner's gaps look
# the same (nothing could tell), so they are not drawn there; nor a base offset moved back: the
# entry is named, but the offsets it no longer reaches are a gap the cleaner could have left
ONLY_GAPS = ("cut_at_boundary", "cut_to_zero", "delete_segment", "backwards")


def damaged(case: Case, seed: int) -> Case:
    """One or two kinds of damage drawn (seeded by ``seed``) and applied to ``case``."""
    rng = random.Random(seed * 7 + 1)
    kinds = [k for k in KINDS if not (case.compacted and k in ONLY_GAPS)]
    wanted = rng.choice([1, 1, 2])
    for _ in range(100):
        if len(case.kinds) == wanted:
            break
        kind = rng.choice(kinds)
        # alone only: a torn last write is normal only without other damage, and an offset moved
        # back into offsets a neighbour's damage hides looks like theirs (nothing could tell)
        if kind in ("cut_last_inside", "backwards") and wanted > 1:
            continue
        if damage(case, rng, kind):
            case.kinds.append(kind)
    return case
