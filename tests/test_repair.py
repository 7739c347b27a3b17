"""drop_culprits (KIP-467 client side): for random batches with random culprits injected, the
repaired buffer validates clean and keeps exactly the non-culprit records, in order."""
import struct

import pytest
from hypothesis import given, settings, strategies as st

import pykbatch as kb
from pykbatch import codecs
from tests.samples import batch, batch_of_records, record


def with_records_area(batch_bytes: bytes, records: bytes, codec: int) -> bytes:
    """The batch with another records area, compressed with `codec`, CRC recomputed."""
    payload = codecs.compress(codec, records) if codec else records
    head = bytearray(batch_bytes[:61])
    struct.pack_into(">i", head, 8, 61 + len(payload) - 12)
    head[22] = (head[22] & ~7) | codec
    body = bytes(head[21:]) + payload
    return bytes(head[:17]) + struct.pack(">I", kb.crc32c(body)) + body


@st.composite
def damaged_batches(draw):
    n = draw(st.integers(1, 25))
    recs = [{"key": draw(st.none() | st.binary(max_size=8)), "value": draw(st.binary(max_size=40)),
             "timestamp": 1_000 + draw(st.integers(0, 50))} for _ in range(n)]
    codec = draw(st.sampled_from([0, 1, 2, 3, 4]))
    data = kb.build_batch(recs, producer_id=77, producer_epoch=3, base_sequence=draw(st.integers(0, 2**31 - 30)))
    (b,) = kb.iter_batches(data)
    positions = [r.position for r in b] + [len(data)]
    area = bytearray(data[61:])
    # structural damage: a record's header count (its last byte, 0) becomes -1
    for i in draw(st.sets(st.integers(0, n - 1), max_size=n)):
        area[positions[i + 1] - 61 - 1] = 0x01
    damaged = bytearray(with_records_area(data, bytes(area), codec))
    if draw(st.booleans()):  # records above a lowered maxTimestamp become culprits too
        highest = max(x["timestamp"] for x in recs)  # never raised: that is a batch-level culprit
        struct.pack_into(">q", damaged, 35, draw(st.integers(1_000, highest)))
        damaged = bytearray(with_records_area(bytes(damaged), bytes(area), codec))
    return bytes(damaged), recs


@settings(max_examples=150, deadline=None)
@given(case=damaged_batches())
def test_drop_culprits_keeps_exactly_the_good_records(case):
    data, recs = case
    result = kb.validate(data)
    named = {c.record_index for c in result.culprits}
    assert None not in named, result.culprits  # every injected fault is a record-level culprit
    fixed, dropped = kb.drop_culprits(data, result)
    assert kb.validate(fixed).ok, kb.validate(fixed).culprits
    kept = [(r.key, r.value, r.timestamp) for b in kb.iter_batches(fixed) for r in b]
    assert kept == [(x["key"], x["value"], x["timestamp"]) for i, x in enumerate(recs) if i not in named]
    assert sorted(d.record_index for d in dropped) == sorted(named)
    for b in kb.iter_batches(fixed):
        (orig,) = kb.iter_batches(data, verify_crc=False)
        assert (b.producer_id, b.producer_epoch, b.base_sequence, b.compression) == \
            (orig.producer_id, orig.producer_epoch, orig.base_sequence, orig.compression)
        assert [r.offset_delta for r in b] == list(range(b.record_count))


def test_batch_level_culprits_are_unrepairable():
    bad_crc = bytearray(batch(2))
    bad_crc[-2] ^= 1
    good = batch(3)
    data = bytes(bad_crc) + good
    with pytest.raises(kb.UnrepairableError) as info:
        kb.drop_culprits(data, unrepairable="raise")
    assert info.value.batches[0][0] == 0 and info.value.code == 2
    fixed, dropped = kb.drop_culprits(data)  # "drop", as every repair surface does
    assert fixed == good and dropped[0].record_index is None and dropped[0].raw == bytes(bad_crc)
    repair = kb.drop_culprits(data, unrepairable="keep")
    assert repair.data == data and repair.unrepairable[0][0] == 0


