"""The readers (iter_batches and its records, to_arrow) and the validator share the C core's
checks: wherever a reader raises, the validator reports the same rule at the same byte among its
culprits, on Kafka's own vectors and on damaged batches of every magic and codec, the damage
inside compressed payloads included."""
import random
import struct

import pytest

import pykbatch as kb
from pykbatch import codecs
from tests.conftest import load_json, KAFKA_VECTORS
from tests.kafka_cases import damage, random_batch
from tests.samples import recrc

LOG = kb.ValidationConfig(origin="log", max_culprits=10_000)


def reader_fault(data: bytes):
    """(rule, position) of the first fault the readers raise on data, or None."""
    try:
        for batch in kb.iter_batches(data):
            for _ in batch:
                pass
    except kb.errors.KafkaDataError as exc:
        return exc.rule, exc.offset
    return None


def arrow_fault(data: bytes):
    try:
        kb.to_arrow(data)
    except kb.errors.KafkaDataError as exc:
        return exc.rule, exc.offset
    return None


def assert_validator_agrees(data: bytes, config=LOG):
    found = {(c.rule, c.position) for c in kb.validate(data, config=config).culprits}
    for read in (reader_fault, arrow_fault):
        fault = read(data)
        if fault is not None:
            assert fault in found, (read.__name__, fault, sorted(found))
    return reader_fault(data)


def _record_sets():
    for v in load_json(KAFKA_VECTORS):
        data = bytes.fromhex(v.get("hex") or "")
        if len(data) >= 26 and data[16] in (0, 1, 2):
            yield pytest.param(data, id=v["name"])


@pytest.mark.parametrize("data", list(_record_sets()))
def test_kafka_vectors(data):
    assert_validator_agrees(data)


def _damaged_payload(rng: random.Random, codec: str) -> bytes:
    """A compressed v2 batch whose decompressed records carry the damage (a flipped bit, a cut,
    bytes appended): the faults a consumer meets reading records out of the codec's stream."""
    plain = random_batch(rng, 2, compression="none")
    records = bytearray(plain[61:])
    what = rng.choice(["flip", "flip", "cut", "extend", "varint"])
    if what == "flip":
        pos = rng.randrange(len(records))
        records[pos] ^= 1 << rng.randrange(8)
    elif what == "cut":
        del records[rng.randrange(len(records)):]
    elif what == "extend":
        records += rng.randbytes(rng.randint(1, 6))
    else:  # a record length varint that never ends
        records[0:1] = b"\xff\xff\xff\xff\xff\x01"
    body = codecs.compress(codecs.NAMES.index(codec), bytes(records))
    header = bytearray(plain[:61])
    struct.pack_into(">i", header, 8, 49 + len(body))
    header[22] = (header[22] & ~7) | codecs.NAMES.index(codec)
    return recrc(bytes(header) + body)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_damage_inside_compressed_records(codec):
    rng = random.Random(codec)
    raised = 0
    for _ in range(150):
        raised += assert_validator_agrees(_damaged_payload(rng, codec)) is not None
    assert raised > 50  # the damage reaches the readers' checks


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_damaged_batches(magic):
    rng = random.Random(magic)
    raised = 0
    for _ in range(300):
        data = random_batch(rng, magic)
        if magic == 2:
            data = damage(rng, data)
        else:
            pos = rng.randrange(len(data))
            data = data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]
        raised += assert_validator_agrees(data) is not None
    assert raised > 30


def test_count_past_last_offset_delta_is_reported_by_both():
    """Kafka's client iterator stops at records that run out before the count; the broker's log
    check (count > lastOffsetDelta + 1) fires first: the validator reports both."""
    data = kb.build_batch([{"value": b"a"}, {"value": b"b"}])
    data = recrc(data[:57] + struct.pack(">i", 3) + data[61:])
    assert reader_fault(data) == ("batch.premature_eof", len(data))
    rules = {c.rule for c in kb.validate(data, config=LOG).culprits}
    assert {"batch.count_offset_mismatch", "batch.premature_eof"} <= rules
    assert_validator_agrees(data)


def _rows_batch(n, value_size, base_offset, headers=()):
    return kb.build_batch([{"key": b"k%d" % i, "value": bytes([65 + i % 26]) * value_size, "timestamp": i,
                            "headers": list(headers)} for i in range(n)], base_offset=base_offset)


