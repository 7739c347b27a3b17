"""validate()'s KIP-467 verdict is what a Kafka broker answers over the wire, quirks included
(tests/test_kafka_wire.py checks them against a real broker; these run everywhere).  Each quirk's
culprit names the precise rule and byte, and Kafka's reason is in the rule's detail."""
import gzip
import struct
import zlib

import pytest

import pykbatch as kb
from pykbatch import codecs
from tests.samples import batch, batch_of_records, record, recrc, zz

CLIENT = kb.ValidationConfig(origin="client", strict=False, single_append=True, produce_version=12)
SIX = b"\x80\x80\x80\x80\x80\x01"  # a varint of six bytes


def verdict(data, config=CLIENT):
    r = kb.validate(data, config)
    return r.error_code, r.error_records, r.error_message


@pytest.mark.parametrize("entry, message", [
    (struct.pack(">qi", 0, 5) + bytes(5), "Record size 5 is less than the minimum record overhead (14)"),
    (batch(2)[:16] + b"\x03" + batch(2)[17:], "Invalid magic found in record: 3"),
])
def test_a_first_entry_framing_fault_comes_back_with_its_message(entry, message):
    """KafkaApis reads the first entry (RequestUtils.hasTransactionalRecords) before any check: its
    exception becomes the whole request's error, message included."""
    assert verdict(entry) == (2, [], message)
    assert verdict(batch(1) + entry) == (2, [], None)  # found later, by the checks: no message
    assert verdict(entry, kb.ValidationConfig(origin="log"))[2] is None


def test_request_checks_of_the_first_batch_still_apply_when_the_second_entry_is_broken():
    zstd = batch(2, compression="zstd")
    config = kb.ValidationConfig(origin="client", strict=False, single_append=True, produce_version=6)
    assert verdict(zstd + struct.pack(">qi", 0, 5) + bytes(5), config)[0] == 76


def test_an_uncompressed_records_length_varint_too_long_is_an_unknown_server_error():
    good = record(0)
    data = batch_of_records(good, SIX + good[1:], count=2)
    r = kb.validate(data, CLIENT)
    (c,) = r.culprits
    assert (c.rule, c.code, c.position, c.record_index) == ("record.length_varint_too_long", -1, 61 + len(good), 1)
    assert verdict(data) == (-1, [], None)
    # any other varint too long is Kafka's INVALID_RECORD ("Found invalid record structure")
    data = batch_of_records(good, good[:4] + SIX + good[5:], count=2)
    assert kb.validate(data, CLIENT).culprits[0].rule == "record.varint_too_long"
    assert verdict(data)[0] == 87


def swapped(codec: str) -> bytes:
    """A batch whose records 1 and 2 carry each other's offset delta, compressed with ``codec``."""
    plain = batch_of_records(*[record(d, 0, b"k%d" % i, b"v" * 20) for i, d in enumerate([0, 2, 1, 3])])
    body = codecs.compress(codecs.NAMES.index(codec), plain[61:])
    header = bytearray(plain[:61])
    struct.pack_into(">i", header, 8, 49 + len(body))
    header[22] = codecs.NAMES.index(codec)
    return recrc(bytes(header) + body)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_compressed_batch_kept_in_its_codec_with_offsets_to_fix_fails_in_kafka(codec):
    data = swapped(codec)
    r = kb.validate(data, CLIENT)
    (c,) = r.culprits
    assert (c.rule, c.code, c.record_index) == ("batch.partial_rebuild", -1, None)
    assert c.message == "key is skipped in PartialDefaultRecord" and "record 1 has offset delta 2" in c.detail
    assert verdict(data) == (-1, [], None)
    # re-encoded for the topic, the records get new offsets: accepted
    assert kb.validate(data, kb.ValidationConfig(origin="client", strict=False,
                                                 target_compression="uncompressed")).ok
    # a record error is answered first (LogValidator.processRecordErrors)
    compacted = kb.ValidationConfig(origin="client", strict=False, compacted=True)
    keyless = batch_of_records(record(0, 0, None, b"v"), record(2), record(1))
    body = codecs.compress(codecs.NAMES.index(codec), keyless[61:])
    header = bytearray(keyless[:61])
    struct.pack_into(">i", header, 8, 49 + len(body))
    header[22] = codecs.NAMES.index(codec)
    assert kb.validate(recrc(bytes(header) + body), compacted).error_code == 87


