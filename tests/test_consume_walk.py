"""The consumer's one walk (``_native.consume`` over csrc/kb_consume.c) against the careful path
(the validator's verdict per entry, Python's isolation): on generated fetches -- producers with
transactions committed and aborted, markers, codecs, offsets compaction removed, headers, both
timestamp types, a last stable offset, fetch offsets inside batches, damage of several kinds --
whenever the walk answers, it answers exactly as the careful path does (records and their columns,
spans, next offset, the aborted producers it leaves), and it answers every fetch without damage or
an unexplained gap.  Seed: PYKBATCH_CONSUME_SEED (printed)."""
from __future__ import annotations

import os
import random
import struct

import pytest

import pykbatch as kb
from pykbatch.kafka.control import ABORT, COMMIT
from pykbatch.kafka.isolation import Isolation
from pykbatch.live.fetched import _read_at_once, _read_carefully, read_fetched, CONSUMER_CHECKS
from pykbatch.kafka.isolation import AbortedTxn

SEED = int(os.environ.get("PYKBATCH_CONSUME_SEED", "20261127"))
CASES = int(os.environ.get("PYKBATCH_CONSUME_CASES", "400"))
CODECS = ("none", "none", "gzip", "snappy", "lz4", "zstd")


def records(rng, base, n):
    out = []
    for i in range(n):
        headers = [("h%d" % j, rng.choice((None, b"", b"v" * rng.randrange(1, 9)))) for j in range(rng.randrange(0, 3))]
        out.append({"key": rng.choice((None, b"k%d" % (base + i))), "value": rng.choice((None, b"", os.urandom(rng.randrange(1, 40)))),
                    "headers": headers, "timestamp": rng.choice((1_700_000_000_000 + i, 0, -1, 2**40))})
    return out


def marker(base, pid, kind):
    return kb.build_batch([(struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 3))], base_offset=base, producer_id=pid,
                          producer_epoch=0, is_transactional=True, is_control=True)


def generated_fetch(rng):
    """A partition's log as a fetch holds it, the aborted transactions the broker would list with
    it, and whether offsets are missing from it (compaction)."""
    parts, aborted, base, gaps = [], [], rng.randrange(0, 1000), False
    open_txn: dict[int, int] = {}  # producer -> first offset of its open transaction
    for _ in range(rng.randrange(1, 10)):
        if rng.random() < 0.15:
            base += rng.randrange(1, 6)
            gaps = True
        pid = rng.choice((-1, -1, 11, 12))
        if pid >= 0 and pid in open_txn and rng.random() < 0.35:  # the transaction ends
            kind = rng.choice((ABORT, COMMIT))
            if kind == ABORT:
                aborted.append(AbortedTxn(0, pid, open_txn[pid], base, -1))
            parts.append(marker(base, pid, kind))
            del open_txn[pid]
            base += 1
            continue
        n = rng.randrange(1, 7)
        kw = {}
        if pid >= 0:
            open_txn.setdefault(pid, base)
            kw = dict(producer_id=pid, producer_epoch=0, base_sequence=base, is_transactional=True)
        parts.append(kb.build_batch(records(rng, base, n), base_offset=base, compression=rng.choice(CODECS),
                                    timestamp_type=rng.choice(("CreateTime", "CreateTime", "LogAppendTime")),
                                    max_timestamp=1_700_000_000_999, partition_leader_epoch=rng.randrange(-1, 5), **kw))
        base += n
    first_open = min(open_txn.values(), default=None)
    return parts, aborted, gaps, first_open


def damaged(rng, parts):
    """The fetch's bytes with one kind of damage drawn (or none)."""
    data = bytearray(b"".join(parts))
    kind = rng.choice(("none", "none", "none", "flip", "length", "cut", "garbage", "record"))
    i = rng.randrange(len(parts))
    start = sum(len(p) for p in parts[:i])
    if kind == "flip":
        data[start + rng.randrange(len(parts[i]))] ^= 1 << rng.randrange(8)
    elif kind == "length":
        struct.pack_into(">i", data, start + 8, rng.choice((0, 5, len(parts[i]) + 100, 2**30)))
    elif kind == "cut":
        data = data[:rng.randrange(1, len(data) + 1)]
    elif kind == "garbage":
        data[start:start] = os.urandom(rng.randrange(1, 30))
    elif kind == "record" and len(parts[i]) > 70:  # a record's bytes changed under a recomputed CRC
        data[start + 61 + rng.randrange(len(parts[i]) - 61)] ^= 0xFF
        struct.pack_into(">I", data, start + 17, kb.crc32c(bytes(data[start + 21:start + len(parts[i])])))
    return bytes(data), kind


def isolation(rng, aborted, first_open):
    if rng.random() < 0.5:
        return lambda: Isolation()
    lso = first_open if first_open is not None and rng.random() < 0.7 else None
    return lambda: Isolation("read_committed", aborted, lso, None)


