"""AWS Glue Schema Registry: its wire format (byte 0 the header version 3, byte 1 the compression --
0 none, 5 zlib -- then the schema version's 16-byte UUID and the datum) and its schema versions,
read with boto3's Glue client (credentials, region and endpoint as boto3 finds them).

``decode_values(..., framing="glue", registry=GlueSchemaRegistry(...))`` turns each distinct UUID
into a small id and from there decodes as for Confluent's framing; a zlib-compressed datum is
inflated first, bounded (``MAX_INFLATED`` bytes a value), and one that does not inflate is a
culprit (``value.compressed_invalid``)."""
from __future__ import annotations

import threading
import uuid
import zlib

import numpy as np
import pyarrow as pa

from pykbatch.values.registry import RegisteredSchema, RegistryError, RegistryUnavailable

HEADER = 18              # version, compression, UUID
COMPRESSION_ZLIB = 5
MAX_INFLATED = 64 << 20  # a value that inflates past this is refused, not allocated

_CACHE: dict[tuple[str, str], RegisteredSchema | None] = {}
_LOCK = threading.Lock()


class GlueSchemaRegistry:
    """Schema versions by UUID (``get_schema_version``), cached for the process."""

    def __init__(self, client=None, **boto3_kwargs):
        if client is None:
            import boto3
            client = boto3.client("glue", **boto3_kwargs)
        self.client = client
        self.url = getattr(getattr(client, "meta", None), "endpoint_url", None) or "glue"

    def __repr__(self) -> str:
        return f"GlueSchemaRegistry({self.url!r})"

    def schema_version(self, version_id: str) -> RegisteredSchema | None:
        key = (self.url, version_id)
        if key in _CACHE:
            return _CACHE[key]
        try:
            answer = self.client.get_schema_version(SchemaVersionId=version_id)
        except Exception as e:  # botocore's errors, by their codes
            code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
            if code == "EntityNotFoundException":
                found = None
            elif code in ("AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException"):
                raise RegistryError(f"Glue refused get_schema_version: {code}") from None
            elif code:
                raise RegistryUnavailable(f"Glue get_schema_version {version_id}: {code}") from None
            else:
                raise RegistryUnavailable(f"Glue get_schema_version {version_id}: {e}") from None
        else:
            found = RegisteredSchema(None, answer["SchemaDefinition"], answer.get("DataFormat", "AVRO"),
                                     subject=answer.get("SchemaArn"), version=answer.get("VersionNumber"))
        with _LOCK:
            _CACHE[key] = found
        return found

    def referenced(self, schema: RegisteredSchema) -> list:
        return []

    def latest(self, subject: str):
        return None


def frame_ids(arr: pa.Array, framed: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each framed row's schema version as a small id (its UUID's place in the returned list)."""
    offsets, data = _buffers(arr)
    rows = np.flatnonzero(framed)
    ids = np.full(len(arr), -1, np.int64)
    if not len(rows):
        return ids, []
    starts = offsets[rows] + 2
    raw = data[starts[:, None] + np.arange(16)]
    keys = raw.view(np.dtype((np.void, 16))).ravel()
    distinct, index = np.unique(keys, return_inverse=True)
    ids[rows] = index
    return ids, [str(uuid.UUID(bytes=bytes(k))) for k in distinct]


def compressed_rows(arr: pa.Array, framed: np.ndarray) -> np.ndarray:
    offsets, data = _buffers(arr)
    rows = np.flatnonzero(framed)
    return rows[data[offsets[rows] + 1] == COMPRESSION_ZLIB] if len(rows) else rows


def inflate(value: bytes) -> bytes:
    """The datum of a zlib-compressed value, reframed as uncompressed; ValueError when it does
    not inflate or inflates past MAX_INFLATED."""
    d = zlib.decompressobj()
    out = d.decompress(value[HEADER:], MAX_INFLATED)
    if d.unconsumed_tail or not d.eof:
        raise ValueError("not a complete zlib stream" if not d.unconsumed_tail else
                         f"it inflates past {MAX_INFLATED} bytes")
    return value[:1] + b"\0" + value[2:HEADER] + out


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    wide = pa.types.is_large_binary(arr.type)
    _, off, data = arr.buffers()[:3]
    offsets = np.frombuffer(off, np.int64 if wide else np.int32)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    return offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
