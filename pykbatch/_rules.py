"""The rules the native core checks: stable ids, message templates and how
Kafka reports each.

Order matches ``kb_rule`` in ``csrc/kb_rules.h`` (the native module checks
this at import).  A template may use ``{a0}``-``{a2}`` (the core's values for
the fault), ``{field}`` (the record field a structural fault was found in) and
``{tp}`` (the topic-partition of the validation config).  Where Kafka has a
message for the condition, the template is Kafka's exact text.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    id: str
    """Stable name, e.g. ``"batch.crc_mismatch"``."""
    template: str
    kafka: bool
    """True when Apache Kafka rejects the condition too; False for pykbatch's stricter checks."""
    record_error: bool
    """True when reported as a per-record error (KIP-467 ``error_records``); False when
    the whole batch fails, as Kafka's broker does for every structural error."""
    detail: str = ""
    """Extra explanation appended by pykbatch (Kafka's own message stays as is)."""
    record: bool = False
    """The template uses {record}: Kafka's toString of a legacy record (LegacyRecordBatch)."""
    stage: str = "batch"
    """When Kafka's broker runs the check (see STAGES): decides which culprit gives the verdict."""
    reader_template: str = ""
    """Kafka's client-side message for the same fault, when it differs from the broker's
    (``iter_batches`` raises with it)."""


# The order in which a partition leader checks one append (SPEC.md section 7): each stage runs
# over every batch before the next begins; "batch" runs per batch (header, then its records).
# Kafka answers with the first failure, so the verdict comes from the earliest (stage, entry).
# A rule of stage "framing" is found while iterating entries: "request" or "append", by entry.
# "handler": ReplicaManager.handleProduceAppend, between the request's checks and the log's append;
# "rebuild": LogValidator re-encoding a batch after every record of it passed.
STAGES = ("request", "handler", "append", "validator", "batch", "rebuild", "after")

