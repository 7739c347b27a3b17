"""Producer state: idempotence and transactions across a partition's batches (Kafka's
ProducerStateManager and ProducerAppendInfo).

A partition leader keeps, per producer id, the epoch, the coordinator epoch, the open transaction
and the last five batches' sequence ranges (Kafka's ``ProducerStateEntry``), and checks every
batch against them (``ProducerAppendInfo``): epoch fencing, sequence continuity with wrap-around,
duplicates, transaction markers.  ``ProducerStateTracker`` does the same offline, either as the
leader would answer appends (``mode="leader"``) or to audit batches already in a log
(``mode="audit"``: every batch counts, and gaps, duplicates and fencing are reported as culprits
with their offsets).

    audit = pykbatch.audit_producers(segment_bytes)
    for c in audit.culprits: print(c.offset, c.name, c.message)
"""
from __future__ import annotations

import warnings

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from pykbatch.result import Culprit
from pykbatch.rules import BY_ID
from pykbatch.errors import KafkaDataError

INT32_MAX = 2**31 - 1
BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN

@dataclass(frozen=True)
class SnapshotEntry:
    """One producer in a ``.snapshot`` (only its newest batch is kept)."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: none

    @property
    def first_sequence(self) -> int:
        """lastSequence - offsetDelta, wrapping like Kafka's decrementSequence."""
        seq = self.last_sequence - self.offset_delta
        return seq + 2**31 if seq < 0 else seq

    @property
    def has_batch(self) -> bool:
        return self.last_offset >= 0

    def dump_line(self) -> str:
        txn = "OptionalLong.empty" if self.current_txn_first_offset < 0 else \
            f"OptionalLong[{self.current_txn_first_offset}]"
        line = (f"producerId: {self.producer_id} producerEpoch: {self.producer_epoch} coordinatorEpoch: "
                f"{self.coordinator_epoch} currentTxnFirstOffset: {txn} lastTimestamp: {self.timestamp}")
        if self.has_batch:
            line += (f" firstSequence: {self.first_sequence} lastSequence: {self.last_sequence} lastOffset: "
                     f"{self.last_offset} offsetDelta: {self.offset_delta} timestamp: {self.timestamp}")
        return line


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker (what Kafka feeds its transaction index)."""
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    """What the leader remembers of one producer."""
    producer_id: int
    epoch: int = -1
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    current_txn_first_timestamp: int = -1
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def add_batch(self, first_seq: int, last_seq: int, first_offset: int, last_offset: int, timestamp: int) -> None:
        """Remembers an appended batch (the last five are kept)."""
        self.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        return next((b for b in self.batches if (b.first_seq, b.last_seq) == (first_seq, last_seq)), None)


class Check(NamedTuple):
    """The tracker's answer for one batch."""
    culprits: list
    duplicate_of: BatchMetadata | None
    """mode "leader": the retained batch this one repeats (Kafka answers success with its offsets)."""
    completed_txn: CompletedTxn | None


@dataclass
class ProducerAudit:
    culprits: list
    producers: dict
    completed_transactions: list
    open_transactions: dict
    """producer id -> first offset of a transaction no marker closed."""

    @property
    def ok(self) -> bool:
        return not self.culprits


APPEND_ORIGINS = ("client", "coordinator", "replication")
"""Kafka's AppendOrigin values: who appends the batches (decides which producer checks run)."""


