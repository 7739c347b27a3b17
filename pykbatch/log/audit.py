"""Audit of a whole partition directory: every segment validated, offsets followed across
segments (``pykbatch.log.truth``: a closed segment cut short, offsets missing between segments),
producer state replayed, indexes checked against the log.

    audit = pykbatch.log.audit.audit_partition("/var/lib/kafka/t-0")
    audit.ok, audit.segments, audit.lost, audit.overlaps, audit.producers, audit.index_problems
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from pykbatch._native import _v2_header_table
from pykbatch.config import ValidationConfig
from pykbatch.errors import KafkaDataError
from pykbatch.result import Culprit, ValidationResult
from pykbatch.log import OffsetIndex, Partition, Segment, TimeIndex, sibling, topic_partition_of
from pykbatch.log.checks import check_file, check_partition_files, missing_indexes
from pykbatch.log.segments import bound_unsound, first_offset
from pykbatch.log.truth import SegmentSpan, between_segments
from pykbatch.log.txn_index import txn_index_problems
from pykbatch.parallel import ordered_map
from pykbatch.kafka.producer_state import ProducerAudit, ProducerStateTracker


@dataclass
class SegmentAudit:
    path: str
    base_offset: int
    result: ValidationResult
    batches: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    invalid_tail_bytes: int = 0
    read_error: str | None = None
    """Why reading stopped early (the validator's culprits say where)."""
    newest_timestamp: int = -1
    """The largest batch max timestamp seen (-1: none)."""
    size: int = 0

    @property
    def span(self) -> SegmentSpan:
        tail = self.result.truncated_tail
        return SegmentSpan(self.path, self.first_offset, self.last_offset, tail.position if tail else None,
                           self.size - tail.position if tail else 0, tail.entry if tail else 0, self.base_offset)


@dataclass
class PartitionAudit:
    directory: str
    segments: list = field(default_factory=list)
    overlaps: list = field(default_factory=list)
    """(segment path, byte position, previous segment's last offset, this segment's first base
    offset): offsets that go back from one segment to the next, which no broker writes (inside a
    segment they are the validator's culprits, ``log.offsets_not_increasing``)."""
    gaps: int = 0
    """Offset gaps between consecutive batches: normal where the topic is compacted (the cleaner
    removes records and, in time, transaction markers); elsewhere each is a culprit too
    (``log.offset_gap``: in a segment the validator's, between segments in ``lost``)."""
    lost: list = field(default_factory=list)
    """(segment path, Culprit) the partition itself shows (``pykbatch.log.truth``): a segment
    other than the last that ends inside an entry, offsets missing between two segments."""
    below_base: list = field(default_factory=list)
    """(segment path, first offset) of segments starting below the offset in their file name."""
    producers: ProducerAudit | None = None
    index_problems: list = field(default_factory=list)
    open_transactions: list = field(default_factory=list)
    """``OpenTransaction``s left at the end of the log, each with its abort command."""

    @property
    def culprit_count(self) -> int:
        return sum(s.result.culprit_count for s in self.segments)

    @property
    def ok(self) -> bool:
        return not (self.culprit_count or self.lost or self.overlaps or self.below_base or self.index_problems
                    or any(s.read_error for s in self.segments) or (self.producers and self.producers.culprits))


def audit_partition(directory: str, config: ValidationConfig | None = None, *, producers: bool = True,
                    indexes: bool = True, jobs: int | None = None,
                    progress: Callable[[int], object] | None = None) -> PartitionAudit:
    """``jobs``: threads validating segments (and checking indexes) ahead of the walk that follows
    offsets and producer state in order; default, every core this process may use.
    ``progress``: called with the number of segments done after each."""
    config = config or ValidationConfig(origin="log")
    part = Partition(directory)
    audit = PartitionAudit(part.directory)
    tracker = ProducerStateTracker(config.topic_partition, mode="audit") if producers else None
    producer_culprits = []

    def check(path):
        with Segment(path) as seg:
            verdict = seg.validate(config)
            headers = _v2_header_table(seg.view()) if _WALK_TABLES else None
            base_offset, size = seg.base_offset, seg.size
        return verdict, base_offset, size, headers, _check_indexes(path, headers) if indexes else []

    with ordered_map(check, part.segment_paths, jobs) as checked:
        for done, (path, (verdict, base_offset, size, headers, index_problems)) in enumerate(
                zip(part.segment_paths, checked), 1):
            if headers is None:
                _walk_segment(path, verdict, audit, tracker, producer_culprits)
            else:
                _walk_table(path, verdict, base_offset, headers, audit, tracker, producer_culprits)
            audit.segments[-1].size = size
            audit.segments[-1].invalid_tail_bytes = size - verdict.valid_bytes
            audit.index_problems += index_problems
            if progress is not None:
                progress(done)
    for before, after in zip(audit.segments, audit.segments[1:]):  # lost framing at a segment's end
        bound_unsound(before.result.culprits, next_first=after.first_offset if after.first_offset is not None
                      else after.base_offset)
    audit.lost = between_segments([s.span for s in audit.segments], config.compacted, config.topic_partition)
    if indexes:
        audit.index_problems += missing_indexes(part.segment_paths)
        audit.index_problems += check_partition_files(part.directory, part.segment_paths)
        if tracker is not None:
            last = audit.segments[-1].span if audit.segments else None
            audit.index_problems += txn_index_problems(
                part.segment_paths, tracker.completed_transactions, tracker.open_transactions(),
                torn_after=torn_after(last))
    if tracker is not None:
        audit.producers = ProducerAudit(producer_culprits, tracker.producers, tracker.completed_transactions,
                                        tracker.open_transactions())
        named = topic_partition_of(part.directory)
        if named is not None:
            last = [s.newest_timestamp for s in audit.segments]
            audit.open_transactions = tracker.open_transaction_details(*named, max(last, default=-1))
    return audit


# A segment of whole v2 batches is walked from its header table, built beside validation by the
# worker threads; any other segment batch by batch (tests turn the tables off to compare).
_WALK_TABLES = True


def _previous_last_offset(audit):
    return next((s.last_offset for s in reversed(audit.segments) if s.last_offset is not None), None)


_CRC = "batch.crc_mismatch"


def _claimed_lasts(verdict) -> dict:
    """position -> last offset of each batch whose CRC fails, as its culprit names it: the header's
    last offset delta lies under that CRC, and the validator bounds it by the entry after it."""
    return {c.entry_position: c.last_offset for c in verdict.culprits
            if c.rule == _CRC and c.record_index is None and c.last_offset is not None}


def _previous_last(audit, first: int | None):
    """The last offset before a segment whose first is ``first``: the previous segment's, unless its
    last batch failed its CRC and claims offsets from ``first`` on (a damaged delta): then up to
    ``first`` only, its culprit and span bounded so (the validator's bound, across the files)."""
    prev = _previous_last_offset(audit)
    if prev is None or first is None or first > prev:
        return prev
    seg = next(s for s in reversed(audit.segments) if s.last_offset is not None)
    for c in seg.result.culprits:
        if c.rule == _CRC and c.record_index is None and c.last_offset == prev and c.first_offset is not None \
                and c.first_offset < first:
            c.last_offset = seg.last_offset = first - 1
            return first - 1
    return prev


def _walk_table(path, verdict, base_offset, t, audit, tracker, producer_culprits):
    """``_walk_segment`` over a segment's header table (``_v2_header_table``): the offset checks
    at once, producer state batch by batch without a batch object."""
    entry = SegmentAudit(path, base_offset, verdict, batches=len(t["position"]))
    base, last, position = t["base_offset"], t["last_offset"], t["position"]
    claimed = _claimed_lasts(verdict)
    if claimed:
        last = last.copy()
        for at, bound in claimed.items():
            k = int(np.searchsorted(position, at))
            if k < len(position) and position[k] == at and bound < last[k]:
                last[k] = bound
    if entry.batches:
        entry.first_offset, entry.last_offset = int(base[0]), int(last.max())  # the highest, where it went back
        entry.newest_timestamp = max(-1, int(t["max_timestamp"].max()))
        if entry.first_offset < entry.base_offset:
            audit.below_base.append((path, entry.first_offset))
        prev_last = _previous_last(audit, int(base[0]))
        before = np.empty_like(last)
        before[1:] = last[:-1]
        before[0] = prev_last if prev_last is not None else 0
        first = 0 if prev_last is not None else 1  # the log's first batch follows nothing
        ahead = base[first:] > before[first:]
        if prev_last is not None and not ahead[0]:  # inside the segment: the validator's culprits
            audit.overlaps.append((path, int(position[0]), int(before[0]), int(base[0])))
        # a gap inside the segment: more than one past the last offset (base - before never
        # overflows to 1); between segments it is the partition's (pykbatch.log.truth)
        audit.gaps += int(np.count_nonzero((base[1:] > last[:-1]) & (base[1:] - last[:-1] != 1)))
    if tracker is not None:
        _replay_producers(path, t, tracker, producer_culprits)
    audit.segments.append(entry)


def torn_after(span: SegmentSpan | None) -> int | None:
    """The last offset read of a last segment that ends inside an entry (-1: none read)."""
    if span is None or span.tail_position is None:
        return None
    return span.last_offset if span.last_offset is not None else -1


def producer_state(log_paths: list[str], topic_partition: str = "t-0") -> ProducerStateTracker:
    """The producer state of a partition's segments (in offset order), replayed as the audit
    does, without validating them (the dump's check of the transaction indexes)."""
    tracker = ProducerStateTracker(topic_partition, mode="audit")
    for path in log_paths:
        with Segment(path) as seg:
            table = _v2_header_table(seg.view())
            if table is None:  # legacy entries or damage: batch by batch, as far as it reads
                try:
                    for b in seg.batches():
                        try:
                            tracker.append(b)
                        except KafkaDataError:
                            pass  # an unreadable marker: the audit names it
                except ValueError:
                    pass  # lost framing: the validator names it
        if table is not None:
            _replay_producers(path, table, tracker, [])
    return tracker


def txn_index_findings(log_paths: list[str], topic_partition: str = "t-0") -> list[str]:
    """``txn_index_problems`` of a partition's segments (in offset order): each ``.txnindex``
    against the transactions the log aborts, as replayed by ``producer_state`` (the active
    segment's torn last write left to recovery)."""
    from pykbatch.log.truth import walk_span
    if not log_paths:
        return []
    tracker = producer_state(log_paths, topic_partition)
    return txn_index_problems(log_paths, tracker.completed_transactions, tracker.open_transactions(),
                              torn_after=torn_after(walk_span(log_paths[-1])))


def _replay_producers(path, t, tracker, producer_culprits):
    """``tracker.append`` of every batch with a producer id, from the table's columns (a control
    batch is read for its marker)."""
    rows = np.flatnonzero(t["producer_id"] >= 0)
    columns = [t[name][rows].tolist() for name in (
        "producer_id", "producer_epoch", "base_sequence", "last_sequence", "base_offset", "last_offset",
        "max_timestamp", "is_transactional", "is_control", "position")]
    seg = None
    try:
        for i, pid, epoch, seq, last_seq, base, last, ts, txn, control, pos in zip(rows.tolist(), *columns):
            if control:
                seg = seg or Segment(path)
                try:
                    check = tracker.append(next(iter(seg.batches(start=pos))), entry=i)
                except KafkaDataError as exc:  # an unreadable marker: a culprit of the producer state
                    producer_culprits.append(_unreadable_marker(exc, i, pos, base, last))
                    continue
            else:
                check = tracker.append_data(pid, epoch, seq, last_seq, base, last, ts, txn, (i, pos))
            producer_culprits += check.culprits
    finally:
        if seg is not None:
            seg.close()


def _unreadable_marker(exc, entry: int, position: int, first: int, last: int) -> Culprit:
    """A control batch whose marker cannot be read (its CRC may hold: the validator does not read
    markers): which transaction it ended is not known, so the producer's state is not."""
    return Culprit(entry, None, None, exc.code, exc.rule, exc.offset if exc.offset is not None else position, None,
                   position, exc.message, "the transaction this marker ends is not known", True, first, last)


def _walk_segment(path, verdict, audit, tracker, producer_culprits):
    """One segment's batches in order: offsets against the last batch before them, producer state."""
    prev_last = _previous_last_offset(audit)
    newest = -1
    claimed = _claimed_lasts(verdict)
    with Segment(path) as seg:
        entry = SegmentAudit(path, seg.base_offset, verdict)
        try:
            for b in seg.batches():
                entry.batches += 1
                after = prev_last
                if entry.batches == 1 and seg.base_offset is not None:  # its name: its first batch's first
                    after = seg.base_offset - 1 if after is None else max(after, seg.base_offset - 1)
                first = first_offset(b, after, b.last_offset)  # records unreadable: the validator's
                if entry.batches == 1:
                    prev_last = _previous_last(audit, first)
                b_last = min(b.last_offset, claimed.get(b.position, b.last_offset))
                if entry.first_offset is None:
                    entry.first_offset = first
                    if first < seg.base_offset:
                        audit.below_base.append((path, first))
                entry.last_offset = max(b_last, entry.last_offset if entry.last_offset is not None else b_last)
                if prev_last is not None:
                    if first <= prev_last and entry.batches == 1:  # inside: the validator's
                        audit.overlaps.append((path, b.position, prev_last, first))
                    elif first > prev_last + 1 and entry.batches > 1:  # between segments: truth's
                        audit.gaps += 1
                prev_last = b_last
                newest = max(newest, b.max_timestamp)
                if tracker is not None:
                    try:
                        producer_culprits += tracker.append(b).culprits
                    except KafkaDataError as exc:  # an unreadable marker: a culprit of the producer state
                        producer_culprits.append(_unreadable_marker(exc, entry.batches - 1, b.position,
                                                                    first, b.last_offset))
                del b
        except ValueError as exc:
            entry.read_error = str(exc)
        entry.invalid_tail_bytes = seg.invalid_tail_bytes
        entry.newest_timestamp = newest
    audit.segments.append(entry)


def _check_indexes(log_path: str, headers: dict | None = None) -> list[str]:
    """The segment's offset and time indexes (``pykbatch.log.checks.check_file``): Kafka's
    --verify-index-only against the log, and the broker's start-up sanity checks."""
    problems = []
    for kind in (OffsetIndex, TimeIndex):
        path = sibling(log_path, kind.SUFFIX)
        if os.path.exists(path):
            problems += check_file(path, headers)
    return problems
