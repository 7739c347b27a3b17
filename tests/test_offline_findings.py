"""Issue 53's findings, each pinned as the case that showed it (every one failed at cdfdcd5, before
81b3937); tests/test_partition_truth.py holds the class on drawn partitions."""
from __future__ import annotations

import struct

import pytest

import pykbatch as kb
from pykbatch.log.audit import audit_partition
from tests.samples import recrc, write_partition
from tests.test_damage_contract import run


def two_segments(tmp_path):
    return write_partition(tmp_path / "t-0", segments=2, batches=10, records=10)


def test_a_closed_segment_cut_inside_its_last_batch_is_damage_for_every_command(tmp_path):
    part = two_segments(tmp_path)
    first = sorted(part.glob("*.log"))[0]
    first.write_bytes(first.read_bytes()[:-40])
    for argv in (["validate", "--segment", str(part)], ["validate", str(first)], ["dump", "--files", str(part)],
                 ["dump", "--files", str(first)], ["repair", str(first), "--out", str(tmp_path / "fixed.log")]):
        status, out, err = run(argv)
        assert status == 1, argv
        assert "log.segment_truncated" in out + err and "offsets 90 to 99 are lost" in out + err, argv
    assert "compaction removes records" not in run(["validate", "--segment", str(part)])[1]


def test_a_deleted_middle_segment_is_named_with_its_offsets(tmp_path):
    part = write_partition(tmp_path / "t-0", segments=3, batches=4, records=5)
    middle = sorted(part.glob("*.log"))[1]
    for suffix in (".log", ".index", ".timeindex"):
        middle.with_suffix(suffix).unlink()
    status, out, _ = run(["validate", "--segment", str(part)])
    assert status == 1 and "log.offset_gap: Offsets 20 to 39 are missing from the log" in out
    assert run(["validate", "--segment", str(part), "--compacted"])[0] == 0  # the cleaner's, if compacted
    from pykbatch.log import read_partition
    told = []
    assert sum(1 for _ in read_partition(str(part), on_lost=told.append)) == 8
    assert [(c.rule, c.first_offset, c.last_offset) for c in told] == [("log.offset_gap", 20, 39)]


def test_a_middle_segments_deleted_index_is_a_problem(tmp_path):
    part = write_partition(tmp_path / "t-0", segments=3, batches=12, records=5)
    sorted(part.glob("*.index"))[1].unlink()
    status, out, _ = run(["validate", "--segment", str(part)])
    assert status == 1 and "Could not find offset index file corresponding to log file" in out


