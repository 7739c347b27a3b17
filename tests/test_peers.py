"""Round trips with real clients: batches built by kafka-python and aiokafka decode
identically here, and ours decode identically there; property-based over random records."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import pykbatch as kb
from tests import peers

PEERS = sorted(peers.BUILDERS)

header_key = st.text(max_size=12)
blob = st.none() | st.binary(max_size=300)
record = st.tuples(st.integers(0, 2**41), blob, blob,
                   st.lists(st.tuples(header_key, blob), max_size=4))
records = st.lists(record, min_size=1, max_size=40)

# generated timestamps roam far from now: a producer batch without the leader's future-time window
ANY_TIME = kb.ValidationConfig(timestamp_after_max_ms=2**63 - 1)


def ours(data: bytes):
    return [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
            for b in kb.iter_batches(data) for r in b]


def as_dicts(recs):
    return [{"timestamp": ts, "key": k, "value": v, "headers": h} for ts, k, v, h in recs]


@pytest.mark.parametrize("peer", PEERS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=records, base_offset=st.integers(0, 2**40))
def test_peer_built_batches_decode_identically(peer, recs, base_offset):
    data = peers.build(peer, recs, base_offset=base_offset)
    assert ours(data) == peers.read(peer, data)
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    assert result.ok, result.culprits
    assert kb.encode(kb.iter_batches(data)) == data


@pytest.mark.parametrize("peer", PEERS)
@settings(max_examples=60, deadline=None)
@given(recs=records)
def test_our_batches_decode_identically_in_peers(peer, recs):
    data = kb.build_batch(as_dicts(recs))
    expected = [(i, ts, k, v, [(hk, hv) for hk, hv in h]) for i, (ts, k, v, h) in enumerate(recs)]
    assert peers.read(peer, data) == expected
    assert ours(data) == expected
    assert kb.validate(data, ANY_TIME).ok


@pytest.mark.parametrize("peer", PEERS)
def test_idempotent_and_transactional_fields_match(peer):
    recs = [(1000 + i, b"k%d" % i, b"v", []) for i in range(5)]
    data = peers.build(peer, recs, producer_id=4242, producer_epoch=3, base_sequence=2**31 - 3,
                       transactional=True)
    (batch,) = kb.iter_batches(data)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == \
        (4242, 3, 2**31 - 3, True)
    assert [r.sequence for r in batch] == [2147483645, 2147483646, 2147483647, 0, 1]
    assert batch.last_sequence == 1
    # kafka-python writes partitionLeaderEpoch 0 where Kafka's producer writes -1
    ours_built = kb.build_batch(as_dicts(recs), producer_id=4242, producer_epoch=3, base_sequence=2**31 - 3,
                                is_transactional=True, partition_leader_epoch=batch.partition_leader_epoch)
    assert ours_built == data


@settings(max_examples=100, deadline=None)
@given(recs=records, pid=st.integers(-1, 2**40), epoch=st.integers(-1, 2**15 - 1))
def test_build_then_decode_roundtrip(recs, pid, epoch):
    data = kb.build_batch(as_dicts(recs), producer_id=pid, producer_epoch=epoch,
                          base_sequence=0 if pid >= 0 else -1)
    (batch,) = kb.iter_batches(data)
    assert batch.record_count == len(recs) and batch.last_offset_delta == len(recs) - 1
    assert batch.max_timestamp == max(r[0] for r in recs)
    assert ours(data) == [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]
    table = kb.to_arrow(data)
    assert table.column("key").to_pylist() == [r[1] for r in recs]
    assert table.column("value").to_pylist() == [r[2] for r in recs]
    assert table.column("headers").to_pylist() == [[{"key": k, "value": v} for k, v in r[3]] for r in recs]
    views = kb.to_arrow(data, zero_copy=True)
    views.validate(full=True)
    assert views.column("key").to_pylist() == [r[1] for r in recs]
    assert views.column("value").to_pylist() == [r[2] for r in recs]
    assert views.drop_columns(["key", "value"]).equals(table.drop_columns(["key", "value"]))


CODECS = ["gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", PEERS)
@settings(max_examples=25, deadline=None)
@given(recs=records)
def test_compressed_batches_round_trip_with_peers(peer, codec, recs):
    """Their compressed batches decode here; ours decode there; both validate."""
    theirs = peers.build(peer, recs, compression=codec)
    (b,) = kb.iter_batches(theirs)
    assert b.compression in (codec, "none")  # kafka-python stores small batches uncompressed
    assert ours(theirs) == peers.read(peer, theirs)
    assert kb.validate(theirs, ANY_TIME).ok
    mine = kb.build_batch(as_dicts(recs), compression=codec)
    expected = [(i, ts, k, v, [(hk, hv) for hk, hv in h]) for i, (ts, k, v, h) in enumerate(recs)]
    assert peers.read(peer, mine) == expected
    assert kb.validate(mine, ANY_TIME).ok
    table = kb.to_arrow(mine, zero_copy=True)
    assert table.column("value").to_pylist() == [r[2] for r in recs]
    assert kb.to_arrow(kb.encode(kb.iter_batches(mine))).equals(kb.to_arrow(mine))


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("peer", PEERS)
def test_large_compressed_batches_from_peers(peer, codec):
    recs = [(1_700_000_000_000 + i, b"key-%d" % i, b"value %d " % i * 40, [("h", b"x")]) for i in range(2000)]
    data = peers.build(peer, recs, compression=codec, producer_id=9, producer_epoch=1, base_sequence=100)
    (b,) = kb.iter_batches(data)
    assert b.compression == codec and b.size < 100_000  # really compressed
    assert ours(data) == peers.read(peer, data)
    result = kb.validate(data, ANY_TIME)
    assert result.ok and result.records == 2000
    assert kb.to_arrow(data).column("sequence").to_pylist() == list(range(100, 2100))


legacy_records = st.lists(st.tuples(st.integers(0, 2**41), blob, blob), min_size=1, max_size=30)


LEGACY_CASES = [(peer, magic, codec) for peer in PEERS for magic in (0, 1)
                for codec in ("none", "gzip", "snappy", "lz4")
                if not (peer == "aiokafka" and magic == 0 and codec == "lz4")]  # aiokafka refuses it


@pytest.mark.parametrize("peer, magic, codec", LEGACY_CASES)
@settings(max_examples=20, deadline=None)
@given(recs=legacy_records, base_offset=st.integers(0, 2**40))
def test_legacy_message_sets_round_trip_with_peers(peer, magic, codec, recs, base_offset):
    """Magic 0/1, every codec allowed there: their sets decode here, ours decode there."""
    theirs = peers.build_legacy(peer, recs, magic, codec, base_offset)
    assert ours(theirs) == peers.read(peer, theirs)
    # Kafka's rules only: aiokafka stamps v1 wrappers with timestamp 0, not the largest inner one
    assert kb.validate(theirs, kb.ValidationConfig(origin="log", strict=False)).ok
    mine = kb.build_batch([{"key": k, "value": v, "timestamp": ts} for ts, k, v in recs], magic=magic,
                          compression=codec, base_offset=base_offset)
    want = [(base_offset + i, ts if magic else -1, k, v, []) for i, (ts, k, v) in enumerate(recs)]
    assert ours(mine) == want
    assert peers.read(peer, mine) == want
    assert kb.validate(mine, kb.ValidationConfig(origin="log")).ok
    assert kb.to_arrow(mine).column("offset").to_pylist() == [w[0] for w in want]
    if codec == "none":
        assert mine == theirs or kb.encode(kb.iter_batches(mine)) == mine


def test_legacy_builder_refusals():
    with pytest.raises(ValueError, match="ZStandard compression is not supported for magic 1"):
        kb.build_batch([(None, b"v")], magic=1, compression="zstd")
    with pytest.raises(ValueError, match="does not support record headers"):
        kb.build_batch([{"value": b"v", "headers": [("h", b"x")]}], magic=1)
    with pytest.raises(ValueError, match="need magic 2"):
        kb.build_batch([(None, b"v")], magic=0, producer_id=5)