def test_the_one_walk_answers_as_the_careful_path_does():
    print(f"PYKBATCH_CONSUME_SEED={SEED}")
    rng = random.Random(SEED)
    answered = clean = 0
    for case in range(CASES):
        parts, aborted, gaps, first_open = generated_fetch(rng)
        data, kind = damaged(rng, parts)
        entries = list(kb.iter_batches(data, verify_crc=False)) if kind == "none" else []
        first = entries[0].base_offset if entries else 0
        fetch_offset = first + rng.randrange(0, 8)
        compacted = gaps and rng.random() < 0.6
        make = isolation(rng, aborted, first_open)
        fast_iso, careful_iso = make(), make()
        fast = _read_at_once(memoryview(data), fetch_offset, "t", 3, fast_iso, compacted)
        careful = _read_carefully(memoryview(data), fetch_offset, "t", 3, careful_iso, CONSUMER_CHECKS, compacted)
        where = f"case {case} ({kind}, fetch at {fetch_offset}, compacted={compacted}, {fast_iso.level})"
        if kind == "none" and (compacted or not gaps) and any(b.last_offset >= fetch_offset for b in entries):
            clean += 1
            assert fast is not None, where  # nothing the careful path would name: the walk settles it
        if fast is None:
            continue
        answered += 1
        assert careful.skips == [] and careful.damage is None and careful.lead_gap is None, where
        assert fast.table.schema == careful.table.schema, where
        assert fast.table.equals(careful.table), where
        assert (fast.next_offset, fast.spans, fast.partial_size) == (careful.next_offset, careful.spans,
                                                                      careful.partial_size), where
        assert fast_iso.aborted == careful_iso.aborted, where
    print(f"{answered} of {CASES} fetches answered by the one walk; {clean} without damage or unexplained gaps")
    assert clean > CASES // 4 and answered >= clean


def test_read_fetched_takes_the_walk_and_falls_back_on_damage(monkeypatch):
    """read_fetched's answer comes from the walk when it settles the fetch, else from the careful path."""
    import pykbatch.live.fetched as fetched
    calls = []
    monkeypatch.setattr(fetched, "_read_carefully", lambda *a: calls.append(a) or "careful")
    sound = kb.build_batch([(b"k", b"v")] * 3, base_offset=10)
    assert read_fetched(sound, 10).table.num_rows == 3 and calls == []
    bad = bytearray(sound)
    bad[-1] ^= 1
    assert read_fetched(bytes(bad), 10) == "careful" and len(calls) == 1


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_the_walk_fills_sparks_layout(codec):
    """Microseconds, Kafka's timestamp type id, headers, the leader epoch: Spark's Kafka source's columns."""
    data = kb.build_batch([{"key": b"k", "value": b"v", "headers": [("a", b"1"), ("b", None)], "timestamp": 1234}],
                          base_offset=5, partition_leader_epoch=7, compression=codec)
    f = read_fetched(data, 5, topic="orders", partition=2)
    row = f.table.to_pylist()[0]
    assert row["timestamp"].timestamp() == 1.234 and row["timestampType"] == 0 and row["leader_epoch"] == 7
    assert row["headers"] == [{"key": "a", "value": b"1"}, {"key": "b", "value": None}]
    assert (row["topic"], row["partition"], row["offset"], row["key"], row["value"]) == ("orders", 2, 5, b"k", b"v")


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_to_arrow_fills_sparks_timestamps_as_the_column_functions_make_them(magic):
    """``to_arrow(spark_time=True)`` (the core's fill, what kafka-segment reads) equals to_arrow's
    milliseconds and type names turned into Spark's columns by ``arrow.spark_timestamps``."""
    from pykbatch.arrow import spark_timestamps
    rng = random.Random(SEED + magic)
    kw = {} if magic == 2 else {"magic": magic}
    parts = [kb.build_batch([{"key": b"k", "value": b"v", "timestamp": rng.choice((0, 1_700_000_000_123, 2**40))}
                             for _ in range(rng.randrange(1, 5))], base_offset=10 * i, compression=rng.choice(CODECS[:3]),
                            timestamp_type=rng.choice(("CreateTime", "LogAppendTime")) if magic else "CreateTime",
                            max_timestamp=1_700_000_000_999, **kw) for i in range(8)]
    data = b"".join(parts)
    plain, spark = kb.to_arrow(data), kb.to_arrow(data, spark_time=True)
    micros, ids = spark_timestamps(plain.column("timestamp").combine_chunks(), plain.column("timestamp_type").combine_chunks())
    assert spark.column("timestamp").combine_chunks().equals(micros)
    assert spark.column("timestampType").combine_chunks().equals(ids)
    rest = [n for n in plain.column_names if n not in ("timestamp", "timestamp_type")]
    assert spark.select(rest).equals(plain.select(rest))
