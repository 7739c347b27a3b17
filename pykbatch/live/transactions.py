"""The requests a producer sends besides its records: a producer id and epoch (InitProducerId),
and a transaction's partitions, offsets and end (AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn), each answer sorted by the producer's error classes.

Two protocols, chosen by the cluster's finalized ``transaction.version`` (ApiVersions):
- v1 (every broker since 2.5): partitions added before the first record goes to them
  (AddPartitionsToTxn), a group before its offsets (AddOffsetsToTxn); Produce up to v11; the
  producer's epoch stays the same from one transaction to the next.
- v2 (KIP-890 part 2; Kafka 4.0+, on by default there): the broker enlists a partition on the
  transaction's first Produce (v12) to it and a group on TxnOffsetCommit (v5), and EndTxn (v5)
  bumps the epoch at every commit or abort, answering with the producer id and epoch to go on
  with -- so a late write of an ended transaction is fenced by its old epoch, never appended to
  the next one.  TRANSACTION_ABORTABLE (120) makes the transaction abortable.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from pykbatch import errors as kb_errors
from pykbatch.live import protocol
from pykbatch.live.cluster import COORDINATOR_MOVED, AuthorizationError, Cluster, ClusterError, TopicPartition

_FENCED = {kb_errors.CODE["PRODUCER_FENCED"], kb_errors.CODE["INVALID_PRODUCER_EPOCH"]}


class ProducerFencedError(ClusterError):
    """Another producer with the same transactional.id took over (a newer epoch): this one must
    close; retrying cannot help (fatal)."""


class TransactionAbortableError(ClusterError):
    """The transaction cannot commit (a record failed in it, the coordinator aborted it after
    transaction.timeout.ms, ...): abort it and start again; the producer is still usable."""


class FatalProducerError(ClusterError):
    """The producer cannot go on (refused security, an invalid state): close it."""


@dataclass
class ProducerId:
    id: int = -1
    epoch: int = -1


def _fail(code: int, what: str, message: str | None = None):
    """The exception for a coordinator's answer ``code`` to ``what``."""
    name = kb_errors.error_name(code)
    text = f"{what}: {name} ({code})" + (f" {message}" if message else "")
    if code in _FENCED:
        return ProducerFencedError(f"{text}: another producer with this transactional.id has a newer epoch", code)
    if code in (kb_errors.CODE["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"], kb_errors.CODE["CLUSTER_AUTHORIZATION_FAILED"],
                kb_errors.CODE["TOPIC_AUTHORIZATION_FAILED"], kb_errors.CODE["GROUP_AUTHORIZATION_FAILED"]):
        return AuthorizationError(text, code)
    cls = kb_errors.classify(code)
    if cls == kb_errors.RETRIABLE:
        return ClusterError(text, code, retriable=True)
    if cls == kb_errors.ABORTABLE:
        return TransactionAbortableError(text, code)
    return FatalProducerError(text, code)


