"""Which remote copies count: the broker's remote log metadata cache, replayed offline.

Kafka's topic-based metadata manager replays ``__remote_log_metadata`` into a cache
(``RemoteLogMetadataCache`` / ``RemoteLogLeaderEpochState``): per leader epoch, start offset ->
the finished copy, where a later finished copy of the same epoch that starts at or before the
last one's start and reaches at least as far replaces it (duplicate uploads after a leader
change); copies being deleted leave the map.  A fetch at offset ``o`` asks the cache with the
epoch the partition's leader-epoch lineage gives ``o``.  ``RemotePartition.plan`` walks the
offsets the same way and answers which copy serves each range, and what could not be served.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable

from pykbatch.tiered.metadata import (PartitionDelete, PartitionDeleteState, SegmentId, SegmentMetadata, SegmentSnapshot,
                       SegmentState, SegmentUpdate, TopicIdPartition)

_VALID = {  # RemoteLogSegmentState.isValidTransition (a self transition is also valid)
    None: {SegmentState.COPY_SEGMENT_STARTED},
    SegmentState.COPY_SEGMENT_STARTED: {SegmentState.COPY_SEGMENT_FINISHED, SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.COPY_SEGMENT_FINISHED: {SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.DELETE_SEGMENT_STARTED: {SegmentState.DELETE_SEGMENT_FINISHED},
}


@dataclass
class Copy:
    """One remote copy of a segment and its latest known state."""
    metadata: SegmentMetadata
    state: SegmentState

    @property
    def id(self) -> SegmentId:
        return self.metadata.segment_id

    @property
    def start(self) -> int:
        return self.metadata.start_offset

    @property
    def end(self) -> int:
        return self.metadata.end_offset

    def epoch_end(self, epoch: int) -> int:
        """The last offset of ``epoch`` in this copy."""
        later = [o for e, o in self.metadata.leader_epochs.items() if e > epoch]
        return min(later) - 1 if later else self.end


@dataclass
class _EpochState:
    offset_to_id: dict[int, SegmentId] = field(default_factory=dict)
    highest: int | None = None

    def floor(self, offset: int) -> SegmentId | None:
        keys = sorted(self.offset_to_id)
        i = bisect.bisect_right(keys, offset)
        return self.offset_to_id[keys[i - 1]] if i else None


@dataclass(frozen=True)
class Span:
    """A range of offsets [start, end] and what serves it: ``copy`` (a remote copy), or None for a
    hole in the remote log that the broker would not serve either."""
    start: int
    end: int
    copy: Copy | None


@dataclass(frozen=True)
class Rejected:
    """A copy the plan does not read, and why (``state``: copy unfinished, being deleted; or
    ``superseded`` by a later copy of the same offsets; or ``outside lineage``)."""
    copy: Copy
    reason: str


class Lineage:
    """The leader-epoch lineage: (epoch, start offset) pairs, ascending."""

    def __init__(self, entries: Iterable[tuple[int, int]]):
        self.entries = sorted(set(entries))

    def epoch_for(self, offset: int) -> int | None:
        starts = [o for _, o in self.entries]
        i = bisect.bisect_right(starts, offset)
        if i == 0:
            return self.entries[0][0] if self.entries else None
        return self.entries[i - 1][0]

    def __repr__(self) -> str:
        return f"Lineage({self.entries})"


class RemotePartition:
    """One partition's remote copies, as the broker's metadata cache holds them."""

    def __init__(self, partition: TopicIdPartition):
        self.partition = partition
        self.copies: dict[SegmentId, Copy] = {}
        self.epochs: dict[int, _EpochState] = {}
        self.deleted: set[SegmentId] = set()
        self.dropped_events: list[tuple[object, str]] = []  # invalid transitions, as the broker drops them
        self.partition_deleted: PartitionDeleteState | None = None

    # -- replay -------------------------------------------------------------------------------
    def apply(self, event) -> None:
        if isinstance(event, SegmentMetadata):
            self._started(event)
        elif isinstance(event, SegmentUpdate):
            self._update(event)
        elif isinstance(event, PartitionDelete):
            self.partition_deleted = PartitionDeleteState(event.state)
        elif isinstance(event, SegmentSnapshot):  # carries the state directly
            self.dropped_events.append((event, "snapshot records restore a cache, not replayed here"))

    def _started(self, m: SegmentMetadata) -> None:
        existing = self.copies.get(m.segment_id)
        if not self._valid(existing.state if existing else None, m.state, m):
            return
        if m.state != SegmentState.COPY_SEGMENT_STARTED:
            self.dropped_events.append((m, f"metadata added with state {SegmentState(m.state).name}"))
            return
        self.copies[m.segment_id] = Copy(m, SegmentState.COPY_SEGMENT_STARTED)

    def _valid(self, src, target, event) -> bool:
        if src == target or target in _VALID.get(src, ()):
            return True
        self.dropped_events.append((event, f"{getattr(src, 'name', src)} -> {SegmentState(target).name}"))
        return False

    def _update(self, u: SegmentUpdate) -> None:
        copy = self.copies.get(u.segment_id)
        if copy is None:
            self.dropped_events.append((u, "an update for a copy the metadata never announced"))
            return
        if not self._valid(copy.state, u.state, u):
            return
        copy.state = SegmentState(u.state)
        if copy.state == SegmentState.COPY_SEGMENT_FINISHED:
            for epoch, start in copy.metadata.leader_epochs.items():
                self._finished(self.epochs.setdefault(epoch, _EpochState()), start, copy, copy.epoch_end(epoch))
        elif copy.state == SegmentState.DELETE_SEGMENT_STARTED:
            for epoch, start in copy.metadata.leader_epochs.items():
                state = self.epochs.setdefault(epoch, _EpochState())
                if state.offset_to_id.get(start) == copy.id:
                    del state.offset_to_id[start]
        elif copy.state == SegmentState.DELETE_SEGMENT_FINISHED:
            del self.copies[copy.id]
            self.deleted.add(copy.id)

    @staticmethod
    def _finished(state: _EpochState, start: int, copy: Copy, epoch_end: int) -> None:
        # A finished copy of this epoch replaces the later entries it covers (duplicate uploads).
        while state.offset_to_id:
            last = max(state.offset_to_id)
            if last >= start and state.highest is not None and state.highest <= epoch_end:
                del state.offset_to_id[last]
            else:
                break
        state.offset_to_id[start] = copy.id
        if state.highest is None or epoch_end > state.highest:
            state.highest = epoch_end

    # -- lookups ------------------------------------------------------------------------------
    def lookup(self, epoch: int, offset: int) -> Copy | None:
        """``RemoteLogMetadataCache.remoteLogSegmentMetadata(epoch, offset)``."""
        state = self.epochs.get(epoch)
        sid = state.floor(offset) if state else None
        copy = self.copies.get(sid) if sid else None
        if copy is None or offset > copy.epoch_end(epoch):
            return None
        return copy

    def referenced(self) -> list[Copy]:
        ids = {sid for s in self.epochs.values() for sid in s.offset_to_id.values()}
        return sorted((self.copies[i] for i in ids if i in self.copies), key=lambda c: (c.start, c.end))

    def default_lineage(self) -> Lineage:
        """A lineage from the metadata alone, for when no leader-epoch checkpoint is at hand: each
        epoch starts where its finished copies say, and an epoch whose copies start before an
        earlier epoch's highest offset belongs to a diverged leader and is left out."""
        starts: dict[int, int] = {}
        for copy in self.referenced():
            for epoch, start in copy.metadata.leader_epochs.items():
                starts[epoch] = min(start, starts.get(epoch, start))
        entries, reached = [], -1
        for epoch in sorted(starts):
            if starts[epoch] > reached or not entries:
                entries.append((epoch, starts[epoch]))
                reached = max(reached, self.epochs[epoch].highest or starts[epoch])
        return Lineage(entries)

    def plan(self, lineage: Lineage | None = None, start: int | None = None) -> tuple[list[Span], list[Rejected]]:
        """The ranges of offsets the remote log serves, from ``start`` (default: the first one it
        holds) to its end, each with its copy or None (a hole); and the copies left unread."""
        lineage = lineage or self.default_lineage()
        lineage_epochs = {e for e, _ in lineage.entries}
        referenced = [c for c in self.referenced() if set(c.metadata.leader_epochs) & lineage_epochs]
        spans: list[Span] = []
        if referenced:
            offset = referenced[0].start if start is None else start
            last = max(c.end for c in referenced)
            while offset <= last:
                epoch = lineage.epoch_for(offset)
                copy = self.lookup(epoch, offset) if epoch is not None else None
                if copy is not None:
                    spans.append(Span(offset, copy.end, copy))
                    offset = copy.end + 1
                    continue
                later = [c.start for c in referenced if c.start > offset]
                nxt = min(later) if later else last + 1
                spans.append(Span(offset, nxt - 1, None))
                offset = nxt
        used = {s.copy.id for s in spans if s.copy}
        rejected = []
        for copy in sorted(self.copies.values(), key=lambda c: (c.start, c.end)):
            if copy.id in used:
                continue
            if copy.state != SegmentState.COPY_SEGMENT_FINISHED:
                reason = copy.state.name
            elif not set(copy.metadata.leader_epochs) & lineage_epochs:
                reason = "outside the leader-epoch lineage"
            elif spans and copy.end < spans[0].start:
                reason = "before the start"
            else:
                reason = "superseded by another copy of its offsets"
            rejected.append(Rejected(copy, reason))
        return spans, rejected


def replay(events: Iterable) -> dict[TopicIdPartition, RemotePartition]:
    """Every partition's cache after the given metadata events (in the metadata topic's order)."""
    parts: dict[TopicIdPartition, RemotePartition] = {}
    for event in events:
        tip = event.partition
        if tip is None:
            continue
        part = parts.get(tip)
        if part is None:
            part = parts[tip] = RemotePartition(tip)
        part.apply(event)
    return parts
