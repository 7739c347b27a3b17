"""``kafka-kbatch`` as a sink: Spark's Kafka sink on pykbatch's producer, so one poison row no
longer fails the task: the broker (or the pre-flight) names it, it goes where the error policy
says, and every other row is delivered (``pykbatch.live.Producer``).

    df.write.format("kafka-kbatch").option("kafka.bootstrap.servers", "broker:9092") \\
        .option("topic", "orders").option("errors.tolerance", "all") \\
        .option("errors.deadletterqueue.topic.name", "orders-dlq").mode("append").save()
    df.writeStream.format("kafka-kbatch").option(...).option("checkpointLocation", ...).start()

A topic is only appended to: ``mode("overwrite")`` is refused, as Spark's own Kafka sink refuses
it.  Spark refuses its default mode (ErrorIfExists) for every Python data source before the source
sees the write (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), so a batch write names ``mode("append")``.

Columns are Spark's Kafka sink's: ``value`` (binary or string), optional ``key``, ``headers``
(array<struct<key: string, value: binary>>), ``topic``, ``partition``, and ``timestamp``.  Options:
``kafka.*`` (the producer's and the connection's properties: ``kafka.acks``,
``kafka.compression.type``, ``kafka.linger.ms``, ``kafka.security.protocol``, ...), ``topic``, and
Connect's ``errors.tolerance``, ``errors.deadletterqueue.topic.name``, ``errors.log.enable``,
``errors.log.include.messages``, plus ``preflight``; ``deliveryGuarantee`` (``at_least_once``, or
``exactly_once``: a transaction per task that also records the batch as written,
``spark_udfs.exactly_once``) and ``transactionalIdPrefix``; with ``exactly_once``,
``sourceOffsetsGroup`` and ``sourceOffsetsColumn`` commit the source's offsets in the same
transactions (read-process-write, ``spark_udfs.source_offsets``).  Each task produces its rows through one
producer (Arrow batches as Spark hands them, read in place) and reports what became of them in its
commit message; with ``errors.tolerance`` ``none`` (the default, as Spark's sink) a refused row
fails the task after every other row has its outcome.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from . import exactly_once, source_offsets

log = logging.getLogger("pykbatch.spark.sink")

SINK_OPTIONS = {"topic", "errors.tolerance", "errors.deadletterqueue.topic.name", "errors.log.enable",
                "errors.log.include.messages", "preflight", "checkpointlocation", "path",
                "errors.deadletterqueue.topic.replication.factor", "errors.deadletterqueue.topic.partitions"}
NOT_PRODUCER = {"checkpointlocation", "path"} | exactly_once.OPTIONS  # the sink's, not the producer's
CLIENT_IGNORED = {"key.serializer", "value.serializer"}  # Spark's sink refuses them; bytes are bytes here
# a bulk write is not latency-bound: batches of up to 512 KiB unless kafka.batch.size says otherwise
# (Kafka's 16 KiB default costs a Python call per 16 KiB; measured 0.27 vs 1.05 M rows/s, local[2])
SINK_BATCH_SIZE = 512 * 1024


def producer_props(options) -> tuple[dict, str | None]:
    """The producer's properties and the default topic from the sink's options."""
    props: dict = {}
    topic = None
    unknown = []
    for k, v in dict(options).items():
        low = k.lower()
        if low.startswith("kafka."):
            if k[6:] not in CLIENT_IGNORED:
                props[k[6:]] = v
        elif low == "topic":
            topic = v
        elif low in SINK_OPTIONS or low in exactly_once.OPTIONS:
            if low not in NOT_PRODUCER:
                props[low] = v
        else:
            unknown.append(k)
    if unknown:
        raise ValueError(f"kafka-kbatch sink: unknown option(s) {', '.join(sorted(unknown))}")
    if "bootstrap.servers" not in props:
        raise ValueError("kafka-kbatch sink: option kafka.bootstrap.servers is required")
    props.setdefault("batch.size", SINK_BATCH_SIZE)
    return props, topic


@dataclass
class Written:
    """A task's commit message: what became of its rows, and the first few culprits."""
    records: int
    delivered: int
    dropped: int
    dead_lettered: int
    failed: int
    culprits: list
    replayed: bool = False  # exactly_once: the batch was committed before, nothing written again
    source_reached: dict | None = None  # sourceOffsetsGroup: the source offsets committed with the rows


