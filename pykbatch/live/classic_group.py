"""A member of a consumer group under the classic protocol (``group.protocol=classic``): for
clusters before Kafka 4.0 and groups that stay classic.

JoinGroup (the member's subscription under each assignor it offers, ``partition.assignment.strategy``
order), SyncGroup (the leader, chosen by the coordinator, assigns with ``pykbatch.live.assignors``),
then Heartbeat every ``heartbeat.interval.ms`` until the coordinator answers REBALANCE_IN_PROGRESS.
Under ``range`` (eager) every partition is given up -- revoked in the reader's next poll,
committed first -- before joining again; under ``cooperative-sticky`` the member keeps what it
owns while the group rebalances, gives up only what the new assignment moved, and joins once
more when it gave something up, so the partition reaches its new owner in the next round.  The
application's side (callbacks, commits, max.poll.interval.ms) is ``MemberBase``'s, as for KIP-848.
"""
from __future__ import annotations

import struct
from typing import Any, Mapping

from pykbatch.errors import CODE, error_name
from pykbatch.kafka import definitions
from pykbatch.live import protocol
from pykbatch.live.assignors import (
    COOPERATIVE_STICKY,
    RANGE,
    Subscription,
    cooperative_sticky_assign,
    range_assign,
)
from pykbatch.live.cluster import ClusterError, TopicPartition
from pykbatch.live.group import AGAIN, GroupError, MemberBase, log

ASSIGNORS = {RANGE: range_assign, COOPERATIVE_STICKY: cooperative_sticky_assign}
DEFAULT_STRATEGY = (RANGE, COOPERATIVE_STICKY)  # the Java consumer's default, in its order
MEMBER_ID_REQUIRED = 79  # JoinGroup v4+: join again with the id the coordinator made
REJOIN = frozenset({CODE["REBALANCE_IN_PROGRESS"]})
GONE = frozenset({CODE["ILLEGAL_GENERATION"], CODE["UNKNOWN_MEMBER_ID"]})
SUBSCRIPTION_VERSION, ASSIGNMENT_VERSION = 2, 0  # owned partitions and their generation; the plain assignment
JAVA_NAMES = {"org.apache.kafka.clients.consumer.RangeAssignor": RANGE,
              "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": COOPERATIVE_STICKY}


def strategies_of(value) -> list[str]:
    """``partition.assignment.strategy`` (names or the Java client's class names, comma separated)."""
    names = value.split(",") if isinstance(value, str) else list(value)
    return [JAVA_NAMES.get(n.strip(), n.strip()) for n in names if n.strip()]


def encode_subscription(topics: list[str], owned: list[TopicPartition], generation: int = -1) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(owned):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = definitions.load("ConsumerProtocolSubscription").encode(
        {"Topics": sorted(topics), "UserData": None,
         "OwnedPartitions": [{"Topic": t, "Partitions": ps} for t, ps in by_topic.items()],
         "GenerationId": generation}, SUBSCRIPTION_VERSION)
    return struct.pack(">h", SUBSCRIPTION_VERSION) + body


def decode_subscription(data: bytes, generation: int) -> Subscription:
    (version,) = struct.unpack_from(">h", data)
    fields, _ = definitions.load("ConsumerProtocolSubscription").decode(data, 2, min(version, 3))
    owned = [TopicPartition(t["Topic"], p) for t in fields.get("OwnedPartitions") or () for p in t["Partitions"]]
    return Subscription(list(fields["Topics"]), owned, fields.get("GenerationId", generation))