class Coordinator:
    """A producer's conversation with its transaction coordinator (or, without a
    transactional.id, any broker for its producer id)."""

    def __init__(self, cluster: Cluster, transactional_id: str | None, transaction_timeout_ms: int,
                 deadline_ms: int):
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.deadline_ms = deadline_ms
        self.version = 1  # transactions v1 or v2 (transaction_version)

    def transaction_version(self) -> int:
        """The transactions version to use from now on (v2 where the cluster has finalized
        ``transaction.version`` 2 or more and the coordinator takes v2's requests), kept."""
        r = self._call("ApiVersions", protocol.api_versions, lambda r: (r.error_code, None))
        self.version = 2 if protocol.transaction_version(r) >= 2 else 1
        return self.version

    def _node(self) -> int:
        if self.transactional_id is None:
            return self.cluster.any_node()
        return self.cluster.coordinator(self.transactional_id, "transaction")

    def _call(self, what: str, make, error_of, node=None):
        """``make()`` sent to the coordinator until it answers without a retriable error (or the
        deadline passes); its response."""
        deadline = time.monotonic() + self.deadline_ms / 1000
        backoff = 0.05
        while True:
            try:
                response = self.cluster.request(node() if node else self._node(), make())
            except ClusterError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            code, message = error_of(response)
            if not code:
                return response
            if code in COORDINATOR_MOVED and self.transactional_id is not None:
                self.cluster.forget_coordinator(self.transactional_id, "transaction")
            exc = _fail(code, what, message)
            if not getattr(exc, "retriable", False) or time.monotonic() > deadline:
                raise exc
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def init_producer_id(self, current: ProducerId | None = None) -> ProducerId:
        """A producer id and epoch (a new one, or ``current``'s epoch bumped: KIP-360)."""
        cur = current or ProducerId()

        def make():
            return protocol.init_producer_id(self.transactional_id, self.transaction_timeout_ms, cur.id, cur.epoch)
        r = self._call("InitProducerId", make, lambda r: (r.error_code, None))
        return ProducerId(r.producer_id, r.producer_epoch)

    def add_partitions(self, pid: ProducerId, tps: list[TopicPartition]) -> None:
        """Enlists ``tps`` in the transaction (v2: nothing to send, Produce v12 enlists them)."""
        if self.version >= 2:
            return
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)

        def make():
            return protocol.add_partitions_to_txn(self.transactional_id, pid.id, pid.epoch, topics)

        def error_of(r):
            if r.error_code:
                return r.error_code, None
            codes = [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition
                     if p.partition_error_code]
            # OPERATION_NOT_ATTEMPTED (55) marks the partitions held back by another one's error
            real = [c for c in codes if c != 55]
            return (real or codes or [0])[0], None
        self._call(f"AddPartitionsToTxn {', '.join(map(str, tps))}", make, error_of)

    def add_offsets(self, pid: ProducerId, group: str) -> None:
        """Enlists ``group`` in the transaction (v2: nothing to send, TxnOffsetCommit v5 enlists it)."""
        if self.version >= 2:
            return
        self._call(f"AddOffsetsToTxn for group {group!r}",
                   lambda: protocol.add_offsets_to_txn(self.transactional_id, pid.id, pid.epoch, group),
                   lambda r: (r.error_code, None))

    def commit_offsets(self, pid: ProducerId, group: str, offsets: Mapping[TopicPartition, int],
                       generation_id: int = -1, member_id: str = "", group_instance_id: str | None = None,
                       metadata: Mapping[TopicPartition, str] | None = None) -> None:
        topics: dict[str, list] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append((tp.partition, offset, (metadata or {}).get(tp, "")))

        def make():
            return protocol.txn_offset_commit(self.transactional_id, group, pid.id, pid.epoch, topics, generation_id,
                                              member_id, group_instance_id, self.version)

        def error_of(r):
            codes = [p.error_code for t in r.topics for p in t.partitions if p.error_code]
            return (codes or [0])[0], None
        self._call(f"TxnOffsetCommit for group {group!r}", make, error_of,
                   node=lambda: self.cluster.coordinator(group, "group"))

    def end(self, pid: ProducerId, commit: bool) -> ProducerId:
        """Ends the transaction; the producer id and epoch to go on with (v2: the epoch the
        coordinator bumped, or a new producer id when the epoch ran out; v1: ``pid``)."""
        r = self._call("EndTxn " + ("commit" if commit else "abort"),
                       lambda: protocol.end_txn(self.transactional_id, pid.id, pid.epoch, commit, self.version),
                       lambda r: (r.error_code, None))
        if self.version >= 2:
            if getattr(r, "producer_id", -1) < 0 or getattr(r, "producer_epoch", -1) < 0:
                raise FatalProducerError(f"EndTxn v{r.version} under transactions v2 answered no producer epoch "
                                         "to go on with")
            return ProducerId(r.producer_id, r.producer_epoch)
        return pid
