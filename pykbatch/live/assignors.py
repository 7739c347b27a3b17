"""The classic group protocol's client-side assignors, as the group's leader runs them: ``range``
(Kafka's RangeAssignor: per topic, contiguous runs in member order) and ``cooperative-sticky``
(balanced, partitions kept where they are, and -- the cooperative part -- never handed to a new
owner in the same rebalance in which another member still owns it: that member gives it up
first, then a second rebalance moves it).  Pure functions, tested offline on drawn groups
(tests/test_live_units.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from pykbatch.live.cluster import TopicPartition

RANGE, COOPERATIVE_STICKY = "range", "cooperative-sticky"


@dataclass
class Subscription:
    """What a member told the leader: its topics and (cooperative) what it owns, as of ``generation``."""
    topics: list[str]
    owned: list[TopicPartition] = field(default_factory=list)
    generation: int = -1


def range_assign(members: dict[str, Subscription], partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Per topic, its partitions in order, split into contiguous runs over the members subscribed
    to it (sorted by member id); the first ``n % m`` members take one more."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic in sorted(partitions):
        takers = sorted(m for m, s in members.items() if topic in s.topics)
        if not takers:
            continue
        per, extra = divmod(partitions[topic], len(takers))
        start = 0
        for i, m in enumerate(takers):
            n = per + (1 if i < extra else 0)
            out[m] += [TopicPartition(topic, p) for p in range(start, start + n)]
            start += n
    return out


def cooperative_sticky_assign(members: dict[str, Subscription],
                              partitions: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Balanced within one partition where the members subscribe alike (least loaded first
    otherwise), each member keeping what it owns up to its share, and no partition given to one
    member while another still owns it (its owner revokes it this round; the next places it)."""
    everything = sorted(TopicPartition(t, p) for t, n in partitions.items() for p in range(n))
    eligible = {tp: sorted(m for m, s in members.items() if tp.topic in s.topics) for tp in everything}
    owner = _owners(members, set(everything))
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    same = len({tuple(sorted(s.topics)) for s in members.values()}) == 1
    wanted = [tp for tp in everything if eligible[tp]]
    if same and members:
        low, extra = divmod(len(wanted), len(members))
        caps = _caps(members, owner, low, extra)
    else:
        caps = {m: len(wanted) for m in members}
    for tp in wanted:  # keep what is owned, up to the member's share
        m = owner.get(tp)
        if m is not None and len(out[m]) < caps[m]:
            out[m].append(tp)
    kept = {tp for ps in out.values() for tp in ps}
    for tp in wanted:  # the rest to the least loaded that may take it
        if tp in kept:
            continue
        room = [m for m in eligible[tp] if len(out[m]) < caps[m]] or eligible[tp]
        m = min(room, key=lambda m: (len(out[m]), m))
        out[m].append(tp)
    # cooperative: a partition another member still owns waits for it to be given up
    return {m: sorted(tp for tp in ps if owner.get(tp, m) == m) for m, ps in out.items()}


def _owners(members: dict[str, Subscription], exists: set) -> dict[TopicPartition, str]:
    """Each partition's owner by the subscriptions: the claim of the highest generation (two
    claims of one generation: nobody's -- a member that missed a rebalance)."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for m, s in members.items():
        for tp in s.owned:
            if tp in exists and tp.topic in s.topics:
                claims.setdefault(tp, []).append((s.generation, m))
    owner = {}
    for tp, cs in claims.items():
        cs.sort(reverse=True)
        if len(cs) == 1 or cs[0][0] > cs[1][0]:
            owner[tp] = cs[0][1]
    return owner


def _caps(members: dict[str, Subscription], owner: dict, low: int, extra: int) -> dict[str, int]:
    """Each member's share: ``low``, and one more for ``extra`` of them -- those owning most."""
    owns = {m: 0 for m in members}
    for m in owner.values():
        owns[m] += 1
    bigger = sorted(members, key=lambda m: (-owns[m], m))[:extra]
    return {m: low + (1 if m in bigger else 0) for m in members}
