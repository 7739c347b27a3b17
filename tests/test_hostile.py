"""Bad input is normal input: truncated, lying, overlong, mutated and random bytes all give a
precise culprit (or exception) with a byte position, never a crash, hang or over-read."""
import mmap
import struct

import pytest
from hypothesis import given, settings, strategies as st

import pykbatch as kb
from tests.samples import batch, batch_of_records, patch, record, zz

GOOD = batch(3) + batch(2, base_offset=3) + batch(4, base_offset=5)
LOG = kb.ValidationConfig(origin="log")


def rules(result):
    return [(c.entry, c.record_index, c.rule) for c in result.culprits]


def test_every_prefix_is_ok_with_a_truncated_tail():
    ends = {0}
    for b in kb.iter_batches(GOOD):
        ends.add(b.position + b.size)
    for n in range(len(GOOD) + 1):
        result = kb.validate(GOOD[:n], LOG)
        assert result.ok, (n, result.culprits)
        complete = max(e for e in ends if e <= n)
        assert result.valid_bytes == complete
        assert (result.truncated_tail is None) == (n == complete)
        if result.truncated_tail:
            assert result.truncated_tail.position == complete
        assert len(list(kb.iter_batches(GOOD[:n]))) == sorted(ends).index(complete)


def test_every_culprit_is_reported_not_just_the_first():
    bad_crc = bytearray(batch(3))
    bad_crc[-2] ^= 1  # last byte of the last value
    padded = record(1)[1:] + b"\x00"  # body plus one stray byte, declared in the length
    bad_record = struct.pack(">q", 5) + batch_of_records(record(0), zz(len(padded)) + padded, record(2))[8:]
    bad_magic = bytearray(batch(2, base_offset=8))
    bad_magic[16] = 7
    data = bytes(bad_crc) + batch(2, base_offset=3) + bad_record + bytes(bad_magic) + batch(1, base_offset=10)
    result = kb.validate(data, LOG)
    assert result.entries == 5 and not result.ok
    assert rules(result) == [(0, None, "batch.crc_mismatch"), (2, 1, "record.size_mismatch"),
                             (3, None, "framing.invalid_magic")]
    positions = [c.position for c in result.culprits]
    assert positions == sorted(positions) and all(0 <= p < len(data) for p in positions)
    # the good batches around them are still readable one by one
    assert result.records == 3 + 2 + 2 + 1


def test_culprit_cap_still_counts_every_culprit():
    recs = [record(5, key=b"k%d" % i) for i in range(300)]  # every delta out of order
    data = batch_of_records(*recs, last_offset_delta=299)
    result = kb.validate(data, kb.ValidationConfig(origin="log", max_culprits=10))
    assert len(result.culprits) == 10 and result.culprit_count == 299
    full = kb.validate(data, LOG)
    assert len(full.culprits) == 299


def test_negative_and_tiny_sizes_lose_the_framing_precisely():
    data = GOOD + struct.pack(">qi", 9, -5) + b"\x00" * 40
    result = kb.validate(data, LOG)
    (c,) = result.culprits
    assert (c.rule, c.position, c.entry, c.code) == ("framing.size_too_small", len(GOOD) + 8, 3, 2)
    assert c.message == "Record size -5 is less than the minimum record overhead (14)"
    assert result.stopped_at == len(GOOD)
    with pytest.raises(kb.CorruptRecordError) as info:
        list(kb.iter_batches(data))
    assert info.value.offset == len(GOOD) + 8 and info.value.retriable