class ProducerStateTracker:
    """Kafka's per-partition producer state, checked batch by batch.

    mode
        ``"leader"``: answer as a partition leader does for client appends: a failing batch
        leaves the state as it was, a duplicate of one of the last five batches is answered
        with the original (``Check.duplicate_of``).  ``"audit"``: the batches are already in a
        log: each one moves the state on (but a fenced writer's), and duplicates are culprits.
    append_origin
        Kafka's ``AppendOrigin`` of the batches: ``"client"`` checks sequences; ``"coordinator"``
        only epochs; ``"replication"`` reports nothing (Kafka only logs), as the broker does for
        each.  (Not ``ValidationConfig.origin``, which says whose bytes are validated: a client's,
        a log's or a replica's.)  ``origin=`` is the old name of this argument.
    duplicates
        Look for a repeat of the last five batches first, as the leader does before
        ``ProducerAppendInfo`` runs; False gives ``ProducerAppendInfo``'s answer alone.
    transaction_version
        The producers' transaction protocol version (KIP-890; -1: not given, Kafka's default for
        an append).  From 2 on, a marker must carry a newer epoch than the data it closes.
    """

    _fast_path = True  # a producer's next batch in order skips the checks it passes (tests turn it off)

    def __init__(self, topic_partition: str = "t-0", mode: str = "leader", append_origin: str = "client",
                 duplicates: bool = True, transaction_version: int = -1, *, origin: str | None = None):
        if origin is not None:
            warnings.warn("ProducerStateTracker(origin=...) is now append_origin=", DeprecationWarning, stacklevel=2)
            append_origin = origin
        if mode not in ("leader", "audit"):
            raise ValueError("mode must be 'leader' or 'audit'")
        if append_origin not in APPEND_ORIGINS:
            raise ValueError(f"append_origin must be one of {', '.join(map(repr, APPEND_ORIGINS))}")
        self.topic_partition = topic_partition
        self.mode = mode
        self.append_origin = append_origin
        self.duplicates = duplicates
        self.transaction_version = transaction_version
        self.producers: dict[int, ProducerEntry] = {}
        self.completed_transactions: list[CompletedTxn] = []
        self.unreadable_markers: dict[int, list[int]] = {}
        """producer id -> offsets of its control batches whose marker does not read."""

    # -- one batch --------------------------------------------------------------------------
    def append(self, batch, entry: int | None = None) -> Check:
        """Checks one batch (a ``pykbatch.Batch``; legacy batches and batches without a
        producer id carry no producer state)."""
        pid = getattr(batch, "producer_id", -1)
        if pid < 0:
            return Check([], None, None)
        where = (batch.entry if entry is None else entry, batch.position)
        if batch.is_control:
            try:
                control = batch.control
            except KafkaDataError:  # which transaction it ended is not known: kept for the open ones
                self.unreadable_markers.setdefault(pid, []).append(batch.last_offset)
                raise
            if control is None or control.type not in (0, 1):
                return Check([], None, None)  # an empty control batch, or not a transaction marker
            return self.append_marker(pid, batch.producer_epoch, control.type == 0, control.coordinator_epoch,
                                      batch.base_offset, batch.max_timestamp, where)
        return self.append_data(pid, batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                                batch.base_offset, batch.last_offset, batch.max_timestamp, batch.is_transactional,
                                where)

    def append_data(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
                    last_offset: int, timestamp: int = -1, transactional: bool = False, where=(None, None)) -> Check:
        """ProducerAppendInfo.appendDataBatch (with the leader's duplicate check before it)."""
        state = self.producers.get(producer_id)
        if (self._fast_path and state is not None and state.batches and epoch == state.epoch and not transactional
                and state.current_txn_first_offset is None and self.append_origin == "client"
                and first_seq == state.batches[-1].last_seq + 1):
            # the common case, a producer's next batch in order: unless it repeats a retained
            # batch (possible after a gap in an audited log), every check below passes
            if state.find_duplicate(epoch, first_seq, last_seq) is None:
                state.add_batch(first_seq, last_seq, first_offset, last_offset, timestamp)
                return Check([], None, None)
        state = state or ProducerEntry(producer_id)
        report = _Reporter(self.topic_partition, producer_id, first_offset, where)
        duplicate = state.find_duplicate(epoch, first_seq, last_seq) \
            if self.duplicates and self.append_origin == "client" else None
        if duplicate is not None:
            if self.mode == "leader":
                return Check([], duplicate, None)
            report("producer.duplicate", seq=first_seq, last=last_seq, first_offset=duplicate.first_offset,
                   last_offset=duplicate.last_offset)
            return Check(report.culprits, duplicate, None)
        if self.append_origin != "replication" and epoch < state.epoch:
            report("producer.stale_epoch", epoch=epoch, op="<", current=state.epoch, tv=self.transaction_version)
            return Check(report.culprits, None, None)  # a fenced writer moves nothing on
        if self.append_origin == "client":
            if epoch != state.epoch:
                if first_seq != 0 and state.epoch != -1:
                    report("producer.new_epoch_sequence", epoch=epoch, seq=first_seq, current=state.epoch)
            elif not (state.epoch == -1 or first_seq == state.last_seq + 1
                      or (first_seq == 0 and state.last_seq == INT32_MAX)):
                report("producer.out_of_order_sequence", seq=first_seq, last=state.last_seq)
        if self.append_origin != "replication" and state.current_txn_first_offset is not None and not transactional:
            report("producer.non_transactional_in_transaction")
        if report.culprits and self.mode == "leader":
            return Check(report.culprits, None, None)
        if epoch != state.epoch:
            state.batches.clear()
            state.epoch = epoch
        state.add_batch(first_seq, last_seq, first_offset, last_offset, timestamp)
        if transactional and state.current_txn_first_offset is None:
            state.current_txn_first_offset = first_offset
            state.current_txn_first_timestamp = timestamp
        self.producers[producer_id] = state
        return Check(report.culprits, None, None)

    def append_marker(self, producer_id: int, epoch: int, aborted: bool, coordinator_epoch: int, offset: int,
                      timestamp: int = -1, where=(None, None)) -> Check:
        """ProducerAppendInfo.appendEndTxnMarker: closes the producer's transaction."""
        state = self.producers.get(producer_id) or ProducerEntry(producer_id)
        report = _Reporter(self.topic_partition, producer_id, offset, where)
        if self.append_origin != "replication":
            bumps = self.transaction_version >= 2  # TV2 markers carry the bumped epoch
            if epoch < state.epoch or (bumps and epoch == state.epoch):
                report("producer.stale_epoch", epoch=epoch, op="<=" if bumps else "<", current=state.epoch,
                       tv=self.transaction_version)
            elif state.coordinator_epoch > coordinator_epoch:
                report("producer.coordinator_fenced", zombie=coordinator_epoch, current=state.coordinator_epoch)
        if report.culprits:
            return Check(report.culprits, None, None)  # fenced: the marker closes nothing
        first = state.current_txn_first_offset
        txn = CompletedTxn(producer_id, offset if first is None else first, offset, aborted)
        self.completed_transactions.append(txn)
        if epoch != state.epoch:
            state.batches.clear()
            state.epoch = epoch
        state.coordinator_epoch = coordinator_epoch
        state.current_txn_first_offset = None
        state.last_timestamp = timestamp
        self.producers[producer_id] = state
        return Check([], None, txn)

    def open_transactions(self) -> dict[int, int]:
        return {pid: s.current_txn_first_offset for pid, s in self.producers.items()
                if s.current_txn_first_offset is not None}

    def open_transaction_details(self, topic: str, partition: int, now_ms: int) -> list["OpenTransaction"]:
        """The transactions no marker closed, with what closing one takes (``now_ms``: the time
        their age is measured at, e.g. the log's newest timestamp)."""
        return [OpenTransaction(topic, partition, pid, s.epoch, s.current_txn_first_offset,
                                s.current_txn_first_timestamp,
                                now_ms - s.current_txn_first_timestamp if s.current_txn_first_timestamp >= 0 else None,
                                next((o for o in self.unreadable_markers.get(pid, ())
                                      if o > s.current_txn_first_offset), None))
                for pid, s in sorted(self.producers.items(), key=lambda kv: kv[1].current_txn_first_offset or 0)
                if s.current_txn_first_offset is not None]


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction left open at the end of a partition's log: it holds back the last stable
    offset, so read_committed consumers stop there until it ends (a hanging transaction)."""
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    first_timestamp: int
    age_ms: int | None
    marker_unreadable_at: int | None = None
    """The offset of a marker of this producer after the transaction's first that does not read:
    the transaction may have ended there (committed or aborted is not known), not hang."""

    def abort_command(self, bootstrap: str = "<bootstrap-server>") -> str:
        """Kafka's own tool closing it (KIP-664: the broker finds the producer from the offset)."""
        return (f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic {self.topic} "
                f"--partition {self.partition} --start-offset {self.first_offset}")

    def as_dict(self, bootstrap: str = "<bootstrap-server>") -> dict:
        return {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "first_offset": self.first_offset,
                "first_timestamp": self.first_timestamp, "age_ms": self.age_ms,
                "marker_unreadable_at": self.marker_unreadable_at, "abort_command": self.abort_command(bootstrap)}


