"""A producer that does what KIP-467 asks of a client: when the broker names the culprit records
of a batch, only those fail (or go where the policy says) and the rest goes out again as a new
batch -- sequence re-based, so idempotence holds, and inside a transaction the transaction still
commits (KIP-1059).

    from pykbatch.live import Producer
    with Producer({"bootstrap.servers": "broker:9092", "errors.tolerance": "all",
                   "errors.deadletterqueue.topic.name": "orders-dlq"}) as producer:
        report = producer.produce_arrow(table, topic="orders")   # Spark's Kafka sink columns
        report.counts        # {"delivered": ..., "dropped": ..., "dead_lettered": ..., "failed": ...}

Records come as Arrow tables (``key``, ``value``, ``headers``, ``timestamp``, ``partition``,
``topic``: the columns Spark's Kafka sink takes; read in place from the Arrow buffers) or one
by one (``send``, a ``Delivery`` future each).  Batches are built in C; partitions follow
Kafka's default partitioner (murmur2 of the key; a sticky partition per batch for null keys).
Idempotence is on by default; ``transactional.id`` turns on transactions.

Before a batch leaves, the pre-flight checks it against the topic's configuration as the
cluster holds it (DescribeConfigs) with the validator's rules -- the broker's rule, code and
message -- so a record the leader would refuse is taken out before it can fail its neighbours.
The broker's answer stays the authority: whatever it names is handled the same way.

Every record gets exactly one outcome (``pykbatch.live.produced``): delivered, dropped,
dead-lettered or failed.  What decides between them for a record the broker (or the
pre-flight) refused: a fatal error fails it; otherwise a KIP-210 ``handler(record, error)``
answers CONTINUE or FAIL (asked until its first FAIL), else ``errors.tolerance`` (``none``:
fail, the default; ``all``: let it go).  A record let go is dead-lettered when
``errors.deadletterqueue.topic.name`` is set (its key, value and headers, plus Connect's
``__connect.errors.*`` headers naming the topic, partition, error and message), else dropped.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from pykbatch import _native
from pykbatch import errors as kb_errors
from pykbatch.live import wire_logs
from pykbatch.live.cluster import Cluster, TopicPartition, UnknownTopicError, asked_until_answered
from pykbatch.live.produced import (
    DEAD_LETTERED, DROPPED, FAILED, Delivery, ProduceError, ProduceFailedError, ProduceReport,
)
from pykbatch.live.rows import BATCH_OVERHEAD, RECORD_OVERHEAD, ArrowColumns, ArrowRows, Build, ListRows, Pending, Rows
from pykbatch.live.sender import ProducerBatch, Sender
from pykbatch.live.topic_limits import TopicLimits, check, check_before_compression, describe
from pykbatch.live.transactions import (
    Coordinator, FatalProducerError, ProducerFencedError, TransactionAbortableError,
)
from pykbatch.policy import context_headers

log = logging.getLogger("pykbatch.live.producer")
errors_log = logging.getLogger("pykbatch.errors")

# The producer's own settings (Kafka's names); everything else is a connection setting.
DEFAULTS: dict[str, Any] = {
    "acks": "all", "enable.idempotence": True, "compression.type": "none", "linger.ms": 5, "batch.size": 16384,
    "max.in.flight.requests.per.connection": 5, "max.request.size": 1048576, "request.timeout.ms": 30000,
    "delivery.timeout.ms": 120000, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
    "transactional.id": None, "transaction.timeout.ms": 60000, "preflight": True,
    "errors.tolerance": "none", "errors.deadletterqueue.topic.name": "",
    "errors.deadletterqueue.topic.replication.factor": -1, "errors.deadletterqueue.topic.partitions": 1,
    "errors.deadletterqueue.context.headers.enable": True, "errors.log.enable": False,
    "errors.log.include.messages": False, "client.id": "pykbatch",
}
_BOOL = {"enable.idempotence", "preflight", "errors.deadletterqueue.context.headers.enable", "errors.log.enable",
         "errors.log.include.messages"}
_INT = {"linger.ms", "batch.size", "max.in.flight.requests.per.connection", "max.request.size", "request.timeout.ms",
        "delivery.timeout.ms", "retry.backoff.ms", "retry.backoff.max.ms", "transaction.timeout.ms",
        "errors.deadletterqueue.topic.replication.factor", "errors.deadletterqueue.topic.partitions"}
STAGE = "KAFKA_PRODUCE"  # Connect's stage for a failed write to Kafka
LIMITS_CONFIRMED_S = 1.0  # the pre-flight drops a record only on topic limits read this recently
CLASS_NAME = "pykbatch.live.Producer"
METRICS = ("total-records", "total-record-failures", "total-record-errors", "total-records-skipped", "total-retries",
           "total-errors-logged", "deadletterqueue-produce-requests", "deadletterqueue-produce-failures",
           "records-sent", "batches-sent", "produce-requests", "records-named-by-broker", "records-named-by-preflight",
           "batch-splits", "metadata-refreshes", "network-errors", "throttle-time-ms", "handler-calls",
           "possibly-persisted-batches", "possibly-duplicated-records", "transactions-committed",
           "transactions-aborted")


def _flag(value) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in ("true", "1", "yes")


def split_settings(props: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(producer settings with defaults, connection settings) of Kafka-named ``props``
    (``kafka.`` prefixes, as Spark options carry them, dropped)."""
    plain = {k[6:] if k.startswith("kafka.") else k: v for k, v in props.items()}
    mine = dict(DEFAULTS)
    conn = {}
    for k, v in plain.items():
        if k in DEFAULTS:
            mine[k] = v
        else:
            conn[k] = v
    for k in _BOOL:
        mine[k] = _flag(mine[k])
    for k in _INT:
        mine[k] = int(mine[k])
    if "client.id" in plain:
        conn["client.id"] = plain["client.id"]
    acks = str(mine["acks"]).lower()
    mine["acks"] = -1 if acks in ("all", "-1") else int(acks)
    if mine["acks"] not in (-1, 0, 1):
        raise ValueError(f"acks is all, 1 or 0, not {props.get('acks')!r}")
    if mine["errors.tolerance"] not in ("none", "all"):
        raise ValueError("errors.tolerance is 'none' or 'all'")
    if mine["transactional.id"] is not None:
        mine["enable.idempotence"] = True
    if mine["enable.idempotence"]:
        if mine["acks"] != -1:
            raise ValueError("enable.idempotence needs acks=all (set enable.idempotence=false for acks 0 or 1)")
        if not 1 <= mine["max.in.flight.requests.per.connection"] <= 5:
            raise ValueError("enable.idempotence needs max.in.flight.requests.per.connection between 1 and 5")
    codec = str(mine["compression.type"]).lower()
    if codec not in _native.COMPRESSION_NAMES:
        raise ValueError(f"compression.type is one of {', '.join(_native.COMPRESSION_NAMES)}, not {codec!r}")
    mine["compression.type"] = codec
    return mine, conn


