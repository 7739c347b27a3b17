"""Redpanda's native segments: its own 61-byte batch header on disk (little-endian), then the
Kafka v2 record bytes.

    header_crc u32 | size_bytes i32 | base_offset i64 | type i8 | crc i32 | attributes i16 |
    last_offset_delta i32 | first_timestamp i64 | max_timestamp i64 | producer_id i64 |
    producer_epoch i16 | base_sequence i32 | record_count i32        (then size_bytes - 61 record bytes)

``header_crc`` is CRC-32C over the header's other 57 bytes as stored; ``crc`` is Kafka's batch CRC
(over the same fields big-endian from the attributes on, and the records), so a batch re-framed as
a Kafka v2 batch (``to_kafka``: partition leader epoch -1) passes Kafka's own checks and every
pykbatch reader.  Batch types other than ``raft_data`` (1) carry Redpanda's internal state and are
reported by type.  Zero bytes after the last batch (preallocated space) end the walk quietly.

    for b in redpanda.batches(data): b.type_name, b.header_crc_ok, b.to_kafka()
    kafka, report = redpanda.kafka_log(data)          # the raft_data batches as a Kafka log
    reading = redpanda.read(data)                     # all of it, and Kafka's checks of the data
"""
from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass, field
from typing import Iterator

from pykbatch._native import crc32c, frame_v2, validate
from pykbatch.config import ValidationConfig
from pykbatch.result import ValidationResult
from pykbatch.rules import BY_ID as _RULES, render

HEADER = struct.Struct("<IiqbIhiqqqhii")  # 61 bytes
RAFT_DATA = 1
# record_batch_type values Redpanda writes (model/record_batch_types.h)
TYPE_NAMES = {1: "raft_data", 2: "raft_configuration", 3: "controller", 4: "kvstore", 5: "checkpoint",
              6: "topic_management_cmd", 7: "ghost_batch"}


def type_name(t: int) -> str:
    return TYPE_NAMES.get(t, f"type_{t}")


@dataclass(frozen=True)
class RedpandaBatch:
    position: int
    size: int
    header_crc: int
    base_offset: int
    type: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: bytes = field(repr=False)
    header_crc_ok: bool = True

    @property
    def type_name(self) -> str:
        return type_name(self.type)

    def _framed(self, partition_leader_epoch: int = -1, build: bool = True) -> tuple[bytes | None, int]:
        """This batch framed as Kafka's v2 batch (the native encoder lays the header out) with the
        stored CRC kept, and the CRC Kafka computes over it (``build=False``: that CRC only, no copy)."""
        return frame_v2(self.records, base_offset=self.base_offset, partition_leader_epoch=partition_leader_epoch,
                        attributes=self.attributes, last_offset_delta=self.last_offset_delta,
                        base_timestamp=self.first_timestamp, max_timestamp=self.max_timestamp,
                        producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                        base_sequence=self.base_sequence, record_count=self.record_count, crc=self.crc, build=build)

    @functools.cached_property
    def kafka_crc(self) -> int:
        """Kafka's CRC computed over this batch (over the records in place: no copy)."""
        return self._framed(build=False)[1]

    @property
    def kafka_crc_ok(self) -> bool:
        return self.kafka_crc == self.crc

    def to_kafka(self, partition_leader_epoch: int = -1) -> bytes:
        """The batch as a Kafka v2 record batch (Kafka's CRC carried over as stored)."""
        return self._framed(partition_leader_epoch)[0]


@dataclass
class Report:
    """What a walk met besides data batches: non-data batches by type, and faults with their byte
    position (``header_crc``, ``kafka_crc``, ``size`` below the header, ``truncated``)."""
    batches: int = 0
    non_data: list = field(default_factory=list)  # (position, base offset, type name, record count)
    faults: list = field(default_factory=list)  # (position, rule, message)
    valid_bytes: int = 0
    zero_padding: int = 0

    @property
    def ok(self) -> bool:
        return not self.faults


def is_native(data) -> bool:
    """Whether ``data`` starts with a Redpanda batch header (its header CRC holds)."""
    view = memoryview(data)
    return len(view) >= HEADER.size and HEADER.unpack_from(view)[0] == crc32c(view[4:HEADER.size]) \
        and any(view[:HEADER.size])


