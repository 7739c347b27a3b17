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


def control_type(key: bytes | None) -> int:
    """The control type id of a control record key (ControlRecordType.parse)."""
    if key is None or len(key) < 4:
        n = 0 if key is None else len(key)
        raise InvalidRecordError("Invalid value size found for end control record key. Must have at least "
                                 f"4 bytes, but found only {n}", None, "control.key_size")
    version, typ = struct.unpack_from(">hh", key)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}. May indicate data "
                                 "corruption", None, "control.key_version")
    return typ if typ in TYPE_NAMES else -1


def parse_control(key: bytes | None, value: bytes | None) -> ControlRecord:
    typ = control_type(key)
    name = TYPE_NAMES.get(typ, "UNKNOWN")
    epoch = None
    if typ in (ABORT, COMMIT):
        if value is None or len(value) < 6:
            n = 0 if value is None else len(value)
            raise InvalidRecordError("Invalid value size found for end transaction marker. Must have at least "
                                     f"6 bytes, but found only {n}", None, "control.marker_size")
        version, epoch = struct.unpack_from(">hi", value)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for end transaction marker: {version}. May "
                                     "indicate data corruption", None, "control.marker_version")
    return ControlRecord(typ, name, epoch)