def encode_assignment(tps: list[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = definitions.load("ConsumerProtocolAssignment").encode(
        {"AssignedPartitions": [{"Topic": t, "Partitions": ps} for t, ps in by_topic.items()], "UserData": None},
        ASSIGNMENT_VERSION)
    return struct.pack(">h", ASSIGNMENT_VERSION) + body


def decode_assignment(data: bytes) -> frozenset:
    if not data:
        return frozenset()
    (version,) = struct.unpack_from(">h", data)
    fields, _ = definitions.load("ConsumerProtocolAssignment").decode(data, 2, min(version, 3))
    return frozenset(TopicPartition(t["Topic"], p) for t in fields["AssignedPartitions"] for p in t["Partitions"])


class ClassicMember(MemberBase):
    """One member of ``group`` under the classic protocol (see the module's doc)."""

    def __init__(self, props: Mapping[str, Any], group: str, topics: list[str], *, instance_id: str | None = None,
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3_000,
                 rebalance_timeout_ms: int = 300_000, strategies=DEFAULT_STRATEGY, max_poll_interval_ms: int = 300_000):
        super().__init__(props, group, topics, instance_id=instance_id, max_poll_interval_ms=max_poll_interval_ms)
        unknown = [s for s in strategies if s not in ASSIGNORS]
        if unknown or not strategies:
            raise GroupError(f"partition.assignment.strategy: {', '.join(unknown) or 'none given'} -- pykbatch's "
                             f"assignors are {', '.join(ASSIGNORS)}")
        self.strategies = list(strategies)
        self.session_timeout_ms, self.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self.interval_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.protocol_name: str | None = None
        self._needs_join = True
        self._rejoin_when_released = False  # cooperative: gave partitions up, so another round places them

    @property
    def eager(self) -> bool:
        return (self.protocol_name or self.strategies[0]) != COOPERATIVE_STICKY

    def _rejoin(self) -> None:
        self.epoch, self._needs_join = -1, True

    def _beat(self) -> None:
        with self._lock:
            owned, target = self._owned, self._target
        if self._rejoin_when_released and target is not None and owned == target:
            self._rejoin_when_released, self._needs_join = False, True
        if self._needs_join:
            if self.eager and owned:  # eager: everything is given up (and committed) before joining
                with self._lock:
                    self._target = frozenset()
                self._joined.set()
                return
            self._join(owned)
            return
        response = self.cluster.request(self.cluster.coordinator(self.group),
                                        protocol.classic_heartbeat(self.group, self.epoch, self.member_id,
                                                                   self.instance_id))
        self._answer(response.error_code, "Heartbeat")
        self._joined.set()

    def _answer(self, code: int, what: str) -> bool:
        """Whether ``code`` lets the member go on; otherwise what it means is done."""
        if not code:
            return True
        if code in AGAIN:
            self.cluster.forget_coordinator(self.group, "group")
            raise ClusterError(f"group {self.group!r}: {what}: {error_name(code)}", code, retriable=True)
        if code in REJOIN:
            self._needs_join = True
            return False
        if code in GONE:
            if code == CODE["UNKNOWN_MEMBER_ID"]:
                self.member_id = ""
            self._needs_join = True
            self._lose(f"{what}: {error_name(code)}")
            return False
        raise GroupError(f"group {self.group!r} refused member {self.member_id or '(new)'}: {what}: "
                         f"{error_name(code)}({code})", code)

    def _join(self, owned: frozenset) -> None:
        subscription = encode_subscription(self.topics, list(owned) if not self.eager else [], self.epoch)
        while True:
            request = protocol.join_group(self.group, self.member_id, self.instance_id, self.session_timeout_ms,
                                          self.rebalance_timeout_ms, [(s, subscription) for s in self.strategies])
            response = self.cluster.request(self.cluster.coordinator(self.group), request,
                                            timeout_ms=self.rebalance_timeout_ms + 5_000)
            if response.error_code == MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            break
        if not self._answer(response.error_code, "JoinGroup"):
            return
        self.member_id, self.epoch, self.protocol_name = response.member_id, response.generation_id, \
            response.protocol_name
        assignments = {}
        if response.leader == self.member_id:
            assignments = self._assign(response.members)
        sync = self.cluster.request(self.cluster.coordinator(self.group), protocol.sync_group(
            self.group, self.epoch, self.member_id, self.instance_id, self.protocol_name, assignments))
        if not self._answer(sync.error_code, "SyncGroup"):
            return
        assigned = decode_assignment(bytes(sync.assignment or b""))
        with self._lock:
            self._target = assigned
            self._rejoin_when_released = not self.eager and bool(self._owned - assigned)
        self._needs_join = False
        log.info("group %s: generation %d (%s): member %s assigned %d partitions", self.group, self.epoch,
                 self.protocol_name, self.member_id, len(assigned))
        self._joined.set()

    def _assign(self, members) -> dict[str, bytes]:
        """The leader's work: every member's share under the chosen assignor, encoded."""
        subscriptions = {m.member_id: decode_subscription(bytes(m.metadata), self.epoch - 1) for m in members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        self.cluster.refresh(topics)
        partitions = {t: len(self.cluster.partitions(t)) for t in topics}
        shares = ASSIGNORS[self.protocol_name](subscriptions, partitions)
        return {m: encode_assignment(tps) for m, tps in shares.items()}

    def _leave(self) -> None:
        if self.instance_id or not self.member_id:
            return  # a static member's place is kept for it until its session times out
        self.cluster.request(self.cluster.coordinator(self.group),
                             protocol.leave_group(self.group, self.member_id, self.instance_id))
        self._needs_join, self.epoch = True, -1
