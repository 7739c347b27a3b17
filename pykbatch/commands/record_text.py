"""Records as ``pykbatch consume`` prints them, in the forms Kafka users already read: the console
consumer's (``--property print.key=true`` ...: Kafka's DefaultMessageFormatter), kcat's ``-f``
format string, or JSON lines.  Each formatter takes a ``ConsumedRecord`` and gives the bytes of
its line (keys and values are bytes: written as they are, as both tools do)."""
from __future__ import annotations

import json
import re

from pykbatch._catalogue import TIMESTAMP_TYPES
from pykbatch.commands.common import UsageError
from pykbatch.dump import json_bytes

# DefaultMessageFormatter's properties and their defaults (kafka-console-consumer --property)
CONSOLE_DEFAULTS = {"print.timestamp": "false", "print.key": "false", "print.value": "true", "print.offset": "false",
                    "print.partition": "false", "print.headers": "false", "key.separator": "\t",
                    "line.separator": "\n", "headers.separator": ",", "null.literal": "null"}
_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\r": "\r", "\\\\": "\\"}


def _unescape(text: str) -> str:
    return re.sub(r"\\[ntr\\]", lambda m: _ESCAPES[m.group(0)], text)


def _b(value) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def console(properties: dict[str, str]):
    """Kafka's console consumer's line: [CreateTime:ts] [Partition:p] [Offset:o] [headers] [key]
    value, each part asked for by its ``print.*`` property, ``key.separator`` between them."""
    unknown = sorted(set(properties) - set(CONSOLE_DEFAULTS))
    if unknown:
        raise UsageError(f"unknown --property {', '.join(unknown)} (known: {', '.join(CONSOLE_DEFAULTS)})")
    p = {**CONSOLE_DEFAULTS, **properties}
    on = {k: p[k].lower() == "true" for k in p if k.startswith("print.")}
    sep, line_sep = _b(_unescape(p["key.separator"])), _b(_unescape(p["line.separator"]))
    header_sep, null = _b(_unescape(p["headers.separator"])), _b(p["null.literal"])

    def line(r) -> bytes:
        parts = []
        if on["print.timestamp"]:
            parts.append(b"%s:%d" % (TIMESTAMP_TYPES[r.timestamp_type].encode(), r.timestamp)
                         if 0 <= r.timestamp_type < len(TIMESTAMP_TYPES) else b"NO_TIMESTAMP")
        if on["print.partition"]:
            parts.append(b"Partition:%d" % r.partition)
        if on["print.offset"]:
            parts.append(b"Offset:%d" % r.offset)
        if on["print.headers"]:
            parts.append(header_sep.join(_b(k) + b":" + (null if v is None else _b(v)) for k, v in r.headers)
                         if r.headers else b"NO_HEADERS")
        if on["print.key"]:
            parts.append(null if r.key is None else _b(r.key))
        if on["print.value"]:
            parts.append(null if r.value is None else _b(r.value))
        return sep.join(parts) + line_sep
    return line


_KCAT = re.compile(r"%[tpokshTKS%]|\\[ntr\\]")


def kcat(fmt: str):
    """kcat's ``-f``: %t topic, %p partition, %o offset, %k key, %s value, %h headers (k=v,...),
    %T timestamp (ms), %K / %S key / value length (-1 for null), %% a percent; \\n \\t \\r \\\\."""
    def line(r) -> bytes:
        def one(m) -> bytes:
            code = m.group(0)
            if code.startswith("\\"):
                return _ESCAPES[code].encode()
            if code == "%%":
                return b"%"
            if code in ("%k", "%s"):
                v = r.key if code == "%k" else r.value
                return b"" if v is None else _b(v)
            if code in ("%K", "%S"):
                v = r.key if code == "%K" else r.value
                return b"%d" % (-1 if v is None else len(v))
            if code == "%h":
                return b",".join(_b(k) + b"=" + (b"" if v is None else _b(v)) for k, v in r.headers)
            return str({"%t": r.topic, "%p": r.partition, "%o": r.offset, "%T": r.timestamp}[code]).encode()
        out, at = [], 0
        for m in _KCAT.finditer(fmt):
            out.append(fmt[at:m.start()].encode())
            out.append(one(m))
            at = m.end()
        out.append(fmt[at:].encode())
        return b"".join(out)
    return line


def json_line(r) -> bytes:
    """A record as one JSON object: bytes as UTF-8 text where they are, else base64 (each with
    an ``*_encoding`` field naming which: ``pykbatch.dump.json_bytes``)."""
    key, key_enc = json_bytes(r.key)
    value, value_enc = json_bytes(r.value)
    headers = [dict(zip(("key", "value", "value_encoding"), (k, *json_bytes(v)))) for k, v in r.headers]
    ts_type = TIMESTAMP_TYPES[r.timestamp_type] if 0 <= r.timestamp_type < len(TIMESTAMP_TYPES) else None
    return (json.dumps({"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
                        "timestamp_type": ts_type, "key": key, "key_encoding": key_enc, "value": value,
                        "value_encoding": value_enc, "headers": headers}) + "\n").encode()
