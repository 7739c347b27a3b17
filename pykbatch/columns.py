"""The Arrow types of pykbatch's columns, each written once.

A batch header's fields and a decoded record's fields, named as the ``Batch`` / ``Record``
attributes they come from, with their Arrow types.  Every columnar output is a selection of these
names in its own order: ``to_arrow``'s table, the Spark functions' structs (``pykbatch.arrow``),
the ``kafka-segment`` source's rows and the dump's JSON objects.  The result structs of the column
functions and the internal-topic tables' columns are declared here too: no other module builds an
Arrow schema from a literal type (``tests/test_layers.py``).
"""
from __future__ import annotations

import pyarrow as pa

from pykbatch._catalogue import NO_TIMESTAMP_TYPE, TIMESTAMP_TYPES as _TYPES

HEADER = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
"""One record header: key (UTF-8, never null) and value (binary, nullable)."""

TIMESTAMP_TYPES = _TYPES + (NO_TIMESTAMP_TYPE,)
"""``timestamp_type`` values: by attribute bit 3, then magic 0's (which has none)."""

BATCH: dict[str, pa.DataType] = {
    "position": pa.int64(), "size": pa.int64(), "magic": pa.int8(), "base_offset": pa.int64(),
    "last_offset": pa.int64(), "record_count": pa.int32(), "compression": pa.string(),
    "timestamp_type": pa.string(), "max_timestamp": pa.int64(), "producer_id": pa.int64(),
    "producer_epoch": pa.int16(), "base_sequence": pa.int32(), "last_sequence": pa.int32(),
    "partition_leader_epoch": pa.int32(), "is_transactional": pa.bool_(), "is_control": pa.bool_(),
    "delete_horizon_ms": pa.int64(), "crc": pa.int64(), "is_valid": pa.bool_(),
}
"""Every field of an entry's header (v0/v1 messages carry Kafka's "none" values in the v2 ones)."""

RECORD: dict[str, pa.DataType] = {
    "offset": pa.int64(), "timestamp": pa.int64(), "key": pa.binary(), "value": pa.binary(),
    "headers": pa.list_(HEADER), "sequence": pa.int32(), "batch_index": pa.int32(), "batch_position": pa.int64(),
    "base_offset": pa.int64(), "partition_leader_epoch": pa.int32(), "producer_id": pa.int64(),
    "producer_epoch": pa.int16(), "is_transactional": pa.bool_(), "is_control": pa.bool_(),
    "timestamp_type": pa.string(),
}
"""Every field of a decoded record: its own, then its batch's (``batch_index``: the entry's number
in the input, ``batch_position``: its byte position there)."""

LOCATION: dict[str, pa.DataType] = {"topic": pa.string(), "partition": pa.int32(), "segment": pa.int64()}
"""Where a row read from log files comes from (the segment's base offset)."""

READ: dict[str, pa.DataType] = {
    "path": pa.string(), "leader_epoch": pa.int32(), "batch_ok": pa.bool_(), "batch_error": pa.string(),
    "error_rule": pa.string(), "error_code": pa.int16(), "lost_bytes": pa.int64(), "lost_first_offset": pa.int64(),
    "lost_last_offset": pa.int64(),
}
"""What a read of log files can add to its rows: the file, the leader epoch the tiered lineage
gives the offset, and the batch's verdict (null ``batch_error``: it passed; ``error_rule`` and
``error_code``: the rule and Kafka code of its first culprit).  A row whose ``lost_bytes`` is not
null is no record: a range whose records cannot be read (``lost_bytes`` of the file from
``batch_position``; 0 for offsets missing with no bytes left of them), the offsets it hides in
``lost_first_offset`` / ``lost_last_offset`` where they can be known."""

SPARK_KAFKA: dict[str, pa.DataType] = {
    "key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(), "offset": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestampType": pa.int32(), "headers": pa.list_(HEADER),
}
"""The columns of Spark's own Kafka source, named and typed as it does (``timestamp`` a
TimestampType, ``timestampType`` Kafka's id: -1 none, 0 CreateTime, 1 LogAppendTime): the
``kafka-segment`` source's records carry them first, so one source can stand in for the other."""

