"""A member of a consumer group under KIP-848's protocol (``group.protocol=consumer``).

The coordinator assigns (its ``uniform`` or ``range`` assignor, ``group.remote.assignor``); the
member heartbeats (ConsumerGroupHeartbeat) what it subscribes to and what it owns, and the answer
carries its epoch and, when it changed, its target assignment by topic id.  Partitions move
without a stop-the-world rebalance: the coordinator gives a partition to its new owner only once
the old owner's heartbeat no longer lists it, so no two members read it at once.

Heartbeats go from a thread of their own, on a connection of their own, so a member stays in the
group while its application works through what a poll returned.  What the thread learns (a new
target, fencing, a fatal refusal) waits for the application's thread: the reader reconciles at
its next poll -- revoked partitions committed and given up, new ones started from the group's
commits -- and tells the member what it owns now (``acknowledge``), which the thread heartbeats
at once.  A member whose application has not polled for ``max.poll.interval.ms`` leaves the group
(its partitions go to others); its next poll reports them lost and joins again, as Kafka's Java
consumer does.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pykbatch.errors import CODE, error_name
from pykbatch.live import protocol
from pykbatch.live.cluster import Cluster, ClusterError, TopicPartition

log = logging.getLogger("pykbatch.live.group")

JOIN, LEAVE, LEAVE_STATIC = 0, -1, -2  # member epochs a heartbeat sends to join / leave
GONE = frozenset({CODE["FENCED_MEMBER_EPOCH"], CODE["UNKNOWN_MEMBER_ID"]})  # no longer a member: join again
AGAIN = frozenset({CODE["COORDINATOR_LOAD_IN_PROGRESS"], CODE["COORDINATOR_NOT_AVAILABLE"], CODE["NOT_COORDINATOR"]})
RETRY_S = 0.2


class GroupError(ClusterError):
    """The group refused the member for good (no such protocol on the broker, the group is a
    classic one, not authorized, full, a static member's id in use): named, with Kafka's code."""


@dataclass
class Changes:
    """What the reader does at its next poll: give up ``revoked`` (committing them first),
    start ``assigned``; ``lost``: every partition it owned went to others uncommitted (fenced,
    or left after max.poll.interval.ms)."""
    revoked: frozenset
    assigned: frozenset
    lost: bool = False

    def __bool__(self) -> bool:
        return bool(self.revoked or self.assigned or self.lost)


class MemberBase(ABC):
    """What every kind of member shares: the application's side (``changes`` / ``acknowledge``
    around each poll, commits' identity, closing) and the thread that keeps it in the group (its
    own connection; ``_beat`` is one step of the protocol, ``_leave`` leaves)."""

    def __init__(self, props: Mapping[str, Any], group: str, topics: list[str], *, instance_id: str | None = None,
                 max_poll_interval_ms: int = 300_000):
        self.group, self.topics = group, sorted(set(topics))
        self.instance_id, self.max_poll_interval_ms = instance_id, max_poll_interval_ms
        self.epoch = JOIN
        self.interval_s = 1.0
        self.cluster = Cluster(props)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._target: frozenset | None = None      # what the group assigns this member now, by name
        self._owned: frozenset = frozenset()       # what the reader holds (acknowledge)
        self._lost = False
        self._error: Exception | None = None
        self._polled = time.monotonic()
        self._joined = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pykbatch-group-{group}", daemon=True)

    # -- the application's thread ----------------------------------------------------------------
    def start(self, timeout_s: float = 30) -> None:
        """Joins; returns once the coordinator answered (or raises what it refused)."""
        self.cluster.connect()
        self._thread.start()
        if not self._joined.wait(timeout_s):
            self.raise_error()
            raise ClusterError(f"group {self.group!r}: no answer to joining within {timeout_s:.0f} s", retriable=True)
        self.raise_error()

    def raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def polled(self) -> None:
        """The application polled (max.poll.interval.ms counts from here)."""
        self._polled = time.monotonic()

    def changes(self) -> Changes:
        """What to reconcile now, against what the reader owns."""
        self.raise_error()
        with self._lock:
            if self._lost:
                return Changes(frozenset(), frozenset(), lost=True)
            if self._target is None:
                return Changes(frozenset(), frozenset())
            return Changes(self._owned - self._target, self._target - self._owned)

    def acknowledge(self, owned) -> None:
        """What the reader owns after reconciling (after a loss: nothing; the member joins again)."""
        with self._lock:
            self._owned = frozenset(owned)
            if self._lost and not self._owned:
                self._lost, self._target = False, None
                self._rejoin()
                self._joined.clear()
        self._wake.set()

    @property
    def identity(self) -> tuple[str, int, str | None]:
        """(member id, epoch or generation, instance id): what a commit as this member carries."""
        return self.member_id, self.epoch, self.instance_id

    def refresh_epoch(self, timeout_s: float = 10) -> None:
        """A heartbeat now, and its answer waited for (a commit refused for a stale epoch)."""
        seen = self.epoch
        self._joined.clear()
        self._wake.set()
        self._joined.wait(timeout_s)
        log.debug("group %s: epoch %s -> %s", self.group, seen, self.epoch)

    def close(self, leave: bool = True) -> None:
        """Stops heartbeating and (``leave``) leaves the group: a static member's place is kept
        for it until the group's session timeout; others' partitions move at once."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(10)
        if leave and self.epoch > 0:
            try:
                self._leave()
            except ClusterError as exc:
                log.info("group %s: leaving: %s", self.group, exc)
        self.cluster.close()

    # -- the protocol's part ----------------------------------------------------------------------
    member_id: str

    @abstractmethod
    def _beat(self) -> None:
        """One step (a heartbeat, a join): sets ``_target``, ``_lost``, sets ``_joined`` when answered."""

    @abstractmethod
    def _leave(self) -> None:
        """Leaves the group (a static member: keeps its place, as its protocol says)."""

    def _rejoin(self) -> None:
        """After a loss the application released: the next ``_beat`` joins again."""
        self.epoch = JOIN

    def _lose(self, why: str) -> None:
        log.warning("group %s: %s: the partitions this member held are lost; joining again", self.group, why)
        with self._lock:
            self._lost, self._target = True, None
        self._joined.set()

    # -- the heartbeat thread -------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._idle_too_long():
                    continue
                with self._lock:
                    waiting_for_release = self._lost
                if not waiting_for_release:
                    self._beat()
            except GroupError as exc:
                self._error = exc
                self._joined.set()
                return
            except ClusterError as exc:  # a connection or coordinator that failed: again, soon
                log.info("group %s: heartbeat: %s", self.group, exc)
                self._wake.wait(RETRY_S)
                self._wake.clear()
                continue
            except Exception as exc:  # noqa: BLE001 (surfaced at the application's next poll, not lost in a thread)
                self._error = exc
                self._joined.set()
                return
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def _idle_too_long(self) -> bool:
        """max.poll.interval.ms passed without a poll: leave, so the partitions move (the next
        poll finds them lost and joins again)."""
        if time.monotonic() - self._polled <= self.max_poll_interval_ms / 1000 or self.epoch <= 0:
            return False
        log.warning("group %s: no poll for %d ms (max.poll.interval.ms): leaving the group", self.group,
                    self.max_poll_interval_ms)
        try:
            self._leave()
        finally:
            with self._lock:
                self._lost, self.epoch = True, JOIN
        self._wake.wait(RETRY_S)
        return True


