"""Control records (Kafka's ControlRecordType and EndTransactionMarker): transaction markers and
KRaft control types.

A control record's key is ``int16 version | int16 type``; an ABORT/COMMIT
marker's value is ``int16 version | int32 coordinatorEpoch``.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import rule_error as _fail

ABORT, COMMIT = 0, 1
TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
              5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


class ControlRecord(NamedTuple):
    type: int           # Kafka's id, -1 for types Kafka does not know (UNKNOWN)
    type_name: str
    coordinator_epoch: int | None  # for ABORT / COMMIT markers


def _versioned(data: bytes | None, fmt: str, what: str) -> tuple:
    """Unpacks a control key / marker value (int16 version first), with Kafka's checks; ``what``:
    "key" or "marker"."""
    need = struct.calcsize(fmt)
    if data is None or len(data) < need:
        raise _fail(f"control.{what}_size", None, need=need, found=0 if data is None else len(data))
    fields = struct.unpack_from(fmt, data)
    if fields[0] < 0:
        raise _fail(f"control.{what}_version", None, version=fields[0])
    return fields


def control_type(key: bytes | None) -> int:
    """The control type id of a control record key (ControlRecordType.parse)."""
    _, typ = _versioned(key, ">hh", "key")
    return typ if typ in TYPE_NAMES else -1


def parse_control(key: bytes | None, value: bytes | None) -> ControlRecord:
    typ = control_type(key)
    name = TYPE_NAMES.get(typ, "UNKNOWN")
    epoch = None
    if typ in (ABORT, COMMIT):
        _, epoch = _versioned(value, ">hi", "marker")
    return ControlRecord(typ, name, epoch)


class _Reader:
    """Kafka's flexible-version message encoding: fixed ints, compact arrays, tagged fields."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise _fail("control.message", None, what="a varint runs past the value")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()

    def array(self, item) -> list:
        n = self.uvarint() - 1
        return [] if n < 0 else [item() for _ in range(n)]


def _json(obj) -> str:
    import json
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _uuid(r: "_Reader") -> str:
    import base64
    raw = r.data[r.pos:r.pos + 16]
    if len(raw) < 16:
        raise struct.error("uuid")
    r.pos += 16
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _string(r: "_Reader") -> str:
    n = r.uvarint() - 1
    text = r.data[r.pos:r.pos + n].decode("utf-8", "replace")
    r.pos += n
    return text


def _leader_change(r: _Reader) -> dict:
    def voter():
        v = {"voterId": r.fixed(">i")}
        r.skip_tags()
        return v
    return {"version": r.fixed(">h"), "leaderId": r.fixed(">i"), "voters": r.array(voter),
            "grantingVoters": r.array(voter)}


def _voters(r: _Reader) -> dict:
    def endpoint():
        e = {"name": _string(r), "host": _string(r), "port": r.fixed(">H")}
        r.skip_tags()
        return e

    def voter():
        v = {"voterId": r.fixed(">i"), "voterDirectoryId": _uuid(r), "endpoints": r.array(endpoint)}
        feature = {"minSupportedVersion": r.fixed(">h"), "maxSupportedVersion": r.fixed(">h")}
        r.skip_tags()
        v["kRaftVersionFeature"] = feature
        r.skip_tags()
        return v
    return {"version": r.fixed(">h"), "voters": r.array(voter)}


# control type -> (the label Kafka's tools print, the message's fields as JSON)
KRAFT_MESSAGES = {
    2: ("LeaderChange:", _leader_change),
    3: ("SnapshotHeader", lambda r: {"version": r.fixed(">h"), "lastContainedLogTimestamp": r.fixed(">q")}),
    4: ("SnapshotFooter", lambda r: {"version": r.fixed(">h")}),
    5: ("KRaftVersion", lambda r: {"version": r.fixed(">h"), "kRaftVersion": r.fixed(">h")}),
    6: ("KRaftVoters", _voters),
}


def kraft_control_json(control_type: int, value: bytes) -> str:
    """A KRaft control record's value (LeaderChangeMessage, SnapshotHeader/FooterRecord,
    KRaftVersionRecord, VotersRecord: flexible version 0) as the JSON Kafka's tools print."""
    r = _Reader(value or b"")
    try:
        obj = KRAFT_MESSAGES[control_type][1](r)
        r.skip_tags()
    except (struct.error, IndexError):
        raise _fail("control.message", None, what=f"the {TYPE_NAMES[control_type]} value is too short") from None
    return _json(obj)