def test_a_damaged_commit_marker_is_a_culprit_not_a_traceback(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    data = kb.build_batch([(b"k", b"v")] * 2, producer_id=7, producer_epoch=0, base_sequence=0,
                          is_transactional=True)
    marker = bytearray(kb.build_batch([{"key": b"\x00\x00\x00\x01", "value": b"\x00\x00\x00\x00\x00\x03"}],
                                      base_offset=2, producer_id=7, producer_epoch=0, is_transactional=True,
                                      is_control=True))
    marker[-7] = 0xFF  # the marker value's version negative: unreadable, under a CRC that matches
    (part / "00000000000000000000.log").write_bytes(data + recrc(bytes(marker)))
    status, out, err = run(["validate", "--segment", str(part)])
    assert status == 1 and "Traceback" not in err and "control.marker_version" in out
    # the transaction may have ended at that marker: undecided, not a hanging one to abort
    assert "undecided, its marker at offset 2 does not read" in out and "to abort it" not in out, out


def test_a_length_into_the_next_batch_loses_only_its_own_batch(tmp_path):
    batches = [kb.build_batch([(b"k%d" % i, b"v" * 40)] * 3, base_offset=3 * i) for i in range(3)]
    lying = bytearray(batches[0])
    struct.pack_into(">i", lying, 8, len(batches[0]) - 12 + 30)  # ends 30 bytes into the next batch
    data = bytes(lying) + batches[1] + batches[2]
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    assert [(c.rule, c.first_offset, c.last_offset) for c in result.culprits] == [("framing.size_into_next", None, 2)]
    read = [b.base_offset for b in kb.read_segment(_file(tmp_path, data)).batches()]
    assert read == [3, 6]  # the intact next batch is read


def _file(tmp_path, data: bytes):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path


def test_the_offset_delta_label_is_the_delta_and_the_offset_is_printed_as_such(tmp_path):
    data = kb.build_batch([{"key": None, "value": b"x"}], base_offset=500)
    result = kb.validate(data, kb.ValidationConfig(origin="log", compacted=True))
    [c] = result.culprits
    assert (c.relative_offset, c.first_offset) == (0, 500)
    out = run(["validate", "--compacted", str(_file(tmp_path, data))])[1]
    assert "(offset delta 0, offset 500)" in out
    batch = kb.build_batch([{"key": b"c"}, {"key": None}, {"key": b"d"}], base_offset=2)
    [c] = kb.validate(batch, kb.ValidationConfig(origin="log", compacted=True)).culprits
    assert (c.relative_offset, c.first_offset) == (1, 3)


def test_repair_of_a_log_keeps_every_records_offset(tmp_path):
    batch = kb.build_batch([{"key": b"c", "value": b"1"}, {"key": None, "value": b"2"}, {"key": b"d", "value": b"3"},
                            {"key": b"e", "value": b"4"}], base_offset=2)
    src = _file(tmp_path, batch)
    status, _, _ = run(["repair", str(src), "--out", str(tmp_path / "fixed.log"), "--compacted"])
    fixed = (tmp_path / "fixed.log").read_bytes()
    assert status == 1
    assert [(r.offset, r.key) for b in kb.iter_batches(fixed) for r in b] == [(2, b"c"), (4, b"d"), (5, b"e")]
    [b] = kb.iter_batches(fixed)
    assert (b.base_offset, b.last_offset) == (2, 5)  # ends where the next batch begins
    assert run(["validate", "--compacted", str(tmp_path / "fixed.log")])[0] == 0


def test_culprits_name_the_offsets_a_damaged_batch_hides(tmp_path):
    batches = [kb.build_batch([(b"k", b"v")] * 4, base_offset=4 * i) for i in range(3)]
    zeroed = bytes(61) + batches[1][61:]
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(batches[0] + zeroed + batches[2])
    audit = audit_partition(str(part))
    named = [(c.first_offset, c.last_offset) for s in audit.segments for c in s.result.culprits]
    assert named == [(4, 7)]


def _txn(base: int, n: int, seq: int, pid: int = 7, txn: bool = True) -> bytes:
    return kb.build_batch([{"key": b"k", "value": b"v%d" % i, "timestamp": 1000 + i} for i in range(n)],
                          base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=seq,
                          is_transactional=txn)


def _commit(offset: int, pid: int = 7) -> bytes:
    return kb.build_batch([{"key": b"\x00\x00\x00\x01", "value": b"\x00\x00\x00\x00\x00\x03", "timestamp": 1100}],
                          base_offset=offset, producer_id=pid, producer_epoch=0, is_transactional=True,
                          is_control=True)


def _repaired_markers(part, tmp_path):
    """Every segment of ``part`` repaired into fixed/t-0: the control batches of the output, and
    the producer state of the repaired partition (what Kafka's log refuses to load)."""
    fixed = tmp_path / "fixed" / "t-0"
    fixed.mkdir(parents=True)
    outs = []
    for path in sorted(part.glob("*.log")):
        status, out, err = run(["repair", str(path), "--out", str(fixed / path.name)])
        assert "Traceback" not in err
        outs.append(out)
    markers = [(b.base_offset, b.control.type_name, b.producer_id) for p in sorted(fixed.glob("*.log"))
               for b in kb.iter_batches(p.read_bytes()) if b.is_control]
    producers = audit_partition(str(fixed)).producers
    return markers, [c.rule for c in producers.culprits], "\n".join(outs)


def test_a_transaction_whose_marker_a_cut_took_is_closed_by_the_repair(tmp_path):
    """Offsets 0-3 transactional, their COMMIT at 4 cut off the end of a closed segment, the
    producer's next write (5) outside a transaction: Kafka's UnifiedLog refused the repaired log
    ("Expected transactional write from producer 7 at offset 5") until the repair closed it with
    an ABORT at the lost offset (failed at da3577d)."""
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(_txn(0, 4, 0) + _commit(4)[:-10])
    (part / "00000000000000000005.log").write_bytes(_txn(5, 2, 4, txn=False))
    markers, rules, out = _repaired_markers(part, tmp_path)
    assert markers == [(4, "ABORT", 7)]
    assert rules == []
    assert "from offset 0 to 3 lost its marker" in out and "ABORT marker at offset 4" in out


def test_a_damaged_marker_inside_a_segment_is_replaced_by_an_abort(tmp_path):
    """The COMMIT at 4 fails its CRC, mid-segment: the repair drops it and kept its offset with an
    empty batch, which left the transaction open before the write at 5 (failed at da3577d); a
    transaction that goes on after a loss is not closed."""
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        _txn(0, 4, 0) + _damaged(_commit(4)) + _txn(5, 2, 4, txn=False)
        + _txn(7, 1, 0, pid=8) + _damaged(_commit(8, pid=8)) + _txn(9, 1, 1, pid=8) + _commit(10, pid=8))
    markers, rules, out = _repaired_markers(part, tmp_path)
    assert markers == [(4, "ABORT", 7), (10, "COMMIT", 8)]
    assert rules == []