def write_batches(props: dict, topic: str | None, batches,
                  eos: tuple[exactly_once.Settings, exactly_once.TaskTransaction] | None = None) -> Written:
    """Produces every Arrow record batch of a task; the counts (raises when the policy fails a row).
    With ``eos``, in the task's transaction, which also records the batch as written -- or
    nothing, when it was written before."""
    import pyarrow as pa

    from pykbatch.live import ProduceFailedError, Producer
    reports = []
    positions = None
    if eos is not None:
        if eos[0].source_group is not None:
            positions = source_offsets.SourcePositions(eos[0].source_column)
        props = {**props, "transactional.id": eos[1].transactional_id}
        props.setdefault("transaction.timeout.ms", exactly_once.TIMEOUT_MS)
    with Producer(props) as producer:
        if eos is not None:
            producer.init_transactions()  # fences another attempt of this task, aborts what it left open
            if exactly_once.written_before(producer, *eos):
                for _ in batches:  # Spark hands the rows over all the same
                    pass
                return Written(0, 0, 0, 0, 0, [], replayed=True)
            producer.begin_transaction()
        for batch in batches:
            if positions is not None:
                batch = positions.take(batch)
            if batch.num_rows:
                reports.append(producer.produce_arrow(pa.Table.from_batches([batch]), topic=topic, wait=False))
        producer.flush()
        failed = []
        for report in reports:
            report.wait()
            failed.extend(report.failed())
        if eos is not None:
            if failed:
                producer.abort_transaction()  # none of the task's rows visible; the task fails below
            else:
                exactly_once.record_written(producer, *eos)
                if positions is not None and positions.reached:  # the rows' source records, read
                    producer.send_offsets_to_transaction(positions.reached, eos[0].source_group)
                producer.commit_transaction()
    counts = {k: sum(r.counts[k] for r in reports) for k in ("delivered", "dropped", "dead_lettered", "failed")}
    culprits = [c.as_dict() for r in reports for c in r.culprits][:20]
    if failed:  # not tolerated (a dead letter that could not land fails its row under tolerance all too)
        # every other row has landed; the task fails as Spark's sink fails it, naming the culprit
        raise ProduceFailedError(next(r for r in reports if r.failed()))
    return Written(sum(r.records for r in reports), counts["delivered"], counts["dropped"], counts["dead_lettered"],
                   counts["failed"], culprits, source_reached=None if positions is None else positions.reached)


def refuse_overwrite(overwrite: bool) -> None:
    """A topic cannot be overwritten: refused, as Spark's own Kafka sink refuses it (appending
    instead would say one thing and do another)."""
    if overwrite:
        raise ValueError("Save mode Overwrite not allowed for kafka-kbatch: a topic is only appended to. "
                         "Allowed save modes are Append and ErrorIfExists, as for Spark's Kafka sink")


def writer_classes():
    """The batch and streaming Arrow writers (made on demand: pyspark is imported lazily)."""
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

    @dataclass
    class Message(WriterCommitMessage):
        written: Written

    def summarize(messages) -> None:
        done = [m.written for m in messages if m is not None]
        replayed = sum(w.replayed for w in done)
        if replayed:  # said louder: under a reused batch job name this is rows not written
            log.warning("kafka-kbatch sink (exactly_once): %d task(s) found their batch committed before and wrote "
                        "nothing (a replayed micro-batch, a retried task, or a batch job run again under the same "
                        "transactionalIdPrefix)", replayed)
        log.info("kafka-kbatch sink: %d records: %d delivered, %d dropped, %d dead-lettered, %d failed; "
                 "%d task(s) found their batch written before (exactly_once)",
                 sum(w.records for w in done), sum(w.delivered for w in done), sum(w.dropped for w in done),
                 sum(w.dead_lettered for w in done), sum(w.failed for w in done), sum(w.replayed for w in done))

    class Produces:
        """What the batch and the streaming writer share: the options, and a task's write."""

        streaming = False

        def __init__(self, options):
            self.props, self.topic = producer_props(options)
            self.eos = exactly_once.settings_of(options, self.topic)
            if self.eos is not None and self.eos.prefix is None and not self.streaming:
                exactly_once.task_transaction(self.eos, 0, None, None, streaming=False)  # refused on the driver

        def write(self, iterator):
            eos = None if self.eos is None else (self.eos, exactly_once.running_task(self.eos, self.streaming))
            return Message(write_batches(self.props, self.topic, iterator, eos))

    # commit and abort report (and commit refuses a read-process-write batch it cannot vouch
    # for): what landed stays (Kafka has no undo outside a transaction), as with Spark's own sink
    def committed(messages) -> None:
        summarize(messages)
        source_offsets.one_task_per_partition([None if m is None else m.written.source_reached for m in messages])

    class ArrowWriter(Produces, DataSourceArrowWriter):
        def commit(self, messages):
            committed(messages)

        def abort(self, messages):
            summarize(messages)

    class StreamArrowWriter(Produces, DataSourceStreamArrowWriter):
        streaming = True

        def commit(self, messages, batchId):
            committed(messages)

        def abort(self, messages, batchId):
            summarize(messages)

    return ArrowWriter, StreamArrowWriter
