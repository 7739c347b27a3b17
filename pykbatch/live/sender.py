"""The producer's network thread: sealed batches to their leaders, answers sorted as the design
documents say, never a record with two outcomes or none.

- Per partition, batches leave in order, up to ``max_in_flight`` at a time, with the producer's
  id, epoch and consecutive sequences (idempotence: a batch sent again keeps its sequence, so the
  broker appends it once).
- Any answer other than success puts the partition on hold: nothing new leaves until its batches
  in flight have answered.  Then, in sequence order: a batch whose records the broker named
  (KIP-467 ``record_errors``) goes out again without them; a batch refused whole fails its records
  (a MESSAGE_TOO_LARGE batch of several records is split first, as Kafka's producer does); a
  retriable one goes again unchanged.  Once a batch is known not appended, the later ones are
  known not appended too (the broker takes sequences only in order), so they are re-sequenced
  from there: sequences stay gap-free and nothing is written twice.
- Answers for the records the broker refused go to ``on_culprits`` (the producer's policy).
"""
from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from pykbatch import _native
from pykbatch import errors as kb_errors
from pykbatch.live.cluster import Cluster, ClusterError, TopicPartition
from pykbatch.live.produced import FAILED, ProduceError
from pykbatch.live.rows import Build, Rows
from pykbatch.live import protocol
from pykbatch.live.transactions import ProducerId
from pykbatch.rules import rule_of_message

log = logging.getLogger("pykbatch.live.producer")

C = kb_errors.CODE
SUCCESS_CODES = {0, C["DUPLICATE_SEQUENCE_NUMBER"]}  # a duplicate was appended before: it landed
SEQUENCE_MAX = 2**31 - 1
NODE_DOWN_S = 1.0  # a leader unreachable this long has its partitions' metadata asked for again


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    rows: Rows
    created: float
    dead_letter: bool = False  # a dead-letter batch: its failures are not dead-lettered again
    sequence: int = -1
    epoch: int = -1
    data: bytes | None = None
    attempts: int = 0
    not_before: float = 0.0
    answer: tuple | None = None  # (code, message, record_errors) or (exception,)
    stamp: tuple = (-1, -1, -1)  # the producer id, epoch and sequence ``data`` carries
    unsure: bool = False  # a request of it failed in a way that may have appended it ("possibly_persisted")


@dataclass
class _SendQueue:
    tp: TopicPartition
    queue: collections.deque = field(default_factory=collections.deque)
    in_flight: list = field(default_factory=list)
    answered: list = field(default_factory=list)  # failed answers waiting for the in-flight to drain
    next_sequence: int = 0
    hold: bool = False
    # a broker takes any first sequence from a producer it holds no state for, so until a batch
    # of this epoch has landed only one goes at a time (after that, a gap is refused); the same
    # after a failure, so that a retried batch is not lost again with the ones behind it
    acked_epoch: int = -2


