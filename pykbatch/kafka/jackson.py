"""JSON as Kafka's tools print it: Jackson's ``JsonNode.toString()`` (compact, non-ASCII as is,
control characters escaped with upper-case hex, bytes as padded base64, doubles as Java's
``Double.toString``)."""
from __future__ import annotations

import base64
import re


class JsonBytes(bytes):
    """A bytes value in JSON: Jackson writes a BinaryNode as base64 (standard alphabet, padded)."""


class JsonDouble(float):
    """A float64 in JSON, written as Java's Double.toString."""


def jackson(obj) -> str:
    """``obj`` as Jackson's ``JsonNode.toString()`` writes it (Kafka's tools print that): compact,
    non-ASCII as is, control characters escaped with upper-case hex."""
    write = _JACKSON.get(type(obj))
    if write is None:
        raise TypeError(f"not JSON: {type(obj).__name__}")
    return write(obj)


def _jackson_bytes(obj: bytes) -> str:
    return '"' + base64.b64encode(obj).decode() + '"'


_JACKSON = {
    type(None): lambda o: "null", bool: lambda o: "true" if o else "false", int: str,
    JsonBytes: _jackson_bytes, JsonDouble: lambda o: _java_double(float(o)), float: lambda o: _java_double(o),
    str: lambda o: _jackson_string(o),
    dict: lambda o: "{" + ",".join([_jackson_string(k) + ":" + jackson(v) for k, v in o.items()]) + "}",
    list: lambda o: "[" + ",".join([jackson(v) for v in o]) + "]",
    tuple: lambda o: "[" + ",".join([jackson(v) for v in o]) + "]",
}


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _escape(m) -> str:
    ch = m.group()
    return _SHORT_ESCAPES.get(ch) or f"\\u{ord(ch):04X}"


def _jackson_string(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:  # the usual case: nothing to escape
        return '"' + text + '"'
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


def _java_double(x: float) -> str:
    """Java's Double.toString: decimal between 1e-3 and 1e7, else d.dddE±n; shortest digits."""
    import math
    from decimal import Decimal
    if x != x or x in (math.inf, -math.inf):
        return {True: '"NaN"'}.get(x != x) or ('"Infinity"' if x > 0 else '"-Infinity"')
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    digits = "".join(map(str, digits))
    return f"{'-' if sign else ''}{digits[0]}.{digits[1:] or '0'}E{exp + len(digits) - 1}"
