"""A reader of live partitions that is never stuck: every readable record delivered, every
unreadable range named, skipped by policy and dead-lettered, the position moved past exactly what
cannot be read.

    from pykbatch.live import Reader
    with Reader({"bootstrap.servers": "broker:9092"}, subscribe="orders", starting_offsets="earliest",
                ending_offsets="latest", policy=ErrorPolicy(tolerance="all")) as reader:
        table = reader.read()              # Arrow: Spark's Kafka columns + leader_epoch
        reader.skips                       # what was moved past, each with its culprits

Fetches go to each partition's leader (one request per broker, every assigned partition in it);
each partition's bytes go through ``pykbatch.live.fetched.read_fetched`` (the validator, the
isolation level).  Unreadable entries whose extent a response does not show, a broker that
answers CORRUPT_MESSAGE with no data, and one that answers nothing below its high watermark (asked
again alone, so a full response is not mistaken for it) are resolved by ``pykbatch.live.probe``:
small fetches forward to the first offset the broker serves sound, so the skipped range is exact.
Offsets the broker passes over on a topic that is not compacted (``cleanup.policy``, read with
DescribeConfigs and read again before a gap is named) are probed for sound batches, then named.

Every partition keeps a ``pykbatch.live.ledger.Ledger``: each offset from the start delivered,
skipped with a name, or explained by Kafka's semantics, checked at every step (``accounting()``).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import pyarrow as pa

from pykbatch import _native
from pykbatch.columns import CONSUMED
from pykbatch.errors import CONTINUE, FAIL, KafkaDataError
from pykbatch.kafka.isolation import READ_COMMITTED, AbortedTxn, Isolation, check_level
from pykbatch.live import protocol
from pykbatch.live.cluster import (
    EARLIEST,
    LATEST,
    AuthorizationError,
    Cluster,
    ClusterError,
    TopicPartition,
)
from pykbatch.live.fetched import (
    OFFSET_GAP,
    Damage,
    Fetched,
    Skip,
    gap_skip,
    read_fetched,
)
from pykbatch.live.ledger import Ledger
from pykbatch.live.membership import Membership
from pykbatch.live.offsets import assigned, ending_positions, starting_positions
from pykbatch.live.probe import Probe, ProbeResult
from pykbatch.live.settings import SettingsError, consumer_settings, outside_group
from pykbatch.policy import ErrorPolicy
from pykbatch.rules import BY_ID

log = logging.getLogger("pykbatch.live")
SCHEMA = pa.schema(CONSUMED)


_answer = protocol.error_class  # a partition's error code -> the connection layer's error class


class ConsumedRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    """Epoch milliseconds."""
    timestamp_type: int
    """Kafka's id: 0 CreateTime, 1 LogAppendTime (-1: none, magic 0)."""
    key: bytes | None
    value: bytes | None
    headers: list
    """``(key, value)`` pairs (an empty tuple when there are none)."""
    leader_epoch: int


class UnreadableRecordsError(KafkaDataError, ValueError):
    """The policy does not tolerate a skip (``errors.tolerance=none``, a handler's FAIL, or more
    than ``max_errors``): the reader's position is left before the range."""

    def __init__(self, skip: Skip, why: str):
        self.skip = skip
        self.code = skip.code
        super().__init__(f"{skip.line()} ({why}; the reader's position stays at {skip.first_offset}: "
                         "with errors.tolerance=all the reader moves past it)", skip.position, skip.rule,
                         skip.culprits)


class DataLossError(ClusterError):
    """The position is out of the partition's range (records deleted by retention or a
    truncation) and ``fail_on_data_loss`` is set, as in Spark's Kafka source."""


@dataclass
class Poll:
    """What one poll delivered and moved past."""
    table: pa.Table
    skips: list[Skip]
    positions: dict[TopicPartition, int]

    def records(self) -> list[ConsumedRecord]:
        return records_of(self.table)

    def report(self) -> str:
        lines = [f"{self.table.num_rows} records, {len(self.skips)} skipped ranges"]
        lines += ["  " + s.line() for s in self.skips]
        return "\n".join(lines)


def records_of(table: pa.Table) -> list[ConsumedRecord]:
    """Python objects for a reader's table (timestamps in epoch ms), read by the core in one pass."""
    return _native.consumer_records(table, ConsumedRecord)


@dataclass
class _FetchState:
    tp: TopicPartition
    position: int
    end: int | None
    fetch_bytes: int
    undecided: frozenset = frozenset()
    aborted: frozenset = frozenset()  # as of the last fetch: what an unreadable range may have decided
    high_watermark: int = -1
    limit: int = -1
    """Where the records a fetch may answer end: the high watermark, or under read_committed the
    last stable offset (as of the last answer)."""
    backoff_until: float = 0.0
    ledger: Ledger | None = None
    served: int = -1
    """The last offset a fetch of this partition was answered records at: where a probe can start
    a fetch that runs past damage the broker's own search cannot cross."""
    epoch: int = -1
    """The leader epoch of the last record delivered (KIP-320: where the log it came from ends is
    asked of a new leader)."""
    fetched_under: int = -1
    """The leader epoch the last fetch was sent under (a higher one means a new leader)."""

    @property
    def done(self) -> bool:
        return self.end is not None and self.position >= self.end