TABLE_TIMESTAMP_TYPE = pa.dictionary(pa.int8(), pa.string())
"""``timestamp_type`` in ``to_arrow``'s table: dictionary-encoded (three values)."""

VIEWS: dict[str, pa.DataType] = {"key": pa.binary_view(), "value": pa.binary_view()}
"""Keys and values as views into the input (``to_arrow(..., views=True)``)."""

TO_ARROW_COLUMNS = ("offset", "timestamp", "key", "value", "headers", "sequence", "batch_index", "batch_position",
                    "base_offset", "partition_leader_epoch", "producer_id", "producer_epoch", "is_transactional",
                    "is_control", "timestamp_type")
RECORDS = pa.schema([(name, dict(RECORD, timestamp_type=TABLE_TIMESTAMP_TYPE)[name]) for name in TO_ARROW_COLUMNS])
"""``to_arrow``'s table: every record field (``RECORD``), ``timestamp_type`` dictionary-encoded."""
RECORDS_VIEWS = pa.schema([(f.name, VIEWS.get(f.name, f.type)) for f in RECORDS])
"""The same with keys and values as views (``to_arrow(..., zero_copy=True)``)."""
RECORDS_SPARK_TIME = pa.schema([("timestamp", SPARK_KAFKA["timestamp"]) if f.name == "timestamp" else
                                ("timestampType", SPARK_KAFKA["timestampType"]) if f.name == "timestamp_type" else f
                                for f in RECORDS])
"""``to_arrow(..., spark_time=True)``: ``timestamp`` and ``timestampType`` as Spark's Kafka source's."""
RECORDS_SPARK_TIME_VIEWS = pa.schema([(f.name, VIEWS.get(f.name, f.type)) for f in RECORDS_SPARK_TIME])

ROW_ID: dict[str, pa.DataType] = {"id": pa.int64()}
"""The input row's id that Spark's ``kbatch_records`` table function carries beside each record."""

# -- what the column functions (pykbatch.arrow, the Spark UDFs) return --------------------------
ERROR_RECORD = pa.struct([("batch_index", pa.int32()), ("message", pa.string())])
"""One of KIP-467's ``error_records``."""
CULPRIT = pa.struct([
    ("entry", pa.int32()), ("record_index", pa.int32()), ("relative_offset", pa.int64()),
    ("code", pa.int32()), ("name", pa.string()), ("rule", pa.string()), ("position", pa.int64()),
    ("entry_position", pa.int64()), ("message", pa.string()), ("detail", pa.string()), ("kafka", pa.bool_()),
])
"""A ``Culprit``."""
VALIDATION = pa.struct([
    ("ok", pa.bool_()), ("error_code", pa.int32()), ("error_name", pa.string()),
    ("error_message", pa.string()), ("error_records", pa.list_(ERROR_RECORD)),
    ("culprits", pa.list_(CULPRIT)), ("culprit_count", pa.int64()), ("records", pa.int64()),
    ("truncated_tail_position", pa.int64()),
])
"""A ``ValidationResult`` with KIP-467's fields."""
DROPPED = pa.struct([
    ("entry", pa.int32()), ("record_index", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()),
    ("value", pa.binary()), ("code", pa.int32()), ("rules", pa.list_(pa.string())), ("message", pa.string()),
])
"""A ``DroppedRecord``."""
REPAIR = pa.struct([("data", pa.binary()), ("dropped", pa.list_(DROPPED)), ("unrepairable_batches", pa.int32())])
"""A ``Repair``: the rebuilt bytes and what was left out."""

