"""Which partitions a reader reads and from where to where, in Spark's Kafka source's terms.

``assign`` ('{"t":[0,1]}' or ``{"t": [0, 1]}``) or ``subscribe`` ("t1,t2": every partition);
``starting_offsets`` "earliest" | "latest" | '{"t":{"0":23,"1":-2}}' (-2 earliest, -1 latest) |
"committed" (the group's committed offsets, ``earliest`` where it has none);
``starting_timestamp`` (one epoch-ms for every partition) or ``starting_offsets_by_timestamp``
('{"t":{"0":1700000000000}}'); ``ending_offsets`` "latest" | '{"t":{"0":50,"1":-1}}' | None
(unbounded: a poll loop or a stream).
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from pykbatch.live.cluster import EARLIEST, LATEST, Cluster, TopicPartition, asked_until_answered

SPEC_NAMES = {"earliest": EARLIEST, "latest": LATEST}
# a killed transactional writer's pending offsets are settled by its coordinator within the
# transaction's timeout (Kafka's default 60 s) plus its check's interval (10 s)
COMMITTED_WAIT_S = 90


def _json(value: Any, what: str):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{what}: not a name or JSON ({exc}): {value!r}") from None
    return value


def assigned(cluster: Cluster, assign=None, subscribe=None) -> list[TopicPartition]:
    """The partitions to read, in topic and partition order (exactly one of the two given)."""
    if (assign is None) == (subscribe is None):
        raise ValueError("give exactly one of assign (topic -> partitions) and subscribe (topics)")
    if subscribe is not None:
        topics = [t.strip() for t in subscribe.split(",")] if isinstance(subscribe, str) else list(subscribe)
        topics = [t for t in topics if t]
        if not topics:
            raise ValueError("subscribe names no topic")
        cluster.refresh(topics)
        return [TopicPartition(t, p) for t in topics for p in cluster.partitions(t)]
    spec = _json(assign, "assign")
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError('assign is a JSON object of topic -> partitions, e.g. {"t":[0,1]}')
    cluster.refresh(spec)
    out = []
    for topic, partitions in spec.items():
        for p in partitions:
            tp = TopicPartition(topic, int(p))
            cluster.leader(tp)  # an unknown partition is named now
            out.append(tp)
    return sorted(out, key=lambda tp: (tp.topic, tp.partition))


def _per_partition(spec, tps: list[TopicPartition], what: str, default: int | None) -> dict[TopicPartition, int]:
    """A name for every partition, or Spark's JSON of topic -> partition -> offset."""
    if isinstance(spec, str) and spec.strip().lower() in SPEC_NAMES:
        return {tp: SPEC_NAMES[spec.strip().lower()] for tp in tps}
    spec = _json(spec, what)
    if not isinstance(spec, Mapping):
        raise ValueError(f"{what}: 'earliest', 'latest' or a JSON object of topic -> partition -> offset")
    out = {}
    for tp in tps:
        by_partition = spec.get(tp.topic, {})
        value = by_partition.get(str(tp.partition), by_partition.get(tp.partition))
        if value is None:
            if default is None:
                raise ValueError(f"{what} gives no offset for partition {tp}")
            value = default
        out[tp] = int(value)
    return out


def starting_positions(cluster: Cluster, tps: list[TopicPartition], starting_offsets="latest", *,
                       starting_timestamp: int | None = None, starting_offsets_by_timestamp=None,
                       group_id: str | None = None, isolation_level: int = 0,
                       reset: str = "earliest") -> dict[TopicPartition, int]:
    """The first offset to read of each partition; ``reset``: where a partition the group has
    committed nothing for starts (the Java consumer's auto.offset.reset)."""
    if starting_timestamp is not None:
        wanted = {tp: int(starting_timestamp) for tp in tps}
    elif starting_offsets_by_timestamp is not None:
        wanted = _per_partition(starting_offsets_by_timestamp, tps, "startingOffsetsByTimestamp", None)
    elif isinstance(starting_offsets, str) and starting_offsets.strip().lower() == "committed":
        if not group_id:
            raise ValueError("startingOffsets=committed needs a group id")
        # asked again while a transaction holds the group's offsets pending (a killed writer's,
        # until its coordinator aborts it): its outcome decides where to start
        committed = asked_until_answered(lambda: cluster.committed(group_id, tps), COMMITTED_WAIT_S)
        wanted = {tp: LATEST if reset == "latest" else EARLIEST for tp, offset in committed.items() if offset is None}
        fixed = {tp: offset for tp, offset in committed.items() if offset is not None}
        return {**fixed, **cluster.list_offsets(wanted, isolation_level)} if wanted else fixed
    else:
        wanted = _per_partition(starting_offsets, tps, "startingOffsets", LATEST)
    fixed = {tp: v for tp, v in wanted.items() if v >= 0 and starting_timestamp is None
             and starting_offsets_by_timestamp is None}
    asked = {tp: v for tp, v in wanted.items() if tp not in fixed}
    return {**fixed, **(cluster.list_offsets(asked, isolation_level) if asked else {})}


def ending_positions(cluster: Cluster, tps: list[TopicPartition], ending_offsets, *,
                     isolation_level: int = 0) -> dict[TopicPartition, int] | None:
    """The offset each partition's read stops before (None: unbounded)."""
    if ending_offsets is None:
        return None
    wanted = _per_partition(ending_offsets, tps, "endingOffsets", LATEST)
    if any(v == EARLIEST for v in wanted.values()):
        raise ValueError("endingOffsets: -2 (earliest) is not allowed")
    fixed = {tp: v for tp, v in wanted.items() if v >= 0}
    asked = {tp: v for tp, v in wanted.items() if v < 0}
    return {**fixed, **(cluster.list_offsets(asked, isolation_level) if asked else {})}
