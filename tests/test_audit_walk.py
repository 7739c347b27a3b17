"""The partition audit walks a segment of whole v2 batches from a header table built beside
validation (offsets checked at once, .index entries looked up in it, producer state replayed
without batch objects) and any other segment batch by batch.  Both must give the same report:
these partitions are made to hit every branch of the offset and index checks (a batch starting
at the previous last offset, before it, one past it, far past it, offsets at the int64 edges,
below the segment's name), with producers, transactions and their markers."""
import contextlib
import io
import random
import struct

import pytest

import pykbatch as kb
import pykbatch.log.audit as audit
from pykbatch.commands import main
from pykbatch.log import OffsetIndex, Segment, segment_file_name

INT64_MAX = 2**63 - 1


def data_batch(rng, base_offset, producer):
    n = rng.randint(1, 4)
    recs = [{"key": b"k", "value": b"v" * rng.randint(0, 40), "timestamp": 1000 + rng.randint(0, 99)}
            for _ in range(n)]
    if producer is None:
        return kb.build_batch(recs, base_offset=base_offset), n
    pid, epoch, seq, txn = producer
    return kb.build_batch(recs, base_offset=base_offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          is_transactional=txn), n


def marker(base_offset, pid, epoch, commit):
    key = b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
    return kb.build_batch([{"key": key, "value": b"\x00\x00\x00\x00\x00\x03", "timestamp": 2000}],
                          base_offset=base_offset, producer_id=pid, producer_epoch=epoch, is_transactional=True,
                          is_control=True)


def write_random_partition(rng, directory):
    directory.mkdir(parents=True)
    last = -1
    sequences = {}
    for s in range(rng.randint(1, 4)):
        name_offset = max(last + 1 + rng.choice([0, 0, 0, 5, -3]), 0)
        log, positions = bytearray(), []
        for _ in range(rng.randint(0, 12)):
            step = rng.choice([1, 1, 1, 1, 0, -1, -4, 2, 9])
            base = max(min(rng.choice([last + step] * 12 + [INT64_MAX - 1, -5, 0]), INT64_MAX), -INT64_MAX - 1)
            pid = rng.choice([None, 7, 7, 8])
            if pid is not None and rng.random() < 0.15:
                batch = marker(base, pid, sequences.get(pid, (0, 0))[0], rng.random() < 0.7)
                count = 1
            else:
                producer = None
                if pid is not None:
                    epoch, seq = sequences.get(pid, (0, 0))
                    epoch += rng.random() < 0.05
                    seq = rng.choice([seq] * 8 + [0, seq + 3, max(seq - 2, 0)])
                    producer = (pid, epoch, seq, rng.random() < 0.3)
                batch, count = data_batch(rng, base, producer)
                if producer is not None:
                    sequences[pid] = (producer[1], producer[2] + count)
            positions.append(len(log))
            log += batch
            last = kb.iter_batches(batch, verify_crc=False).__next__().last_offset
        if rng.random() < 0.1:
            log += kb.build_batch([(b"k", b"legacy")], base_offset=min(last + 1, INT64_MAX), magic=1)  # the batch walk's case
        (directory / segment_file_name(name_offset, ".log")).write_bytes(log)
        index = bytearray()
        for _ in range(rng.randint(0, 5)):  # batch starts, mid-batch, past the end, negative
            position = rng.choice(positions + [rng.randint(-3, len(log) + 9)]) if positions else rng.randint(-3, 9)
            index += struct.pack(">ii", rng.randint(-2, 40), position)
        (directory / segment_file_name(name_offset, ".index")).write_bytes(index)
    return directory


def report(directory):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = (main(["validate", "--segment", str(directory), "--json", "--jobs", "2"]),
                  main(["validate", "--segment", str(directory), "--jobs", "1"]))
    return status, out.getvalue()


@pytest.mark.parametrize("seed", range(6))
def test_both_walks_give_the_same_report(seed, tmp_path, monkeypatch):
    rng = random.Random(seed)
    tables = 0
    for run in range(25):
        directory = write_random_partition(rng, tmp_path / f"p{run}" / "orders-0")
        answers = []
        for walk_tables in (True, False):
            monkeypatch.setattr(audit, "_WALK_TABLES", walk_tables)
            answers.append(report(directory))
        assert answers[0] == answers[1], run
        tables += any(kb._native._v2_header_table(p.read_bytes()) is not None for p in directory.glob("*.log"))
    assert tables >= 15  # most partitions really took the table walk


def test_overlaps_gaps_and_offsets_below_the_name_are_found_by_the_table_walk(tmp_path):
    log = (kb.build_batch([(b"k", b"v")] * 2, base_offset=10) + kb.build_batch([(b"k", b"v")], base_offset=11)
           + kb.build_batch([(b"k", b"v")], base_offset=12) + kb.build_batch([(b"k", b"v")], base_offset=20))
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / segment_file_name(11, ".log")).write_bytes(log)
    result = audit.audit_partition(str(directory))
    assert result.below_base == [(str(directory / segment_file_name(11, ".log")), 10)]
    overlap_position = len(kb.build_batch([(b"k", b"v")] * 2, base_offset=10))
    # starts at the last offset: inside a segment, the validator's culprit (between segments, an overlap)
    assert result.overlaps == []
    culprit, gap = result.segments[0].result.culprits
    assert (culprit.rule, culprit.position) == ("log.offsets_not_increasing", overlap_position)
    assert culprit.message.endswith("an entry starting at offset 11 follows one ending at offset 11")
    assert result.gaps == 1  # 12 follows 11; 20 is past 13
    # the topic is not said to be compacted: 13-19 are lost records, named
    assert (gap.rule, gap.first_offset, gap.last_offset) == ("log.offset_gap", 13, 19)
    compacted = audit.audit_partition(str(directory), kb.ValidationConfig(origin="log", compacted=True))
    assert [c.rule for c in compacted.segments[0].result.culprits] == ["log.offsets_not_increasing"]


@pytest.mark.parametrize("seed", range(4))
def test_index_entries_answered_from_the_table_match_the_log_reads(seed, tmp_path):
    rng = random.Random(100 + seed)
    for run in range(20):
        directory = write_random_partition(rng, tmp_path / f"i{run}" / "orders-0")
        for path in directory.glob("*.log"):
            table = kb._native._v2_header_table(path.read_bytes())
            index = OffsetIndex.from_file(str(path.with_suffix(".index")))
            with Segment(str(path)) as seg:
                for max_size in (5 * 2**20, rng.randint(61, 200)):  # some batches over a small limit
                    assert list(index.check(seg, max_size, headers=table)) == list(index.check(seg, max_size))