def _damaged(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-1] ^= 0xFF
    return bytes(b)


def test_a_size_raised_to_one_byte_short_of_the_end_loses_only_its_own_batch(tmp_path):
    """A size raised into the last batch, ending one byte before the file does, where that byte is
    0 (a gzip payload's last): taken for a preallocated zero tail, the intact last batch was lost
    (drawn: PYKBATCH_PARTITION_SEED=20261207 case 927, failed at 177d521).  A sound entry inside
    the claimed bytes that runs past their end shows the size lied."""
    batches = [kb.build_batch([(b"k%d" % i, b"v" * 40)] * 3, base_offset=3 * i) for i in range(2)]
    last = batches[1][:-1] + b"\x00"  # its last byte 0, the CRC made to match
    last = recrc(last)
    lying = bytearray(batches[0])
    struct.pack_into(">i", lying, 8, len(batches[0]) - 12 + len(last) - 1)  # one byte short of the end
    data = bytes(lying) + last
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    assert [c.rule for c in result.culprits] == ["framing.size_into_next"] and result.truncated_tail is None
    assert [b.base_offset for b in kb.read_segment(_file(tmp_path, data)).batches()] == [3]


def test_offsets_missing_before_a_last_segment_nothing_of_which_reads_are_named(tmp_path):
    """A middle segment deleted, and the last segment's only batch with a size past its end: the
    offsets between the segment before and the last one's base offset (its file name) were named
    by nothing -- the gap was measured only between segments that hold a readable entry (drawn on a
    broker-written partition, seed 32 case 85; failed at c70efff)."""
    from pykbatch.log import read_partition
    part = write_partition(tmp_path / "t-0", segments=3, batches=1, records=5)
    logs = sorted(part.glob("*.log"))
    for suffix in (".log", ".index", ".timeindex"):
        logs[1].with_suffix(suffix).unlink()
    last = bytearray(logs[2].read_bytes())
    struct.pack_into(">i", last, 8, len(last) + 1000)
    logs[2].write_bytes(bytes(last))
    status, out, _ = run(["validate", "--segment", str(part)])
    assert status == 1 and "Offsets 5 to 9 are missing from the log" in out
    told = []
    assert sum(1 for _ in read_partition(str(part), on_lost=told.append)) == 1
    assert ("log.offset_gap", 5, 9) in [(c.rule, c.first_offset, c.last_offset) for c in told]


def test_a_last_size_past_the_end_over_a_whole_batch_and_a_zeroed_one_is_damage(tmp_path):
    """The last segment's last two batches: the first with its size raised past the end, the second
    with its header zeroed.  The bytes to the end were no whole batch, so it passed for the active
    segment's torn write and the partition was "ok" (drawn: PYKBATCH_PARTITION_SEED=20261209 case
    2890, failed at 6bb0095); the first bytes after the size field are a whole batch by its checksum."""
    batches = [kb.build_batch([(b"k%d" % i, b"v" * 40)] * 3, base_offset=3 * i) for i in range(3)]
    raised = bytearray(batches[1])
    struct.pack_into(">i", raised, 8, 100_000)
    zeroed = bytes(61) + batches[2][61:]
    data = batches[0] + bytes(raised) + zeroed
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    assert [c.rule for c in result.culprits][:1] == ["framing.tail_size_lies"] and result.truncated_tail is None
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(data)
    assert run(["validate", "--segment", str(part)])[0] == 1


def test_an_aborted_transaction_missing_from_its_txnindex_is_named_by_the_audit_and_the_dump(tmp_path):
    """A .txnindex without the entry of a transaction its log aborts: a read_committed fetch would
    hand the aborted records to every consumer, and Kafka rebuilds the file only for segments it
    recovers (it was "ok" before the check of pykbatch/log/txn_index.py)."""
    from tests.partition_damage import write
    case = next(c for c in (write(seed, tmp_path / f"p{seed}" / "t-0") for seed in range(1, 60))
                if any(p.stat().st_size for p in c.directory.glob("*.txnindex")))
    assert run(["validate", "--segment", str(case.directory)])[0] == 0
    index = next(p for p in sorted(case.directory.glob("*.txnindex")) if p.stat().st_size)
    first, last = struct.unpack_from(">qq", index.read_bytes(), 10)
    index.write_bytes(index.read_bytes()[34:])
    # the file given alone is held to its partition's log too (its structure only, before)
    for argv in (["validate", "--segment", str(case.directory)], ["dump", "--files", str(case.directory)],
                 ["validate", str(index)]):
        status, out, err = run(argv)
        assert status == 1 and f"aborted at offset {last} (records from offset {first}): read_committed consumers " \
                               f"receive its records" in out + err, (argv, out, err)


