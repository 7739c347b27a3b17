"""A live topic repaired by copy: every readable record of topic A written to topic B exactly once,
across restarts, with each unreadable range of A named and dead-lettered -- the way out for
consumers stuck on a damaged segment.

    from pykbatch.live.copy import copy_topic, OffsetMap, move_group
    report = copy_topic({"bootstrap.servers": "broker:9092"}, "orders", "orders-repaired")
    report.ok                  # False: some range of "orders" could not be read (report.skips)
    move_group({"bootstrap.servers": "broker:9092"}, "billing", "orders", "orders-repaired")

How, and why it is exactly once:

- A is read by the reader that is never stuck (``pykbatch.live.Reader``, read_committed by
  default: what A's consumers see); each record goes to the same partition of B with its key,
  value, headers and timestamp (B's topic stamps its own time if it is LogAppendTime).
- B is written by one transactional producer whose ``transactional.id`` is the copy's name
  (``pykbatch-copy-<A>-<B>`` unless named).  Every transaction holds, for a run of polls: the
  records, the dead letters of the ranges skipped in them, the offset map's entries for them, and
  A's next offsets committed to the consumer group of the same name (TxnOffsetCommit), so all of
  it becomes visible together or not at all.
- A restart's InitProducerId fences a copy still running under the name and aborts what a killed
  one left open; it then resumes from the group's committed offsets (read with require_stable).
  So each readable record of A is in B once, in A's order per partition, however often the copy
  is killed.  The commit's metadata carries each partition's running counts (records copied,
  ranges and offsets skipped), so a resumed copy still reports damage an earlier run met.
- The offset map (``<B>-offset-map`` unless named; compacted, one partition per partition of A)
  holds, per transaction and partition, runs ``[A offset, B offset, count]`` of records that are
  consecutive in both; ``OffsetMap.translate`` gives where a consumer of A at an offset goes on in
  B, and ``move_group`` commits a group's A offsets onto B so its consumers move over.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from pykbatch.errors import CODE
from pykbatch.live.cluster import (
    EARLIEST,
    LATEST,
    Cluster,
    ClusterError,
    TopicPartition,
    UnknownTopicError,
    asked_until_answered,
)
from pykbatch.live.fetched import Skip
from pykbatch.live.producer import Producer
from pykbatch.live.reader import Reader
from pykbatch.live.settings import consumer_settings, outside_group
from pykbatch.live.skip_sinks import ProducerDeadLetters
from pykbatch.policy import ErrorPolicy

log = logging.getLogger("pykbatch.live.copy")
MAP_SUFFIX, DEAD_LETTER_SUFFIX = "-offset-map", "-dead-letters"
METADATA_KEY = "pykbatch.copy"  # marks a group commit's metadata as a copy's running counts
COLUMNS = ("key", "value", "headers", "timestamp", "partition")  # what B's records keep of A's
FENCED = (CODE["PRODUCER_FENCED"], CODE["INVALID_PRODUCER_EPOCH"])  # a newer producer took the transactional.id
TRANSACTION_TIMEOUT_MS = 60_000  # a killed copy's transaction is aborted by the coordinator after this


class CopyError(ClusterError):
    """The copy cannot go on: B cannot take A's partitions, a record B refused is not tolerated, the
    name belongs to a copy of other topics, or another copy under the name fenced this one."""


def copy_name(from_topic: str, to_topic: str) -> str:
    """The default name of a copy: its transactional.id and its consumer group."""
    return f"pykbatch-copy-{from_topic}-{to_topic}"


@dataclass
class PartitionCopy:
    """One partition of A: where this run started and ended, and the copy's running counts
    (every run under the name, this one included)."""
    partition: int
    start: int
    position: int
    copied: int = 0
    skips: int = 0
    skipped: int = 0
    """Offsets inside the skipped ranges."""
    refused: int = 0
    """Records B refused that the policy dead-lettered (``errors.tolerance=all``)."""
    copied_now: int = 0
    """Of ``copied``, by this run."""

    def metadata(self, to_topic: str) -> str:
        return json.dumps({METADATA_KEY: 1, "to": to_topic, "copied": self.copied, "skips": self.skips,
                           "skipped": self.skipped, "refused": self.refused}, separators=(",", ":"))

    def as_dict(self) -> dict:
        return {"partition": self.partition, "from": self.start, "to": self.position, "copied": self.copied,
                "copied_now": self.copied_now, "skips": self.skips, "skipped": self.skipped, "refused": self.refused}


@dataclass
class CopyReport:
    """What a run of ``copy_topic`` did, and what the copy under its name did so far."""
    from_topic: str
    to_topic: str
    name: str
    map_topic: str
    dead_letter_topic: str
    partitions: dict[int, PartitionCopy]
    resumed: bool
    transaction_version: int | None = None
    transactions: int = 0
    skips: list[Skip] = field(default_factory=list)
    """The ranges this run skipped (earlier runs' are in the dead-letter topic)."""
    map_partitions: int = field(default=1, repr=False)

    @property
    def ok(self) -> bool:
        """Nothing of A was left behind by any run of the copy: no range skipped, no record refused."""
        return not any(p.skips or p.refused for p in self.partitions.values())

    def as_dict(self) -> dict:
        return {"from_topic": self.from_topic, "to_topic": self.to_topic, "name": self.name,
                "map_topic": self.map_topic, "dead_letter_topic": self.dead_letter_topic, "resumed": self.resumed,
                "transaction_version": self.transaction_version, "transactions": self.transactions, "ok": self.ok,
                "partitions": [p.as_dict() for p in self.partitions.values()],
                "skips": [s.as_dict() for s in self.skips]}

    def lines(self) -> list[str]:
        out = []
        for p in self.partitions.values():
            damage = f", {p.skips} range(s) skipped ({p.skipped} offsets)" if p.skips else ""
            refused = f", {p.refused} refused by {self.to_topic} and dead-lettered" if p.refused else ""
            out.append(f"{self.from_topic}-{p.partition} -> {self.to_topic}-{p.partition}: at offset {p.position}, "
                       f"{p.copied} records copied ({p.copied_now} by this run){damage}{refused}")
        before = sum(p.skips for p in self.partitions.values()) - len(self.skips)
        status = "ok" if self.ok else f"damage: see {self.dead_letter_topic}"
        out.append(f"copy {self.name}: {self.transactions} transaction(s) committed by this run, {status}")
        out += [f"  {s.line()}" for s in self.skips]
        if before > 0:
            out.append(f"  and {before} range(s) skipped by an earlier run (dead letters in {self.dead_letter_topic})")
        return out


def runs_of(a: np.ndarray, b: np.ndarray) -> list[list[int]]:
    """``[A offset, B offset, count]`` for each stretch of records consecutive in both logs."""
    if not len(a):
        return []
    cut = np.flatnonzero((np.diff(a) != 1) | (np.diff(b) != 1)) + 1
    starts, ends = np.r_[0, cut], np.r_[cut, len(a)]
    return [[int(a[s]), int(b[s]), int(e - s)] for s, e in zip(starts, ends)]


def copy_topic(props: Mapping[str, Any], from_topic: str, to_topic: str, *, name: str | None = None,
               follow: bool = False, isolation_level: str = "read_committed", map_topic: str | None = None,
               dead_letter_topic: str | None = None, commit_interval_ms: int = 1000,
               max_transaction_records: int = 50_000, errors_tolerance: str = "none",
               consumer: Mapping[str, Any] | None = None, producer: Mapping[str, Any] | None = None,
               on_commit: Callable[[CopyReport], object] | None = None,
               stop: Callable[[], bool] | None = None) -> CopyReport:
    """Copies ``from_topic`` to ``to_topic`` (see the module's doc) up to A's end as the copy
    starts (its last stable offset under read_committed), or on and on with ``follow`` until
    ``stop()`` answers True; resumes where the last run under ``name`` committed.

    props are the client properties both sides use (``bootstrap.servers``, TLS, SASL);
    ``consumer`` and ``producer`` add the reader's and the producer's own.  A transaction ends after
    ``commit_interval_ms`` or ``max_transaction_records``; ``on_commit`` is called after each.
    ``errors_tolerance``: what a record B refuses does (``none``: the copy stops, that
    transaction aborted; ``all``: it goes to the dead letters).  B, the offset map and the dead-letter
    topic are created when missing (B with A's partition count)."""
    if errors_tolerance not in ("none", "all"):
        raise ValueError("errors_tolerance is 'none' or 'all'")
    if commit_interval_ms <= 0 or max_transaction_records <= 0:
        raise ValueError("commit_interval_ms and max_transaction_records are positive")
    name = name or copy_name(from_topic, to_topic)
    map_topic = map_topic or to_topic + MAP_SUFFIX
    dead_letter_topic = dead_letter_topic or from_topic + DEAD_LETTER_SUFFIX
    if len({from_topic, to_topic, map_topic, dead_letter_topic}) < 4:
        raise ValueError("the source, the destination, the offset map and the dead-letter topic are four topics")
    cluster_props, java = consumer_settings({**props, **(consumer or {})})
    java = outside_group(java)  # the copy reads its partitions itself; its group is its own
    java.pop("group_id", None)  # the copy's group is its name
    java.pop("auto_offset_reset", None)
    java.pop("isolation_level", None)
    cluster = Cluster(cluster_props)
    try:
        cluster.connect()
        parts = cluster.partitions(from_topic)
        _ensure_topics(cluster, from_topic, to_topic, map_topic, dead_letter_topic, len(parts))
        with Producer({**props, **(producer or {}), "transactional.id": name, "acks": "all",
                       "enable.idempotence": "true", "errors.tolerance": errors_tolerance,
                       "errors.deadletterqueue.topic.name": dead_letter_topic,
                       "transaction.timeout.ms": (producer or {}).get("transaction.timeout.ms",
                                                                      TRANSACTION_TIMEOUT_MS)}) as writer:
            writer.init_transactions()  # fences a copy running under the name; aborts what a killed one left open
            report = _resume(cluster, writer, from_topic, to_topic, parts, name, map_topic, dead_letter_topic)
            report.transaction_version = writer.transaction_version
            report.map_partitions = len(cluster.partitions(map_topic))
            reader = Reader(cluster, assign={from_topic: parts},
                            positions={TopicPartition(from_topic, p): c.start for p, c in report.partitions.items()},
                            ending_offsets=None if follow else "latest", isolation_level=isolation_level,
                            fail_on_data_loss=False, policy=ErrorPolicy(tolerance="all"),
                            dead_letters=ProducerDeadLetters(writer, dead_letter_topic), **java)
            _run(reader, writer, report, commit_interval_ms, max_transaction_records, on_commit, stop)
            return report
    finally:
        cluster.close()


def _ensure_topics(cluster: Cluster, from_topic: str, to_topic: str, map_topic: str, dead_letter_topic: str,
                   partitions: int) -> None:
    """B (with A's partition count and the configurations set on A: its retention, its cleanup
    policy, its timestamp type), the offset map and the dead-letter topic, where missing."""
    from pykbatch.live.topic_limits import overrides
    for topic, count, configs in ((to_topic, partitions, None), (map_topic, partitions, {"cleanup.policy": "compact"}),
                                  (dead_letter_topic, 1, {})):
        try:
            cluster.refresh([topic])
        except UnknownTopicError:
            if configs is None:
                configs = overrides(cluster, from_topic)
            if cluster.create_topic(topic, count, configs=configs):
                log.info("created topic %s (%d partitions, %s)", topic, count, configs or "the broker's defaults")
            cluster.wait_for_topic(topic)
    have = len(cluster.partitions(to_topic))
    if have < partitions:
        raise CopyError(f"{to_topic} has {have} partition(s), fewer than the source's {partitions}: a copy keeps "
                        "each record's partition (add partitions to it, or copy to a new topic)")


def _resume(cluster: Cluster, writer: Producer, from_topic: str, to_topic: str, parts: list[int], name: str,
            map_topic: str, dead_letter_topic: str) -> CopyReport:
    """Where each partition goes on from: the copy's group's commit and its running counts, or A's
    log start for a partition never committed."""
    tps = [TopicPartition(from_topic, p) for p in parts]
    committed = writer.committed_with_metadata(name, tps)
    fresh = [tp for tp in tps if committed[tp][0] is None]
    earliest = cluster.list_offsets({tp: EARLIEST for tp in fresh}) if fresh else {}
    out = {}
    for tp in tps:
        offset, note = committed[tp]
        counts = _counts(note, name, to_topic) if offset is not None else {}
        start = offset if offset is not None else earliest[tp]
        out[tp.partition] = PartitionCopy(tp.partition, start, start, **counts)
    resumed = len(fresh) < len(tps)
    if resumed:
        log.info("copy %s resumes at %s", name, {p: c.start for p, c in out.items()})
    return CopyReport(from_topic, to_topic, name, map_topic, dead_letter_topic, out, resumed)


def _counts(note: str, name: str, to_topic: str) -> dict:
    try:
        doc = json.loads(note) if note else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict) or METADATA_KEY not in doc:
        raise CopyError(f"the consumer group {name!r} has offsets that no copy committed: name the copy otherwise "
                        "(its name is its group and its transactional.id)")
    if doc.get("to") != to_topic:
        raise CopyError(f"copy {name!r} wrote to {doc.get('to')!r}, not {to_topic!r}: name this copy otherwise")
    return {k: int(doc.get(k, 0)) for k in ("copied", "skips", "skipped", "refused")}