# -- the internal topics' tables (pykbatch.topics.tables) ---------------------------------------
KAFKA_FIELD_TYPES: dict[str, pa.DataType] = {
    "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "uint16": pa.uint16(), "int32": pa.int32(),
    "uint32": pa.uint32(), "int64": pa.int64(), "float64": pa.float64(), "string": pa.string(),
    "bytes": pa.binary(), "records": pa.binary(), "uuid": pa.string(),
}
"""The Arrow type of each scalar type of Kafka's message definitions (uuids as Kafka's text)."""
INTERNAL_RECORD: dict[str, pa.DataType] = {
    "log_offset": pa.int64(), "log_timestamp": pa.int64(), "record_type": pa.string(), "value_version": pa.int16(),
    "tombstone": pa.bool_(), "key": pa.string(), "value": pa.string(), "decode_error": pa.string(),
}
"""An internal topic's record as a row: where it is in the log, its type and version, and its key
and value as the JSON Kafka's tools print (or, per field, the definition's columns)."""

TIMESTAMP_TYPE_IDS = {name: i for i, name in enumerate(TIMESTAMP_TYPES)} | {NO_TIMESTAMP_TYPE: -1}
"""Kafka's ``TimestampType.id`` of each ``timestamp_type`` name."""


def fields(types: dict[str, pa.DataType], names: str) -> list[pa.Field]:
    """The fields ``names`` (space-separated) with their types from ``types``."""
    return [pa.field(name, types[name]) for name in names.split()]


CONSUMED: list[pa.Field] = fields(SPARK_KAFKA, "key value topic partition offset timestamp timestampType headers") \
    + fields(READ, "leader_epoch")
"""A live reader's records (``pykbatch.live``): Spark's Kafka source's columns, then the leader
epoch of the batch each came in."""


# ---- values decoded as their schemas say (pykbatch/values/) ----
# Avro's types as Arrow types (the physical type, then a logical annotation that changes it);
# records, arrays, maps and unions are built from these by pykbatch/values/avro_program.py.
AVRO_PRIMITIVE = {
    "null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
    "double": pa.float64(), "bytes": pa.binary(), "string": pa.string(),
}
AVRO_LOGICAL = {
    "date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"), "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"), "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"), "local-timestamp-nanos": pa.timestamp("ns"),
    "uuid": pa.string(),  # a uuid on a string is its text; on a fixed(16) its bytes (AVRO_FIXED)
}
AVRO_ENUM_INDEX = pa.int32()
"""An enum's column: dictionary indices into its symbols."""


def avro_decimal(precision: int, scale: int) -> pa.DataType:
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def avro_fixed(size: int) -> pa.DataType:
    return pa.binary(size)


AVRO_ENUM = pa.dictionary(AVRO_ENUM_INDEX, pa.string())
"""An enum: its symbols as the dictionary."""


def avro_map(values: pa.DataType) -> pa.DataType:
    return pa.map_(pa.string(), values)


VALUE_CULPRIT = pa.struct([
    ("row", pa.int64()), ("column", pa.string()), ("schema_id", pa.string()), ("rule", pa.string()),
    ("code", pa.int16()), ("position", pa.int64()), ("message", pa.string()),
])
"""A value (or key) that could not be read as its schema says: its row, the rule, the byte
(``schema_id``: a registry's id as text, or an AWS Glue schema version's UUID)."""

# Protobuf's scalar field types (FieldDescriptorProto.Type numbers, descriptor.proto) as Arrow
# types; enums are their value names, messages structs (pykbatch/values/protobuf_values.py).
PROTOBUF_SCALAR = {
    1: pa.float64(), 2: pa.float32(), 3: pa.int64(), 4: pa.uint64(), 5: pa.int32(), 6: pa.uint64(), 7: pa.uint32(),
    8: pa.bool_(), 9: pa.string(), 12: pa.binary(), 13: pa.uint32(), 14: pa.string(), 15: pa.int32(), 16: pa.int64(),
    17: pa.int32(), 18: pa.int64(),
}

# JSON Schema's types as Arrow types (pykbatch/values/json_values.py); a value of no single type
# (oneOf, anyOf, an object without properties) is kept as its JSON text.
JSON_SCHEMA_SCALAR = {"integer": pa.int64(), "number": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
                      "null": pa.null()}
JSON_TEXT = pa.string()
