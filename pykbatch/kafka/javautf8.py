"""UTF-8 decoding as the JVM does it (``new String(bytes, UTF_8)``), which is what Kafka's tools
print keys and values with.  Valid input decodes the same everywhere; where the bytes are
malformed, Java replaces spans of a different length than Python's ``errors="replace"`` (e.g.
``ed a7 41`` is one U+FFFD and "A" in Java, two and "A" in Python), so a dump that must match
kafka-dump-log line for line decodes with ``java_utf8``.
"""
from __future__ import annotations

import codecs

REPLACEMENT = "\ufffd"


def _cont(b: int) -> bool:
    return b & 0xC0 == 0x80


def malformed_length(data: bytes, i: int) -> int:
    """How many bytes, from a malformed sequence starting at ``i``, the JVM's UTF-8 decoder
    replaces with one U+FFFD (sun.nio.cs.UTF_8: malformedN, and the end-of-input rules)."""
    n = len(data) - i
    b1 = data[i]
    if 0xE0 <= b1 <= 0xEF:
        if n < 3:  # input ends inside the sequence
            if n > 1 and ((b1 == 0xE0 and data[i + 1] & 0xE0 == 0x80) or not _cont(data[i + 1])):
                return 1
            return n
        b2, b3 = data[i + 1], data[i + 2]
        if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _cont(b2):
            return 1
        if not _cont(b3):
            return 2
        return 3  # a surrogate (ed a0..bf ..)
    if 0xF0 <= b1 <= 0xF4:  # f5..f7 never start a sequence: one byte each
        if n < 4:
            if n > 1:
                b2 = data[i + 1]
                if (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _cont(b2):
                    return 1
            if n > 2 and not _cont(data[i + 2]):
                return 2
            return n
        b2 = data[i + 1]
        if (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and b2 & 0xF0 != 0x80) \
                or not _cont(b2):
            return 1
        if not _cont(data[i + 2]):
            return 2
        return 3
    if 0xC2 <= b1 <= 0xDF and n < 2:
        return n
    return 1


def _handler(exc: UnicodeDecodeError):
    return REPLACEMENT, exc.start + malformed_length(exc.object, exc.start)


codecs.register_error("pykbatch.java", _handler)


def java_utf8(data: bytes) -> str:
    """``data`` decoded as ``new String(data, StandardCharsets.UTF_8)`` would."""
    return bytes(data).decode("utf-8", "pykbatch.java")
