"""Batches written by librdkafka (confluent-kafka) into its mock cluster decode to what was
produced: every codec, idempotent producers, transactions with COMMIT and ABORT markers."""
import pytest

pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test dependency")

import pykbatch as kb  # noqa: E402
from tests.librdkafka_mock import fetch_any, producer  # noqa: E402

LOG = kb.ValidationConfig(origin="log")


def messages(n, tag):
    # every value ends in a compressible run: librdkafka ships a batch uncompressed when the codec
    # does not shrink it, which a loaded machine met when it sent the first record alone
    return [(b"%s-key-%d" % (tag, i), b"%s value %d " % (tag, i) * (i % 7 + 1) + b"." * 64, [("i", b"%d" % i)])
            for i in range(n)]


def produce_all(p, msgs):
    for key, value, headers in msgs:
        p.produce("t", key=key, value=value, headers=headers, partition=0)


def decoded(raw):
    batches = list(kb.iter_batches(raw, verify_crc=False))
    data = [(r.key, r.value, list(r.headers)) for b in batches if not b.is_control for r in b]
    return batches, data


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec(codec):
    # a long linger: under load a 20 ms linger sent the first record alone, and librdkafka ships a
    # batch uncompressed when compressing does not make it smaller (a CI run met that for zstd)
    p, addrs = producer(**{"compression.type": codec, "linger.ms": 2000, "enable.idempotence": False})
    msgs = messages(300, codec.encode())
    produce_all(p, msgs)
    assert p.flush(20) == 0
    raw = fetch_any(addrs, "t")
    batches, data = decoded(raw)
    assert data == msgs
    assert {b.compression for b in batches} == {codec}
    assert [r.offset for b in batches for r in b] == list(range(300))
    result = kb.validate(raw, LOG)
    assert result.ok and result.records == 300, result.culprits
    assert kb.to_arrow(raw).column("value").to_pylist() == [m[1] for m in msgs]


def test_idempotent_producer_sequences():
    p, addrs = producer(**{"enable.idempotence": True, "linger.ms": 20, "compression.type": "lz4"})
    msgs = messages(200, b"idem")
    produce_all(p, msgs)
    assert p.flush(20) == 0
    batches, data = decoded(fetch_any(addrs, "t"))
    assert data == msgs
    assert all(b.producer_id >= 0 and b.producer_epoch >= 0 for b in batches)
    assert [r.sequence for b in batches for r in b] == list(range(200))
    assert all(not b.is_transactional for b in batches)


def test_transactions_with_commit_and_abort_markers():
    p, addrs = producer(**{"transactional.id": "pykbatch-tx", "linger.ms": 5})
    p.init_transactions(10)
    committed, aborted = messages(5, b"commit"), messages(3, b"abort")
    p.begin_transaction()
    produce_all(p, committed)
    p.commit_transaction(10)
    p.begin_transaction()
    produce_all(p, aborted)
    p.flush(10)
    p.abort_transaction(10)
    raw = fetch_any(addrs, "t")
    batches, data = decoded(raw)
    assert data == committed + aborted  # read_uncommitted sees both
    markers = [(b.control_type, b.control.coordinator_epoch >= 0) for b in batches if b.is_control]
    assert markers == [("COMMIT", True), ("ABORT", True)]
    assert all(b.is_transactional and b.producer_id >= 0 for b in batches)
    # The mock broker writes its markers with CRC 0 (a real broker computes it); the producer's
    # batches are sound.  Validation must say exactly that.
    result = kb.validate(raw, LOG)
    marker_entries = [i for i, b in enumerate(batches) if b.is_control]
    assert [(c.entry, c.rule) for c in result.culprits] == [(i, "batch.crc_mismatch") for i in marker_entries]
    assert all(b.crc == 0 for b in batches if b.is_control)
    assert all(b.is_valid for b in batches if not b.is_control)