class GroupMember(MemberBase):
    """One member of ``group`` subscribed to ``topics`` under KIP-848's protocol (see the
    module's doc).  ``props``: connection properties (its heartbeat connection is its own)."""

    def __init__(self, props: Mapping[str, Any], group: str, topics: list[str], *, instance_id: str | None = None,
                 rebalance_timeout_ms: int = 300_000, assignor: str | None = None, rack_id: str | None = None,
                 max_poll_interval_ms: int = 300_000):
        super().__init__(props, group, topics, instance_id=instance_id, max_poll_interval_ms=max_poll_interval_ms)
        self.assignor, self.rack_id, self.rebalance_timeout_ms = assignor, rack_id, rebalance_timeout_ms
        self.member_id = str(uuid.uuid4())  # KIP-1082: the member makes its id, kept for its lifetime
        self._unnamed: list | None = None  # an assignment whose topic ids the metadata does not name yet

    def _leave(self) -> None:
        self._send(LEAVE_STATIC if self.instance_id else LEAVE)

    def _send(self, epoch: int):
        joining = epoch == JOIN
        with self._lock:
            owned = self._owned
        ids = self.cluster.topic_ids({tp.topic for tp in owned}) if owned else {}
        by_id: dict[bytes, list[int]] = {}
        for tp in owned:
            by_id.setdefault(ids[tp.topic], []).append(tp.partition)
        request = protocol.consumer_group_heartbeat(
            self.group, self.member_id, epoch, instance_id=self.instance_id, rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms, topics=self.topics, assignor=self.assignor,
            owned={} if joining else by_id)
        return self.cluster.heartbeat(self.group, request)

    def _beat(self) -> None:
        response = self._send(self.epoch)
        log.debug("group %s: member %s heartbeat: %s", self.group, self.member_id, response)
        code = response.error_code
        if code in AGAIN:
            raise ClusterError(f"group {self.group!r}: {error_name(code)}", code, retriable=True)
        if code in GONE:
            self._lose(f"{error_name(code)} ({response.error_message or ''})")
            return
        if code:
            raise GroupError(self._refusal(code, response.error_message), code)
        with self._lock:
            self.epoch = response.member_epoch
        self.interval_s = max(0.05, response.heartbeat_interval_ms / 1000)
        if response.assignment is not None:
            self._unnamed = [(t.topic_id.bytes, list(t.partitions)) for t in response.assignment.topic_partitions]
        if self._unnamed is not None:
            self._name_target()
        self._joined.set()

    def _name_target(self) -> None:
        names = self.cluster.topic_names(i for i, _ in self._unnamed)
        if len(names) < len({i for i, _ in self._unnamed}):
            return  # a topic the metadata does not name yet (just created): the next heartbeat tries again
        target = frozenset(TopicPartition(names[i], p) for i, ps in self._unnamed for p in ps)
        self._unnamed = None
        with self._lock:
            self._target = target

    def _refusal(self, code: int, message: str | None) -> str:
        why = {
            "UNSUPPORTED_VERSION": "the broker does not speak KIP-848's group protocol (Kafka 4.0+ does; "
                                   "group.protocol=classic for older clusters)",
            "GROUP_ID_NOT_FOUND": "the group exists under the classic protocol (group.protocol=classic joins it)",
            "UNRELEASED_INSTANCE_ID": f"group.instance.id {self.instance_id!r} is held by another member",
            "GROUP_MAX_SIZE_REACHED": "the group is full (group.consumer.max.size)",
            "UNSUPPORTED_ASSIGNOR": f"the coordinator has no assignor {self.assignor!r} (uniform, range)",
        }.get(error_name(code), "")
        return (f"group {self.group!r} refused member {self.member_id}: {error_name(code)}({code})"
                + (f": {message}" if message else "") + (f" -- {why}" if why else ""))