@dataclass
class _Pending:
    """One poll's records sent in the open transaction: A's partitions and offsets, and their outcomes."""
    partition: np.ndarray
    offset: np.ndarray
    outcomes: Any


def _run(reader: Reader, writer: Producer, report: CopyReport, interval_ms: int, max_records: int,
         on_commit, stop) -> None:
    from_topic, to_topic = report.from_topic, report.to_topic
    open_ = False
    while True:
        if not open_:
            writer.begin_transaction()
            open_ = True
        started, skips_before, positions_before = time.monotonic(), len(reader.skips), reader.positions()
        pending: list[_Pending] = []
        records = 0
        while not reader.finished and not (stop and stop()):
            poll = reader.poll()
            table = poll.table
            if table.num_rows:
                outcomes = writer.produce_arrow(table.select(list(COLUMNS)), to_topic, wait=False)
                pending.append(_Pending(table.column("partition").to_numpy(), table.column("offset").to_numpy(),
                                        outcomes))
                records += table.num_rows
            if records >= max_records or (time.monotonic() - started) * 1000 >= interval_ms:
                break
        positions = reader.positions()
        if not pending and len(reader.skips) == skips_before and positions == positions_before:
            if reader.finished or (stop and stop()):
                return  # the open transaction enlisted nothing: there is nothing to end
            continue  # following an idle topic: the same (empty) transaction waits for records
        try:
            writer.flush()
            for p in pending:
                p.outcomes.wait()
            if any(p.outcomes.failed() for p in pending):
                first = next(c for p in pending for c in p.outcomes.failed())
                if first.error.code in FENCED:
                    raise _fenced(report.name, first.error)
                raise CopyError(f"{to_topic} refused a record of {from_topic} ({first.error}); nothing of this "
                                "transaction is written (errors.tolerance=all dead-letters such records)", first.error.code)
            _write_map(writer, report, pending)
            new_skips = reader.skips[skips_before:]
            for p, c in report.partitions.items():
                c.position = positions[TopicPartition(from_topic, p)]
            for s in new_skips:
                report.partitions[s.partition].skips += 1
                report.partitions[s.partition].skipped += s.count
            writer.send_offsets_to_transaction(
                {TopicPartition(from_topic, p): c.position for p, c in report.partitions.items()}, report.name,
                metadata={TopicPartition(from_topic, p): c.metadata(to_topic) for p, c in report.partitions.items()})
            writer.commit_transaction()
            open_ = False
        except BaseException as exc:
            _abort_quietly(writer)
            if isinstance(exc, ClusterError) and exc.code in FENCED and not isinstance(exc, CopyError):
                raise _fenced(report.name, exc) from exc
            raise
        report.skips += new_skips
        report.transactions += 1
        if on_commit is not None:
            on_commit(report)
        if reader.finished or (stop and stop()):
            return


