"""Apache Kafka's own vectors (tests/kafka/kafka-vectors.json, bytes and verdicts produced by
running Kafka's code, kept with the tests: see tests/kafka/README.md): decoded fields, byte-exact
re-encoding, validation verdicts and messages, dump output.

Vectors this version cannot handle yet are marked ``xfail(strict=True)`` with the reason, so
they start failing (and must be un-marked) the day the capability lands.
"""
import pytest

import pykbatch as kb
from tests.conftest import KAFKA_VECTORS, SHARED, arrow_matches_iteration, kafka_vectors, shared_file

BATCH_FILES = ("DefaultRecordBatch.java", "MemoryRecordsBuilder.java", "EndTransactionMarker.java",
               "LegacyRecord.java", "AbstractLegacyRecordBatch.java")

HEADER_FIELDS = {  # Kafka's name -> ours
    "magic": "magic", "sizeInBytes": "size", "isValid": "is_valid", "crc": "crc",
    "compression": "compression", "timestampType": "timestamp_type", "maxTimestamp": "max_timestamp",
    "lastOffset": "last_offset", "baseOffset": "base_offset", "lengthField": "length",
    "partitionLeaderEpoch": "partition_leader_epoch", "attributes": "attributes",
    "lastOffsetDelta": "last_offset_delta", "baseTimestamp": "base_timestamp", "producerId": "producer_id",
    "producerEpoch": "producer_epoch", "baseSequence": "base_sequence", "lastSequence": "last_sequence",
    "isTransactional": "is_transactional", "isControlBatch": "is_control",
    "deleteHorizonMs": "delete_horizon_ms", "recordsCount": "record_count",
}


def is_batch_vector(v):
    return v["source_file"].endswith(BATCH_FILES) and "batches" in v["expected"]


