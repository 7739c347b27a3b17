"""Control records (Kafka's ControlRecordType and EndTransactionMarker): transaction markers and
KRaft control types.

A control record's key is ``int16 version | int16 type``; an ABORT/COMMIT
marker's value is ``int16 version | int32 coordinatorEpoch``.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from pykbatch.errors import rule_error as _fail

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


# control type -> (the label Kafka's tools print, Kafka's definition of its value)
KRAFT_MESSAGES = {
    2: ("LeaderChange:", "LeaderChangeMessage"),
    3: ("SnapshotHeader", "SnapshotHeaderRecord"),
    4: ("SnapshotFooter", "SnapshotFooterRecord"),
    5: ("KRaftVersion", "KRaftVersionRecord"),
    6: ("KRaftVoters", "VotersRecord"),
}
_VALUE_VERSION = 0  # the version Kafka's tools read these values at (the value's own "version" field aside)


def kraft_control_json(control_type: int, value: bytes) -> str:
    """A KRaft control record's value as the JSON Kafka's tools print, read through Kafka's own
    definition of it (``messages``)."""
    from pykbatch.kafka.definitions import MessageFormatError, load
    from pykbatch.kafka.jackson import jackson
    schema = load(KRAFT_MESSAGES[control_type][1])
    try:
        fields, _ = schema.decode(value or b"", 0, _VALUE_VERSION)
    except MessageFormatError as exc:  # names the field and the byte of the value where it failed
        raise _fail("control.message", None,
                    what=f"the {TYPE_NAMES[control_type]} value does not read as {schema.name}: {exc}") from None
    return jackson(schema.to_json(fields, _VALUE_VERSION))