def _fenced(name: str, error) -> CopyError:
    return CopyError(f"fenced: another copy under the name {name!r} took over (the broker answered {error}); this "
                     "one stops, its open transaction aborted", getattr(error, "code", None))


def _write_map(writer: Producer, report: CopyReport, pending: list[_Pending]) -> None:
    """The transaction's offset map entries (one record per partition of A it wrote to), and the
    counts of what it delivered and what B refused."""
    from pykbatch.live.produced import DEAD_LETTERED, OUTCOMES
    if not pending:
        return
    partition = np.concatenate([p.partition for p in pending])
    a = np.concatenate([p.offset for p in pending])
    b = np.concatenate([p.outcomes.offset for p in pending])
    refused = np.concatenate([p.outcomes.outcome for p in pending]) == OUTCOMES.index(DEAD_LETTERED)
    for p, c in report.partitions.items():
        mine = partition == p
        if not mine.any():
            continue
        c.refused += int((mine & refused).sum())
        landed = mine & (b >= 0)
        pa_, pb = a[landed], b[landed]
        if len(pb) and (np.diff(pb) <= 0).any():  # the promise "in A's order per partition", checked
            raise CopyError(f"{report.to_topic}-{p} received records out of {report.from_topic}-{p}'s order "
                            "(a bug: please report it)")
        c.copied += len(pa_)
        c.copied_now += len(pa_)
        runs = runs_of(pa_, pb)
        if runs:
            doc = {"from_topic": report.from_topic, "to_topic": report.to_topic, "partition": p, "runs": runs}
            writer.send(report.map_topic, key=f"{report.from_topic}-{p}@{runs[0][0]}",
                        value=json.dumps(doc, separators=(",", ":")), partition=p % report.map_partitions)


