"""The records of one producer batch, kept until every one has an outcome: they are built into a
batch (in C) when sent, built again without the culprits when the broker names some (KIP-467),
or with a new sequence when an earlier batch shrank, and each record settles its own outcome.

Two kinds: ``ArrowRows`` (rows of an Arrow table, read in place from its buffers) and
``ListRows`` (records given one by one, each with its ``Delivery`` future or a call's report).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from pykbatch import _native
from pykbatch.live.produced import DELIVERED, Delivery, ProduceError, ProduceReport, RecordOutcome

RECORD_OVERHEAD = 21  # a v2 record's framing at most (length, attributes, deltas, key/value lengths, header count)
BATCH_OVERHEAD = 61


@dataclass
class Build:
    """The batch header fields a producer chooses: its codec, id, epoch, first sequence."""
    compression: str = "none"
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False


class Rows(ABC):
    """The records of one batch (``n`` of them), where each one's outcome goes."""
    n: int

    @abstractmethod
    def build(self, b: Build) -> bytes: ...

    @abstractmethod
    def subset(self, keep: list[int]) -> Rows: ...

    @abstractmethod
    def record(self, i: int) -> dict:
        """Record ``i`` as a mapping (key, value, headers, timestamp): for handlers and dead letters."""

    @abstractmethod
    def delivered(self, topic: str, partition: int, base_offset: int, timestamp: int) -> None: ...

    @abstractmethod
    def not_delivered(self, i: int, topic: str, partition: int, outcome: str, error: ProduceError) -> None: ...

    def halves(self) -> tuple[Rows, Rows]:
        """The first and second half: how a batch refused as a whole (too large) is split."""
        half = self.n // 2
        return self.subset(list(range(half))), self.subset(list(range(half, self.n)))


class ArrowRows(Rows):
    """Rows ``rows`` (in order) of Arrow columns; outcomes go to ``report`` by row."""

    def __init__(self, columns: ArrowColumns, rows: np.ndarray, report: ProduceReport):
        self.columns = columns
        self.rows = rows
        self.report = report
        self.n = len(rows)

    def build(self, b: Build) -> bytes:
        return self.columns.batcher().build(self.rows, b.compression, b.producer_id, b.producer_epoch,
                                            b.base_sequence, b.transactional)

    def subset(self, keep: list[int]) -> ArrowRows:
        return ArrowRows(self.columns, self.rows[np.asarray(keep, dtype=np.int64)], self.report)

    def record(self, i: int) -> dict:
        c = self.columns
        row = int(self.rows[i])
        headers = c.headers[row].as_py() if c.headers is not None else None
        return {"key": _bytes(c.keys[row].as_py()) if c.keys is not None else None,
                "value": _bytes(c.values[row].as_py()),
                "headers": [(h["key"], h["value"]) for h in headers or ()],
                "timestamp": int(c.timestamps[row]) if c.timestamps is not None else c.now_ms, "row": row}

    def delivered(self, topic: str, partition: int, base_offset: int, timestamp: int) -> None:
        self.report.delivered(self.rows, partition, base_offset)

    def not_delivered(self, i: int, topic: str, partition: int, outcome: str, error: ProduceError) -> None:
        self.report.not_delivered(int(self.rows[i]), topic, partition, outcome, error)


def _bytes(x):
    return x.encode() if isinstance(x, str) else x


@dataclass
class ArrowColumns:
    """The columns a producer reads from a table (Spark's Kafka sink names: key, value, headers,
    timestamp), held while any of its rows waits for an outcome."""
    keys: object
    values: object
    headers: object = None
    timestamps: np.ndarray | None = None
    now_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    _batcher: object = field(default=None, repr=False)

    def batcher(self) -> _native.ArrowBatcher:
        """The columns read once, for building any rows' batches."""
        if self._batcher is None:
            self._batcher = _native.ArrowBatcher(self.keys, self.values, timestamps=self.timestamps,
                                                 headers=self.headers, now_ms=self.now_ms)
        return self._batcher


@dataclass
class Pending:
    """One record given on its own, and where its outcome goes."""
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int
    delivery: Delivery | None = None
    report: ProduceReport | None = None
    row: int = 0

    def size(self) -> int:
        return (RECORD_OVERHEAD + (len(self.key) if self.key else 0) + (len(self.value) if self.value else 0)
                + sum(len(k) + len(v or b"") + 2 for k, v in self.headers))


class ListRows(Rows):
    def __init__(self, records: list[Pending]):
        self.records = records
        self.n = len(records)

    def build(self, b: Build) -> bytes:
        return _native.build_batch([{"key": r.key, "value": r.value, "headers": r.headers, "timestamp": r.timestamp}
                                    for r in self.records], compression=b.compression, producer_id=b.producer_id,
                                   producer_epoch=b.producer_epoch, base_sequence=b.base_sequence,
                                   is_transactional=b.transactional)

    def subset(self, keep: list[int]) -> ListRows:
        return ListRows([self.records[i] for i in keep])

    def record(self, i: int) -> dict:
        r = self.records[i]
        return {"key": r.key, "value": r.value, "headers": list(r.headers), "timestamp": r.timestamp, "row": r.row}

    def delivered(self, topic: str, partition: int, base_offset: int, timestamp: int) -> None:
        by_report: dict[int, tuple[ProduceReport, list[int], list[int]]] = {}
        for i, r in enumerate(self.records):
            offset = base_offset + i if base_offset >= 0 else -1
            if r.delivery is not None:
                r.delivery._settle(RecordOutcome(DELIVERED, topic, partition, offset,
                                                 timestamp if timestamp >= 0 else r.timestamp))
            if r.report is not None:  # one update per call's report, not per record
                report, rows, offsets = by_report.setdefault(id(r.report), (r.report, [], []))
                rows.append(r.row)
                offsets.append(offset)
        for report, rows, offsets in by_report.values():
            report.delivered(np.array(rows), partition, -1, np.array(offsets, dtype=np.int64))

    def not_delivered(self, i: int, topic: str, partition: int, outcome: str, error: ProduceError) -> None:
        r = self.records[i]
        if r.delivery is not None:
            r.delivery._settle(RecordOutcome(outcome, topic, partition, -1, r.timestamp, error))
        if r.report is not None:
            r.report.not_delivered(r.row, topic, partition, outcome, error)
