"""Internal topics as Arrow tables: one row per record, one column per field.

    table = internal.tables.record_table(segment_bytes, "OffsetCommit")     # group, topic, partition, offset ...
    table = internal.tables.json_table(segment_bytes, "__consumer_offsets")  # every type, Kafka's JSON

``record_table`` flattens one record type (a coordinator key + value pair such as ``OffsetCommit``,
``GroupMetadata``, ``TransactionLog``; or a metadata record such as ``TopicRecord``): its key's and
value's fields (every version's, absent ones null) in snake_case, after ``log_offset``,
``log_timestamp``, ``value_version`` and ``tombstone`` (a coordinator record whose value is null:
the group's or transaction's entry was deleted).  Records of other types are left out; a record
that does not decode becomes an ``errors`` entry naming its offset, type and version — never a
crash.  Uuids are Kafka's 22-character text, as its tools print them.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from pykbatch._native import iter_batches
from pykbatch.columns import INTERNAL_RECORD, KAFKA_FIELD_TYPES, fields
from pykbatch.kafka import definitions, jackson
from pykbatch.kafka.definitions import MessageFormatError

from pykbatch.topics import cluster_metadata, coordinator

LEADING = fields(INTERNAL_RECORD, "log_offset log_timestamp value_version tombstone")


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def arrow_type(f: definitions.Field) -> pa.DataType:
    if f.type.startswith("[]"):
        element = definitions.Field(f.name, f.element, f.versions, f.nullable, f.tagged, None, None, f.fields)
        return pa.list_(arrow_type(element))
    if f.fields:
        return pa.struct([pa.field(snake(s.name), arrow_type(s)) for s in f.fields])
    return KAFKA_FIELD_TYPES[f.type]


def _plain(f: definitions.Field, v):
    """A decoded value as Arrow takes it: uuids as Kafka's text, structs with snake_case keys."""
    if v is None:
        return None
    if f.type.startswith("[]"):
        element = definitions.Field(f.name, f.element, f.versions, f.nullable, f.tagged, None, None, f.fields)
        return [_plain(element, x) for x in v]
    if f.fields:
        return {snake(s.name): _plain(s, v.get(s.name)) for s in f.fields}
    if isinstance(v, uuid.UUID):
        return definitions.kafka_uuid(v)
    return v


@dataclass(frozen=True)
class RecordError:
    """A record that did not decode: its log offset, its record type and version when known."""
    log_offset: int
    record_type: int | None
    version: int | None
    message: str


@dataclass(frozen=True)
class RecordType:
    """How one record type is found and laid out: the topic, its key and value definitions."""
    topic: str
    key: definitions.MessageSchema | None  # None: a framed metadata record (no key)
    value: definitions.MessageSchema

    def columns(self) -> list[tuple[str, definitions.Field, str]]:
        out = []
        for part, schema in (("key", self.key), ("value", self.value)):
            for f in (schema.fields if schema else ()):
                out.append((snake(f.name), f, part))
        seen, unique = set(), []
        for name, f, part in out:  # a value field named like a key field keeps the key's name
            if name in seen or name in {c.name for c in LEADING}:
                name = f"{part}_{name}"
            seen.add(name)
            unique.append((name, f, part))
        return unique

    def schema(self) -> pa.Schema:
        return pa.schema(LEADING + [pa.field(name, arrow_type(f)) for name, f, _ in self.columns()])


def record_type(name: str) -> RecordType:
    """A record type by name: ``OffsetCommit`` (key OffsetCommitKey, value OffsetCommitValue),
    ``TransactionLog``, ``ConsumerGroupMetadata``...; or a metadata record, ``TopicRecord``."""
    for topic in (coordinator.OFFSETS, coordinator.TRANSACTIONS, coordinator.SHARE_STATE):
        keys = {s.name: s for s in definitions.by_api_key(topic, "coordinator-key").values()}
        if name + "Key" in keys:
            key = keys[name + "Key"]
            return RecordType(topic, key, definitions.by_api_key(topic, "coordinator-value")[key.api_key])
    for schema in definitions.by_api_key(cluster_metadata.TOPIC).values():
        if schema.name == name:
            return RecordType(cluster_metadata.TOPIC, None, schema)
    raise ValueError(f"no internal record type {name!r}")


def _records(data) -> Iterator:
    for batch in iter_batches(data):
        if batch.is_control:
            continue
        for r in batch:
            yield r