RULES: tuple[Rule, ...] = (
    Rule("none", "", kafka=False, record_error=False),
    Rule("framing.size_too_small",
         "Record size {a0} is less than the minimum record overhead ({a1})", True, False,
         "the entry's size field is too small, so the entries after it cannot be found", stage="framing"),
    Rule("framing.invalid_magic", "Invalid magic found in record: {a0}", True, False, stage="framing"),
    Rule("batch.too_small",
         "Record batch is corrupt (the size {a0} is smaller than the minimum allowed overhead {a1})",
         True, False, stage="append"),
    Rule("batch.crc_mismatch", "Record is corrupt (stored crc = {a0}) in topic partition {tp}.", True, False,
         "computed crc = {a1}", stage="append",
         reader_template="Record is corrupt (stored crc = {a0}, computed crc = {a1})"),
    Rule("batch.unknown_codec", "Unknown compression type id: {a0}", True, False,
         "Kafka answers UNKNOWN_SERVER_ERROR for this data error", stage="append"),
    Rule("batch.negative_record_count", "Found invalid record count {a0} in magic v2 batch", True, False),
    Rule("batch.invalid_offset_range",
         "Batch has an invalid offset range: [{a0}, {a1}] in topic partition {tp}", True, False),
    Rule("batch.invalid_record_count",
         "Invalid reported count for record batch: {a0} in topic partition {tp}", True, False),
    Rule("batch.count_offset_mismatch",
         "Inconsistent batch offset range [{a0}, {a1}] and count of records {a2} in topic partition {tp}",
         True, False),
    Rule("batch.premature_eof", "Incorrect declared batch size, premature EOF reached", True, False),
    Rule("batch.records_remaining", "Incorrect declared batch size, records still remaining in file",
         True, False, "{a0} bytes follow the last record"),
    Rule("batch.max_timestamp_mismatch",
         "Batch maxTimestamp {a0} is not the largest record timestamp {a1}", False, False),
    Rule("record.length_exceeds_batch",
         "Invalid record size: expected {a0} bytes in record payload, but instead the buffer has only "
         "{a1} remaining bytes.", True, False),
    Rule("record.invalid_structure", "Found invalid record structure", True, False,
         "{field} runs past the end of the batch"),
    Rule("record.varint_too_long", "Found invalid record structure", True, False,
         "the {field} varint continues past its maximum length"),
    Rule("record.size_mismatch",
         "Invalid record size: expected to read {a0} bytes in record payload, but instead read {a1}",
         True, False),
    Rule("record.negative_header_count", "Found invalid number of record headers {a0}", True, False),
    Rule("record.header_count_exceeds_buffer",
         "Found invalid number of record headers. {a0} is larger than the remaining size of the buffer",
         True, False),
    Rule("record.negative_header_key_size", "Invalid negative header key size {a0}", True, False),
    Rule("record.offset_not_increasing",
         "Record offset delta {a0} is not greater than the previous record's offset delta {a1}",
         False, True),
    Rule("record.offset_beyond_last_delta",
         "Record offset delta {a0} is beyond the batch's lastOffsetDelta {a1}", False, True),
    Rule("record.offset_delta_not_index",
         "Record offset delta {a0} differs from its index {a1} in a producer batch", False, True),
    Rule("record.timestamp_above_max",
         "Record timestamp {a0} is above the batch's maxTimestamp {a1}", False, True),
    # raised by pykbatch.codecs; the message comes from there
    Rule("batch.decompression_failed", "Failed to decompress record stream", True, False,
         "Kafka answers UNKNOWN_SERVER_ERROR for this data error"),
    Rule("batch.decompressed_too_large", "Decompressed records exceed the limit", False, False,
         "ValidationConfig.max_decompressed_bytes"),
    # magic 0 and 1
    Rule("legacy.too_small",
         "Record is corrupt (crc could not be retrieved as the record is too small, size = {a0})", True, False,
         stage="append"),
    Rule("legacy.zstd_wrapper", "Invalid wrapper compressionType found in legacy deep record iterator {a0}",
         True, False, "zstd needs magic 2"),
    Rule("legacy.null_wrapper_value", "Found invalid compressed record set with null value (magic = {a0})",
         True, False),
    Rule("legacy.empty_wrapper", "Found invalid compressed record set with no inner records", True, False),
    Rule("legacy.inner_too_small", "Record size is less than the minimum record overhead ({a1})", True, False,
         "inner entry size {a0}"),
    Rule("legacy.nested_compression", "Inner messages must not be compressed", True, False),
    Rule("legacy.wrapper_offset",
         "Found invalid wrapper offset in compressed v1 message set, wrapper offset '{a0}' is less than the "
         "last inner message offset '{a1}' and it is not zero.", True, False),
    Rule("legacy.inner_magic", "Record {record}'s magic does not match outer magic {a2} in topic partition {tp}",
         True, True, record=True),
    Rule("legacy.inner_truncated", "The compressed message set ends inside an inner message", False, False,
         "{a0} bytes left: Kafka's reader drops them silently"),
    # LogValidator: per-record rules and client-only batch checks
    Rule("record.compacted_no_key", "Compacted topic cannot accept message without key in topic partition {tp}",
         True, True),
    Rule("record.timestamp_out_of_range",
         "Timestamp {a0} of message with offset {a1} is out of range. The timestamp should be within [{a2}, {a3}]",
         True, True),
    Rule("record.producer_log_append_time",
         "Invalid timestamp type in message {record_class}(offset={a0}, timestamp={a1}, key={a2} bytes, "
         "value={a3} bytes). Producer should not set timestamp type to LogAppendTime.", True, True),
    Rule("batch.control_from_client", "Clients are not allowed to write control records in topic partition {tp}",
         True, False),
    Rule("batch.invalid_sequence",
         "Invalid sequence number {a0} in record batch with producerId {a1} in topic partition {tp}", True, False),
    # one append as a whole, and the broker's size and record-version settings
    # (sic: Kafka 4.4's text ends in ")." )
    Rule("batch.too_large", "The record batch size in the append to {tp} is {a0} bytes which exceeds the maximum "
         "configured value of {a1}).", True, False, "ValidationConfig.max_message_bytes", stage="append"),
    Rule("batch.base_offset_not_zero",
         "The baseOffset of the record batch in the append to {tp} should be 0, but it is {a0}", True, False,
         stage="append"),
    Rule("request.no_batch",
         "Produce requests with version {a0} must have at least one record batch per partition", True, False,
         stage="request"),
    Rule("request.magic_not_2",
         "Produce requests with version {a0} are only allowed to contain record batches with magic version 2",
         True, False, stage="request"),
    Rule("request.zstd_before_v7",
         "Produce requests with version {a0} are not allowed to use ZStandard compression", True, False,
         stage="request"),
    Rule("request.more_than_one_batch",
         "Produce requests with version {a0} are only allowed to contain exactly one record batch per partition",
         True, False, stage="request"),
    Rule("append.more_than_one_batch", "Compressed outer record has more than one batch", True, False,
         "a magic 2 or compressed append holds exactly one batch", stage="validator"),
    Rule("batch.magic_mismatch",
         "Batch magic {a0} is not the same as the first batch's magic byte {a1} in topic partition {tp}", True, False),
    Rule("batch.transactional_for_magic", "Transactional records cannot be used with magic version {a0}",
         True, False, "ValidationConfig.target_magic"),
    Rule("batch.idempotent_for_magic", "Idempotent records cannot be used with magic version {a0}", True, False,
         "ValidationConfig.target_magic"),
    Rule("append.transactional_conversion", "Transactional records are not supported for magic {a0}", True, False,
         "Kafka answers UNKNOWN_SERVER_ERROR: its down-conversion builder refuses the batch before any check",
         stage="validator"),
    Rule("batch.headers_for_magic", "Magic v{a0} does not support record headers", True, False,
         "Kafka answers UNKNOWN_SERVER_ERROR: down-conversion cannot carry headers"),
    Rule("append.too_large", "Message batch size is {a0} bytes in append to partition {tp}, which exceeds the "
         "maximum configured segment size of {a1}.", True, False, "ValidationConfig.segment_bytes", stage="after"),
    Rule("legacy.inner_crc_mismatch", "Record is corrupt (stored crc = {a0}, computed crc = {a1})", True, False),
    Rule("legacy.producer_log_append_time", "Invalid timestamp type in message {record}. Producer should not set "
         "timestamp type to LogAppendTime.", True, True, record=True),
    # Kafka's readers of compressed records (the validator picks the one Kafka's path uses)
    Rule("record.payload_eof",
         "Invalid record size: expected {a0} bytes in record payload, but the record payload reached EOF.", True, False,
         "{a1} bytes of decompressed records left"),
    Rule("record.skip_eof", "Reached end of input stream before skipping all bytes. Remaining bytes:{a0}", True, False),
    # where Kafka's own code fails on the input: it answers UNKNOWN_SERVER_ERROR (no message), the
    # template says what is wrong and the detail where Kafka fails
    Rule("batch.producer_id_unreadable",
         "Record batch of {a0} bytes is too short to hold its producer id (bytes 43-50)", True, False,
         "Kafka answers UNKNOWN_SERVER_ERROR: ReplicaManager.handleProduceAppend reads it (hasProducerId) "
         "before the batch is validated", stage="handler"),
    Rule("record.length_varint_too_long",
         "Varint is too long, the most significant bit in the 5th byte is set", True, False,
         "the record's length varint: Kafka answers UNKNOWN_SERVER_ERROR (DefaultRecord.readFrom reads it "
         "outside its InvalidRecordException handler)"),
    Rule("batch.partial_rebuild", "key is skipped in PartialDefaultRecord", True, False,
         "record {a1} has offset delta {a0}: LogValidator keeps a compressed batch in its codec only if its "
         "offsets need no change, else rebuilds it from the records its partial reader skipped the keys of, and "
         "fails (UnsupportedOperationException: Kafka answers UNKNOWN_SERVER_ERROR)", stage="rebuild"),
    Rule("append.rebuilt_too_large",
         "Message batch size is {a0} bytes in append to partition {tp} which exceeds the maximum configured "
         "size of {a1}.", True, False,
         "the batch the broker re-encodes for the topic's compression.type or record version",
         stage="after"),
    Rule("record.negative_length", "Record {field} {a1} is below -1", False, True,
         "Kafka reads it as null; no writer produces it"),
)