def test_batch_smaller_than_its_header():
    data = struct.pack(">qiib", 0, 30, -1, 2) + b"\x00" * 30
    (c,) = kb.validate(data, kb.ValidationConfig(origin="log")).culprits
    assert c.rule == "batch.too_small" and c.message.startswith("Record batch is corrupt (the size 42")
    assert c.code == 2
    # in a produce request the broker reads its producer id (bytes 43-50) first and fails
    (c,) = kb.validate(data).culprits
    assert (c.rule, c.code, c.position) == ("batch.producer_id_unreadable", -1, 8)
    assert c.message == "Record batch of 42 bytes is too short to hold its producer id (bytes 43-50)"
    data = struct.pack(">qiib", 0, 39, -1, 2) + b"\x00" * 39  # 51 bytes: it has one
    (c,) = kb.validate(data).culprits
    assert (c.rule, c.code) == ("batch.too_small", 2)


@pytest.mark.parametrize("count", [2**31 - 1, 1000, 4])
def test_lying_record_count_is_not_trusted(count):
    data = batch_of_records(record(0), record(1), count=count, last_offset_delta=count - 1)
    result = kb.validate(data, LOG)
    assert rules(result) == [(0, 2, "batch.premature_eof")]


def test_negative_record_count():
    data = batch_of_records(record(0), count=-3, last_offset_delta=0)
    assert rules(kb.validate(data, LOG)) == [(0, None, "batch.negative_record_count")]
    assert rules(kb.validate(data)) == [(0, None, "batch.invalid_record_count")]


def test_lying_record_lengths():
    huge = zz(2**30) + b"\x00" * 10
    negative = zz(-7) + b"\x00\x00\x00\x02k\x02v\x00"
    for rec, rule in ((huge, "record.length_exceeds_batch"), (negative, "record.size_mismatch")):
        result = kb.validate(batch_of_records(record(0), rec, record(2)), LOG)
        assert rules(result) == [(0, 1, rule)], result.culprits


def test_lying_header_count_allocates_nothing():
    body = b"\x00\x00\x00\x02k\x02v" + zz(2**31 - 1)
    rec = zz(len(body)) + body
    result = kb.validate(batch_of_records(rec), LOG)
    assert rules(result) == [(0, 0, "record.header_count_exceeds_buffer")]


@pytest.mark.parametrize("field_index, name", [(1, "timestampDelta"), (2, "offsetDelta"), (3, "keyLength")])
def test_overlong_varints_name_the_field(field_index, name):
    parts = [b"\x00", zz(0), zz(0), zz(1) + b"k", zz(1) + b"v", zz(0)]
    parts[field_index] = b"\xff" * 10 + b"\x01"
    body = b"".join(parts)
    result = kb.validate(batch_of_records(zz(len(body)) + body), LOG)
    (c,) = result.culprits
    assert (c.rule, c.record_index) == ("record.varint_too_long", 0)
    assert c.message == "Found invalid record structure" and name in c.detail
    assert c.position == 61 + 1 + sum(len(p) for p in parts[:field_index])  # after the length varint


def test_a_bad_record_does_not_hide_the_records_after_it():
    recs = [record(0), record(1, key=b"abc")[:-1] + b"\x7f", record(2), record(3, headers=[(b"h", None)])]
    result = kb.validate(batch_of_records(*recs), LOG)  # record 1's header count became -64
    assert rules(result) == [(0, 1, "record.negative_header_count")]
    assert result.culprits[0].message == "Found invalid number of record headers -64"
    assert result.records == 3


def test_client_and_log_origins():
    # a compacted batch: records 1 and 2 removed, lastOffsetDelta and maxTimestamp kept
    data = batch_of_records(record(0), record(3), count=2, last_offset_delta=3)
    assert kb.validate(data, LOG).ok
    client = kb.validate(data)
    assert [c.rule for c in client.culprits] == ["batch.count_offset_mismatch", "record.offset_delta_not_index"]
    assert client.error_code == 87 and client.error_message is None and client.error_records == []