def audit_producers(data_or_batches, topic_partition: str = "t-0") -> ProducerAudit:
    """Audits the producer state of a partition's batches in log order (a segment's bytes, or
    batches from ``iter_batches``): sequence gaps, duplicates, stale epochs, fenced coordinators,
    non-transactional writes inside a transaction, and transactions left open."""
    from pykbatch._native import iter_batches
    batches: Iterable = data_or_batches
    if isinstance(data_or_batches, (bytes, bytearray, memoryview)):
        batches = iter_batches(data_or_batches, verify_crc=False)
    tracker = ProducerStateTracker(topic_partition, mode="audit")
    culprits = []
    try:
        for batch in batches:
            culprits += tracker.append(batch).culprits
    except KafkaDataError:  # the entries cannot be read on from here (validate says where and why)
        pass
    return ProducerAudit(culprits, tracker.producers, tracker.completed_transactions, tracker.open_transactions())


class _Reporter:
    """Collects a batch's culprits in the validator's Culprit shape."""

    def __init__(self, tp: str, pid: int, offset: int, where):
        self.tp, self.pid, self.offset = tp, pid, offset
        self.entry, self.position = where
        self.culprits: list[Culprit] = []

    def __call__(self, rule: str, **values):
        checked = BY_ID[rule]
        message = checked.message(pid=self.pid, offset=self.offset, tp=self.tp, **values)
        self.culprits.append(Culprit(self.entry, None, None, checked.code, rule, self.position, None,
                                     self.position, message, f"at offset {self.offset}", checked.kafka))
