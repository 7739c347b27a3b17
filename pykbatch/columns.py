"""The Arrow types of pykbatch's columns, each written once.

A batch header's fields and a decoded record's fields, named as the ``Batch`` / ``Record``
attributes they come from, with their Arrow types.  Every columnar output is a selection of these
names in its own order: ``to_arrow``'s table, the Spark functions' structs (``pykbatch.arrow``),
the ``kafka-segment`` source's rows and the dump's JSON objects.
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
}
"""What a read of log files can add to its rows: the file, the leader epoch the tiered lineage
gives the offset, and the batch's verdict (null ``batch_error``: it passed)."""

SPARK_KAFKA: dict[str, pa.DataType] = {
    "key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(), "offset": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestampType": pa.int32(), "headers": pa.list_(HEADER),
}
"""The columns of Spark's own Kafka source, named and typed as it does (``timestamp`` a
TimestampType, ``timestampType`` Kafka's id: -1 none, 0 CreateTime, 1 LogAppendTime): the
``kafka-segment`` source's records carry them first, so one source can stand in for the other."""

TIMESTAMP_TYPE_IDS = {name: i for i, name in enumerate(TIMESTAMP_TYPES)} | {NO_TIMESTAMP_TYPE: -1}
"""Kafka's ``TimestampType.id`` of each ``timestamp_type`` name."""


def fields(types: dict[str, pa.DataType], names: str) -> list[pa.Field]:
    """The fields ``names`` (space-separated) with their types from ``types``."""
    return [pa.field(name, types[name]) for name in names.split()]
