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


RULES: tuple[Rule, ...] = (
    Rule("none", "", kafka=False, record_error=False),
    Rule("framing.size_too_small",
         "Record size {a0} is less than the minimum record overhead ({a1})", True, False,
         "the entry's size field is too small, so the entries after it cannot be found"),
    Rule("framing.invalid_magic", "Invalid magic found in record: {a0}", True, False),
    Rule("format.legacy_magic",
         "Message format v{a0} is not decoded by this version of pykbatch", False, False,
         "magic 0 and 1 message sets are not read yet; only v2 record batches are"),
    Rule("batch.too_small",
         "Record batch is corrupt (the size {a0} is smaller than the minimum allowed overhead {a1})",
         True, False),
    Rule("batch.crc_mismatch", "Record is corrupt (stored crc = {a0}, computed crc = {a1})", True, False),
    Rule("batch.unknown_codec", "Unknown compression type id: {a0}", True, False,
         "Kafka answers UNKNOWN_SERVER_ERROR for this data error"),
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
)

FIELDS = ("length", "attributes", "timestampDelta", "offsetDelta", "keyLength", "key", "valueLength",
          "value", "headerCount", "header key length", "header key", "header value length",
          "header value")

BY_ID = {rule.id: rule for rule in RULES}


def render(rule: Rule, args, tp: str) -> tuple[str, str]:
    """Kafka-style message and pykbatch's detail for one fault."""
    a0, a1, a2 = args
    field = FIELDS[a0] if rule.id in ("record.invalid_structure", "record.varint_too_long") \
        and 0 <= a0 < len(FIELDS) else ""
    values = dict(a0=a0, a1=a1, a2=a2, tp=tp, field=field)
    return rule.template.format(**values), rule.detail.format(**values)
