"""What became of each produced record: exactly one outcome per record, and a report per call.

A record is ``delivered`` (at a partition and offset), ``dropped`` (a culprit the policy let go),
``dead_lettered`` (a culprit written to the dead-letter topic or sink) or ``failed`` (with the
error that failed it).  ``ProduceReport`` counts them for one call (or one transaction) so that
``records == delivered + dropped + dead_lettered + failed`` always holds and can be checked.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from pykbatch import _native
from pykbatch import errors as kb_errors

DELIVERED, DROPPED, DEAD_LETTERED, FAILED = "delivered", "dropped", "dead_lettered", "failed"
OUTCOMES = (DELIVERED, DROPPED, DEAD_LETTERED, FAILED)
_PENDING = -1  # an outcome not known yet (index into OUTCOMES otherwise)
_DELIVERED = OUTCOMES.index(DELIVERED)


class ProduceError(Exception):
    """Why a record was not delivered: Kafka's ``code`` and ``name``, the broker's (or the
    pre-flight's) ``message``, the catalogue ``rule`` when one names it, the record's ``index``
    in its batch as KIP-467 reports it, and the error ``error_class`` (retriable, abortable, fatal)."""

    def __init__(self, code: int, message: str, *, rule: str | None = None, index: int | None = None,
                 topic: str | None = None, partition: int | None = None, source: str = "broker"):
        self.code = code
        self.name = kb_errors.error_name(code)
        self.message = message
        self.rule = rule
        self.index = index
        self.topic = topic
        self.partition = partition
        self.source = source  # "broker", "preflight", "client", "dead-letter"
        where = f" ({topic}-{partition})" if topic is not None and partition is not None else ""
        super().__init__(f"{self.name} ({code}){where}: {message}")

    @property
    def error_class(self) -> str:
        return kb_errors.classify(self.code)

    @property
    def exception_class(self) -> str:
        return kb_errors.exception_class(self.code)

    def as_dict(self) -> dict:
        return {"code": self.code, "name": self.name, "message": self.message, "rule": self.rule,
                "index": self.index, "error_class": self.error_class, "source": self.source}


@dataclass(frozen=True)
class RecordOutcome:
    """One record's outcome: ``outcome`` one of ``OUTCOMES``; ``offset`` when delivered;
    ``error`` otherwise."""
    outcome: str
    topic: str
    partition: int
    offset: int = -1
    timestamp: int = -1
    error: ProduceError | None = None


class Delivery:
    """A future for one record sent with ``Producer.send`` (``result()`` waits; a record that
    did not land raises its ``ProduceError`` there unless the policy dropped or dead-lettered
    it, which ``result()`` returns as the outcome)."""

    __slots__ = ("_done", "_outcome", "_callbacks")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._outcome: RecordOutcome | None = None
        self._callbacks: list[Callable[[RecordOutcome], Any]] = []

    def done(self) -> bool:
        return self._done.is_set()

    def add_callback(self, fn: Callable[[RecordOutcome], Any]) -> None:
        if self._done.is_set():
            fn(self._outcome)
        else:
            self._callbacks.append(fn)

    def outcome(self, timeout: float | None = None) -> RecordOutcome:
        if not self._done.wait(timeout):
            raise TimeoutError("the record has no outcome yet")
        assert self._outcome is not None
        return self._outcome

    def result(self, timeout: float | None = None) -> RecordOutcome:
        outcome = self.outcome(timeout)
        if outcome.outcome == FAILED and outcome.error is not None:
            raise outcome.error
        return outcome

    def _settle(self, outcome: RecordOutcome) -> None:
        self._outcome = outcome
        self._done.set()
        for fn in self._callbacks:
            fn(outcome)


@dataclass
class UndeliveredRecord:
    """A record that did not land, with where it was going and why."""
    row: int  # the record's index in its call (the row of an Arrow table)
    topic: str
    partition: int
    outcome: str
    error: ProduceError

    def as_dict(self) -> dict:
        return {"row": self.row, "topic": self.topic, "partition": self.partition, "outcome": self.outcome,
                **self.error.as_dict()}


@dataclass
class ProduceReport:
    """The outcomes of one call's records, by row: ``outcome`` (index into ``OUTCOMES``),
    ``partition`` and ``offset`` arrays, and a ``UndeliveredRecord`` per record not delivered."""
    records: int
    partition: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    offset: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    outcome: np.ndarray = field(repr=False, default=None)  # type: ignore[assignment]
    culprits: list[UndeliveredRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _left: int = field(default=0, repr=False)
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        self.partition = np.full(self.records, -1, dtype=np.int32)
        self.offset = np.full(self.records, -1, dtype=np.int64)
        self.outcome = np.full(self.records, _PENDING, dtype=np.int8)
        self._left = self.records
        if not self.records:
            self._done.set()

    # -- settling (the sender) ----------------------------------------------------------------
    def delivered(self, rows: np.ndarray, partition: int, base_offset: int, offsets: np.ndarray | None = None) -> None:
        """``rows`` landed on ``partition`` at consecutive offsets from ``base_offset`` (-1: not
        known, acks=0), or at ``offsets``."""
        with self._lock:
            if offsets is None:  # a batch's rows, in the core
                twice = _native.settle_delivered(self.outcome, self.partition, self.offset,
                                                 np.ascontiguousarray(rows, dtype=np.int64), partition, base_offset,
                                                 _DELIVERED, _PENDING)
                if twice >= 0:
                    raise AssertionError(f"rows {[int(rows[twice])]} settled twice")
            else:
                self._check_pending(rows)
                self.partition[rows] = partition
                self.offset[rows] = offsets
                self.outcome[rows] = _DELIVERED
            self._settled(len(rows))

    def not_delivered(self, row: int, topic: str, partition: int, outcome: str, error: ProduceError) -> None:
        with self._lock:
            self._check_pending(np.array([row]))
            self.partition[row] = partition
            self.outcome[row] = OUTCOMES.index(outcome)
            self.culprits.append(UndeliveredRecord(row, topic, partition, outcome, error))
            self._settled(1)

    def _check_pending(self, rows: np.ndarray) -> None:
        if (self.outcome[rows] != _PENDING).any():  # two outcomes for one record is a bug, never hidden
            raise AssertionError(f"rows {rows[self.outcome[rows] != _PENDING][:5].tolist()} settled twice")

    def _settled(self, n: int) -> None:
        self._left -= n
        if self._left == 0:
            self._done.set()

    # -- reading ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def settled(self) -> int:
        """How many records have their outcome so far."""
        return self.records - self._left

    @property
    def complete(self) -> bool:
        return self._done.is_set()

    def count(self, outcome: str) -> int:
        return int((self.outcome == OUTCOMES.index(outcome)).sum())

    def outcome_of(self, row: int) -> str:
        """What became of record ``row``: one of ``OUTCOMES``, or "pending"."""
        code = int(self.outcome[row])
        return OUTCOMES[code] if 0 <= code < len(OUTCOMES) else "pending"

    @property
    def delivered_count(self) -> int:
        return self.count(DELIVERED)

    @property
    def counts(self) -> dict[str, int]:
        return {name: self.count(name) for name in OUTCOMES}

    def conserved(self) -> bool:
        """records == delivered + dropped + dead_lettered + failed (every record has one outcome)."""
        return self.complete and sum(self.counts.values()) == self.records

    def failed(self) -> list[UndeliveredRecord]:
        return [c for c in self.culprits if c.outcome == FAILED]

    def as_arrow(self) -> pa.Table:
        """One row per record: outcome, partition, offset, error code / name / rule / message."""
        code = np.zeros(self.records, dtype=np.int16)
        rule: list[str | None] = [None] * self.records
        message: list[str | None] = [None] * self.records
        for c in self.culprits:
            code[c.row] = c.error.code
            rule[c.row] = c.error.rule
            message[c.row] = c.error.message
        names = np.array(OUTCOMES + ("pending",))
        return pa.table({"outcome": pa.array(names[self.outcome]), "partition": self.partition,
                         "offset": self.offset, "error_code": code,
                         "error_name": [kb_errors.error_name(int(x)) if x else None for x in code],
                         "rule": pa.array(rule, pa.string()), "message": pa.array(message, pa.string())})

    def summary(self) -> str:
        counts = self.counts
        return (f"{self.records} records: {counts[DELIVERED]} delivered, {counts[DROPPED]} dropped, "
                f"{counts[DEAD_LETTERED]} dead-lettered, {counts[FAILED]} failed")


class ProduceFailedError(Exception):
    """A call's records did not all land and the policy says that fails the call
    (``errors.tolerance=none``, or a handler's FAIL): ``report`` says what became of every record."""

    def __init__(self, report: ProduceReport):
        self.report = report
        first = report.failed()[:1]
        why = f"; first: row {first[0].row}: {first[0].error}" if first else ""
        super().__init__(f"{report.summary()}{why}")