def test_the_batch_kafka_re_encodes_must_fit_max_message_bytes():
    recs = [{"key": b"k", "value": b"x" * 60, "timestamp": 1_700_000_000_000}] * 6
    data = kb.build_batch(recs, compression="gzip")
    uncompressed = len(kb.build_batch(recs))
    assert len(data) < 300 < uncompressed
    config = kb.ValidationConfig(origin="client", strict=False, now_ms=1_700_000_000_000,
                                 target_compression="uncompressed", max_message_bytes=300, topic_partition="t-0")
    (c,) = kb.validate(data, config).culprits
    assert (c.rule, c.code) == ("append.rebuilt_too_large", 10)
    assert c.message == (f"Message batch size is {uncompressed} bytes in append to partition t-0 which exceeds "
                         f"the maximum configured size of 300.")
    assert kb.validate(data, kb.ValidationConfig(origin="client", strict=False, now_ms=1_700_000_000_000,
                                                 max_message_bytes=300)).ok  # kept as it is: fits
    # the column functions (Spark's UDFs) say the same
    import pyarrow as pa

    from pykbatch.arrow import validate_array
    (row,) = validate_array(pa.array([data]), config).to_pylist()
    assert row["error_code"] == 10


def test_segment_bytes_applies_to_the_batch_kafka_writes():
    recs = [{"key": b"k", "value": b"x" * 60, "timestamp": 1_700_000_000_000}] * 8
    gz, plain = kb.build_batch(recs, compression="gzip"), kb.build_batch(recs)
    assert len(gz) < 400 < len(plain)

    def rules(data, target):
        config = kb.ValidationConfig(origin="client", strict=False, now_ms=1_700_000_000_000, segment_bytes=400,
                                     target_compression=target)
        return [(c.rule, c.code) for c in kb.validate(data, config).culprits]
    assert rules(gz, "uncompressed") == [("append.too_large", 18)]  # inflated past it
    assert rules(plain, "gzip") == []                                 # compressed under it
    assert rules(plain, "uncompressed") == rules(plain, "producer") == [("append.too_large", 18)]
    assert rules(gz, "producer") == []


@pytest.mark.parametrize("data", [b"", b"\x00" * 12, batch(1)[:40]])
def test_nothing_to_re_encode_in_an_append_without_a_whole_entry(data):
    config = kb.ValidationConfig(origin="client", strict=False, target_compression="uncompressed",
                                 max_message_bytes=10)
    r = kb.validate(data, config)
    assert "append.rebuilt_too_large" not in {c.rule for c in r.culprits}
    import pyarrow as pa

    from pykbatch.arrow import validate_array
    (row,) = validate_array(pa.array([data]), config).to_pylist()
    assert row["culprit_count"] == r.culprit_count


def test_kafkas_zstd_frame_ends_with_an_empty_last_block():
    """Kafka flushes its zstd stream before ending it: the sizes of re-encoded batches depend on it."""
    frame = codecs.compress(codecs.ZSTD, b"records" * 10)
    assert frame.endswith(b"\x01\x00\x00")


def gzip_batch(plain: bytes, damage) -> bytes:
    body = bytearray(gzip.compress(plain[61:]))
    damage(body)
    header = bytearray(plain[:61])
    struct.pack_into(">i", header, 8, 49 + len(body))
    header[22] = 1
    return recrc(bytes(header) + bytes(body))


def test_kafka_meets_a_fault_in_the_records_before_a_broken_gzip_trailer():
    """Kafka reads records out of the stream as it inflates: a record fault before the end wins
    over the trailer that only the last read checks."""
    broken_record = batch_of_records(record(0), record(1)[:-1] + b"\x7f")

    def trailer(b):
        b[-5] ^= 1
    assert verdict(gzip_batch(broken_record, trailer))[0] == 87
    r = kb.validate(gzip_batch(broken_record, trailer), CLIENT)
    assert [c.rule for c in r.culprits] == ["record.negative_header_count"]
    fine = batch_of_records(record(0), record(1))
    (c,) = kb.validate(gzip_batch(fine, trailer), CLIENT).culprits
    assert (c.rule, c.code) == ("batch.decompression_failed", -1) and "Corrupt GZIP trailer" in c.message


