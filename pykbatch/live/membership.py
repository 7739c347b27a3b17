"""A Reader in a consumer group: what its polls do around the fetching (``Reader`` with
``group.id`` and ``subscribe``, as Kafka's Java consumer joins on subscribe).

Before each poll the reader reconciles with its member (``pykbatch.live.group.GroupMember``,
KIP-848's protocol, or ``pykbatch.live.classic_group.ClassicMember``): partitions
lost (fenced, or left after max.poll.interval.ms) are dropped uncommitted and ``on_lost`` told;
revoked ones are committed (with ``enable.auto.commit``) and ``on_revoked`` told while the reader
still holds them (a callback may commit), then dropped; assigned ones start at the group's
committed offsets (``auto.offset.reset`` where there are none) and ``on_assigned`` is told.  The
member then heartbeats what the reader owns, which is what lets the coordinator hand revoked
partitions to their next owner.  With ``enable.auto.commit`` the positions the application has
received (every poll before this one) are committed every ``auto.commit.interval.ms`` and on
close: at-least-once, as Kafka's consumers.

Never stuck, in a group: a skipped range is written into the partition's commit metadata
(``pykbatch.live.commit_notes``) as soon as it is reported -- the committed offset is left where
it was -- so a member that takes the partition over before the next commit skips the range
without reporting it again (once for the group), and the commit past it tells operators which
ranges were skipped (``pykbatch groups describe``).
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from pykbatch.errors import CODE
from pykbatch.live.cluster import (
    EARLIEST,
    LATEST,
    Cluster,
    ClusterError,
    TopicPartition,
    asked_until_answered,
)
from pykbatch.live.commit_notes import SkipNotes
from pykbatch.live.fetched import Skip
from pykbatch.live.group import MemberBase
from pykbatch.live.offsets import COMMITTED_WAIT_S

log = logging.getLogger("pykbatch.live.group")

Callback = Callable[[list[TopicPartition]], object]
# a commit with an epoch / generation the member has since left behind, or during a rebalance:
# sent again once the member's next heartbeat (or join) answered
COMMIT_AGAIN = frozenset({CODE["STALE_MEMBER_EPOCH"], CODE["REBALANCE_IN_PROGRESS"]})
COMMIT_TRIES = 5


class Membership:
    """The group side of one Reader (see the module's doc)."""

    def __init__(self, cluster: Cluster, member: MemberBase, *, auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, reset: str = "latest", isolation_level: int = 0,
                 on_assigned: Callback | None = None, on_revoked: Callback | None = None,
                 on_lost: Callback | None = None):
        self.cluster, self.member = cluster, member
        self.auto_commit, self.interval_s = auto_commit, auto_commit_interval_ms / 1000
        self.reset, self.isolation_level = reset, isolation_level
        self.on_assigned, self.on_revoked, self.on_lost = on_assigned, on_revoked, on_lost
        self.notes: dict[TopicPartition, SkipNotes] = {}
        self.committed: dict[TopicPartition, int] = {}  # what the group holds for each owned partition
        self._next_commit = time.monotonic() + self.interval_s
        self._in_flight: list = []  # commit_async's (handle, offsets, callback), settled before each poll

    @property
    def group(self) -> str:
        return self.member.group

    # -- around a poll ---------------------------------------------------------------------------
    def before_poll(self, reader) -> None:
        """Reconciles, and auto-commits when due (``reader``: the Reader whose partitions change)."""
        self.member.polled()
        self.settle()
        changes = self.member.changes()
        if changes.lost:
            lost = sorted(reader.assignment)
            self._forget(reader, lost)
            if lost and self.on_lost:
                self.on_lost(lost)
            self.member.acknowledge(())
        elif changes:
            if changes.revoked:
                revoked = sorted(changes.revoked)
                if self.auto_commit:
                    self._commit_quietly({tp: reader.positions()[tp] for tp in revoked})
                if self.on_revoked:
                    self.on_revoked(revoked)
                self._forget(reader, revoked)
            if changes.assigned:
                assigned = sorted(changes.assigned)
                reader._add(self._starts(assigned))
                if self.on_assigned:
                    self.on_assigned(assigned)
            self.member.acknowledge(reader.assignment)
        if self.auto_commit and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self.interval_s
            self._commit_quietly(reader.positions())

    def _forget(self, reader, tps: list[TopicPartition]) -> None:
        """Partitions no longer this member's: out of the reader, their notes and commits forgotten."""
        reader._drop(tps)
        for tp in tps:
            self.notes.pop(tp, None)
            self.committed.pop(tp, None)

    def _starts(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where newly assigned partitions start: the group's commits (and the notes they carry;
        asked again while a transaction holds them pending), ``auto.offset.reset`` where none."""
        committed = asked_until_answered(lambda: self.cluster.committed_with_metadata(self.group, tps),
                                         COMMITTED_WAIT_S)
        starts = {}
        for tp, (offset, metadata) in committed.items():
            self.notes[tp] = SkipNotes.parse(metadata)
            if offset is not None:
                starts[tp] = offset
        missing = {tp: LATEST if self.reset == "latest" else EARLIEST for tp in tps if tp not in starts}
        if missing:
            starts.update(self.cluster.list_offsets(missing, self.isolation_level))
        for tp in tps:
            self.committed[tp] = committed[tp][0] if committed[tp][0] is not None else starts[tp]
        return starts

    # -- commits ---------------------------------------------------------------------------------
    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commits ``offsets`` as this member (with each partition's skip notes); a commit the
        coordinator finds one epoch behind is sent again with the member's new epoch."""
        if not offsets:
            return
        for attempt in range(COMMIT_TRIES):
            try:
                self.cluster.commit(self.group, offsets, {tp: self.notes.get(tp, SkipNotes()).text() for tp in offsets},
                                    member=self.member.identity)
                break
            except ClusterError as exc:
                if (exc.code not in COMMIT_AGAIN and not exc.retriable) or attempt == COMMIT_TRIES - 1:
                    raise
                self.member.refresh_epoch()
        self.committed.update(offsets)

    def commit_async(self, offsets: dict[TopicPartition, int], callback: Callable | None = None) -> None:
        """Commits ``offsets`` without waiting; ``callback(offsets, error)`` (error None when it
        succeeded) is called in a later poll (or on close), as Kafka's commitAsync callbacks are."""
        notes = {tp: self.notes.get(tp, SkipNotes()).text() for tp in offsets}
        self._in_flight.append((self.cluster.commit_async(self.group, offsets, notes, member=self.member.identity),
                                dict(offsets), callback))

    def settle(self, wait: bool = False) -> None:
        """Async commits answered since (all of them, ``wait``): recorded, their callbacks called."""
        if wait and self._in_flight:
            self.cluster.collect([h for h, _, _ in self._in_flight if not isinstance(h, Exception)])
        still = []
        for handle, offsets, callback in self._in_flight:
            error = handle if isinstance(handle, Exception) else None
            if error is None:
                if not handle.is_done:
                    still.append((handle, offsets, callback))
                    continue
                try:
                    if handle.failed():
                        raise ClusterError(f"OffsetCommit for group {self.group!r}: {handle.exception}", retriable=True)
                    self.cluster.check_commit(self.group, handle.value)
                    self.committed.update(offsets)
                except ClusterError as exc:
                    error = exc
            if error is not None:
                log.warning("group %s: asynchronous commit failed: %s", self.group, error)
            if callback is not None:
                callback(offsets, error)
        self._in_flight = still

    def _commit_quietly(self, offsets: dict[TopicPartition, int]) -> None:
        """An automatic commit: a failure is logged (the next one carries the positions on)."""
        try:
            self.commit(offsets)
        except ClusterError as exc:
            log.warning("group %s: automatic commit failed: %s", self.group, exc)

    # -- skips -----------------------------------------------------------------------------------
    def reported(self, skip: Skip) -> bool:
        """Whether a member of the group already reported ``skip``'s range (skip it quietly)."""
        notes = self.notes.get(TopicPartition(skip.topic, skip.partition))
        return notes is not None and notes.reported(skip.first_offset, skip.last_offset)

    def note(self, skip: Skip) -> None:
        """``skip`` was reported: written into the partition's commit metadata at once, the
        committed offset left where it was."""
        tp = TopicPartition(skip.topic, skip.partition)
        self.notes.setdefault(tp, SkipNotes()).add(skip.first_offset, skip.last_offset, skip.rule)
        if tp in self.committed:
            self._commit_quietly({tp: self.committed[tp]})

    def close(self, reader, leave: bool = True) -> None:
        """The last commit (``enable.auto.commit``), revocation told, the group left."""
        try:
            self.settle(wait=True)
            if self.auto_commit and reader.assignment:
                self._commit_quietly(reader.positions())
            if self.on_revoked and reader.assignment and leave:
                self.on_revoked(sorted(reader.assignment))
        finally:
            self.member.close(leave)