def batches(data, report: Report | None = None) -> Iterator[RedpandaBatch]:
    """Every batch, in file order.  A header whose CRC fails cannot be trusted for its size: the
    walk stops there (reported); a Kafka CRC failure is reported and the batch still yielded."""
    report = report if report is not None else Report()
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if len(view) - pos < HEADER.size:
            _tail(view, pos, report, f"{len(view) - pos} bytes left, a header takes {HEADER.size}")
            return
        fields = HEADER.unpack_from(view, pos)
        hcrc, size = fields[0], fields[1]
        if hcrc == 0 and size == 0 and not any(view[pos:]):
            report.zero_padding = len(view) - pos
            return
        ok = crc32c(view[pos + 4:pos + HEADER.size]) == hcrc
        if not ok:
            _fault(report, pos, "redpanda.header_crc", stored=hcrc, computed=crc32c(view[pos + 4:pos + HEADER.size]))
            return
        if size < HEADER.size:
            _fault(report, pos, "redpanda.size", size=size, header=HEADER.size)
            return
        if size > len(view) - pos:
            _tail(view, pos, report, f"size_bytes {size} runs past the end ({len(view) - pos} bytes left)")
            return
        batch = RedpandaBatch(pos, *fields[1:2], fields[0], *fields[2:], records=bytes(view[pos + HEADER.size:pos + size]))
        if not batch.kafka_crc_ok:
            _fault(report, pos, "batch.crc_mismatch", (batch.crc, batch.kafka_crc, 0))
        report.batches += 1
        if batch.type != RAFT_DATA:
            report.non_data.append((pos, batch.base_offset, batch.type_name, batch.record_count))
        pos += size
        report.valid_bytes = pos
        yield batch


def _tail(view, pos, report: Report, message: str) -> None:
    if not any(view[pos:]):
        report.zero_padding = len(view) - pos
    else:
        _fault(report, pos, "redpanda.truncated", what=message)


def _fault(report: Report, pos: int, rule: str, args=(), **values) -> None:
    """A fault with its catalogue message: named ``values`` for Redpanda's rules, the core's
    ``args`` for Kafka's."""
    checked = _RULES[rule]
    message = checked.message(**values) if values else render(checked, args, "", reader=True)[0]
    report.faults.append((pos, rule, message))


def kafka_log(data, *, data_only: bool = True) -> tuple[bytes, Report]:
    """The batches re-framed as a Kafka log (only ``raft_data`` ones unless ``data_only`` is
    False), and the walk's report."""
    report = Report()
    return _as_kafka(batches(data, report), data_only), report


def _as_kafka(walk, data_only: bool = True) -> bytes:
    return b"".join(b.to_kafka() for b in walk if not data_only or b.type == RAFT_DATA)


@dataclass
class Reading:
    """A native segment read whole: every batch, the walk's report, the ``raft_data`` batches as
    a Kafka log and what Kafka's checks say of it (``validate`` with origin="log")."""
    batches: list
    report: Report
    kafka: bytes
    result: ValidationResult

    @property
    def problems(self) -> int:
        """Faults of Redpanda's framing plus culprits of Kafka's checks."""
        return len(self.report.faults) + self.result.culprit_count


def read(data) -> Reading:
    """Walks a native segment, re-frames its data batches for Kafka and validates them."""
    report = Report()
    rows = list(batches(data, report))
    kafka = _as_kafka(rows)
    return Reading(rows, report, kafka, validate(kafka, ValidationConfig(origin="log")))


_SEGMENT = re.compile(r"(?:^|/)(?P<topic>[^/]+)/(?P<partition>\d+)_\d+/\d+-\d+-v\d+\.log$")


def find_segments(root: str) -> list[tuple[str, str, int]]:
    """(file, topic, partition) of the native segments under a Redpanda data directory
    (``<namespace>/<topic>/<partition>_<revision>/<base>-<term>-v1.log``); a file given directly
    is read whatever its name, its topic and partition unknown ("", -1)."""
    import os
    if os.path.isfile(root):
        m = _SEGMENT.search(root.replace(os.sep, "/"))
        return [(root, m["topic"], int(m["partition"])) if m else (root, "", -1)]
    out = []
    for d, _, names in os.walk(root):
        for n in sorted(names):
            path = os.path.join(d, n)
            m = _SEGMENT.search(path.replace(os.sep, "/"))
            if m:
                out.append((path, m["topic"], int(m["partition"])))
    return sorted(out)
