"""A consumer group as operators look at it: each partition's committed offset, log end and lag,
the member that holds it, and the ranges its members skipped (``pykbatch.live.commit_notes``) --
what ``pykbatch groups describe`` prints, in the shape of Kafka's ``kafka-consumer-groups
--describe``.

Members come from ConsumerGroupDescribe (KIP-848 groups) or DescribeGroups (classic groups of
protocol type ``consumer``: their assignments decoded); a group with commits and no membership is
described from its commits alone.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pykbatch.errors import CODE, error_name
from pykbatch.live import protocol
from pykbatch.live.cluster import LATEST, Cluster, ClusterError, TopicPartition
from pykbatch.live.commit_notes import SkipNotes

NOT_A_CONSUMER_GROUP = frozenset({CODE["GROUP_ID_NOT_FOUND"]})


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    epoch: int
    partitions: list[TopicPartition]


@dataclass
class PartitionRow:
    tp: TopicPartition
    committed: int | None
    log_end: int
    member: Member | None
    notes: SkipNotes

    @property
    def lag(self) -> int | None:
        return None if self.committed is None else max(0, self.log_end - self.committed)


@dataclass
class GroupDescription:
    group: str
    state: str
    """KIP-848's group state (Empty, Assigning, Reconciling, Stable, Dead), or "-" when the
    group is not a KIP-848 group."""
    members: list[Member] = field(default_factory=list)
    rows: list[PartitionRow] = field(default_factory=list)

    HEADER = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID", "SKIPPED")

    def table(self) -> list[tuple[str, ...]]:
        """kafka-consumer-groups --describe's rows (its columns, "-" where it prints one), and the
        ranges the group's members skipped and committed past or reported."""
        out = []
        for r in self.rows:
            m = r.member
            out.append((self.group, r.tp.topic, str(r.tp.partition), _or_dash(r.committed), str(r.log_end),
                        _or_dash(r.lag), m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-",
                        str(r.notes.total)))
        return out

    def as_dict(self) -> dict:
        return {"group": self.group, "state": self.state,
                "members": [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                             "instance_id": m.instance_id, "epoch": m.epoch,
                             "partitions": [[tp.topic, tp.partition] for tp in m.partitions]} for m in self.members],
                "partitions": [{"topic": r.tp.topic, "partition": r.tp.partition, "committed": r.committed,
                                "log_end": r.log_end, "lag": r.lag, "member": r.member.member_id if r.member else None,
                                "skipped_ranges": r.notes.total,
                                "skipped": [{"first_offset": a, "last_offset": b, "rule": rule}
                                            for a, b, rule in r.notes.ranges]} for r in self.rows]}


def _or_dash(value) -> str:
    return "-" if value is None else str(value)


def describe(cluster: Cluster, group: str) -> GroupDescription:
    """``group`` described (raises ``ClusterError`` naming what the cluster refused)."""
    state, members = _members(cluster, group)
    committed = cluster.committed_with_metadata(group, None)
    held = {tp: m for m in members for tp in m.partitions}
    tps = sorted(set(committed) | set(held))
    ends = cluster.list_offsets({tp: LATEST for tp in tps}) if tps else {}
    rows = [PartitionRow(tp, committed.get(tp, (None, ""))[0], ends[tp], held.get(tp),
                         SkipNotes.parse(committed.get(tp, (None, ""))[1])) for tp in tps]
    return GroupDescription(group, state, members, rows)


def _members(cluster: Cluster, group: str) -> tuple[str, list[Member]]:
    response = cluster.request(cluster.coordinator(group), protocol.consumer_group_describe([group]))
    (g,) = response.groups
    if g.error_code in NOT_A_CONSUMER_GROUP:
        return _classic_members(cluster, group)
    if g.error_code:
        raise ClusterError(f"ConsumerGroupDescribe of {group!r}: {error_name(g.error_code)}({g.error_code})"
                           + (f": {g.error_message}" if g.error_message else ""), g.error_code)
    members = []
    for m in g.members:
        parts = m.assignment.topic_partitions if m.assignment is not None else []
        names = cluster.topic_names(t.topic_id.bytes for t in parts if not t.topic_name)
        members.append(Member(m.member_id, m.client_id, m.client_host, m.instance_id, m.member_epoch, sorted(
            TopicPartition(t.topic_name or names.get(t.topic_id.bytes, str(t.topic_id)), p)
            for t in parts for p in t.partitions)))
    return g.group_state, members


def _classic_members(cluster: Cluster, group: str) -> tuple[str, list[Member]]:
    from pykbatch.live.classic_group import decode_assignment
    (g,) = cluster.request(cluster.coordinator(group), protocol.describe_groups([group])).groups
    if g.error_code:
        raise ClusterError(f"DescribeGroups of {group!r}: {error_name(g.error_code)}({g.error_code})", g.error_code)
    if g.protocol_type != "consumer":
        return g.group_state, []
    members = []
    for m in g.members:
        try:
            held = sorted(decode_assignment(bytes(m.member_assignment or b"")))
        except (ValueError, struct.error):  # an assignment of another shape: the member, without its partitions
            held = []
        members.append(Member(m.member_id, m.client_id, m.client_host, m.group_instance_id, -1, held))
    return g.group_state, members
