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