def test_columns_grow_from_a_small_first_batch_and_failed_rows_leave_nothing():
    """Columns are sized from the first batch and grow; a row that fails after some of its batches
    were filled gives no records, its neighbours all of theirs (checked against iteration)."""
    import pyarrow as pa
    from pykbatch import arrow
    small = _rows_batch(1, 0, 0)
    big = _rows_batch(300, 700, 1, headers=[("h", b"v"), ("n", None)])
    crc_bad = bytearray(_rows_batch(3, 5, 301, headers=[("x", b"y")]))
    crc_bad[-1] ^= 1
    walk_bad = bytearray(recrc(_rows_batch(2, 5, 304)))
    walk_bad[-1] = 0x7e  # the last record now claims 63 headers, with no bytes left for them
    walk_bad = recrc(bytes(walk_bad))
    good_tail = _rows_batch(5, 3, 306, headers=[("t", b"1")])
    rows = [small + big, big + bytes(crc_bad), big + walk_bad, None, good_tail, small]
    out = arrow.decode_array(pa.array(rows, pa.binary()))
    assert out.is_null().to_pylist() == [False, True, True, True, False, False]
    for row, got in zip(rows, out.to_pylist()):
        if got is not None:
            want = [(r.offset, r.value, [(k, v) for k, v in r.headers]) for b in kb.iter_batches(row) for r in b]
            assert [(g["offset"], g["value"], [(h["key"], h["value"]) for h in g["headers"]]) for g in got] == want
    # to_arrow raises the first fault in the input: the CRC one, though a later batch breaks the walk
    with pytest.raises(kb.CorruptRecordError, match="crc_mismatch"):
        kb.to_arrow(small + bytes(crc_bad) + walk_bad)
    with pytest.raises(kb.KafkaDataError) as walk:
        kb.to_arrow(small + walk_bad + bytes(crc_bad))
    assert "crc_mismatch" not in str(walk.value) and walk.value.offset >= len(small)
    for zero_copy in (False, True):
        t = kb.to_arrow(small + big + good_tail, zero_copy=zero_copy)
        t.validate(full=True)
        assert t.num_rows == 306 and t.column("offset").to_pylist() == [0] + list(range(1, 301)) + list(range(306, 311))


@pytest.mark.parametrize("magic", [1, 2])
def test_to_arrow_copies_large_columns_exactly(magic):
    """Columns of several MiB are written around the cache (csrc/kb_copy.h: from 2 MiB, values
    from 512 bytes): keys, values and header values of drawn sizes either side of those bounds, at
    every alignment, come out byte for byte as the record reader reads them."""
    seed = 20261127 + magic
    print(f"seed {seed}")
    rng = random.Random(seed)
    sizes = [0, 1, 15, 16, 17, 63, 64, 65, 500, 511, 512, 513, 527, 1023, 1024, 4096, 10_000]
    payload = bytes(rng.getrandbits(8) for _ in range(1 << 16))

    def blob():
        if rng.random() < 0.08:
            return None
        n = rng.choice(sizes) if rng.random() < 0.6 else rng.randrange(20_000)
        at = rng.randrange(len(payload) - n)
        return payload[at:at + n]

    batches, offset, total = [], 0, 0
    while total < 6 << 20:
        records = []
        for _ in range(rng.randint(1, 30)):
            r = {"key": blob(), "value": blob(), "timestamp": 1_700_000_000_000}
            if magic == 2:
                r["headers"] = [("h%d" % k, blob()) for k in range(rng.randint(0, 2))]
            records.append(r)
        data = kb.build_batch(records, base_offset=offset, magic=magic)
        batches.append(data)
        offset += len(records)
        total += len(data)
    data = b"".join(batches)
    table = kb.to_arrow(data)
    table.validate(full=True)
    want = [(r.key, r.value, [(k, v) for k, v in r.headers]) for b in kb.iter_batches(data) for r in b]
    headers = table.column("headers").to_pylist()
    got = list(zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                   ([(h["key"], h["value"]) for h in hs] for hs in headers)))
    assert len(got) == len(want) == offset
    assert got == want