def _abort_quietly(writer: Producer) -> None:
    """After a failure inside the transaction: abort it if the producer still can (a fenced or
    fatal producer cannot; the next run's InitProducerId aborts it then)."""
    try:
        writer.abort_transaction()
    except Exception as exc:  # the error that brought us here is the one to raise
        log.info("the copy's transaction was not aborted here (%s); the next run's InitProducerId aborts it", exc)


# -- the offset map, for consumers moving from A to B --------------------------------------------------
@dataclass
class OffsetMap:
    """A copy's offset map: per partition, runs ``[A offset, B offset, count]`` in A's order."""
    from_topic: str
    to_topic: str
    runs: dict[int, list[tuple[int, int, int]]]

    @classmethod
    def read(cls, props: Mapping[str, Any] | Cluster, from_topic: str, to_topic: str,
             map_topic: str | None = None, timeout_s: float = 30) -> OffsetMap:
        """The map as committed in ``map_topic`` (default ``<B>-offset-map``), read_committed up to
        its end as of the call: a commit that just returned has its markers written within
        moments, so the read waits for them, up to ``timeout_s`` (a copy still running holds the
        last transaction open: what is past it is left out, and logged)."""
        map_topic = map_topic or to_topic + MAP_SUFFIX
        runs: dict[int, list[tuple[int, int, int]]] = {}
        own = not isinstance(props, Cluster)
        cluster = Cluster(consumer_settings(props)[0]) if own else props
        try:
            cluster.connect()
            ends = cluster.list_offsets({TopicPartition(map_topic, p): LATEST for p in cluster.partitions(map_topic)})
            with Reader(cluster, subscribe=map_topic, starting_offsets="earliest",
                        ending_offsets={map_topic: {str(tp.partition): o for tp, o in ends.items()}},
                        isolation_level="read_committed") as reader:
                for poll in reader.polls(timeout_s):
                    for record in poll.records():
                        doc = json.loads(record.value)
                        if doc.get("from_topic") == from_topic and doc.get("to_topic") == to_topic:
                            runs.setdefault(int(doc["partition"]), []).extend(tuple(r) for r in doc["runs"])
                if not reader.finished:
                    log.warning("%s: read up to %s, short of %s after %s s (a transaction still open: a copy running)",
                                map_topic, reader.positions(), ends, timeout_s)
        finally:
            if own:
                cluster.close()
        for p in runs:
            runs[p].sort()
        return cls(from_topic, to_topic, runs)

    def translate(self, partition: int, offset: int) -> int | None:
        """Where a consumer of A's ``partition`` at ``offset`` (the next to read) goes on in B: the
        B offset of the first copied record at or after it; past every copied record, the offset
        after the last; None when nothing of the partition was copied."""
        runs = self.runs.get(partition)
        if not runs:
            return None
        firsts = [r[0] for r in runs]
        i = int(np.searchsorted(firsts, offset, side="right")) - 1
        if i >= 0:
            a, b, n = runs[i]
            if offset < a + n:
                return b + (offset - a)
        if i + 1 < len(runs):
            return runs[i + 1][1]
        a, b, n = runs[-1]
        return b + n