class Producer:
    """Produces to a live cluster (see the module's doc).

    props
        Kafka's producer properties (``acks``, ``enable.idempotence``, ``compression.type``,
        ``linger.ms``, ``batch.size``, ``max.in.flight.requests.per.connection``,
        ``max.request.size``, ``request.timeout.ms``, ``delivery.timeout.ms``,
        ``retry.backoff.ms``, ``retry.backoff.max.ms``, ``transactional.id``,
        ``transaction.timeout.ms``), Connect's ``errors.*`` (KIP-298), ``preflight``, and the
        connection settings of ``pykbatch.live.settings`` (TLS, SASL).
    handler
        KIP-210: ``handler(record, error)`` -> ``pykbatch.errors.CONTINUE`` or ``FAIL`` for each
        record the broker or the pre-flight refused (``record``: a dict with key, value,
        headers, timestamp, topic, partition, row; ``error``: ``ProduceError``).  Fatal errors
        never reach it; after its first FAIL it is not asked again.
    dead_letters
        A callable ``sink(record, error, context)`` instead of a dead-letter topic (e.g. a local file).
    """

    def __init__(self, props: Mapping[str, Any], *, handler: Callable | None = None,
                 dead_letters: Callable | None = None):
        wire_logs.guard()
        self.settings, conn = split_settings(props)
        s = self.settings
        self.handler = handler
        self._handler_failed = False
        self.dead_letter_sink = dead_letters
        self.dead_letter_topic = s["errors.deadletterqueue.topic.name"] or None
        self.transactional_id = s["transactional.id"]
        self.metrics = dict.fromkeys(METRICS, 0)
        self.last_error_timestamp = -1
        self.cluster = Cluster(conn, timeout_ms=s["request.timeout.ms"]).connect()
        self._coordinator = Coordinator(self.cluster, self.transactional_id, s["transaction.timeout.ms"],
                                        s["delivery.timeout.ms"])
        self._limits: dict[str, tuple[TopicLimits, float]] = {}  # topic -> (limits, when read)
        self._stale_limits: set[str] = set()  # topics whose broker refused what their limits would take
        self._open: dict[TopicPartition, list[Pending]] = {}
        self._open_since: dict[TopicPartition, float] = {}
        self._open_bytes: dict[TopicPartition, int] = {}
        self._sticky: dict[str, int] = {}
        self._lock = threading.RLock()
        self._txn_state = "none"  # none | ready | in_transaction | abortable
        self._txn_partitions: set[TopicPartition] = set()
        self._txn_failed: list[ProduceError] = []
        self._fatal: BaseException | None = None
        self._closed = False
        self._sender = Sender(self.cluster, acks=s["acks"], compression=s["compression.type"],
                              max_in_flight=s["max.in.flight.requests.per.connection"],
                              max_request_size=s["max.request.size"], request_timeout_ms=s["request.timeout.ms"],
                              delivery_timeout_ms=s["delivery.timeout.ms"], retry_backoff_ms=s["retry.backoff.ms"],
                              retry_backoff_max_ms=s["retry.backoff.max.ms"], idempotent=s["enable.idempotence"],
                              transactional_id=self.transactional_id, on_culprits=self._on_culprits,
                              on_add_partitions=self._add_partitions if self.transactional_id else None,
                              metrics=self.metrics)
        self._sender.tick = self._seal_lingering
        try:
            if self.dead_letter_topic is not None:  # as Kafka Connect does when its task starts
                self._ensure_dead_letter_topic()
            if s["enable.idempotence"] and not self.transactional_id:
                self._sender.pid = self._coordinator.init_producer_id()
        except BaseException:
            self.cluster.close()
            raise
        self._sender.start()

    def __repr__(self) -> str:
        return f"Producer({self.cluster!r}, transactional_id={self.transactional_id!r})"

    def _ensure_dead_letter_topic(self) -> None:
        """Creates the dead-letter topic when it does not exist, as Kafka Connect does
        (``errors.deadletterqueue.topic.replication.factor``; -1, the default here, is the
        broker's default where Connect says 3; ``errors.deadletterqueue.topic.partitions``)."""
        try:
            self.cluster.partitions(self.dead_letter_topic)
            return
        except UnknownTopicError:
            pass
        s = self.settings
        if self.cluster.create_topic(self.dead_letter_topic, s["errors.deadletterqueue.topic.partitions"],
                                     s["errors.deadletterqueue.topic.replication.factor"]):
            log.info("created the dead-letter topic %s", self.dead_letter_topic)
        self.cluster.wait_for_topic(self.dead_letter_topic, s["request.timeout.ms"] / 1000)

    # -- records one by one -------------------------------------------------------------------
    def send(self, topic: str, value=None, key=None, headers: Iterable = (), partition: int | None = None,
             timestamp: int | None = None) -> Delivery:
        """Queues one record; its ``Delivery`` settles with its outcome (``flush`` waits for all)."""
        self._check_open()
        self.metrics["total-records"] += 1
        delivery = Delivery()
        self._append(topic, Pending(_blob(key), _blob(value), _headers(headers),
                                    int(time.time() * 1000) if timestamp is None else int(timestamp), delivery),
                     partition)
        return delivery

    def produce(self, records: Iterable, topic: str | None = None, *, timeout: float | None = None) -> ProduceReport:
        """Sends ``records`` (mappings or objects with value, key, headers, timestamp, partition,
        topic; or (key, value) pairs) and waits until each has its outcome: the report, by
        record index.  Raises ``ProduceFailedError`` (carrying the report) when a record failed."""
        records = list(records)
        self.metrics["total-records"] += len(records)
        report = ProduceReport(len(records))
        now = int(time.time() * 1000)
        for row, r in enumerate(records):
            if isinstance(r, tuple):
                r = {"key": r[0], "value": r[1]}
            get = r.get if isinstance(r, Mapping) else (lambda name, default=None, r=r: getattr(r, name, default))
            t = get("topic") or topic
            if t is None:
                raise ValueError(f"record {row} names no topic (give topic=)")
            ts = get("timestamp")
            self._append(t, Pending(_blob(get("key")), _blob(get("value")), _headers(get("headers") or ()),
                                    now if ts is None else int(ts), None, report, row), get("partition"))
        self.flush(timeout)
        return self._finish(report, timeout)

    # -- Arrow --------------------------------------------------------------------------------
    def produce_arrow(self, table, topic: str | None = None, *, timeout: float | None = None,
                      wait: bool = True, progress: Callable[[int], object] | None = None) -> ProduceReport:
        """Sends every row of an Arrow table or record batch (columns ``value``, and optionally
        ``key``, ``headers`` (list<struct<key: string, value: binary>>), ``timestamp``,
        ``partition``, ``topic``), read in place; waits for every row's outcome unless ``wait``
        is False (``progress``: called now and then with how many have theirs).  Raises
        ``ProduceFailedError`` (carrying the report) when a row failed."""
        import pyarrow as pa
        self._check_open()
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        table = table.combine_chunks()
        n = table.num_rows
        self.metrics["total-records"] += n
        report = ProduceReport(n)
        if "value" not in table.column_names:
            raise ValueError("the table has no 'value' column (Spark's Kafka sink columns: key, value, headers, "
                             "topic, partition, timestamp)")
        cols = ArrowColumns(keys=_chunk(table, "key"), values=_chunk(table, "value"), headers=_chunk(table, "headers"),
                            timestamps=_timestamps(table))
        if cols.headers is not None and not pa.types.is_list(cols.headers.type):
            raise TypeError("the headers column is list<struct<key: string, value: binary>> (Spark's Kafka column)")
        explicit = _chunk(table, "partition")
        by_topic = self._rows_by_topic(table, topic, n)
        batches: list[ProducerBatch] = []
        for t, rows in by_topic:
            parts = self._partitions(t)
            sizes = _row_sizes(cols, rows)
            chosen = self._choose_partitions(t, cols, rows, sizes, len(parts), explicit)
            # all in [0, count): as 16-bit keys numpy's stable sort is a radix sort (2.5x faster)
            order = np.argsort(chosen.astype(np.uint16) if len(parts) <= 1 << 16 else chosen, kind="stable")
            chosen_sorted = chosen[order]
            bounds = np.flatnonzero(np.diff(chosen_sorted)) + 1
            for part_rows, part_sizes, part in zip(np.split(rows[order], bounds), np.split(sizes[order], bounds),
                                                   chosen_sorted[np.r_[0, bounds]] if len(rows) else []):
                tp = TopicPartition(t, int(part))
                ends = _native.batch_ends(part_sizes, self.settings["batch.size"] - BATCH_OVERHEAD)
                batches.extend(self._seal_many(tp, cols, part_rows, ends, report))
        self._sender.enqueue(batches)
        if not wait:
            return report
        return self._finish(report, timeout, progress)

    def _rows_by_topic(self, table, topic, n) -> list[tuple[str, np.ndarray]]:
        if "topic" not in table.column_names:
            if topic is None:
                raise ValueError("no topic: give topic= or a 'topic' column")
            return [(topic, np.arange(n, dtype=np.int64))]
        import pyarrow.compute as pc
        col = table.column("topic").combine_chunks()
        if topic is not None:
            col = pc.fill_null(col, topic)
        if col.null_count:
            raise ValueError("a row has no topic (null in the 'topic' column, and no topic=)")
        codes = pc.dictionary_encode(col)
        names = codes.dictionary.to_pylist()
        idx = codes.indices.to_numpy(zero_copy_only=False)
        return [(name, np.flatnonzero(idx == i).astype(np.int64)) for i, name in enumerate(names)]

    def _choose_partitions(self, topic: str, cols: ArrowColumns, rows: np.ndarray, sizes: np.ndarray, count: int,
                           explicit) -> np.ndarray:
        """Kafka's default partitioner for ``rows`` (``sizes``: their bytes): the partition column
        where given, murmur2 of the key, else a sticky partition per batch's worth of rows."""
        chosen = np.full(len(rows), -1, dtype=np.int32)
        if cols.keys is not None:
            chosen = _native.partition_keys(cols.keys, count)[rows]
        if explicit is not None:
            import pyarrow.compute as pc
            given = pc.fill_null(explicit, -1).to_numpy(zero_copy_only=False)[rows]
            mask = explicit.is_valid().to_numpy(zero_copy_only=False)[rows]
            bad = mask & ((given < 0) | (given >= count))
            if bad.any():
                raise ValueError(f"row {int(rows[np.flatnonzero(bad)[0]])}: partition "
                                 f"{int(given[np.flatnonzero(bad)[0]])} is not one of {topic!r}'s {count}")
            chosen[mask] = given[mask].astype(np.int32)
        unkeyed = np.flatnonzero(chosen < 0)
        if len(unkeyed):  # sticky (KIP-480): a batch's worth of rows per partition, then the next
            start = self._sticky.get(topic, int(np.random.randint(count)))
            fill = np.cumsum(sizes[unkeyed]) // max(self.settings["batch.size"] - BATCH_OVERHEAD, 1)
            chosen[unkeyed] = (start + fill) % count
            self._sticky[topic] = int((start + fill[-1] + 1) % count)
        return chosen

    # -- batching -----------------------------------------------------------------------------
    def _append(self, topic: str, record: Pending, partition: int | None) -> None:
        count = len(self._partitions(topic))
        if partition is None:
            if record.key is not None:
                partition = _native.key_partition(record.key, count)
            else:
                partition = self._sticky.setdefault(topic, int(np.random.randint(count)))
        elif not 0 <= partition < count:
            raise ValueError(f"partition {partition} is not one of {topic!r}'s {count}")
        tp = TopicPartition(topic, int(partition))
        size = record.size()
        sealed: list[ProducerBatch] = []
        with self._lock:
            if tp in self._open and self._open_bytes[tp] + size > self.settings["batch.size"]:
                sealed = self._seal_open(tp)
            self._open.setdefault(tp, []).append(record)
            self._open_since.setdefault(tp, time.monotonic())
            self._open_bytes[tp] = self._open_bytes.get(tp, BATCH_OVERHEAD) + size
        if sealed:
            self._sender.enqueue(sealed)

    def _seal_open(self, tp: TopicPartition) -> list[ProducerBatch]:
        records = self._open.pop(tp)
        self._open_since.pop(tp, None)
        self._open_bytes.pop(tp, None)
        if records[0].key is None and self._sticky.get(tp.topic) == tp.partition:  # the next sticky partition
            self._sticky[tp.topic] = (tp.partition + 1) % len(self._partitions(tp.topic))
        return self._seal(tp, ListRows(records))

    def _seal_lingering(self, force: bool = False) -> None:
        linger = self.settings["linger.ms"] / 1000
        now = time.monotonic()
        sealed: list[ProducerBatch] = []
        with self._lock:
            for tp, since in list(self._open_since.items()):
                if force or now - since >= linger:
                    sealed.extend(self._seal_open(tp))
        if sealed:
            self._sender.enqueue(sealed)

    def _seal_many(self, tp: TopicPartition, cols: ArrowColumns, rows: np.ndarray, ends: np.ndarray,
                   report: ProduceReport) -> list[ProducerBatch]:
        """Rows ``rows`` of ``cols`` as batches (``ends``: where each one ends in ``rows``, the next
        starting there), built and pre-flighted together in the core; a batch with a culprit goes
        through ``_seal`` on its own, which settles it as it settles any batch."""
        bounds = list(zip([0, *ends[:-1].tolist()], ends.tolist()))
        limits = self._topic_limits(tp.topic, refresh=tp.topic in self._stale_limits)
        if limits is None:
            return [b for start, end in bounds for b in self._seal(tp, ArrowRows(cols, rows[start:end], report))]
        pid = self._sender.pid
        idempotent = self.settings["enable.idempotence"]
        stamp = (pid.id, pid.epoch, 0) if idempotent else (-1, -1, -1)
        raw = cols.batcher().build_many(rows, ends, "none", stamp[0], stamp[1], stamp[2],
                                        self.transactional_id is not None)
        datas, bad = check_before_compression(raw, limits, tp.partition, self.settings["compression.type"])
        now = time.monotonic()
        out: list[ProducerBatch] = []
        for i, (start, end) in enumerate(bounds):
            part = ArrowRows(cols, rows[start:end], report)
            if i in bad:
                out.extend(self._seal(tp, part))
                continue
            batch = ProducerBatch(tp, part, now, data=datas[i], stamp=stamp)
            out.append(batch)
        return out

    def _seal(self, tp: TopicPartition, rows: Rows) -> list[ProducerBatch]:
        """``rows`` as batches for ``tp``, after the pre-flight (its culprits settled here)."""
        limits = self._topic_limits(tp.topic, refresh=tp.topic in self._stale_limits)
        batch = ProducerBatch(tp, rows, time.monotonic())
        if limits is None:
            return [batch]
        pid = self._sender.pid
        idempotent = self.settings["enable.idempotence"]
        build = Build("none", pid.id if idempotent else -1, pid.epoch if idempotent else -1, 0 if idempotent else -1,
                      self.transactional_id is not None)
        datas, bad = check_before_compression([rows.build(build)], limits, tp.partition,
                                              self.settings["compression.type"])
        if not bad:  # the usual case: sound records, checked before they were compressed
            batch.data = bytearray(datas[0])
            batch.stamp = (pid.id, pid.epoch, 0) if idempotent else (-1, -1, -1)
            return [batch]
        # the culprits as the validator names them in the batch as it would be sent
        data = rows.build(replace(build, compression=self.settings["compression.type"]))
        culprits = check(data, limits.config(tp.partition))
        if culprits and self._limits[tp.topic][1] < time.monotonic() - LIMITS_CONFIRMED_S:
            # a record is dropped only on limits read just before: an operator may have loosened them
            fresh = self._topic_limits(tp.topic, refresh=True)
            if fresh != limits:
                culprits = check(data, fresh.config(tp.partition))
        if not culprits:
            batch.data = bytearray(data)
            batch.stamp = (pid.id, pid.epoch, 0) if idempotent else (-1, -1, -1)
            return [batch]
        whole = [c for c in culprits if c.record_index is None]
        if whole:
            if rows.n > 1:  # a batch-level refusal (too large): halves, until one record is named
                self.metrics["batch-splits"] += 1
                first, second = rows.halves()
                return self._seal(tp, first) + self._seal(tp, second)
            named = {0: whole[0]}
        else:
            named = {}
            for c in culprits:
                named.setdefault(c.record_index, c)
        self.metrics["records-named-by-preflight"] += len(named)
        self._on_culprits(batch, [(i, ProduceError(c.code, c.message, rule=c.rule, index=i, topic=tp.topic,
                                                   partition=tp.partition, source="preflight"))
                                  for i, c in sorted(named.items())])
        keep = [i for i in range(rows.n) if i not in named]
        return [ProducerBatch(tp, rows.subset(keep), batch.created)] if keep else []

    def _topic_limits(self, topic: str, *, refresh: bool = False) -> TopicLimits | None:
        """The topic's limits for the pre-flight (None when it is off); ``refresh`` reads them again
        unless they were read less than ``LIMITS_CONFIRMED_S`` ago (once a second at most)."""
        if not self.settings["preflight"]:
            return None
        known = self._limits.get(topic)
        if known is None or (refresh and known[1] < time.monotonic() - LIMITS_CONFIRMED_S):
            limits = self._sender.call(lambda: describe(self.cluster, [topic])[topic])
            if known is not None and limits != known[0]:
                log.info("topic %s: configuration changed, the pre-flight checks against %s", topic, limits)
            known = self._limits[topic] = (limits, time.monotonic())
            self._stale_limits.discard(topic)
        return known[0]

    def _partitions(self, topic: str) -> list[int]:
        parts = self.cluster.known_partitions(topic)
        if parts is None:
            parts = self._sender.call(self.cluster.partitions, topic)
        return parts

    # -- culprits: the policy -----------------------------------------------------------------
    def _on_culprits(self, batch: ProducerBatch, culprits: list[tuple[int, ProduceError]]) -> None:
        """Each refused record's outcome (network thread or the caller's, for the pre-flight)."""
        tp = batch.tp
        if self.settings["preflight"] and any(e.source == "broker" and e.error_class != kb_errors.RETRIABLE
                                              for _, e in culprits):
            self._stale_limits.add(tp.topic)  # refused what the limits let through: read them again
        for i, error in culprits:
            self.metrics["total-record-failures"] += 1
            self.metrics["total-record-errors"] += 1
            self.last_error_timestamp = int(time.time() * 1000)
            fatal = error.error_class == kb_errors.FATAL
            tolerated = False
            record = None
            if not fatal and not self._handler_failed:  # after a FAIL every later culprit fails too
                if self.handler is not None:
                    record = {**batch.rows.record(i), "topic": tp.topic, "partition": tp.partition}
                    self.metrics["handler-calls"] += 1
                    answer = self.handler(record, error)
                    if answer == kb_errors.FAIL:
                        self._handler_failed = True
                        log.error("handler answered FAIL for %s record %s: %s", tp, i, error)
                    elif answer == kb_errors.CONTINUE:
                        tolerated = True
                        log.debug("handler answered CONTINUE for %s record %s: %s", tp, i, error)
                    else:
                        raise ValueError(f"a handler answers CONTINUE or FAIL, not {answer!r}")
                else:
                    tolerated = self.settings["errors.tolerance"] == "all"
            if self.settings["errors.log.enable"]:
                self._log_error(batch, i, error)
            if not tolerated:
                if self.transactional_id is not None:
                    self._txn_failed.append(error)
                batch.rows.not_delivered(i, tp.topic, tp.partition, FAILED, error)
                continue
            self.metrics["total-records-skipped"] += 1
            if self.dead_letter_topic is None and self.dead_letter_sink is None:
                batch.rows.not_delivered(i, tp.topic, tp.partition, DROPPED, error)
                continue
            record = record or {**batch.rows.record(i), "topic": tp.topic, "partition": tp.partition}
            self._dead_letter(batch.rows, i, tp, record, error)

    def _dead_letter(self, rows: Rows, i: int, tp: TopicPartition, record: dict, error: ProduceError) -> None:
        headers = list(record["headers"] or ())
        if self.settings["errors.deadletterqueue.context.headers.enable"]:
            headers += context_headers(tp.topic, tp.partition, None, error.code, error.message, stage=STAGE,
                                       class_name=CLASS_NAME)
            headers += [("__pykbatch.errors.rule", (error.rule or "").encode()),
                        ("__pykbatch.errors.code", str(error.code).encode()),
                        ("__pykbatch.errors.record.index", str(record.get("row", i)).encode())]
        self.metrics["deadletterqueue-produce-requests"] += 1
        if self.dead_letter_sink is not None:
            try:
                self.dead_letter_sink(record, error, headers)
            except Exception as exc:  # noqa: BLE001 (the sink's failure is the record's)
                self.metrics["deadletterqueue-produce-failures"] += 1
                rows.not_delivered(i, tp.topic, tp.partition, FAILED,
                                   ProduceError(error.code, f"{error.message}; the dead-letter sink failed: {exc}",
                                                rule=error.rule, topic=tp.topic, partition=tp.partition))
                return
            rows.not_delivered(i, tp.topic, tp.partition, DEAD_LETTERED, error)
            return
        timestamp = record["timestamp"]
        if error.code == kb_errors.CODE["INVALID_TIMESTAMP"]:
            # the letter must not fail for its record's reason: it takes the send time, the record's
            # own timestamp rides in a header
            headers.append(("__pykbatch.errors.timestamp", str(timestamp).encode()))
            timestamp = int(time.time() * 1000)
        letter = _DeadLetter(rows, i, tp, error, Pending(record["key"], record["value"], tuple(headers), timestamp))
        dlq = TopicPartition(self.dead_letter_topic, 0)
        self._sender.enqueue([ProducerBatch(dlq, letter, time.monotonic(), dead_letter=True)])

    def _log_error(self, batch: ProducerBatch, i: int, error: ProduceError) -> None:
        """errors.log.enable: KIP-298's error context; record bytes only with include.messages."""
        record = batch.rows.record(i)
        doc: dict[str, Any] = {"record": {"topic": batch.tp.topic, "partition": batch.tp.partition,
                                          "timestamp": record["timestamp"]},
                               "stage": {"type": STAGE, "class": CLASS_NAME},
                               "exception": {"class": error.exception_class, "message": error.message},
                               "error": error.as_dict()}
        if self.settings["errors.log.include.messages"]:
            import base64
            doc["record"]["key"] = base64.b64encode(record["key"]).decode() if record["key"] is not None else None
            doc["record"]["value"] = (base64.b64encode(record["value"]).decode()
                                      if record["value"] is not None else None)
        self.metrics["total-errors-logged"] += 1
        errors_log.error(json.dumps(doc, default=str))

    # -- transactions -------------------------------------------------------------------------
    def init_transactions(self) -> None:
        """Registers the transactional.id (fencing any older producer with it) and waits for its
        unfinished transaction to end."""
        if self.transactional_id is None:
            raise ValueError("init_transactions needs transactional.id")
        self._sender.txn_version = self._sender.call(self._coordinator.transaction_version)
        self._sender.pid = self._sender.call(self._coordinator.init_producer_id)
        self._txn_state = "ready"

    @property
    def transaction_version(self) -> int | None:
        """The transactions protocol in use (1, or 2: KIP-890) once init_transactions ran."""
        return self._sender.txn_version

    def begin_transaction(self) -> None:
        self._check_open()
        if self._txn_state != "ready":
            raise RuntimeError(f"begin_transaction in state {self._txn_state} (init_transactions first, and end the "
                               "transaction before the next)")
        self._txn_state = "in_transaction"
        self._txn_partitions = set()
        self._txn_failed = []

    def _add_partitions(self, tps: list[TopicPartition]) -> None:
        """Network thread: partitions join the transaction before their first batch."""
        new = [tp for tp in tps if tp not in self._txn_partitions]
        if not new:
            return
        if self._txn_state != "in_transaction" and not all(tp.topic == self.dead_letter_topic for tp in new):
            raise FatalProducerError("a transactional producer sends records only inside a transaction "
                                     "(begin_transaction first)")
        try:
            self._coordinator.add_partitions(self._sender.pid, new)
        except (ProducerFencedError, FatalProducerError) as exc:
            self._fatal = exc
            raise
        self._txn_partitions.update(new)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_id: str,
                                    metadata: Mapping[TopicPartition, str] | None = None) -> None:
        """Commits a consumer group's ``offsets`` (the next offsets to read), with ``metadata``
        per partition when given, in the transaction."""
        if self._txn_state != "in_transaction":
            raise RuntimeError("send_offsets_to_transaction outside a transaction")
        self._sender.call(self._coordinator.add_offsets, self._sender.pid, group_id)
        self._sender.call(self._coordinator.commit_offsets, self._sender.pid, group_id, dict(offsets), -1, "", None,
                          metadata)

    def committed(self, group_id: str, partitions: Iterable[TopicPartition],
                  timeout: float = 60) -> dict[TopicPartition, int | None]:
        """The offsets ``group_id`` committed for ``partitions`` (None: none), read on this
        producer's connections once no transaction holds them pending (OffsetFetch,
        require_stable) -- what a writer checks to know whether its own commit landed."""
        return {tp: offset for tp, (offset, _) in self.committed_with_metadata(group_id, partitions, timeout).items()}

    def committed_with_metadata(self, group_id: str, partitions: Iterable[TopicPartition],
                                timeout: float = 60) -> dict[TopicPartition, tuple[int | None, str]]:
        """``committed`` with the metadata committed beside each offset.  A retriable answer
        (UNSTABLE_OFFSET_COMMIT while a transaction's marker is written, a coordinator loading or
        moving) is asked again for up to ``timeout`` seconds."""
        partitions = list(partitions)
        return asked_until_answered(
            lambda: self._sender.call(self.cluster.committed_with_metadata, group_id, partitions), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flushes, then commits.  A record that failed in it (not dropped or dead-lettered by the
        policy) makes the transaction abortable: ``TransactionAbortableError``, abort and retry."""
        if self._txn_state != "in_transaction":
            raise RuntimeError(f"commit_transaction in state {self._txn_state}")
        self.flush(timeout)  # a fatal error (fenced) raises here, before the failed records'
        if self._txn_failed:
            self._txn_state = "abortable"
            first = self._txn_failed[0]
            raise TransactionAbortableError(f"{len(self._txn_failed)} record(s) failed in the transaction; first: "
                                            f"{first}", first.code)
        try:
            self._sender.call(self._ended, True)
        except TransactionAbortableError:
            self._txn_state = "abortable"
            raise
        except (ProducerFencedError, FatalProducerError) as exc:
            self._fatal = exc
            raise
        self._txn_state = "ready"

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Aborts: records sent in it are not read by read_committed consumers."""
        if self._txn_state not in ("in_transaction", "abortable"):
            raise RuntimeError(f"abort_transaction in state {self._txn_state}")
        self.flush(timeout, raise_fatal=False)
        try:
            self._sender.call(self._ended, False)
        except ProducerFencedError:
            # the coordinator aborted it already (transaction.timeout.ms) and bumped the epoch
            # (under v2 it answers a retried abort itself): a new epoch from InitProducerId
            # (KIP-360) -- unless the coordinator cannot resume this epoch, or another producer
            # took the id, which InitProducerId answers with PRODUCER_FENCED: fatal
            try:
                self._sender.pid = self._sender.call(self._coordinator.init_producer_id, self._sender.pid)
            except ProducerFencedError as exc:
                self._fatal = ProducerFencedError(
                    f"{exc}: either the transaction ran past transaction.timeout.ms and the coordinator, having "
                    "aborted it, cannot resume this producer's epoch, or another producer took transactional.id "
                    f"{self.transactional_id!r}; close this producer (a new one with the same id goes on)", exc.code)
                raise self._fatal from exc
            except FatalProducerError as exc:
                self._fatal = exc
                raise
            self._sender.call(self._sender.reset_sequences)
        self._txn_state = "ready"

    def _ended(self, commit: bool) -> None:
        """Network thread: EndTxn; under v2 the next transaction goes on with the epoch the
        coordinator bumped, every partition's sequences from 0."""
        pid = self._coordinator.end(self._sender.pid, commit)
        if pid != self._sender.pid:
            self._sender.pid = pid
            self._sender.reset_sequences()
        self.metrics["transactions-committed" if commit else "transactions-aborted"] += 1

    # -- waiting, closing ---------------------------------------------------------------------
    def flush(self, timeout: float | None = None, *, raise_fatal: bool = True) -> None:
        """Waits until every record sent so far has its outcome."""
        self._seal_lingering(force=True)
        if not self._sender.wait_idle(timeout):
            raise TimeoutError(f"{self._sender.pending()} batch(es) still without an answer after {timeout} s")
        if raise_fatal and self._fatal is not None:
            raise self._fatal

    def _finish(self, report: ProduceReport, timeout: float | None,
                progress: Callable[[int], object] | None = None) -> ProduceReport:
        self._seal_lingering(force=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        while progress is not None and not report.wait(0.2) and (deadline is None or time.monotonic() < deadline):
            progress(report.settled)
        if not report.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"{report.records - sum(report.counts.values())} record(s) still without an outcome")
        if report.failed():  # not tolerated: tolerance none, a handler's FAIL, a fatal error, a dead letter
            raise ProduceFailedError(report)  # that could not land, delivery.timeout.ms: never silent
        return report

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the producer is closed")
        if self._fatal is not None:
            raise RuntimeError(f"the producer hit a fatal error and must be closed: {self._fatal}") from self._fatal
        if self._sender.fatal is not None:
            raise RuntimeError("the producer's network thread failed") from self._sender.fatal

    def metrics_dict(self) -> dict:
        return {**self.metrics, "last-error-timestamp": self.last_error_timestamp}

    def close(self, timeout: float | None = 30) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._seal_lingering(force=True)
            self._sender.wait_idle(timeout)
        finally:
            self._sender.close(timeout)
            self.cluster.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _DeadLetter(ListRows):
    """A dead letter on its way: landing settles its original record as dead-lettered; failing
    to land settles it as failed (never dead-lettered again)."""

    def __init__(self, origin: Rows, index: int, tp: TopicPartition, error: ProduceError, letter: Pending):
        super().__init__([letter])
        self.origin, self.index, self.tp, self.error = origin, index, tp, error

    def subset(self, keep: list[int]) -> ListRows:
        return self if keep else ListRows([])

    def delivered(self, topic: str, partition: int, base_offset: int, timestamp: int) -> None:
        self.origin.not_delivered(self.index, self.tp.topic, self.tp.partition, DEAD_LETTERED, self.error)

    def not_delivered(self, i: int, topic: str, partition: int, outcome: str, error: ProduceError) -> None:
        why = ProduceError(self.error.code, f"{self.error.message}; the dead-letter topic {topic} refused it: "
                           f"{error}", rule=self.error.rule, topic=self.tp.topic, partition=self.tp.partition)
        self.origin.not_delivered(self.index, self.tp.topic, self.tp.partition, FAILED, why)


def _blob(x):
    if x is None or isinstance(x, bytes):
        return x
    if isinstance(x, str):
        return x.encode()
    return bytes(x)


def _headers(headers) -> tuple:
    return tuple((k.encode() if isinstance(k, str) else bytes(k), _blob(v)) for k, v in headers)


def _chunk(table, name: str):
    if name not in table.column_names:
        return None
    col = table.column(name)
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _timestamps(table) -> np.ndarray | None:
    """A ``timestamp`` column as int64 ms (Arrow timestamps of any unit, or integers in ms).
    Finer units are truncated to milliseconds (floored), as Spark's Kafka sink does with its
    microseconds: Spark's ``TimestampType`` and ``current_timestamp()`` carry sub-millisecond digits."""
    import pyarrow as pa
    import pyarrow.compute as pc
    col = _chunk(table, "timestamp")
    if col is None:
        return None
    per_ms = None
    if pa.types.is_timestamp(col.type):
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[col.type.unit]
        if per_ms is None:  # seconds: exact in milliseconds
            col = pc.cast(col, pa.timestamp("ms", tz=col.type.tz))
            per_ms = 1
        col = col.view(pa.int64())
    if col.null_count:
        col = pc.fill_null(col, int(time.time() * 1000) * (per_ms or 1))
    out = col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return out // per_ms if per_ms and per_ms > 1 else out


def _row_sizes(cols: ArrowColumns, rows: np.ndarray) -> np.ndarray:
    """Each row's bytes in a batch, at most (for batch.size)."""
    size = RECORD_OVERHEAD + _lengths(cols.values)[rows]
    if cols.keys is not None:
        size = size + _lengths(cols.keys)[rows]
    if cols.headers is not None:
        offsets = _offsets(cols.headers)
        kv = cols.headers.values
        per_header = np.zeros(len(kv) + 1, dtype=np.int64)
        if len(kv):
            flat = kv.flatten()
            per_header[1:] = np.cumsum(_lengths(flat[0]) + _lengths(flat[1]) + 10)
        size = size + (per_header[offsets[1:]] - per_header[offsets[:-1]])[rows]
    return np.asarray(size, dtype=np.int64)


def _offsets(arr) -> np.ndarray:
    """The offsets of an Arrow binary, string or list array (its slice applied), as int64."""
    import pyarrow as pa
    wide = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_large_list(arr.type)
    raw = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)
    return raw[arr.offset:arr.offset + len(arr) + 1].astype(np.int64, copy=False)


def _lengths(arr) -> np.ndarray:
    o = _offsets(arr)
    return o[1:] - o[:-1]