class Sender:
    """Owns the producer's connection (``cluster``) on one thread; the producer hands it sealed
    batches (``enqueue``) and tasks to run between polls (``call``)."""

    def __init__(self, cluster: Cluster, *, acks: int, compression: str, max_in_flight: int,
                 max_request_size: int, request_timeout_ms: int, delivery_timeout_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, idempotent: bool, transactional_id: str | None,
                 on_culprits: Callable[[ProducerBatch, list[tuple[int, ProduceError]]], None],
                 on_add_partitions: Callable[[list[TopicPartition]], None] | None, metrics: dict):
        self.cluster = cluster
        self.acks = acks
        self.compression = compression
        self.max_in_flight = max_in_flight
        self.max_request_size = max_request_size
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.backoff = retry_backoff_ms / 1000
        self.backoff_max = retry_backoff_max_ms / 1000
        self.idempotent = idempotent
        self.transactional_id = transactional_id
        self.on_culprits = on_culprits
        self.on_add_partitions = on_add_partitions
        self.metrics = metrics
        self.pid = ProducerId()
        self.txn_version: int | None = None  # a transactional producer's (Coordinator.transaction_version)
        self._parts: dict[TopicPartition, _SendQueue] = {}
        self._lock = threading.Lock()
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._requests: list[tuple[Future | object, list[ProducerBatch], int, float]] = []  # (future, batches, node, sent)
        self._node_not_before: dict[int, float] = {}
        self._node_down_since: dict[int, float] = {}  # leaders found not ready, since when (_node_up)
        self._closing = False
        self._idle = threading.Condition()
        self.fatal: BaseException | None = None
        self.tick: Callable[[], None] | None = None  # the producer's linger check, each turn
        self._thread = threading.Thread(target=self._run, name="pykbatch-producer", daemon=True)

    # -- from the producer's threads ----------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def enqueue(self, batches: list[ProducerBatch]) -> None:
        with self._lock:
            tp = q = None
            for b in batches:  # a partition's batches come together: one lookup for each run of them
                if b.tp is not tp:
                    tp, q = b.tp, self._part(b.tp).queue
                q.append(b)
        self._wake()

    def call(self, fn, *args):
        """``fn(*args)`` on the network thread; its result (or exception)."""
        if threading.current_thread() is self._thread or not self._thread.is_alive():
            return fn(*args)
        f: Future = Future()
        self._tasks.put((f, fn, args))
        self._wake()
        return f.result()

    def pending(self) -> int:
        with self._lock:
            return sum(len(p.queue) + len(p.in_flight) + len(p.answered) for p in self._parts.values())

    def wait_idle(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self.pending():
                if not self._thread.is_alive():
                    raise RuntimeError("the producer's network thread has stopped") from self.fatal
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(0.05 if left is None else min(left, 0.05))
        return True

    def close(self, timeout: float | None = None) -> None:
        self._closing = True
        self._wake()
        self._thread.join(timeout)

    def _wake(self) -> None:
        try:
            self.cluster.wakeup()
        except Exception:  # noqa: BLE001 (not connected yet: the loop's short poll picks it up)
            pass

    def _part(self, tp: TopicPartition) -> _SendQueue:
        p = self._parts.get(tp)
        if p is None:
            p = self._parts[tp] = _SendQueue(tp)
        return p

    # -- the network thread -------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                self._run_tasks()
                if self.tick is not None:
                    self.tick()
                if self._closing and not self.pending():
                    break
                self._send_ready()
                self.cluster.pump(self._poll_ms())
                self._collect()
                self._expire()
                with self._idle:
                    self._idle.notify_all()
        except BaseException as exc:  # noqa: BLE001 (a bug must not leave callers waiting forever)
            log.exception("the producer's network thread failed")
            self.fatal = exc
            self._fail_everything(ProduceError(-1, f"the producer's network thread failed: {exc!r}", source="client"))
        finally:
            with self._idle:
                self._idle.notify_all()
            self._run_tasks()

    def _poll_ms(self) -> int:
        if not self._tasks.empty():
            return 0
        return 20 if self._requests else 50

    def _run_tasks(self) -> None:
        while not self._tasks.empty():
            try:
                f, fn, args = self._tasks.get_nowait()
            except queue.Empty:
                return
            if f.set_running_or_notify_cancel():
                try:
                    f.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 (handed to the caller)
                    f.set_exception(exc)

    def _send_ready(self) -> None:
        now = time.monotonic()
        by_node: dict[int, list[ProducerBatch]] = {}
        with self._lock:
            ready = [p for p in self._parts.values() if p.queue and not p.hold and len(p.in_flight) < self._window(p)]
        if not ready:
            return
        if self.on_add_partitions is not None:
            try:
                self.on_add_partitions([p.tp for p in ready])
            except ClusterError as exc:
                if exc.retriable:  # the coordinator is moving: next turn
                    return
                self._fail_queued(ready, exc, source="coordinator")
                return
        node_ready: dict[int, bool] = {}  # asked once a turn for each node
        for p in ready:
            if p.queue and p.queue[0].not_before > now:
                continue
            try:
                node = self.cluster.leader(p.tp).node
            except ClusterError as exc:
                if not exc.retriable:
                    self._fail_queued([p], exc, source="client")
                continue
            if node < 0:  # no leader yet (elected or loading): ask the metadata again, after a pause
                self.cluster.forget_leader(p.tp)
                self.metrics["metadata-refreshes"] += 1
                with self._lock:
                    if p.queue:
                        p.queue[0].not_before = max(p.queue[0].not_before, now + self.backoff)
                continue
            if self._node_not_before.get(node, 0) > now:
                continue
            up = node_ready.get(node)
            if up is None:
                up = node_ready[node] = self._node_up(node, now)
            if not up:  # connecting (again): next turn
                continue
            with self._lock:
                b = p.queue.popleft()  # its not_before was checked above; only this thread takes from the left
                p.in_flight.append(b)
            self._prepare(p, b)
            by_node.setdefault(node, []).append(b)
        for node, batches in by_node.items():
            chunk: list[ProducerBatch] = []
            size = 0
            for b in batches:
                assert b.data is not None
                if chunk and size + len(b.data) > self.max_request_size:
                    self._send(node, chunk)
                    chunk, size = [], 0
                chunk.append(b)
                size += len(b.data)
            if chunk:
                self._send(node, chunk)

    def _node_up(self, node: int, now: float) -> bool:
        """Whether ``node`` takes a request now.  One that stays unreachable for a back-off has its
        leaderships asked for again (once each back-off): a leader killed or cut off is replaced in
        the metadata, and its partitions' batches go to the new one."""
        if self.cluster.ready(node):
            self._node_down_since.pop(node, None)
            return True
        since = self._node_down_since.setdefault(node, now)
        if now - since >= max(self.backoff, NODE_DOWN_S):
            self.cluster.forget_node(node)
            self.metrics["metadata-refreshes"] += 1
            self._node_down_since[node] = now
        return False

    def _window(self, p: _SendQueue) -> int:
        """Batches of ``p`` allowed in flight."""
        if self.idempotent and p.acked_epoch != self.pid.epoch:
            return 1
        return self.max_in_flight

    def _fail_queued(self, parts: list[_SendQueue], exc: ClusterError, source: str) -> None:
        """The batches waiting for ``parts`` are refused with ``exc`` (no leader to be had, or the
        transaction coordinator's refusal)."""
        with self._lock:
            batches = [b for p in parts for b in p.queue]
            for p in parts:
                p.queue.clear()
        for b in batches:
            self._fail_batch(b, ProduceError(exc.code if exc.code is not None else -1, str(exc), topic=b.tp.topic,
                                             partition=b.tp.partition, source=source))

    def _prepare(self, p: _SendQueue, b: ProducerBatch) -> None:
        """Gives ``b`` its sequence (the first time, or anew after an earlier batch shrank) and builds it."""
        if self.idempotent and (b.sequence < 0 or b.epoch != self.pid.epoch):
            b.sequence = p.next_sequence
            b.epoch = self.pid.epoch
            p.next_sequence = (p.next_sequence + b.rows.n) % (SEQUENCE_MAX + 1)
        stamp = (self.pid.id, self.pid.epoch, b.sequence) if self.idempotent else (-1, -1, -1)
        if b.data is None:
            b.data = bytearray(b.rows.build(Build(self.compression, *stamp, self.transactional_id is not None)))
        elif b.stamp != stamp:
            _native.restamp_v2(b.data, producer_id=stamp[0], producer_epoch=stamp[1], base_sequence=stamp[2])
        b.stamp = stamp
        b.attempts += 1

    def _send(self, node: int, batches: list[ProducerBatch]) -> None:
        topics: dict[str, list] = {}
        for b in batches:
            topics.setdefault(b.tp.topic, []).append((b.tp.partition, b.data))
        self.metrics["produce-requests"] += 1
        try:
            f = self.cluster.send_produce(node, topics, acks=self.acks, timeout_ms=self.request_timeout_ms,
                                          transactional_id=self.transactional_id, txn_version=self.txn_version)
        except Exception as exc:  # noqa: BLE001 (not connected: the batches go back, unchanged)
            f = exc
        if self.acks == 0:  # no answer comes: the records count as delivered, offsets unknown
            self._landed([(b, -1, -1) for b in batches])
            return
        self._requests.append((f, batches, node, time.monotonic()))

    def _collect(self) -> None:
        now = time.monotonic()
        still = []
        for f, batches, node, sent in self._requests:
            if isinstance(f, BaseException):
                self._network_failure(batches, node, f)
            elif not f.is_done:
                if now - sent < self.request_timeout_ms / 1000 + 5:
                    still.append((f, batches, node, sent))
                    continue
                # no answer and no error from the connection layer: the request is lost
                self._network_failure(batches, node, ClusterError(f"no answer within {self.request_timeout_ms} ms"))
            elif f.failed():
                self._network_failure(batches, node, f.exception)
            else:
                self._answered(f.value, batches, node, now)
        self._requests = still

    def _network_failure(self, batches: list[ProducerBatch], node: int, exc) -> None:
        log.debug("produce request to node %s failed: %s", node, exc)
        self.metrics["network-errors"] += 1
        for b in batches:
            self._failed_answer(b, (exc,))

    def _answered(self, response, batches: list[ProducerBatch], node: int, now: float) -> None:
        if not isinstance(response, tuple):  # a request the library sent and decoded
            response = protocol.produce_answer_of(response)
        _, throttle, answers = response
        if throttle:  # KIP-219: the broker answered at once and asks us to wait
            self.metrics["throttle-time-ms"] += throttle
            self._node_not_before[node] = now + throttle / 1000
        # a request carries one batch of each partition: the answers by (topic, partition), which
        # a TopicPartition equals
        by_tp = {(a[0], a[1]): a for a in answers}
        landed = []
        for b in batches:
            a = by_tp.get(b.tp)
            if a is None:
                self._failed_answer(b, (ClusterError(f"no answer for {b.tp} in the produce response"),))
                continue
            _, _, code, base_offset, log_append_time, record_errors, message = a
            if code in SUCCESS_CODES:
                landed.append((b, base_offset, log_append_time))
            else:
                self._failed_answer(b, (code, message, record_errors))
        if landed:
            self._landed(landed)

    def _landed(self, landed: list[tuple[ProducerBatch, int, int]]) -> None:
        """Batches appended (each with its base offset and log append time): their records delivered."""
        with self._lock:
            parts = [self._part(b.tp) for b, _, _ in landed]
            for part, (b, _, _) in zip(parts, landed):
                if b in part.in_flight:
                    part.in_flight.remove(b)
                part.acked_epoch = b.epoch
        records = 0
        for part, (b, base_offset, log_append_time) in zip(parts, landed):
            records += b.rows.n
            if b.unsure and not self.idempotent:  # the broker cannot tell a second copy: no sequence to check
                self.metrics["possibly-duplicated-records"] += b.rows.n
                log.warning("%s: %d record(s) landed at offset %d after a request that may have landed already "
                            "(%s): they may be in the log twice (enable.idempotence=true prevents it)", b.tp,
                            b.rows.n, base_offset, "no answer or a timeout after the append")
            b.rows.delivered(b.tp.topic, b.tp.partition, base_offset, log_append_time)
            if part.hold:  # set and cleared on this thread only
                self._maybe_resume(part)
        self.metrics["records-sent"] += records
        self.metrics["batches-sent"] += len(landed)

    def _failed_answer(self, b: ProducerBatch, answer: tuple) -> None:
        with self._lock:
            part = self._part(b.tp)
            if b in part.in_flight:
                part.in_flight.remove(b)
            b.answer = answer
            part.answered.append(b)
            part.hold = True
            part.acked_epoch = -2  # after a failure, one batch at a time until one lands (as Kafka's producer)
        self._maybe_resume(part)

    def _maybe_resume(self, part: _SendQueue) -> None:
        """Once a held partition's batches have all answered: settle or requeue each, in order."""
        with self._lock:
            if not part.hold or part.in_flight:
                return
            answered = sorted(part.answered, key=lambda b: b.sequence)
            part.answered = []
        again: list[ProducerBatch] = []
        shift_at: int | None = None  # sequence from which nothing was appended: later ones move
        for n, b in enumerate(answered):
            kept = self._settle_failed(b, after_failure=n > 0)
            if kept is not None and shift_at is None:
                shift_at = b.sequence
            again.extend([b] if kept is None else kept)
        with self._lock:
            if self.idempotent and shift_at is not None:
                # everything from the first batch known not appended on gets its sequence anew,
                # in the order it leaves: the requeued batches, then those that were waiting
                for b in (*again, *part.queue):
                    if b.sequence >= shift_at or b.sequence < 0:
                        b.sequence = -1
                part.next_sequence = shift_at
            part.queue.extendleft(reversed(again))
            part.hold = False

    def _settle_failed(self, b: ProducerBatch, after_failure: bool) -> list[ProducerBatch] | None:
        """A failed answer's consequence: None to send ``b`` again as it is, else the batches to
        send instead (possibly none), its culprits settled."""
        answer = b.answer
        b.answer = None
        now = time.monotonic()
        if len(answer) == 1:  # the request failed (connection lost, no answer): unknown, so again
            code, message, record_errors, source = C["NETWORK_EXCEPTION"], f"{answer[0]}", [], "client"
        else:
            (code, message, record_errors), source = answer, "broker"
        error = ProduceError(code, message or _default_message(code), topic=b.tp.topic, partition=b.tp.partition,
                             source=source)
        if code == C["OUT_OF_ORDER_SEQUENCE_NUMBER"] and after_failure:
            return self._retry(b, now, error)  # an earlier batch was not appended: this one follows it
        actions = kb_errors.ERROR_ACTIONS.get(code, frozenset())
        if kb_errors.POSSIBLY_PERSISTED in actions and not b.unsure:
            b.unsure = True  # it may be in the log already: sent again, it may land twice unless idempotent
            self.metrics["possibly-persisted-batches"] += 1
        if kb_errors.classify(code) == kb_errors.RETRIABLE:
            if kb_errors.REFRESH in actions:
                self.cluster.forget_leader(b.tp)
                self.metrics["metadata-refreshes"] += 1
            return self._retry(b, now, error)
        if record_errors:  # KIP-467: those records out, the rest again as a new batch
            named = {}
            for index, text in record_errors:
                if 0 <= index < b.rows.n:
                    # one code answers the partition; each record's own message says its fault
                    rule = rule_of_message(text)
                    named[index] = ProduceError(rule.code if rule else code, text or message or error.name,
                                                rule=rule.id if rule else None, index=index, topic=b.tp.topic,
                                                partition=b.tp.partition)
            self.metrics["records-named-by-broker"] += len(named)
            return self._culprits_out(b, named)
        if code == C["MESSAGE_TOO_LARGE"] and b.rows.n > 1:  # split, as Kafka's producer does
            self.metrics["batch-splits"] += 1
            return [ProducerBatch(b.tp, half, b.created, b.dead_letter) for half in b.rows.halves()]
        # refused whole: every record gets the broker's error
        self._fail_batch(b, error)
        return []

    def _culprits_out(self, b: ProducerBatch, named: dict[int, ProduceError]) -> list[ProducerBatch]:
        keep = [i for i in range(b.rows.n) if i not in named]
        rest = [ProducerBatch(b.tp, b.rows.subset(keep), b.created, b.dead_letter)] if keep else []
        self._culprits(b, sorted(named.items()))
        return rest

    def _culprits(self, b: ProducerBatch, culprits: list[tuple[int, ProduceError]]) -> None:
        if b.dead_letter:  # a dead letter that cannot land fails its original record
            for i, err in culprits:
                b.rows.not_delivered(i, b.tp.topic, b.tp.partition, FAILED, err)
            self.metrics["deadletterqueue-produce-failures"] += len(culprits)
            return
        self.on_culprits(b, culprits)

    def _retry(self, b: ProducerBatch, now: float, error: ProduceError) -> list[ProducerBatch] | None:
        if now - b.created > self.delivery_timeout:
            self._fail_batch(b, ProduceError(C["REQUEST_TIMED_OUT"], f"delivery.timeout.ms passed since the batch was "
                                             f"made, last error: {error}", topic=b.tp.topic, partition=b.tp.partition,
                                             source="client"))
            return []
        self.metrics["total-retries"] += 1
        b.not_before = now + min(self.backoff * 2 ** max(b.attempts - 1, 0), self.backoff_max)
        return None

    def _fail_batch(self, b: ProducerBatch, error: ProduceError) -> None:
        """Every record of ``b`` is refused with ``error`` (the policy decides what becomes of each)."""
        self._culprits(b, [(i, error) for i in range(b.rows.n)])

    def _expire(self) -> None:
        """Unsent batches past delivery.timeout.ms fail (sent ones wait for their answer)."""
        now = time.monotonic()
        expired = []
        with self._lock:
            for p in self._parts.values():
                while p.queue and now - p.queue[0].created > self.delivery_timeout and not p.hold and p.queue[0].attempts == 0:
                    expired.append(p.queue.popleft())
        for b in expired:
            self._fail_batch(b, ProduceError(C["REQUEST_TIMED_OUT"], "delivery.timeout.ms passed before the batch "
                                             "could be sent (no leader, or not connected)", topic=b.tp.topic,
                                             partition=b.tp.partition, source="client"))

    def _fail_everything(self, error: ProduceError) -> None:
        with self._lock:
            batches = [b for p in self._parts.values() for b in (*p.in_flight, *p.answered, *p.queue)]
            for p in self._parts.values():
                p.queue.clear()
                p.in_flight.clear()
                p.answered.clear()
        for b in batches:
            for i in range(b.rows.n):
                try:
                    b.rows.not_delivered(i, b.tp.topic, b.tp.partition, FAILED, error)
                except AssertionError:  # settled already
                    pass

    def reset_sequences(self) -> None:
        """A new producer epoch starts every partition's sequences at 0 (network thread only)."""
        with self._lock:
            for p in self._parts.values():
                p.next_sequence = 0


def _default_message(code: int) -> str:
    """Kafka's own words for a code the broker sent without a message (Errors' default message)."""
    return getattr(protocol.error_class(code), "description", "") or kb_errors.error_name(code)