FIELDS = ("length", "attributes", "timestampDelta", "offsetDelta", "keyLength", "key", "valueLength",
          "value", "headerCount", "header key length", "header key", "header value length",
          "header value")

BY_ID = {rule.id: rule for rule in RULES}


TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


def legacy_record(offset, magic, attributes, crc, key_len, value_len, timestamp) -> str:
    """LegacyRecordBatch.toString, as it appears inside Kafka's validator messages."""
    codec = attributes & 7
    fields = [f"magic={magic}", f"attributes={attributes}",
              f"compression={CODEC_NAMES[codec] if codec < 5 else codec}", f"crc={crc}"]
    if magic > 0:
        fields.append(f"{TIMESTAMP_TYPES[(attributes >> 3) & 1]}={timestamp}")
    fields += [f"key={max(key_len, 0)} bytes", f"value={max(value_len, 0)} bytes"]
    return f"LegacyRecordBatch(offset={offset}, Record({', '.join(fields)}))"


_ARG_NAMES = tuple(f"a{i}" for i in range(8))  # the templates' {a0}..{a7}


def render(rule: Rule, args, tp: str, reader: bool = False) -> tuple[str, str]:
    """Kafka-style message and pykbatch's detail for one fault (args: 3 or 8 values); ``reader``:
    the message Kafka's client-side reader gives, where it has its own."""
    values = dict(zip(_ARG_NAMES, args))
    a0 = args[0]
    values["field"] = FIELDS[a0] if rule.id in ("record.invalid_structure", "record.varint_too_long",
                                                 "record.negative_length") \
        and 0 <= a0 < len(FIELDS) else ""
    values["tp"] = tp
    if rule.record:
        values["record"] = legacy_record(args[0], args[1], *args[3:8])
    # DefaultRecord prints null as 0 bytes; the compressed in-place path's partial reader prints -1
    values["record_class"] = "PartialDefaultRecord" if len(args) > 4 and args[4] else "DefaultRecord"
    template = rule.reader_template if reader and rule.reader_template else rule.template
    return template.format_map(values), rule.detail.format_map(values) if rule.detail else ""