def test_dropped_records_carry_their_culprits_and_bytes():
    data = batch_of_records(record(0, key=b"a"), record(5, key=b"b"), record(2, key=b"c"), last_offset_delta=5)
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    fixed, dropped = kb.drop_culprits(data, result)
    assert [(d.record_index, d.key, d.offset, [c.rule for c in d.culprits]) for d in dropped] == \
        [(2, b"c", 2, ["record.offset_not_increasing"])]
    assert dropped[0].raw == record(2, key=b"c")
    assert [r.key for b in kb.iter_batches(fixed) for r in b] == [b"a", b"b"]


def test_a_result_with_a_truncated_culprit_list_is_refused():
    recs = [record(5) for _ in range(10)]
    data = batch_of_records(*recs, last_offset_delta=9)
    with pytest.raises(ValueError, match="larger max_culprits"):
        kb.drop_culprits(data, kb.validate(data, kb.ValidationConfig(max_culprits=2)))


GOOD = batch(5) + batch(3, base_offset=5) + batch(4, base_offset=8, headers=[(b"h", b"v")])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_repairing_any_mutation_validates_clean(data):
    """Clean after the repair, but for what a repair cannot fix and says it left: offsets that go
    backwards (a flipped base-offset byte), where which entry is wrong is not known."""
    from pykbatch.rules import BY_ID
    buf = bytearray(GOOD)
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    config = kb.ValidationConfig(origin=data.draw(st.sampled_from(["client", "log"])))
    result = kb.validate(bytes(buf), config)
    repair = kb.drop_culprits(bytes(buf), result, unrepairable="drop")
    fixed, dropped = repair
    again = kb.validate(fixed, config)
    left = [c for c in again.culprits if not BY_ID[c.rule].between]
    assert not left, (again.culprits, result.culprits)
    assert not again.culprits or repair.unfixed, (again.culprits, result.culprits)
    assert again.truncated_tail is None
    kept = sum(1 for b in kb.iter_batches(fixed) for _ in b)
    assert kept + sum(1 for d in dropped if d.record_index is not None) <= result.records + len(result.culprits)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4"])
def test_legacy_message_sets_are_repaired_too(magic, compression):
    """A compacted topic's keyless v0/v1 messages: uncompressed entries go whole, a compressed
    wrapper is rebuilt around the kept inner messages; log data keeps every kept record's
    offset, as Kafka's cleaner does."""
    keys = [b"a", None, b"c", None, b"e"]
    recs = [{"key": k, "value": b"v%d" % i, "timestamp": 1000 + i} for i, k in enumerate(keys)]
    data = kb.build_batch(recs, base_offset=40, magic=magic, compression=compression)
    config = kb.ValidationConfig(origin="log", compacted=True)
    result = kb.validate(data, config)
    assert result.culprit_count == 2
    fixed, dropped = kb.drop_culprits(data, result)
    assert kb.validate(fixed, config).ok
    kept = [r for b in kb.iter_batches(fixed) for r in b]
    assert [r.key for r in kept] == [b"a", b"c", b"e"]
    assert [r.value for r in dropped] == [b"v1", b"v3"] and all(d.key is None for d in dropped)
    assert [d.culprits[0].rule for d in dropped] == ["record.compacted_no_key"] * 2
    assert all(d.raw[16] == magic for d in dropped)  # each message's own bytes, log header first
    assert [r.offset for r in kept] == [40, 42, 44]  # each kept record at its offset
    if compression != "none":
        (b,) = kb.iter_batches(fixed)
        assert b.compression == compression and b.magic == magic
    client = kb.ValidationConfig(origin="client", compacted=True)  # a producer's: re-based
    if compression != "none":
        refixed, _ = kb.drop_culprits(data, kb.validate(data, client))
        assert [r.offset for b in kb.iter_batches(refixed) for r in b] == [40, 41, 42]
