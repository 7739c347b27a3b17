"""Control records (SPEC.md section 5.3): transaction markers and KRaft control types.

A control record's key is ``int16 version | int16 type``; an ABORT/COMMIT
marker's value is ``int16 version | int32 coordinatorEpoch``.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import InvalidRecordError

ABORT, COMMIT = 0, 1
TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
              5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


class ControlRecord(NamedTuple):
    type: int           # Kafka's id, -1 for types Kafka does not know (UNKNOWN)
    type_name: str
    coordinator_epoch: int | None  # for ABORT / COMMIT markers


def _versioned(data: bytes | None, fmt: str, what: str, rule: str) -> tuple:
    """Unpacks a control key / marker value (int16 version first), with Kafka's checks."""
    need = struct.calcsize(fmt)
    if data is None or len(data) < need:
        raise InvalidRecordError(f"Invalid value size found for {what}. Must have at least {need} bytes, but "
                                 f"found only {0 if data is None else len(data)}", None, f"control.{rule}_size")
    fields = struct.unpack_from(fmt, data)
    if fields[0] < 0:
        name = "control record" if rule == "key" else what
        raise InvalidRecordError(f"Invalid version found for {name}: {fields[0]}. May indicate data corruption",
                                 None, f"control.{rule}_version")
    return fields


def control_type(key: bytes | None) -> int:
    """The control type id of a control record key (ControlRecordType.parse)."""
    _, typ = _versioned(key, ">hh", "end control record key", "key")
    return typ if typ in TYPE_NAMES else -1


def parse_control(key: bytes | None, value: bytes | None) -> ControlRecord:
    typ = control_type(key)
    name = TYPE_NAMES.get(typ, "UNKNOWN")
    epoch = None
    if typ in (ABORT, COMMIT):
        _, epoch = _versioned(value, ">hi", "end transaction marker", "marker")
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
                raise InvalidRecordError("Found invalid control record: a varint runs past the value", None,
                                         "control.message")
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


def leader_change_json(value: bytes) -> str:
    """A LEADER_CHANGE control record's value (LeaderChangeMessage v0, flexible) as the JSON
    Kafka's tools print: ``{"version":0,"leaderId":1,"voters":[...],"grantingVoters":[...]}``."""
    r = _Reader(value)
    try:
        version = r.fixed(">h")
        leader = r.fixed(">i")

        def voter():
            v = {"voterId": r.fixed(">i")}
            r.skip_tags()
            return v
        voters, granting = r.array(voter), r.array(voter)
        r.skip_tags()
    except struct.error:
        raise InvalidRecordError("Found invalid control record: the LeaderChange value is too short", None,
                                 "control.message") from None
    import json
    return json.dumps({"version": version, "leaderId": leader, "voters": voters, "grantingVoters": granting},
                      separators=(",", ":"))