def move_group(props: Mapping[str, Any], group: str, from_topic: str, to_topic: str, *, name: str | None = None,
               map_topic: str | None = None) -> dict[int, tuple[int, int]]:
    """Commits ``group``'s offsets of A, translated by the copy's offset map, as its offsets of B
    (``{partition: (A offset, B offset)}``), so its consumers, subscribed to B, go on where they
    stopped.  The group must have no members running (a commit from outside a group's generation
    is refused while it has), and the copy must have passed the group's offsets."""
    name = name or copy_name(from_topic, to_topic)
    cluster_props, _ = consumer_settings(props)
    with Cluster(cluster_props) as cluster:
        cluster.connect()
        tps = [TopicPartition(from_topic, p) for p in cluster.partitions(from_topic)]
        at = asked_until_answered(lambda: cluster.committed(group, tps))
        copied = asked_until_answered(lambda: cluster.committed(name, tps))
        if all(v is None for v in at.values()):
            raise CopyError(f"group {group!r} has committed no offsets of {from_topic}")
        offset_map = OffsetMap.read(cluster, from_topic, to_topic, map_topic)
        moves = {}
        for tp in tps:
            a = at[tp]
            if a is None:
                continue
            if copied[tp] is None or copied[tp] < a:
                raise CopyError(f"the copy {name!r} has not reached offset {a} of {tp.topic}-{tp.partition} yet "
                                f"(it is at {copied[tp]}): let it catch up, then move the group")
            b = offset_map.translate(tp.partition, a)
            if b is None:  # nothing of the partition copied: B's end, where its copy goes on
                b = cluster.list_offsets({TopicPartition(to_topic, tp.partition): LATEST})[
                    TopicPartition(to_topic, tp.partition)]
            moves[tp.partition] = (a, b)
        cluster.commit(group, {TopicPartition(to_topic, p): b for p, (_, b) in moves.items()},
                       metadata=f"moved from {from_topic} by {name}")
        return moves