def test_gzip_headers_are_read_as_the_jdk_reads_them():
    data = b"record bytes " * 50
    member = bytearray(gzip.compress(data))
    member[3] |= 0x40  # a reserved flag bit: the JDK ignores it, zlib refuses it
    out = bytearray(10_000)
    assert codecs.decompress_into(codecs.GZIP, 2, memoryview(bytes(member)), memoryview(out)) == len(data)
    with pytest.raises(codecs.CodecError, match="Unsupported compression method"):
        member[2] = 7
        codecs.decompress_into(codecs.GZIP, 2, memoryview(bytes(member)), memoryview(out))
    named = b"\x1f\x8b\x08\x08" + bytes(6) + b"name\x00" + zlib.compress(data, wbits=-15)
    named += struct.pack("<II", zlib.crc32(data), len(data))
    assert codecs.decompress_into(codecs.GZIP, 2, memoryview(named), memoryview(out)) == len(data)


def test_a_raw_zstd_block_cut_short_streams_its_bytes_first():
    """libzstd hands out a raw block's bytes as they arrive, so Kafka parses records out of them."""
    records = batch_of_records(record(0), record(1))[61:]
    frame = b"\x28\xb5\x2f\xfd\x00\x58" + struct.pack("<I", (500 << 3) | 0)[:3] + records + b"\x00"  # 500 declared
    out = bytearray(1000)
    with pytest.raises(codecs.CodecError) as exc:
        codecs.decompress_into(codecs.ZSTD, 2, memoryview(frame), memoryview(out))
    assert exc.value.produced == len(records) + 1


@pytest.mark.parametrize("field", ["key", "value", "header"])
def test_strict_lengths_below_minus_one(field):
    body = bytes([0]) + zz(0) + zz(0)
    if field == "key":
        body += zz(-2) + zz(1) + b"v" + zz(0)
    elif field == "value":
        body += zz(1) + b"k" + zz(-2) + zz(0)
    else:
        body += zz(1) + b"k" + zz(1) + b"v" + zz(1) + zz(1) + b"h" + zz(-2)
    data = batch_of_records(zz(len(body)) + body, record(1))
    assert kb.validate(data, kb.ValidationConfig(strict=False)).ok  # Kafka reads it as null
    (c,) = kb.validate(data).culprits
    assert (c.rule, c.kafka, c.record_index, c.code) == ("record.negative_length", False, 0, 87)
    name = {"key": "keyLength", "value": "valueLength", "header": "header value length"}[field]
    assert c.message == f"Record {name} -2 is below -1"
    assert data[c.position] == 0x03  # zigzag -2: the length's own byte


def legacy(magic: int, key_len: int, value_len: int, attributes: int = 0, value: bytes = b"") -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", 1000) if magic else b"")
    body += struct.pack(">i", key_len) + struct.pack(">i", value_len) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
def test_strict_lengths_below_minus_one_in_v0_v1_messages_and_wrappers(magic):
    for key_len, value_len, field in ((-2, -1, "keyLength"), (-1, -3, "valueLength")):
        data = legacy(magic, key_len, value_len)
        assert kb.validate(data, kb.ValidationConfig(origin="log", strict=False)).ok
        (c,) = kb.validate(data, kb.ValidationConfig(origin="log")).culprits
        assert (c.rule, c.kafka) == ("record.negative_length", False)
        assert c.message == f"Record {field} {min(key_len, value_len)} is below -1"
    inner = legacy(magic, -5, -1)
    wrapper = legacy(magic, -1, len(gzip.compress(inner)), attributes=1, value=gzip.compress(inner))
    (c,) = kb.validate(wrapper, kb.ValidationConfig(origin="log")).culprits
    assert (c.rule, c.record_index) == ("record.negative_length", 0)