def with_gap(params, why):
    """Marks the params `why` names a reason for as strict expected failures."""
    out = []
    for p in params:
        v = p.values[0]
        reason = v and why(v)
        out.append(pytest.param(v, id=p.id, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else p)
    return out


def headers_of(rec):
    return [[k, None if v is None else v.hex()] for k, v in rec.headers]


@pytest.mark.parametrize("v", kafka_vectors(is_batch_vector))
def test_batch_vectors_decode_to_kafkas_fields(v):
    data = bytes.fromhex(v["hex"])
    batches = list(kb.iter_batches(data, verify_crc=False))
    assert len(batches) == len(v["expected"]["batches"])
    assert sum(b.size for b in batches) == v["expected"]["totalBytes"]
    for b, exp in zip(batches, v["expected"]["batches"]):
        for theirs, ours in HEADER_FIELDS.items():
            if theirs in exp:
                assert getattr(b, ours) == exp[theirs], theirs
        assert bytes(b.raw) == data[b.position:b.position + b.size]
        records = list(b)
        assert len(records) == len(exp["records"])
        for r, er in zip(records, exp["records"]):
            assert (r.offset, r.timestamp, r.sequence) == (er["offset"], er["timestamp"], er["sequence"])
            assert (len(r.key) if r.key is not None else -1) == er["keySize"]
            assert (len(r.value) if r.value is not None else -1) == er["valueSize"]
            assert (r.key.hex() if r.key is not None else None) == er["keyHex"]
            assert (r.value.hex() if r.value is not None else None) == er["valueHex"]
            assert [[h["key"], h.get("valueHex")] for h in er["headers"]] == headers_of(r)


@pytest.mark.parametrize("v", kafka_vectors(is_batch_vector))
def test_batches_reencode(v):
    """Uncompressed: byte-identical.  Compressed: codec libraries differ in the bytes they
    emit, so the same header and records, in a batch that validates."""
    data = bytes.fromhex(v["hex"])
    encoded = kb.encode(kb.iter_batches(data, verify_crc=False))
    if any(b["compression"] != "none" for b in v["expected"]["batches"]):
        assert kb.validate(encoded, kb.ValidationConfig(origin="log")).ok
        for old, new in zip(kb.iter_batches(data), kb.iter_batches(encoded)):
            fields = ("magic", "base_offset", "last_offset", "attributes", "max_timestamp", "producer_id",
                      "producer_epoch", "base_sequence", "record_count", "partition_leader_epoch")
            assert [getattr(new, f) for f in fields] == [getattr(old, f) for f in fields]
            assert list(new) == list(old)
    elif all(b["isValid"] for b in v["expected"]["batches"]):
        assert encoded == data
    else:  # the encoder writes the correct CRC, and nothing else changes
        assert encoded[:17] + encoded[21:] == data[:17] + data[21:]
        assert kb.validate(encoded).ok


@pytest.mark.parametrize("v", kafka_vectors(is_batch_vector))
def test_batch_vectors_validate(v):
    data = bytes.fromhex(v["hex"])
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    assert result.unwalked_batches == 0
    assert result.records == sum(len(b["records"]) for b in v["expected"]["batches"])
    bad_crc = [i for i, b in enumerate(v["expected"]["batches"]) if not b["isValid"]]
    assert [c.entry for c in result.culprits] == bad_crc
    assert all(c.rule == "batch.crc_mismatch" for c in result.culprits)
    if "ensureValidMessage" in v["expected"]:  # the client's reader says it so; the broker names the partition
        stored = v["expected"]["batches"][0]["crc"]
        assert result.culprits[0].message == f"Record is corrupt (stored crc = {stored}) in topic partition t-0."
        assert (result.error_code, result.error_name, result.error_message) == (2, "CORRUPT_MESSAGE", None)
        with pytest.raises(kb.CorruptRecordError) as info:
            list(kb.iter_batches(data))
        assert info.value.message == v["expected"]["ensureValidMessage"]


def _batch_around(record: bytes, codec: int = 0) -> bytes:
    """A one-record v2 batch around a bare record (gzip-compressed for codec 1), with a correct CRC."""
    import gzip
    import struct
    body = struct.pack(">hiqqqhii", codec, 0, 0, 0, -1, -1, -1, 1) + (gzip.compress(record) if codec else record)
    crc = kb.crc32c(body)
    return struct.pack(">qiib", 0, len(body) + 9, -1, 2) + struct.pack(">I", crc) + body


@pytest.mark.parametrize("v", kafka_vectors(lambda v: "DefaultRecordTest" in v["source_file"]))
def test_malformed_records_get_kafkas_message(v):
    batch = _batch_around(bytes.fromhex(v["hex"]))
    result = kb.validate(batch, kb.ValidationConfig(origin="log"))
    expected = v["expected"]["readFrom_ByteBuffer"]
    assert expected["outcome"] == "error"
    first = result.culprits[0]
    assert first.message == expected["exceptionMessage"]
    assert (first.entry, first.record_index, first.code) == (0, 0, 87)
    assert 61 <= first.position <= len(batch)  # == len: the byte that is missing
    with pytest.raises(kb.InvalidRecordError) as info:
        list(next(kb.iter_batches(batch)))
    assert info.value.message.startswith(expected["exceptionMessage"])
    assert info.value.offset == first.position


@pytest.mark.parametrize("v", kafka_vectors(lambda v: "DefaultRecordTest" in v["source_file"]))
@pytest.mark.parametrize("reader, config", [
    ("readFrom_InputStream", kb.ValidationConfig(origin="log")),  # consumers; re-compressing brokers
    ("readPartiallyFrom_InputStream", kb.ValidationConfig(strict=False)),  # a leader keeping the codec
])
def test_compressed_records_get_the_message_of_kafkas_reader(v, reader, config):
    result = kb.validate(_batch_around(bytes.fromhex(v["hex"]), codec=1), config)
    expected = v["expected"][reader]
    if expected["outcome"] == "ok":  # the record reads; the byte its declared length still
        # counts is left over, which a batch answers as Kafka's own log does (tests/test_kafka_broker.py)
        assert result.records == 1 and [c.rule for c in result.culprits] == ["batch.records_remaining"]
        return
    assert result.verdict.message == expected["exceptionMessage"]
    assert result.error_code == 87 and result.verdict.inner_position is not None


# LogValidator scenarios: uncompressed magic-2 client batches are in scope now; the rest wait
# for the issues that bring their rules.
VALIDATOR_GAPS = {  # a key found in the vector's name -> why it cannot pass yet
    "zstd with inter.broker": "deliberate: pykbatch models Kafka 4 brokers, which no longer have an "
        "inter.broker.protocol.version below 3.0 (KIP-896), so this pre-2.1 zstd rule cannot fire; Kafka 4.4's "
        "own log accepts the batch (tests/test_kafka_broker.py)",
}


def validator_gap(v):
    return next((reason for key, reason in VALIDATOR_GAPS.items() if key in v["name"]), None)


@pytest.mark.parametrize("v", with_gap(kafka_vectors(lambda v: "LogValidator" in v["source_file"]), validator_gap))
def test_log_validator_verdicts(v):
    exp, params = v["expected"], v["expected"]["validatorParams"]
    origin = "client" if params["origin"] == "CLIENT" else "log"
    # LogValidator itself does not check the outer CRC (analyzeAndValidateRecords does, earlier)
    target = params["targetCompression"]
    config = kb.ValidationConfig(origin=origin, verify_crc=False, strict=False, single_append=True,
                                 target_magic=params["toMagic"],
                                 target_compression="producer" if target == params["sourceCompression"]
                                 else "uncompressed" if target == "none" else target,
                                 compacted=params["compactedTopic"], timestamp_type=params["topicTimestampType"],
                                 timestamp_before_max_ms=params["timestampBeforeMaxMs"],
                                 timestamp_after_max_ms=params["timestampAfterMaxMs"], now_ms=params["nowMs"])
    result = kb.validate(bytes.fromhex(v["hex"]), config)
    assert result.unwalked_batches == 0, "every record must have been checked"
    if "errorName" not in exp:
        assert result.ok, result.culprits
        return
    assert result.error_name == exp["errorName"]
    assert result.error_code == exp["errorCode"]
    if result.culprits[0].rule == "batch.decompression_failed":  # Kafka's text is the codec's exception
        assert exp["exceptionMessage"].split(": ", 1)[-1] in result.culprits[0].message
    elif not exp.get("recordErrors"):  # record errors: compared below through KIP-467's fields
        assert result.culprits[0].message == exp["exceptionMessage"]
    assert result.error_message == exp.get("errorMessageField")
    assert [[i, m] for i, m in result.error_records] == [[e["batchIndex"], e["message"]]
                                                           for e in exp.get("recordErrors", [])]


@pytest.mark.parametrize("v", kafka_vectors(lambda v: "DumpLogSegments" in v["source_file"]))
def test_dump_output_line_for_line(v, tmp_path, capsys):
    from pykbatch.commands import main
    name = v["expected"]["description"].split("--files ")[1].split()[0]
    path = tmp_path / name
    path.write_bytes(bytes.fromhex(v["hex"]))
    main(["dump", "--files", str(path), "--print-data-log", "--style", "scala"])  # the vectors predate 4.3
    assert capsys.readouterr().out == v["expected"]["stdout"].replace("DIR", str(tmp_path))


@pytest.mark.parametrize("v", kafka_vectors(lambda v: is_batch_vector(v)
                                            and all(b["isValid"] for b in v["expected"]["batches"])))
def test_arrow_columns_match_iteration(v):
    arrow_matches_iteration(bytes.fromhex(v["hex"]))


@pytest.mark.parametrize("v", kafka_vectors(lambda v: v["name"].startswith("v2 control batch")))
def test_control_batches_expose_their_marker(v):
    (b,) = kb.iter_batches(bytes.fromhex(v["hex"]))
    want = "COMMIT" if "COMMIT" in v["name"] else "ABORT"
    assert b.is_control and b.is_transactional and b.control_type == want
    assert b.control.coordinator_epoch == 9 and b.control.type == (1 if want == "COMMIT" else 0)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (12345, 2, -1)


def test_kept_vectors_are_the_reference_copy():
    """The copy kept in tests/kafka has not drifted from the team's reference file."""
    reference = shared_file(SHARED / "kafka" / "kafka-vectors.json")
    assert KAFKA_VECTORS.read_bytes() == reference.read_bytes()