def test_record_level_culprits_fill_kip467_fields():
    data = batch_of_records(record(0), record(2), record(1), last_offset_delta=2)
    result = kb.validate(data)
    assert rules(result) == [(0, 1, "record.offset_delta_not_index"), (0, 2, "record.offset_not_increasing")]
    assert result.error_code == 87 and result.error_name == "INVALID_RECORD"
    assert result.error_records == [(1, "Record offset delta 2 differs from its index 1 in a producer batch"),
                                    (2, "Record offset delta 1 is not greater than the previous record's "
                                        "offset delta 2")]
    assert result.error_message.startswith("One or more records have been rejected due to 2 record errors")
    assert [c.relative_offset for c in result.culprits] == [2, 1]
    assert kb.validate(data, kb.ValidationConfig(strict=False)).ok
    with pytest.raises(kb.InvalidRecordError) as info:
        result.raise_for_error()
    assert len(info.value.culprits) == 2 and info.value.error_class == "abortable"


def test_timestamp_rules():
    data = batch_of_records(record(0, ts_delta=0), record(1, ts_delta=5))  # maxTimestamp 1000, record 1005
    result = kb.validate(data)
    assert rules(result) == [(0, 1, "record.timestamp_above_max")]
    assert result.error_code == 32
    assert result.error_message == "One or more records have been rejected due to invalid timestamp"
    below = batch_of_records(record(0, ts_delta=-5))
    assert [c.rule for c in kb.validate(below).culprits] == ["batch.max_timestamp_mismatch"]
    assert kb.validate(below, LOG).ok


def test_unknown_codec_and_compressed_batches():
    data = patch(batch(2), 22, b"\x06")
    result = kb.validate(data)
    assert rules(result) == [(0, None, "batch.unknown_codec")] and result.error_code == -1
    gz = patch(batch(2), 22, b"\x01")  # says gzip, holds plain records
    (c,) = kb.validate(gz).culprits
    assert (c.rule, c.code, c.position, c.entry_position) == ("batch.decompression_failed", -1, 61, 0)
    assert c.message.startswith("Failed to decompress gzip record stream")


def test_all_buffer_kinds(tmp_path):
    path = tmp_path / "b.log"
    path.write_bytes(GOOD)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for buf in (GOOD, bytearray(GOOD), memoryview(GOOD), mm, memoryview(GOOD).cast("B", (len(GOOD),))):
            assert kb.validate(buf, LOG).ok
            assert [r.offset for b in kb.iter_batches(buf) for r in b] == list(range(9))
            assert kb.to_arrow(buf).num_rows == 9
        first = next(kb.iter_batches(mm))
        assert isinstance(first.raw, memoryview) and bytes(first.raw) == GOOD[:first.size]
        del first


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_never_crash(data):
    for config in (kb.ValidationConfig(), LOG):
        result = kb.validate(data, config)
        assert all(0 <= c.position <= len(data) for c in result.culprits)
        assert result.valid_bytes <= len(data)
    try:
        for b in kb.iter_batches(data, verify_crc=False):
            for _ in b:
                pass
        kb.to_arrow(data, verify_crc=False)
    except kb.KafkaDataError as exc:
        assert exc.offset is None or 0 <= exc.offset <= len(data)


CRC_COVERED = [range(b.position + 21, b.position + b.size) for b in kb.iter_batches(GOOD)]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutations_of_a_good_buffer(data):
    buf = bytearray(GOOD)
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    changed = [i for i in range(len(buf)) if buf[i] != GOOD[i]]  # a later write may undo an earlier one
    result = kb.validate(bytes(buf), LOG)
    assert all(0 <= c.position <= len(buf) for c in result.culprits)
    if changed and all(any(i in r for r in CRC_COVERED) for i in changed):
        assert any(c.rule == "batch.crc_mismatch" for c in result.culprits)


def test_tuples_match_records_and_share_checks():
    for b in kb.iter_batches(GOOD):
        assert list(b.tuples()) == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b]
    short = batch_of_records(record(0), count=3, last_offset_delta=2)
    with pytest.raises(kb.InvalidRecordError, match="premature EOF"):
        list(next(kb.iter_batches(short)).tuples())
