"""Record by record: a record's key and value decoded as their schemas say, as the dump prints
them (``pykbatch dump --value-decoder confluent``): the decoded value as JSON, or the culprit's
rule, byte and message in its place."""
from __future__ import annotations

import base64
import datetime
import decimal
import json

from pykbatch.errors import KafkaDataError
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

    def __init__(self, registry, keys: bool = False, values: bool = True, on_culprit=None):
        self.registry = as_registry(registry)
        self.keys, self.values = keys, values
        self.on_culprit = on_culprit  # called as culprits are found (the command's verdict, before printing)
        self.culprits: list[ValueCulprit] = []
        self.offsets: list[int] = []
        self._texts: dict[tuple[str, int], str | None] = {}  # this batch's, decoded as a column

    def begin_batch(self, batch) -> None:
        """Decodes a batch's keys and values a column at a time (the dump calls this before its
        records; a batch whose records do not read is left to the record-by-record path)."""
        self._texts = {}
        records = [r for r in batch.readable() if not isinstance(r, KafkaDataError)]  # the dump reports the rest
        for column, wanted in (("key", self.keys), ("value", self.values)):
            if wanted:
                data = [getattr(r, column) for r in records]
                texts = self._decode(data, column, [r.offset for r in records])
                self._texts.update({(column, r.offset): t for r, t in zip(records, texts)})

    def _decode(self, data: list, column: str, offsets: list[int]) -> list[str | None]:
        got = decode_values(data, self.registry, column=column)
        out = [None if v is None else json.dumps(_plain(v), ensure_ascii=False, separators=(",", ":"))
               for v in got.values.to_pylist(maps_as_pydicts="lossy")]
        if got.culprits and self.on_culprit is not None:
            self.on_culprit()
        for c in got.culprits:
            self.culprits.append(c)
            self.offsets.append(offsets[c.row])
            out[c.row] = f"<{c.rule} ({c.code}) at byte {c.position}: {c.message}>"
        return out

    def decode(self, data: bytes | None, column: str, offset: int) -> str | None:
        if data is None:
            return None
        if (column, offset) in self._texts:
            return self._texts.pop((column, offset))
        return self._decode([data], column, [offset])[0]

    def __call__(self, r):
        key = self.decode(r.key, "key", r.offset) if self.keys else (None if r.key is None else r.key.decode("utf-8", "replace"))
        value = self.decode(r.value, "value", r.offset) if self.values else (
            None if r.value is None else r.value.decode("utf-8", "replace"))
        return key, value