@dataclass
class Metrics:
    """Counters of one reader (Connect's error metrics under their names, then the reader's own)."""
    counts: dict = field(default_factory=lambda: dict.fromkeys((
        "total-records", "total-record-failures", "total-record-errors", "total-records-skipped",
        "total-errors-logged", "deadletterqueue-produce-requests", "deadletterqueue-produce-failures",
        "records-consumed", "bytes-fetched", "fetch-requests", "probe-requests", "offsets-skipped",
        "offsets-held", "offsets-compacted", "fetch-size-increases", "leader-refreshes", "solo-fetches",
        "prefetches", "prefetches-set-aside", "offsets-skipped-reported-before", "offsets-diverged"), 0))
    last_error_timestamp: int = -1

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def as_dict(self) -> dict:
        return {**self.counts, "last-error-timestamp": self.last_error_timestamp}


class Reader:
    """Reads assigned partitions of a live cluster (see the module's doc).

    props
        Kafka client properties: ``bootstrap.servers``, ``security.protocol``, SASL and TLS
        settings (``pykbatch.live.settings``), as the Java client or Spark (``kafka.*``) names them;
        and the Java consumer's ``group.id``, ``isolation.level``, ``max.partition.fetch.bytes``,
        ``fetch.max.bytes``, ``fetch.max.wait.ms``, ``auto.offset.reset`` (with ``group.id``: the
        group's committed offsets, this where it has none; without: the starting offsets) -- a
        keyword given here wins over its property.  Consumer properties with no use here
        (deserializers, ``max.poll.records``) are refused, naming what does it.
        With ``group.id`` as a property and ``subscribe`` (and no ``ending_offsets``), the reader
        joins the group as Kafka's Java consumer does on subscribe (``pykbatch.live.membership``:
        KIP-848's protocol, ``group.protocol=consumer``): the coordinator assigns partitions, which
        start at the group's commits; ``enable.auto.commit`` (default true),
        ``auto.commit.interval.ms``, ``group.instance.id`` (static membership),
        ``group.remote.assignor``, ``max.poll.interval.ms``, ``client.rack`` as the Java consumer
        has them.  ``join_group`` False keeps such a reader out of the group (it reads every
        partition of ``subscribe`` and commits under ``group.id`` when asked); True joins with a
        ``Cluster`` given instead of properties.
    on_assigned, on_revoked, on_lost
        A member's rebalance callbacks (Kafka's ConsumerRebalanceListener), each called in the
        poll that applies the change with the partitions it concerns: revoked ones still held
        (committed first with ``enable.auto.commit``; a callback may commit), lost ones already
        someone else's.
    assign / subscribe, starting_offsets, ending_offsets, starting_timestamp,
    starting_offsets_by_timestamp
        Spark's Kafka source's options (``pykbatch.live.offsets``); ``starting_offsets="committed"``
        resumes ``group_id``'s committed offsets.
    isolation_level
        ``read_uncommitted`` or ``read_committed`` (aborted transactions left out, nothing at or
        after the last stable offset).
    fail_on_data_loss
        Spark's meaning: a position outside the log (deleted by retention) raises
        ``DataLossError``; False moves to the log's start (or end) and reports the gap as a skip.
    policy, dead_letters
        What a skip does (``pykbatch.policy.ErrorPolicy``: tolerance ``none`` raises
        ``UnreadableRecordsError``; ``all`` moves on; a handler answers CONTINUE or FAIL for each
        skip) and where its bytes go (a callable ``sink(skip, context)``: ``JsonLinesDeadLetters``,
        ``DeadLetterTopic``).
    max_partition_fetch_bytes, fetch_max_bytes, max_wait_ms, max_batch_bytes
        Fetch sizes (Kafka's defaults); a batch larger than the partition's size is fetched again
        with its size, up to ``max_batch_bytes``.
    fetch_sessions
        Incremental fetch sessions (KIP-227) with each broker, as Kafka's consumers use them.
    prefetch
        Each broker's next fetch is sent as soon as an answer arrives, from where its records
        most likely end (their headers say), and the answer is read while the broker prepares the
        next one, as Kafka's and librdkafka's consumers pipeline; when reading it ends elsewhere
        (damage, a seek), that fetch is set aside and asked again from the right offsets.
    compacted
        Whether offsets may be missing because the topic is compacted: None (the default) reads
        each topic's ``cleanup.policy`` with DescribeConfigs (again, at most once a second, before
        a gap is named damage); where the principal may not describe the topic, a gap is named.
    """

    def __init__(self, props: Mapping[str, Any] | Cluster, *, assign=None, subscribe=None,
                 starting_offsets=None, ending_offsets=None, starting_timestamp: int | None = None,
                 starting_offsets_by_timestamp=None, group_id: str | None = None,
                 isolation_level: str | None = None, fail_on_data_loss: bool = True,
                 policy: ErrorPolicy | None = None, dead_letters: Callable[[Skip, dict], Any] | None = None,
                 max_partition_fetch_bytes: int | None = None, fetch_max_bytes: int | None = None,
                 max_wait_ms: int | None = None, max_batch_bytes: int = 64 << 20, positions: Mapping | None = None,
                 fetch_sessions: bool = True, compacted: bool | None = None, prefetch: bool = True,
                 join_group: bool | None = None, on_assigned: Callable | None = None,
                 on_revoked: Callable | None = None, on_lost: Callable | None = None):
        java: dict[str, Any] = {}
        given_props = not isinstance(props, Cluster)
        if given_props:
            props, java = consumer_settings(props)
        if join_group is None:  # as the Java consumer: group.id and subscribe make a member
            join_group = (given_props and "group_id" in java and subscribe is not None and assign is None
                          and ending_offsets is None and positions is None)
        group_id = group_id if group_id is not None else java.get("group_id")
        reset = java.get("auto_offset_reset")
        if starting_offsets is None:  # a group resumes its commits, as the Java consumer does
            starting_offsets = "committed" if group_id and "group_id" in java else (reset or "latest")
        isolation_level = isolation_level or java.get("isolation_level", "read_uncommitted")
        max_partition_fetch_bytes = max_partition_fetch_bytes or java.get("max_partition_fetch_bytes", 1 << 20)
        fetch_max_bytes = fetch_max_bytes or java.get("fetch_max_bytes", 50 << 20)
        max_wait_ms = max_wait_ms if max_wait_ms is not None else java.get("max_wait_ms", 500)
        self.level = check_level(isolation_level)
        self._iso_code = 1 if self.level == READ_COMMITTED else 0
        self.cluster = props if isinstance(props, Cluster) else Cluster(props)
        self._owns_cluster = not isinstance(props, Cluster)
        self.policy = policy or ErrorPolicy()
        self.dead_letters = dead_letters
        self.fail_on_data_loss = fail_on_data_loss
        self.group_id = group_id
        self.max_wait_ms, self.fetch_max_bytes, self.max_batch_bytes = max_wait_ms, fetch_max_bytes, max_batch_bytes
        self.metrics = Metrics()
        self.fetch_sessions = fetch_sessions
        self._sessions: dict[int, protocol.FetchSession] = {}  # node -> its incremental fetch session
        self.prefetch = prefetch
        self._prefetched: dict[int, tuple[Any, tuple]] = {}  # node -> (its next fetch in flight, what it asks)
        self.skips: list[Skip] = []
        self.divergences: list[Skip] = []  # KIP-320: offsets delivered from a log truncated since (_validated)
        self._compacted_setting = compacted
        self._policies: dict[str, tuple[bool, float]] = {}  # topic -> (compacted, when it was read)
        self._failures = 0
        self._rotation = 0
        self._fetch_bytes = max_partition_fetch_bytes
        self._membership: Membership | None = None
        if join_group:  # (settings refused before any connection is made)
            self._parts = {}
            self._membership = _join(self.cluster, group_id, subscribe, java, reset=reset or "latest",
                                     isolation_level=self._iso_code, starting_offsets=starting_offsets,
                                     ending_offsets=ending_offsets, assign=assign, positions=positions,
                                     callbacks=(on_assigned, on_revoked, on_lost))
            return
        outside_group(java)  # (its refusal of enable.auto.commit=true)
        self.cluster.connect()
        tps = assigned(self.cluster, assign, subscribe)
        if positions is not None:
            start = {tp: positions[tp] for tp in tps}
        else:
            start = starting_positions(self.cluster, tps, starting_offsets, starting_timestamp=starting_timestamp,
                                       starting_offsets_by_timestamp=starting_offsets_by_timestamp,
                                       group_id=group_id, isolation_level=self._iso_code, reset=reset or "earliest")
        end = ending_positions(self.cluster, tps, ending_offsets, isolation_level=self._iso_code)
        self._parts = {tp: _FetchState(tp, start[tp], None if end is None else end[tp], max_partition_fetch_bytes,
                                      ledger=Ledger(tp.topic, tp.partition, start[tp])) for tp in tps}

    # -- the public surface ----------------------------------------------------------------------
    @property
    def assignment(self) -> list[TopicPartition]:
        return list(self._parts)

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset each partition reads (what to commit or checkpoint)."""
        return {tp: p.position for tp, p in self._parts.items()}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._parts[tp].position = offset
        self._parts[tp].ledger.restart(offset)

    def accounting(self) -> dict[TopicPartition, Ledger]:
        """Each partition's offsets from where it started to its position: delivered, skipped
        (in how many named ranges), left out by Kafka's semantics, compacted away."""
        return {tp: p.ledger for tp, p in self._parts.items()}

    @property
    def finished(self) -> bool:
        """Every partition reached its ending offset (never, for an unbounded reader or a group's member)."""
        return self._membership is None and all(p.done for p in self._parts.values())

    @property
    def member(self):
        """The reader's ``GroupMember`` (None outside a group): its id, epoch, group."""
        return None if self._membership is None else self._membership.member

    def commit(self, group_id: str | None = None) -> None:
        """Commits the positions for ``group_id`` (default: the reader's; a member commits as
        one, with its partitions' skip notes)."""
        if self._membership is not None and group_id in (None, self.group_id):
            self._membership.commit(self.positions())
            return
        group = group_id or self.group_id
        if not group:
            raise ValueError("commit needs a group id")
        self.cluster.commit(group, self.positions())

    def commit_async(self, callback: Callable | None = None) -> None:
        """A member's commit of its positions without waiting: ``callback(offsets, error)`` is
        called in a later poll (or on close), error None when the coordinator took it."""
        if self._membership is None:
            raise ValueError("commit_async is a group member's (group.id with subscribe); Reader.commit() commits "
                             "a reader outside a group")
        self._membership.commit_async(self.positions(), callback)

    def poll(self, timeout_ms: int | None = None) -> Poll:
        """One round of fetches (one request per leader), waiting up to ``max_wait_ms`` for data."""
        tables, skips = [], []
        if self._membership is not None:
            self._membership.before_poll(self)
            if not self._parts:  # nothing assigned (yet): the member's heartbeats go on meanwhile
                time.sleep(min(0.1, (timeout_ms or self.max_wait_ms) / 1000))
                return Poll(SCHEMA.empty_table(), [], {})
        active = [p for p in self._parts.values() if not p.done and p.backoff_until <= time.monotonic()]
        if not active:
            if not self.finished:
                time.sleep(min(0.1, max(0.0, min(p.backoff_until for p in self._parts.values()) - time.monotonic())))
            return Poll(SCHEMA.empty_table(), [], self.positions())
        self._rotation += 1  # a different partition first each time: none starves behind a large one
        active = active[self._rotation % len(active):] + active[:self._rotation % len(active)]
        by_node: dict[int, list[_FetchState]] = {}
        for p in active:
            try:
                leader = self.cluster.leader(p.tp)
                if leader.epoch > p.fetched_under >= 0 and p.epoch >= 0 and not self._validated(p, leader):
                    continue
                p.fetched_under = leader.epoch
                by_node.setdefault(leader.node, []).append(p)
            except ClusterError as exc:
                if isinstance(exc, (AuthorizationError, DataLossError)):
                    raise
                self._back_off(p, exc)
        nodes = list(by_node)
        responses = self._fetch_all(nodes, by_node, (timeout_ms or self.max_wait_ms) + self.cluster.timeout_ms)
        for node, response in zip(nodes, responses):
            session = self._sessions.get(node)
            if isinstance(response, Exception):
                log.warning("fetch from node %s failed: %s", node, response)
                if session is not None:
                    session.handle_error(response)
                for p in by_node[node]:
                    self.cluster.forget_leader(p.tp)
                    self._back_off(p, response)
                continue
            if session is not None and not session.handle_response(response):
                continue  # the session was refused or lost: the next request starts a new one, positions kept
            if getattr(response, "error_code", 0):
                raise ClusterError(f"fetch from node {node}: error {response.error_code}", response.error_code)
            parts = {(t.topic, d.partition_index): d for t in response.responses for d in t.partitions}
            self._prefetch(node, by_node[node], parts)
            for p in by_node[node]:
                data = parts.get((p.tp.topic, p.tp.partition))
                try:
                    if data is not None:
                        if not data.error_code and data.records:
                            p.served = p.position  # what this fetch asked for
                        table, found = self._handle(p, data)
                    elif p.position < p.limit and not p.done:  # left out of a session's answer below its end
                        table, found = self._handle(p, self._fetch_solo(p), solo=True)
                    else:
                        continue
                except ClusterError as exc:  # a probe's request failed (a broker restarting): again later
                    if not exc.retriable or isinstance(exc, AuthorizationError):
                        raise
                    self.cluster.forget_leader(p.tp)
                    self._back_off(p, exc)
                    continue
                if table is not None and table.num_rows:
                    tables.append(table)
                skips += found
        table = pa.concat_tables(tables) if tables else SCHEMA.empty_table()
        self.metrics.add("records-consumed", table.num_rows)
        self.metrics.add("total-records", table.num_rows)
        return Poll(table, skips, self.positions())

    def polls(self, timeout_s: float | None = None) -> Iterator[Poll]:
        """Polls until every partition reached its end (or ``timeout_s`` passed)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.finished and (deadline is None or time.monotonic() < deadline):
            yield self.poll()

    def read(self, timeout_s: float | None = None) -> pa.Table:
        """Every record up to the ending offsets, as one table (needs ``ending_offsets``)."""
        if any(p.end is None for p in self._parts.values()) and timeout_s is None:
            raise ValueError("read() needs ending_offsets (or a timeout_s) to know when to stop")
        tables = [poll.table for poll in self.polls(timeout_s) if poll.table.num_rows]
        return pa.concat_tables(tables) if tables else SCHEMA.empty_table()

    def __iter__(self) -> Iterator[ConsumedRecord]:
        for poll in self.polls():
            yield from poll.records()

    def close(self) -> None:
        """Leaves the group (a member: its last automatic commit first), closes the connections."""
        try:
            if self._membership is not None:
                membership, self._membership = self._membership, None
                membership.close(self)
        finally:
            if self._owns_cluster:
                self.cluster.close()

    # -- a member's partitions come and go (pykbatch.live.membership) ---------------------------
    def _drop(self, tps) -> None:
        for tp in tps:
            self._parts.pop(tp, None)

    def _add(self, starts: Mapping[TopicPartition, int]) -> None:
        for tp, start in starts.items():
            self._parts[tp] = _FetchState(tp, start, None, self._fetch_bytes, ledger=Ledger(tp.topic, tp.partition, start))

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- fetching ------------------------------------------------------------------------------
    def _fetch_all(self, nodes: list[int], by_node: dict[int, list[_FetchState]], timeout_ms: int) -> list:
        """Each node's answer for its partitions at their positions: the fetch already in flight
        when it asks exactly that (``_prefetch``), else a new one."""
        pending = {}
        for node in nodes:
            ahead = self._prefetched.pop(node, None)
            if ahead is not None:
                if ahead[1] == _plan(by_node[node]):
                    pending[node] = ahead[0]
                    continue
                self._set_aside(node, ahead[0], timeout_ms)
            pending[node] = self.cluster.send(node, self._session_request(node, by_node[node]))
            self.metrics.add("fetch-requests")
        return self.cluster.collect([pending[n] for n in nodes], timeout_ms)

    def _prefetch(self, node: int, parts: list[_FetchState], answers: dict) -> None:
        """Sends ``node``'s next fetch before this answer is read: from where each partition's
        records end, when every one of them moves on and none reaches its end."""
        if not self.prefetch:
            return
        ahead = {}
        for p in parts:
            data = answers.get((p.tp.topic, p.tp.partition))
            if data is None or data.error_code:
                return
            lso = getattr(data, "last_stable_offset", -1) if self.level == READ_COMMITTED else -1
            nxt = _native.fetch_end(data.records or b"", p.position, lso if lso >= 0 else None)
            if nxt <= p.position or (p.end is not None and nxt >= p.end):
                return
            ahead[p.tp] = nxt
        request = self._session_request(node, parts, offsets=ahead)
        self._prefetched[node] = (self.cluster.send(node, request), _plan(parts, ahead))
        self.metrics.add("fetch-requests")
        self.metrics.add("prefetches")

    def _set_aside(self, node: int, pending, timeout_ms: int) -> None:
        """A fetch sent early that asked for other offsets: its answer keeps the node's fetch
        session in step and is otherwise forgotten."""
        self.metrics.add("prefetches-set-aside")
        response = self.cluster.collect([pending], timeout_ms)[0]
        session = self._sessions.get(node)
        if session is not None:
            if isinstance(response, Exception):
                session.handle_error(response)
            else:
                session.handle_response(response)

    def _fetch_partition(self, p: _FetchState, offset: int | None = None, max_bytes: int | None = None):
        return protocol.fetch_partition(p.tp.partition, p.position if offset is None else offset,
                                        p.fetch_bytes if max_bytes is None else max_bytes, self.cluster.leader(p.tp).epoch)

    def _fetch_request(self, parts: list[_FetchState], *, offset: int | None = None, max_bytes: int | None = None,
                       offsets: dict | None = None):
        """A sessionless FetchRequest (a probe's at ``offset``; ``offsets``: a prefetch's, by partition)."""
        topics: dict[str, list] = {}
        for p in parts:
            at = offsets.get(p.tp) if offsets else offset
            topics.setdefault(p.tp.topic, []).append(self._fetch_partition(p, at, max_bytes))
        return protocol.fetch(topics, max_wait_ms=self.max_wait_ms if offset is None else 0,
                              max_bytes=self.fetch_max_bytes if max_bytes is None else max(max_bytes, 1),
                              isolation_level=self._iso_code)

    def _session_request(self, node: int, parts: list[_FetchState], offsets: dict | None = None):
        """The FetchRequest for ``node``'s partitions: within the node's incremental fetch session
        (KIP-227) when ``fetch_sessions``, so partitions whose fetch did not change are not sent
        again, nor answered when they have nothing new."""
        if not self.fetch_sessions:
            return self._fetch_request(parts, offsets=offsets)
        session = self._sessions.get(node)
        if session is None:
            session = self._sessions[node] = protocol.FetchSession(node)
        wanted = [(p.tp.topic, p.tp.partition, self._fetch_partition(p, offsets.get(p.tp) if offsets else None))
                  for p in parts]
        return session.request(wanted, max_wait_ms=self.max_wait_ms, max_bytes=self.fetch_max_bytes,
                               isolation_level=self._iso_code)

    def _fetch_one(self, p: _FetchState, offset: int, max_bytes: int = 1):
        """One fetch of ``p`` alone at ``offset`` (a probe's: one entry): its partition data."""
        request = self._fetch_request([p], offset=offset, max_bytes=max_bytes)
        self.metrics.add("probe-requests")
        response = self.cluster.request(self.cluster.leader(p.tp).node, request)
        data = response.responses[0].partitions[0]
        if not data.error_code and data.records and offset <= p.position:
            p.served = max(p.served, offset)
        return data

    def _fetch_solo(self, p: _FetchState):
        """``p`` at its position alone in a request, with its whole fetch size: the answer Kafka
        gives a partition first in a response (at least one entry, KIP-74), so an empty one is
        not the response's size spent on other partitions."""
        self.metrics.add("solo-fetches")
        return self._fetch_one(p, p.position, p.fetch_bytes)

    def _note_limit(self, p: _FetchState, data) -> None:
        if data.high_watermark >= 0:
            p.high_watermark = data.high_watermark
            lso = getattr(data, "last_stable_offset", -1)
            p.limit = lso if self.level == READ_COMMITTED and lso >= 0 else data.high_watermark

    def _compacted(self, topic: str, *, max_age_s: float | None = None) -> bool:
        """Whether ``topic``'s cleanup.policy has compact (DescribeConfigs; read again when older
        than ``max_age_s``, at most once a second)."""
        if self._compacted_setting is not None:
            return self._compacted_setting
        known = self._policies.get(topic)
        now = time.monotonic()
        if known is not None and (max_age_s is None or now - known[1] < max(max_age_s, 1.0)):
            return known[0]
        from pykbatch.live.topic_limits import describe
        try:
            compacted = describe(self.cluster, [topic])[topic].compacted
        except ClusterError as exc:  # AuthorizationError too: without DescribeConfigs a gap is named
            if known is None:
                log.warning("%s: cleanup.policy unknown (%s): offsets missing from its log are named as skips",
                            topic, exc)
            compacted = False
        self._policies[topic] = (compacted, now)
        return compacted

    def _isolation(self, p: _FetchState, data, fetch_offset: int) -> Isolation:
        aborted = [AbortedTxn(0, t.producer_id, t.first_offset, 2**63 - 1, -1) for t in (data.aborted_transactions or ())]
        lso = data.last_stable_offset if self.level == READ_COMMITTED and data.last_stable_offset >= 0 else None
        return Isolation(self.level, aborted, lso, None, undecided=p.undecided)

    def _handle(self, p: _FetchState, data, solo: bool = False) -> tuple[pa.Table | None, list[Skip]]:
        """One partition's answer; ``solo``: it was asked alone (``_fetch_solo``)."""
        Errors = protocol.errors()
        self._note_limit(p, data)
        if data.error_code:
            err = _answer(data.error_code)
            if err is Errors.CorruptRecordError:  # no records: the broker cannot read its own log there
                return self._probe(p, None, data)
            if err is Errors.OffsetOutOfRangeError:
                return None, self._out_of_range(p, data)
            if issubclass(err, Errors.AuthorizationError):
                raise AuthorizationError(f"not authorized to read topic {p.tp.topic!r} ({err.message})", err.errno)
            if err.invalid_metadata or err.retriable:  # a moved leader, a fenced epoch, a broker restarting
                self.metrics.add("leader-refreshes")
                self.cluster.forget_leader(p.tp)
                self._back_off(p, ClusterError(f"{p.tp}: {err.message}", err.errno, retriable=True))
                return None, []
            raise ClusterError(f"fetch of {p.tp}: {err.message}({err.errno})", err.errno)
        records = data.records or b""
        self.metrics.add("bytes-fetched", len(records))
        fetched = self._read(p, data, records, self._compacted(p.tp.topic))
        if self._compacted_setting is None and (fetched.lead_gap or any(s.rule == OFFSET_GAP for s in fetched.skips)) \
                and self._compacted(p.tp.topic, max_age_s=1.0):
            fetched = self._read(p, data, records, True)  # compaction was turned on since it was read
        return self._deliver(p, fetched, data, solo)

    def _read(self, p: _FetchState, data, records, compacted: bool) -> Fetched:
        iso = self._isolation(p, data, p.position)
        fetched = read_fetched(records, p.position, topic=p.tp.topic, partition=p.tp.partition, isolation=iso,
                               compacted=compacted)
        p.undecided, p.aborted = iso.undecided, iso.aborted
        return fetched

    def _deliver(self, p: _FetchState, fetched: Fetched, data, solo: bool = False) -> tuple[pa.Table | None, list[Skip]]:
        start, ledger, skipped = p.position, p.ledger.snapshot(), len(self.skips)
        try:
            return self._deliver_from(p, fetched, data, start, solo)
        except Exception:  # a policy's FAIL, or a probe's request failed: nothing of this fetch was
            p.position = start  # handed out, so all of it comes again (a dead letter may come twice)
            p.ledger.restore(ledger)
            del self.skips[skipped:]
            raise

    def _deliver_from(self, p: _FetchState, fetched: Fetched, data, start: int, solo: bool):
        skips = []
        if fetched.lead_gap is not None:
            found, skips = self._passed_over(p, *fetched.lead_gap)
            if found is not None:  # a sound batch inside the range: read on from it, this answer later
                return found
        for s in fetched.skips:
            if p.end is not None and s.first_offset >= p.end:
                continue  # past the range this reader reads: the next range's business
            s = _clipped(s, p.end)
            self._apply(s)  # raises when the policy fails: the position is left before the skip
            skips.append(s)
        table = self._output(p, fetched.table)
        if table is not None:
            p.epoch = table.column("leader_epoch")[-1].as_py()
        before = p.position
        p.position = max(p.position, fetched.next_offset)
        if p.end is not None:
            p.position = min(p.position, max(p.end, before))  # what lies past the end was not delivered
        p.ledger.take(fetched.spans, table.column("offset").to_numpy() if table is not None else (), p.position)
        if fetched.damage is not None:
            more, found = self._probe(p, fetched.damage, data)
            skips += found
            if more is not None and more.num_rows:
                table = pa.concat_tables([table, more]) if table is not None else more
        elif fetched.partial_size is not None and p.position == start:
            if fetched.partial_size > self.max_batch_bytes:
                rule = BY_ID["consumer.batch_too_large"]
                damage = Damage(p.position, 0, [], b"")
                return table, skips + self._probe(p, damage, data, rule=rule, message=rule.message(
                    offset=p.position, size=fetched.partial_size, limit=self.max_batch_bytes))[1]
            if fetched.partial_size > p.fetch_bytes:
                p.fetch_bytes = fetched.partial_size  # as the Java consumer grows it
                self.metrics.add("fetch-size-increases")
                return table, skips
        if p.position == start and not skips and fetched.damage is None and p.position < p.limit and not p.done:
            # no progress below the end: asked alone first (a response's size may have gone to other
            # partitions); alone and still nothing, the broker cannot serve past this offset
            if not solo:
                more, found = self._handle(p, self._fetch_solo(p), solo=True)
            else:
                rule = BY_ID["consumer.no_progress"]
                more, found = self._probe(p, None, data, rule=rule, message_fields={"limit": p.limit})
            skips += found
            if more is not None and more.num_rows:
                table = pa.concat_tables([table, more]) if table is not None else more
        return table, skips

    def _passed_over(self, p: _FetchState, first: int, last: int):
        """Offsets ``[first, last]`` a fetch at ``first`` passed over (not compacted): sound
        batches the broker serves inside them are read (the answer in hand comes again later);
        the rest is a named skip.  ``(None, skips)``: the answer in hand goes on from ``last + 1``."""
        if p.end is not None:
            last = min(last, p.end - 1)
        probe = Probe(self, p)
        island = probe.island(first, last) if last > first else None
        if island is None or island.next_offset > first:  # sound batches only a fetch from before reaches
            island = probe.crossing(first, last if island is None else island.next_offset - 1) or island
        if island is not None:
            if island.next_offset > first:
                skip = gap_skip(p.tp.topic, p.tp.partition, first, island.next_offset - 1)
                self._apply(skip)
                p.ledger.skip(first, skip.last_offset)
                p.position = island.next_offset
                table, found = self._handle(p, island.data)
                return (table, [skip] + found), []
            return self._handle(p, island.data), []
        if last < first:
            return None, []
        skip = gap_skip(p.tp.topic, p.tp.partition, first, last)
        self._apply(skip)
        p.ledger.skip(first, last)
        p.position = last + 1
        return None, [skip]

    def _output(self, p: _FetchState, table: pa.Table) -> pa.Table | None:
        """A partition's records, cut at its end."""
        if not table.num_rows:
            return None
        if p.end is not None and table.column("offset")[-1].as_py() >= p.end:
            import pyarrow.compute as pc
            table = table.filter(pc.less(table.column("offset"), p.end))
        return table

    # -- what cannot be read -------------------------------------------------------------------
    def _apply(self, skip: Skip) -> None:
        """The policy for one skip: fail (position kept), or count, log, dead-letter and move on
        (in a group: once for the group, see ``pykbatch.live.membership``)."""
        if self._membership is not None and self._membership.reported(skip):
            skip.reported = True
            self.skips.append(skip)
            self._parts[TopicPartition(skip.topic, skip.partition)].ledger.skips += 1
            self.metrics.add("offsets-skipped-reported-before", skip.count)
            log.info("%s", skip.line())
            return
        policy = self.policy
        self.metrics.add("total-record-failures")
        self.metrics.add("total-record-errors")
        self.metrics.last_error_timestamp = int(time.time() * 1000)
        if policy.tolerance == "none":
            raise UnreadableRecordsError(skip, "errors.tolerance=none")
        if policy.handler is not None:
            answer = policy.handler(skip)
            if answer == FAIL:
                raise UnreadableRecordsError(skip, "the handler answered FAIL")
            if answer != CONTINUE:
                raise ValueError(f"a handler answers CONTINUE or FAIL, not {answer!r}")
        self._failures += 1
        if policy.max_errors is not None and self._failures > policy.max_errors:
            raise UnreadableRecordsError(skip, f"more than max_errors={policy.max_errors} skips")
        self.skips.append(skip)
        self._parts[TopicPartition(skip.topic, skip.partition)].ledger.skips += 1
        self.metrics.add("offsets-held" if skip.held else "offsets-skipped", skip.count)
        if policy.log_enable:
            import json

            from pykbatch.live.skip_sinks import skip_context
            log.error(json.dumps(skip_context(skip, include_bytes=policy.include_messages), default=str))
            self.metrics.add("total-errors-logged")
        else:
            log.warning("%s", skip.line())
        if policy.dead_letter and self.dead_letters is not None:
            from pykbatch.live.skip_sinks import skip_context
            try:
                self.dead_letters(skip, skip_context(skip, include_bytes=False))
                self.metrics.add("deadletterqueue-produce-requests")
            except Exception:
                self.metrics.add("deadletterqueue-produce-failures")
                raise
        else:
            self.metrics.add("total-records-skipped")
        if self._membership is not None:
            self._membership.note(skip)

    def _out_of_range(self, p: _FetchState, data) -> list[Skip]:
        tp = p.tp
        if self.fail_on_data_loss:
            raise DataLossError(f"offset {p.position} of {tp} is out of the partition's range (log start "
                                f"{data.log_start_offset}, high watermark {data.high_watermark}): records were "
                                "deleted or the log was truncated (failOnDataLoss=false moves on)", 1)
        earliest = self.cluster.list_offsets({tp: EARLIEST})[tp]
        latest = self.cluster.list_offsets({tp: LATEST}, self._iso_code)[tp]
        target = earliest if p.position < earliest else latest
        skips = []
        if target > p.position:
            rule = BY_ID["consumer.data_loss"]
            skip = Skip(tp.topic, tp.partition, p.position, target - 1, rule.id, rule.code,
                        rule.message(first=p.position, last=target - 1, start=earliest))
            self.skips.append(skip)
            p.ledger.skips += 1
            p.ledger.skip(p.position, target - 1)
            self.metrics.add("offsets-skipped", skip.count)
            log.warning("%s", skip.line())
            skips.append(skip)
        else:
            p.ledger.restart(target)  # the log was truncated below the position: read again from its end
        p.position = target
        return skips

    def _validated(self, p: _FetchState, leader) -> bool:
        """KIP-320, after a leader change: the new leader says where the epoch of the last record
        delivered ends in its log.  Below the position, the log was truncated under the reader (an
        unclean election): ``DataLossError`` naming the offsets (failOnDataLoss), else the
        divergence is reported (``divergences``) and reading goes on from where the logs part.
        False: asked again after a back-off (the leader moved again, or did not answer)."""
        tp = p.tp
        response = self.cluster.request(leader.node, protocol.offset_for_leader_epoch(
            tp.topic, tp.partition, leader.epoch, p.epoch))
        answer = response.topics[0].partitions[0]
        if answer.error_code:
            err = _answer(answer.error_code)
            if err.invalid_metadata or err.retriable:
                self.cluster.forget_leader(tp)
                self._back_off(p, ClusterError(f"{tp}: {err.message}", err.errno, retriable=True))
                return False
            raise ClusterError(f"OffsetForLeaderEpoch of {tp}: {err.message}({err.errno})", err.errno)
        end = answer.end_offset
        if end < 0 or end >= p.position:  # the epoch ends at or past the position: the same history
            return True
        rule = BY_ID["consumer.log_diverged"]
        message = rule.message(first=end, last=p.position - 1, epoch=p.epoch, leader=leader.node,
                               leader_epoch=leader.epoch, end=end)
        if self.fail_on_data_loss:
            raise DataLossError(f"{tp}: {message} (failOnDataLoss=false reads on from offset {end})", rule.code)
        divergence = Skip(tp.topic, tp.partition, end, p.position - 1, rule.id, rule.code, message)
        self.divergences.append(divergence)
        self.metrics.add("offsets-diverged", divergence.count)
        log.warning("%s", divergence.line())
        p.ledger.restart(end)
        p.position = end
        p.epoch = answer.leader_epoch if answer.leader_epoch >= 0 else p.epoch
        return True

    def _back_off(self, p: _FetchState, exc: Exception) -> None:
        log.info("%s: %s; fetching again after a metadata refresh", p.tp, exc)
        p.backoff_until = time.monotonic() + 0.1

    def _probe(self, p: _FetchState, damage: Damage | None, data, *, rule=None, message=None,
               message_fields: Mapping | None = None):
        """Finds the first offset after ``p.position`` that the broker serves as a sound entry,
        skips up to it and delivers what that fetch holds."""
        probe = Probe(self, p)
        result = probe.run(damage)
        if result.next_offset > p.position:  # sound batches the broker serves only to a fetch from before
            result = probe.crossing(p.position, result.next_offset - 1) or result
        if p.end is not None and result.next_offset > p.end:  # the rest is the next range's business
            result = ProbeResult(p.end)
        first, last = p.position, result.next_offset - 1
        if damage is not None and rule is None:
            skip = damage.skip(p.tp.topic, p.tp.partition, last)
        else:
            rule = rule or BY_ID["consumer.broker_corrupt"]
            skip = Skip(p.tp.topic, p.tp.partition, first, last, rule.id, rule.code,
                        message or rule.message(first=first, last=last, **(message_fields or {})))
        skips = []
        if last >= first:
            self._apply(skip)
            p.ledger.skip(first, last)
            skips.append(skip)
            if damage is None:  # the broker's refusal: the range may hold markers of the aborted producers
                p.undecided |= p.aborted
        p.position = result.next_offset
        if result.data is None:
            return None, skips
        table, found = self._handle(p, result.data)
        return table, skips + found


def _plan(parts: list[_FetchState], offsets: dict | None = None) -> tuple:
    """What a fetch asks of its partitions: offsets (``offsets`` or their positions) and sizes."""
    return tuple(sorted((p.tp.topic, p.tp.partition, (offsets or {}).get(p.tp, p.position), p.fetch_bytes)
                        for p in parts))


def _clipped(skip: Skip, end: int | None) -> Skip:
    """``skip`` cut at a reader's ending offset (a range such as a Spark micro-batch's reports only
    its own offsets; the next range reports the rest, once)."""
    if end is None or skip.last_offset < end:
        return skip
    from dataclasses import replace
    return replace(skip, last_offset=end - 1)


def _join(cluster: Cluster, group_id, subscribe, java: dict, *, reset: str, isolation_level: int, starting_offsets,
          ending_offsets, assign, positions, callbacks) -> Membership:
    """A reader's membership of ``group_id`` (``Reader``'s doc), refusing what a member cannot do."""
    if not group_id:
        raise SettingsError("joining a group needs group.id")
    for name, value in (("assign", assign), ("ending_offsets", ending_offsets), ("positions", positions)):
        if value is not None:
            raise SettingsError(f"{name}: a group's member reads what the coordinator assigns, from the group's "
                                "commits, without end (join_group=False reads on its own)")
    if starting_offsets not in (None, "committed"):
        raise SettingsError("starting_offsets: a group's member starts at the group's commits "
                            "(auto.offset.reset where there are none)")
    protocol_name = java.get("group_protocol", "consumer").lower()
    topics = [t.strip() for t in (subscribe.split(",") if isinstance(subscribe, str) else subscribe) if t.strip()]
    if not topics:
        raise SettingsError("subscribe: name the topics the member reads")
    poll_ms = java.get("max_poll_interval_ms", 300_000)
    if protocol_name == "consumer":
        from pykbatch.live.group import GroupMember
        from pykbatch.live.settings import BROKER_SIDE
        for name, keyword in (("session.timeout.ms", "session_timeout_ms"),
                              ("heartbeat.interval.ms", "heartbeat_interval_ms")):
            if keyword in java:
                raise SettingsError(f"{name}: {BROKER_SIDE.format(name)}")
        if "partition_assignment_strategy" in java:
            raise SettingsError("partition.assignment.strategy: under KIP-848's protocol the coordinator assigns "
                                "(group.remote.assignor: uniform or range); group.protocol=classic takes it")
        member = GroupMember(cluster.props, group_id, topics, instance_id=java.get("group_instance_id"),
                             rebalance_timeout_ms=poll_ms, assignor=java.get("group_remote_assignor"),
                             rack_id=java.get("client_rack"), max_poll_interval_ms=poll_ms)
    elif protocol_name == "classic":
        from pykbatch.live.classic_group import (
            DEFAULT_STRATEGY,
            ClassicMember,
            strategies_of,
        )
        if "group_remote_assignor" in java:
            raise SettingsError("group.remote.assignor is KIP-848's (group.protocol=consumer); the classic "
                                "protocol's leader assigns with partition.assignment.strategy")
        member = ClassicMember(cluster.props, group_id, topics, instance_id=java.get("group_instance_id"),
                               session_timeout_ms=java.get("session_timeout_ms", 45_000),
                               heartbeat_interval_ms=java.get("heartbeat_interval_ms", 3_000),
                               rebalance_timeout_ms=poll_ms, max_poll_interval_ms=poll_ms,
                               strategies=strategies_of(java.get("partition_assignment_strategy", DEFAULT_STRATEGY)))
    else:
        raise SettingsError(f"group.protocol is consumer (KIP-848, Kafka 4.0+) or classic, not {protocol_name!r}")
    on_assigned, on_revoked, on_lost = callbacks
    membership = Membership(cluster, member, auto_commit=java.get("enable_auto_commit", True),
                            auto_commit_interval_ms=java.get("auto_commit_interval_ms", 5000), reset=reset,
                            isolation_level=isolation_level, on_assigned=on_assigned, on_revoked=on_revoked,
                            on_lost=on_lost)
    try:
        member.start()
    except BaseException:
        member.close(leave=False)
        raise
    return membership