def test_lost_framing_before_a_compressed_legacy_wrapper_names_the_offsets_it_hides(tmp_path):
    """A zeroed v0/v1 entry before a compressed wrapper: the offsets it hid run up to the wrapper's
    first record (its header gives only its last offset): they were named by nothing (drawn
    legacy partition, seed 91012)."""
    from tests.partition_damage import Written, _legacy
    for magic in (0, 1):
        rows = [Written(o, b"k%d" % o, b"v" * 30, (), 1_700_000_000_000 + o if magic else -1) for o in range(12)]
        entries = [raw for part in (rows[:5], rows[5:6], rows[6:]) for raw, _ in _legacy(part, "gzip", magic)]
        log = tmp_path / f"{magic}" / "t-0" / "00000000000000000000.log"
        log.parent.mkdir(parents=True)
        log.write_bytes(entries[0] + bytes(len(entries[1])) + entries[2])
        culprits = kb.validate(log.read_bytes(), kb.ValidationConfig(origin="log")).culprits
        assert [(c.rule, c.first_offset, c.last_offset) for c in culprits] == [("framing.size_too_small", 5, 5)], magic


def test_repair_beside_a_legacy_segment_with_an_undecodable_wrapper_ends_without_a_traceback(tmp_path):
    """A v0/v1 wrapper whose compressed records do not read, under a right CRC, in the segment
    before one being repaired: repair reads the earlier segments for the producers' state and ended
    in a traceback on that wrapper's first offset (legacy drawn partition, seed 91276)."""
    import zlib
    from tests.partition_damage import Written, _at, _legacy, _plain
    from pykbatch.log import segment_file_name
    for magic in (0, 1):
        part = tmp_path / f"{magic}" / "t-0"
        part.mkdir(parents=True)
        rows = [Written(o, b"k%d" % o, b"v" * 30, (), 1_700_000_000_000 + o if magic else -1) for o in range(9)]
        entries = [bytearray(raw) for chunk in (rows[:3], rows[3:6], rows[6:]) for raw, _ in _legacy(chunk, "gzip", magic)]
        payload = (26 if magic else 18) + 8  # after the header, a null key and the value's length
        entries[1][payload:] = bytes(len(entries[1]) - payload)
        struct.pack_into(">I", entries[1], 12, zlib.crc32(entries[1][16:]))
        (part / segment_file_name(0, ".log")).write_bytes(b"".join(entries))
        later = [_at(_plain([Written(o, None, b"x", (), 1_700_000_000_100)], "none"), o) for o in (9, 10, 11)]
        later[1] = bytes(len(later[1]))  # a lost batch: the repair looks for transactions it closed
        (part / segment_file_name(9, ".log")).write_bytes(b"".join(later))
        out = tmp_path / f"{magic}.log"
        status, stdout, err = run(["repair", str(part / segment_file_name(9, ".log")), "--out", str(out)])
        assert status == 1 and "Traceback" not in err, (magic, stdout, err)
        assert [r.offset for b in kb.iter_batches(out.read_bytes()) for r in b] == [9, 11], magic


@pytest.mark.parametrize("closed", [False, True], ids=["inside-a-segment", "last-of-a-closed-segment"])
def test_a_crc_failing_batch_whose_last_offset_delta_is_damaged_names_only_its_own_offsets(tmp_path, closed):
    """A v2 batch's last offset delta lies under its CRC: when the CRC fails, the batch after it
    shows the delta wrong (offsets 5-1005 claimed, 10 next).  The culprit names 5-9, the sound batch
    after it is not "offsets going backwards", the next segment no overlap (both were, before)."""
    part = tmp_path / "t-0"
    part.mkdir()
    damaged = bytearray(kb.build_batch([(b"k", b"v")] * 5, base_offset=5))
    struct.pack_into(">i", damaged, 23, 1000)  # lastOffsetDelta 4 -> 1000, the CRC no longer matches
    first = kb.build_batch([(b"k", b"v")] * 5, base_offset=0) + bytes(damaged)
    after = kb.build_batch([(b"k", b"v")] * 5, base_offset=10)
    if closed:
        (part / "00000000000000000000.log").write_bytes(first)
        (part / "00000000000000000010.log").write_bytes(after)
    else:
        (part / "00000000000000000000.log").write_bytes(first + after)
    status, out, err = run(["validate", "--segment", str(part)])
    assert status == 1 and "batch 1 (offsets 5-9)" in out and "batch.crc_mismatch" in out, out
    assert "offsets_not_increasing" not in out and "0 overlap(s)" in out and "1005" not in out, out
