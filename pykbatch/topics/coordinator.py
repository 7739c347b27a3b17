"""Coordinator records: the keys and values of ``__consumer_offsets`` (classic groups, KIP-848
consumer groups, share and streams groups), ``__transaction_state`` and ``__share_group_state``.

A key is an int16 record type (the api key of a ``coordinator-key`` definition) and that key
message (version 0); a value is an int16 version and the ``coordinator-value`` message of the same
type at that version; a null value is a tombstone.  ``dump_parts`` prints them as kafka-dump-log's
decoders do: ``{"type":"1","data":{...}}`` / ``{"version":"4","data":{...}}`` / ``<DELETE>``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from pykbatch.kafka import definitions
from pykbatch.kafka.definitions import MessageFormatError
from pykbatch.kafka.jackson import jackson

OFFSETS, TRANSACTIONS, SHARE_STATE = "__consumer_offsets", "__transaction_state", "__share_group_state"


class UnknownRecordType(MessageFormatError):
    """A key whose record type is not one of this topic's."""


@dataclass(frozen=True)
class CoordinatorRecord:
    topic: str
    record_type: int
    key_name: str
    key: dict
    value_version: int | None  # None: a tombstone
    value_name: str | None
    value: dict | None

    @property
    def tombstone(self) -> bool:
        return self.value is None


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise MessageFormatError(f"no {what} version: {len(data)} byte(s)", 0,
                                 f"Could not read version from {what}'s buffer.")
    return struct.unpack_from(">h", data)[0]


def _read(schema: definitions.MessageSchema, data: bytes, version: int, what: str, named: int | None = None) -> dict:
    """The message after the int16 prefix; ``named``: the version Kafka's message names (a key's
    record type)."""
    try:
        fields, end = schema.decode(data, 2, version)
    except MessageFormatError as exc:
        # the JVM's reader runs out of buffer with a BufferUnderflowException, whose message is null
        cause = "null" if "remain" in exc.message or "past the end" in exc.message else exc.message
        raise MessageFormatError(exc.message, exc.offset,
                                 f"Could not read record with version {version if named is None else named} "
                                 f"from {what}'s buffer due to: {cause}.") from None
    return fields


def decode_coordinator(topic: str, key: bytes | None, value: bytes | None) -> CoordinatorRecord:
    """One record of ``topic`` (OFFSETS, TRANSACTIONS or SHARE_STATE)."""
    record_type, key_name, key_fields, _ = _key(topic, key)
    if value is None:
        return CoordinatorRecord(topic, record_type, key_name, key_fields, None, None, None)
    value_schema = definitions.by_api_key(topic, "coordinator-value")[record_type]
    version = _version(value, "value")
    return CoordinatorRecord(topic, record_type, key_name, key_fields, version, value_schema.name,
                             _read(value_schema, value, version, "value"))


_KEYS: dict = {}  # (topic, key bytes) -> decoded key: keys repeat (a group's partitions are committed again and again)


def _key(topic: str, key: bytes | None) -> tuple:
    """(record type, key definition's name, fields, Kafka's JSON text) of a key, decoded once."""
    known = _KEYS.get((topic, key))
    if known is not None:
        return known
    if key is None:  # Kafka's tool dies here (RuntimeException); the dump goes on
        raise MessageFormatError("a coordinator record has a key; this one is null", 0,
                                 "the record has no key (Kafka's tool stops here: \"message had a missing key\")")
    record_type = _version(key, "key")
    keys = definitions.by_api_key(topic, "coordinator-key")
    if record_type not in keys:
        raise UnknownRecordType(f"record type {record_type} is not one of {topic}'s", 0,
                                f"Unknown record type {record_type}")
    schema = keys[record_type]
    fields = _read(schema, key, 0, "key", named=record_type)
    decoded = (record_type, schema.name, fields, jackson(_key_document(schema, record_type, fields)))
    if len(_KEYS) > 65536:
        _KEYS.clear()
    _KEYS[(topic, bytes(key))] = decoded
    return decoded


def _key_document(schema: definitions.MessageSchema, record_type: int, fields: dict) -> dict:
    return {"type": str(record_type), "data": schema.to_json(fields, 0)}


def key_json(record: CoordinatorRecord) -> dict:
    schema = definitions.by_api_key(record.topic, "coordinator-key")[record.record_type]
    return _key_document(schema, record.record_type, record.key)


def value_json(record: CoordinatorRecord) -> dict | None:
    if record.value is None:
        return None
    schema = definitions.by_api_key(record.topic, "coordinator-value")[record.record_type]
    data = schema.to_json(record.value, record.value_version)
    if record.value_name == "GroupMetadataValue" and data.get("protocolType") == "consumer":
        for member in data.get("members") or ():
            _embedded(member, "subscription", "ConsumerProtocolSubscription")
            _embedded(member, "assignment", "ConsumerProtocolAssignment")
    return {"version": str(record.value_version), "data": data}


def _embedded(member: dict, field: str, definition: str) -> None:
    """A consumer-protocol member's subscription / assignment bytes replaced by their decoded
    form (int16 version, then the message), as Kafka's tool does; kept as bytes if they do not decode."""
    raw = member.get(field)
    if raw is None:
        return
    try:
        version = _version(raw, field)
        schema = definitions.load(definition)
        fields, _ = schema.decode(raw, 2, version)
        member[field] = schema.to_json(fields, version)
    except (MessageFormatError, ValueError):
        pass


def dump_parts(topic: str, record) -> tuple[str | None, str | None]:
    """(key, payload) as kafka-dump-log's decoder of ``topic`` prints a record."""
    try:
        decoded = decode_coordinator(topic, record.key, record.value)
    except UnknownRecordType as exc:
        return f"{exc.kafka_message} at offset {record.offset}, skipping.", None
    except MessageFormatError as exc:
        return f"Error at offset {record.offset}, skipping. {exc.kafka_message or exc.message}", None
    value = value_json(decoded)
    return _key(topic, record.key)[3], "<DELETE>" if value is None else jackson(value)