ALIASES = {"offsets": "OffsetCommit", "group-metadata": "GroupMetadata", "transactions": "TransactionLog"}
ERROR_COLUMN = fields(INTERNAL_RECORD, "decode_error")[0]


def record_table(data, name: str, error_rows: bool = False) -> tuple[pa.Table, list[RecordError]]:
    """The records of type ``name`` (or an alias: ``ALIASES``) in the log bytes ``data``, and the
    records that did not decode; ``error_rows``: those also as rows (only ``log_offset``,
    ``log_timestamp`` and a ``decode_error`` column set), so a table user sees them."""
    name = ALIASES.get(name, name)
    k = record_type(name)
    cols = k.columns()
    rows = {c.name: [] for c in LEADING} | {n: [] for n, _, _ in cols}
    errors: list = []
    for r in _records(data):
        try:
            if k.key is not None:
                rec = coordinator.decode_coordinator(k.topic, r.key, r.value)
                if rec.record_type != k.key.api_key:
                    continue
                key, value, version = rec.key, rec.value, rec.value_version
            else:
                meta = cluster_metadata.decode_metadata(r.value)
                if meta.schema is not k.value:
                    continue
                key, value, version = {}, meta.fields, meta.version
        except coordinator.UnknownRecordType:
            continue  # another topic's record: not this table's
        except MessageFormatError as exc:
            errors.append((_error(r, exc), r))
            continue
        rows["log_offset"].append(r.offset)
        rows["log_timestamp"].append(r.timestamp)
        rows["value_version"].append(version)
        rows["tombstone"].append(value is None)
        for n, f, part in cols:
            source = key if part == "key" else value
            present = source is not None and (version is None or part == "key" or version in f.versions)
            rows[n].append(_plain(f, source.get(f.name)) if present else None)
    schema = k.schema()
    if error_rows:
        schema = schema.append(ERROR_COLUMN)
        rows["decode_error"] = [None] * len(rows["log_offset"])
        for e, r in errors:
            for f in schema:
                rows[f.name].append({"log_offset": r.offset, "log_timestamp": r.timestamp, "tombstone": False,
                                     "decode_error": f"type {e.record_type} version {e.version}: {e.message}"}.get(f.name))
    return pa.table([pa.array(rows[f.name], f.type) for f in schema], schema=schema), [e for e, _ in errors]


def _error(r, exc: MessageFormatError) -> RecordError:
    type_id = version = None  # the key's int16 record type and the value's int16 version, where present
    if r.key is not None and len(r.key) >= 2:
        type_id = int.from_bytes(r.key[:2], "big", signed=True)
    if r.value is not None and len(r.value) >= 2:
        version = int.from_bytes(r.value[:2], "big", signed=True)
    return RecordError(r.offset, type_id, version, exc.kafka_message or exc.message)


def json_table(data, topic: str) -> tuple[pa.Table, list[RecordError]]:
    """Every record of an internal topic's log bytes: its type, version and Kafka's JSON of key
    and value (as kafka-dump-log's decoder prints them)."""
    out = {"log_offset": [], "log_timestamp": [], "record_type": [], "value_version": [], "tombstone": [],
           "key": [], "value": []}
    errors = []
    for r in _records(data):
        try:
            if topic == cluster_metadata.TOPIC:
                meta = cluster_metadata.decode_metadata(r.value)
                out["record_type"].append(meta.type_name)
                out["value_version"].append(meta.version)
                out["tombstone"].append(False)
                out["key"].append(None)
                out["value"].append(jackson.jackson(meta.schema.to_json(meta.fields, meta.version)))
            else:
                rec = coordinator.decode_coordinator(topic, r.key, r.value)
                value = coordinator.value_json(rec)
                out["record_type"].append(rec.key_name[:-len("Key")])
                out["value_version"].append(rec.value_version)
                out["tombstone"].append(rec.value is None)
                out["key"].append(jackson.jackson(coordinator.key_json(rec)["data"]))
                out["value"].append(None if value is None else jackson.jackson(value["data"]))
        except MessageFormatError as exc:
            errors.append(_error(r, exc))
            continue
        out["log_offset"].append(r.offset)
        out["log_timestamp"].append(r.timestamp)
    return pa.table({k: pa.array(v, INTERNAL_RECORD[k]) for k, v in out.items()}), errors
