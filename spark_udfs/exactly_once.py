"""``kafka-kbatch``'s exactly-once sink (``deliveryGuarantee=exactly_once``): each task writes its
rows in one Kafka transaction, and records in the same transaction that it did.

The design, and why:

- **One transactional.id per (query, Spark partition)**: ``<prefix>-<query id>-<partition>``.  A
  retried or speculative attempt of a task has the same id, so its InitProducerId fences the
  other attempt and aborts whatever that one left open: a killed task leaves nothing visible and
  no transaction hanging past the next attempt (or ``transaction.timeout.ms``, 60 s here by
  default, when no attempt follows).
- **The commit recorded in the transaction**: the micro-batch id + 1 is committed as the offset
  of the sink's ``topic``, partition 0, for a consumer group of the same name
  (``send_offsets_to_transaction``: TxnOffsetCommit), so the record of "(query, batch,
  partition) written" becomes visible exactly when the rows do.  Before writing, a task reads
  that offset (OffsetFetch with require_stable, after its InitProducerId settled any earlier
  attempt); if its batch is there, the batch was written -- a micro-batch replayed after a driver
  restart, or a task retried after its commit -- and it writes nothing.  Groups were chosen over
  a compacted marker topic: the check is one OffsetFetch, not a read of a topic, the coordinator
  keeps the marker transactional with no topic to create, and ``kafka-consumer-groups --list``
  shows them (``offsets.retention.minutes`` removes them once a query is gone).
- **What it promises**: every row of every micro-batch once in the output after recovery, to a
  ``read_committed`` consumer.  In between, a micro-batch may be visible in part: one task's
  transaction committed while another's failed and is retried.  Atomic visibility of a whole
  micro-batch across tasks needs KIP-939's prepared transactions, which no Kafka release ships.
  The replayed micro-batch must be planned into the same partitions with the same rows (Spark's
  own sources replay so; ``kafka-kbatch`` as a source does).
- **Read-process-write** (``sourceOffsetsGroup``): the transaction also commits, for a consumer
  group, the offsets after the source records its rows came from (``spark_udfs.source_offsets``),
  so Kafka to Kafka through Spark is exactly once end to end: the output and the group agree
  whatever became of the checkpoint.
- Batch writes: ``transactionalIdPrefix`` is required and names the job; a rerun of the job under
  the same name writes nothing twice (its "batch" is 0).

Culprits go to the dead letters inside the transaction, as rows do; a row the policy fails
aborts the transaction and fails the task, with nothing of it visible.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import source_offsets

DELIVERY = "deliveryguarantee"
PREFIX = "transactionalidprefix"
OPTIONS = {DELIVERY, PREFIX} | source_offsets.OPTIONS
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once"
TIMEOUT_MS = 60_000  # a transaction no attempt comes back for is aborted by the coordinator after this
# Spark's local properties of a micro-batch's jobs (MicroBatchExecution / StreamExecution)
BATCH_ID_PROPERTY, QUERY_ID_PROPERTY = "streaming.sql.batchId", "sql.streaming.queryId"


@dataclass(frozen=True)
class Settings:
    """The sink's exactly-once options (None from ``settings_of`` for at-least-once)."""
    prefix: str | None
    topic: str
    source_group: str | None = None  # read-process-write: the group the source's offsets go to
    source_column: str = source_offsets.DEFAULT_COLUMN


def settings_of(options, topic: str | None) -> Settings | None:
    values = {k.lower(): v for k, v in dict(options).items()}
    mode = str(values.get(DELIVERY, AT_LEAST_ONCE)).strip().lower()
    if mode not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise ValueError(f"kafka-kbatch sink: deliveryGuarantee is {AT_LEAST_ONCE} or {EXACTLY_ONCE}, not {mode!r}")
    if mode == AT_LEAST_ONCE:
        for option in sorted(OPTIONS - {DELIVERY}):
            if option in values:  # committed "exactly once" only inside a transaction
                named = next(k for k in dict(options) if k.lower() == option)
                raise ValueError(f"kafka-kbatch sink: {named} is for deliveryGuarantee=exactly_once")
        return None
    if not topic:
        raise ValueError("kafka-kbatch sink: deliveryGuarantee=exactly_once needs the topic option (the commit of "
                         "each task's batch is recorded as a group offset of its partition 0)")
    prefix = values.get(PREFIX)
    if prefix is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", prefix):
        raise ValueError("kafka-kbatch sink: transactionalIdPrefix takes letters, digits, '.', '_' and '-'")
    group = values.get(source_offsets.GROUP)
    if group is not None and not str(group).strip():
        raise ValueError("kafka-kbatch sink: sourceOffsetsGroup names a consumer group")
    if source_offsets.COLUMN in values and group is None:
        raise ValueError("kafka-kbatch sink: sourceOffsetsColumn is for sourceOffsetsGroup")
    return Settings(prefix, topic, group, values.get(source_offsets.COLUMN, source_offsets.DEFAULT_COLUMN))


@dataclass(frozen=True)
class TaskTransaction:
    """One task's transaction: its id (the consumer group recording its commits has the same
    name) and the batch it writes."""
    transactional_id: str
    batch_id: int

    @property
    def group(self) -> str:
        return self.transactional_id


def task_transaction(settings: Settings, partition_id: int, batch_id: int | None, query_id: str | None,
                     streaming: bool) -> TaskTransaction:
    """The transaction of Spark partition ``partition_id`` of micro-batch ``batch_id`` of query
    ``query_id`` (a batch write: the job named by the prefix, batch 0)."""
    if streaming:
        if batch_id is None or query_id is None:
            raise RuntimeError("kafka-kbatch sink: exactly_once found no micro-batch id or query id in the task "
                               f"(Spark's local properties {BATCH_ID_PROPERTY}, {QUERY_ID_PROPERTY})")
        return TaskTransaction(f"{settings.prefix or 'pykbatch'}-{query_id}-{partition_id}", int(batch_id))
    if settings.prefix is None:
        raise ValueError("kafka-kbatch sink: a batch write with deliveryGuarantee=exactly_once needs "
                         "transactionalIdPrefix, the job's stable name (a rerun under it writes nothing twice)")
    return TaskTransaction(f"{settings.prefix}-{partition_id}", 0)


def running_task(settings: Settings, streaming: bool) -> TaskTransaction:
    """The transaction of the task this runs in (Spark's TaskContext)."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("kafka-kbatch sink: exactly_once writes run in Spark tasks")
    return task_transaction(settings, ctx.partitionId(), ctx.getLocalProperty(BATCH_ID_PROPERTY),
                            ctx.getLocalProperty(QUERY_ID_PROPERTY), streaming)


def written_before(producer, settings: Settings, txn: TaskTransaction, timeout_s: float = 60) -> bool:
    """Whether ``txn``'s batch was committed already (its group's offset says so).  Read after
    InitProducerId, which settled any earlier attempt's transaction."""
    from pykbatch.live.cluster import TopicPartition
    marker = TopicPartition(settings.topic, 0)
    committed = producer.committed(txn.group, [marker], timeout=timeout_s)[marker]
    return committed is not None and committed > txn.batch_id


def record_written(producer, settings: Settings, txn: TaskTransaction) -> None:
    """The batch's commit, inside the transaction (visible when the rows are)."""
    from pykbatch.live.cluster import TopicPartition
    producer.send_offsets_to_transaction({TopicPartition(settings.topic, 0): txn.batch_id + 1}, txn.group)
