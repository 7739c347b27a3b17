"""Records framed as Kafka's ``AbstractApiMessageSerde`` frames them (the KRaft metadata log,
remote log metadata): unsigned varints frame version (1), api key, version; then the message.  The
failures carry Kafka's own texts, which its dump tool prints."""
from __future__ import annotations

from pykbatch.kafka.definitions import MessageFormatError, MessageSchema, Reader, by_api_key, uvarint_bytes


FRAME_VERSION = 1
_NULL_VALUE = ('Cannot invoke "java.nio.ByteBuffer.remaining()" because the return value of '
               '"org.apache.kafka.common.record.internal.Record.value()" is null')


def _frame_field(reader: "Reader", entity: str) -> int:
    at = reader.pos
    try:
        value = reader.uvarint(entity)
    except MessageFormatError as exc:
        raise MessageFormatError(exc.message, exc.offset, f"Error while reading {entity}") from None
    if value > 0x7FFF:
        raise MessageFormatError(f"{entity} {value} does not fit a short", at, f"Value for {entity} was too large.")
    return value


def decode_framed(value: bytes | None, topic: str) -> tuple[MessageSchema, int, dict]:
    """A framed record value of an internal topic: (its definition, version, fields)."""
    if value is None:
        raise MessageFormatError("a framed record has a value; this one is null", 0, _NULL_VALUE)
    reader = Reader(memoryview(value), 0, len(value), True)
    frame = _frame_field(reader, "frame version")
    if frame == 0:
        raise MessageFormatError("frame version 0 (KRaft's 2.8 preview) is not readable", 0,
                                 "Could not deserialize metadata record with frame version 0. Note that upgrades "
                                 "from the preview release of KRaft in 2.8 to newer versions are not supported.")
    if frame != FRAME_VERSION:
        raise MessageFormatError(f"unknown frame version {frame}", 0,
                                 f"Could not deserialize metadata record due to unknown frame version {frame}"
                                 f"(only frame version {FRAME_VERSION} is supported)")
    at = reader.pos
    api_key = _frame_field(reader, "type")
    version = _frame_field(reader, "version")
    schema = by_api_key(topic).get(api_key)
    if schema is None:
        raise MessageFormatError(f"unknown {topic} record type {api_key}", at,
                                 f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}")
    try:
        fields, end = schema.decode(value, reader.pos, version)
    except MessageFormatError as exc:
        raise MessageFormatError(exc.message, exc.offset, f"Failed to deserialize record with type {api_key}") from None
    if end != len(value):
        text = f"Found {len(value) - end} byte(s) of garbage after {api_key}"
        raise MessageFormatError(text, end, text)
    return schema, version, fields


def encode_framed(schema: MessageSchema, fields: dict, version: int = 0) -> bytes:
    return uvarint_bytes(FRAME_VERSION) + uvarint_bytes(schema.api_key) + uvarint_bytes(version) + schema.encode(fields, version)
