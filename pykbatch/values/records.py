"""Record by record: a record's key and value decoded as their schemas say, as the dump prints
them (``pykbatch dump --value-decoder confluent``): the decoded value as JSON, or the culprit's
rule, byte and message in its place."""
from __future__ import annotations

import base64
import datetime
import decimal
import json

from pykbatch.values.decode import ValueCulprit, decode_values
from pykbatch.values.registry import as_registry


def _plain(v):
    """A decoded Python value as JSON can hold it."""
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


class RegistryParser:
    """The dump's record parser for Confluent-framed keys and/or values: ``(key, payload)`` as
    JSON text; each value that cannot be read prints its culprit and is kept in ``culprits``
    (with the record's offset in ``offsets``)."""

    def __init__(self, registry, keys: bool = False, values: bool = True):
        self.registry = as_registry(registry)
        self.keys, self.values = keys, values
        self.culprits: list[ValueCulprit] = []
        self.offsets: list[int] = []

    def decode(self, data: bytes | None, column: str, offset: int) -> str | None:
        if data is None:
            return None
        got = decode_values([data], self.registry, column=column)
        if got.culprits:
            c = got.culprits[0]
            self.culprits.append(c)
            self.offsets.append(offset)
            return f"<{c.rule} ({c.code}) at byte {c.position}: {c.message}>"
        return json.dumps(_plain(got.values.to_pylist(maps_as_pydicts="lossy")[0]), ensure_ascii=False,
                          separators=(",", ":"))

    def __call__(self, r):
        key = self.decode(r.key, "key", r.offset) if self.keys else (None if r.key is None else r.key.decode("utf-8", "replace"))
        value = self.decode(r.value, "value", r.offset) if self.values else (
            None if r.value is None else r.value.decode("utf-8", "replace"))
        return key, value
