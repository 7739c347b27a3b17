"""Control records (Kafka's ControlRecordType and EndTransactionMarker): transaction markers and
KRaft control types.

A control record's key is ``int16 version | int16 type``; an ABORT/COMMIT marker's value is
``int16 version | int32 coordinatorEpoch``: read by the core (csrc/kb_control.c, the types in the
catalogue), so the consumer's walk, the readers and the dump read them alike.  Here: the KRaft
control records' values, read through Kafka's own definitions of them.
"""
from __future__ import annotations

from pykbatch._catalogue import CONTROL_TYPE_IDS, CONTROL_TYPE_NAMES as TYPE_NAMES
from pykbatch._native import ControlRecord, control_type, parse_control  # noqa: F401 (their home for Python)
from pykbatch.errors import rule_error as _fail

ABORT, COMMIT = CONTROL_TYPE_IDS["ABORT"], CONTROL_TYPE_IDS["COMMIT"]


# control type -> (the label Kafka's tools print, Kafka's definition of its value)
KRAFT_MESSAGES = {
    2: ("LeaderChange:", "LeaderChangeMessage"),
    3: ("SnapshotHeader", "SnapshotHeaderRecord"),
    4: ("SnapshotFooter", "SnapshotFooterRecord"),
    5: ("KRaftVersion", "KRaftVersionRecord"),
    6: ("KRaftVoters", "VotersRecord"),
}
_VALUE_VERSION = 0  # the version Kafka's tools read these values at (the value's own "version" field aside)


def kraft_control_json(type_id: int, value: bytes) -> str:
    """A KRaft control record's value as the JSON Kafka's tools print, read through Kafka's own
    definition of it (``messages``)."""
    from pykbatch.kafka.definitions import MessageFormatError, load
    from pykbatch.kafka.jackson import jackson
    schema = load(KRAFT_MESSAGES[type_id][1])
    try:
        fields, _ = schema.decode(value or b"", 0, _VALUE_VERSION)
    except MessageFormatError as exc:  # names the field and the byte of the value where it failed
        raise _fail("control.message", None,
                    what=f"the {TYPE_NAMES[type_id]} value does not read as {schema.name}: {exc}") from None
    return jackson(schema.to_json(fields, _VALUE_VERSION))


def end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, offset: int,
                   timestamp: int) -> bytes:
    """A transaction marker batch as a coordinator's WriteTxnMarkers leaves it in the log: one
    control record (key: version 0 and the type; value: version 0 and the coordinator epoch),
    transactional and control, at ``offset``."""
    from pykbatch._native import build_batch
    key = (0).to_bytes(2, "big") + (COMMIT if commit else ABORT).to_bytes(2, "big")
    value = (0).to_bytes(2, "big") + coordinator_epoch.to_bytes(4, "big", signed=True)
    return build_batch([{"key": key, "value": value, "timestamp": timestamp}], base_offset=offset,
                       producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                       is_control=True)
