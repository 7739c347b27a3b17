"""Read-process-write through Spark: the exactly-once sink commits the offsets of the source
records its rows came from, in the same transaction as the rows (``sourceOffsetsGroup``).

Each row names the record it came from in a struct column (``sourceOffsetsColumn``, default
``source``: ``struct<topic: string, partition: int, offset: long>``, e.g.
``struct("topic", "partition", "offset")`` of a ``kafka-kbatch`` or Spark ``kafka`` source).  A
task commits, for every source partition among its rows, the offset after the highest one it
wrote, to the consumer group ``sourceOffsetsGroup`` (TxnOffsetCommit): the output and the group's
offsets become visible together or not at all, as a Kafka consume-transform-produce loop keeps
them.  A query started from that group (``startingOffsets=committed`` with ``kafka.group.id``) then
goes on exactly where the committed output ends, whatever became of the checkpoint, and lag tools
read the group as they read any consumer's.

Exact when each source partition's rows of a micro-batch are written by one task -- a query with
no shuffle between source and sink, the usual Kafka-to-Kafka job: two tasks committing the same
partition leave whichever committed last.  The driver refuses such a micro-batch after its tasks
(``one_task_per_partition``): the rows are written once all the same (the batch markers see to
that), the group's offsets are the part no longer to be trusted.

The offset committed is that of the last record that gave a row: source records after it in the
micro-batch that gave none (filtered out, skipped as damaged, transaction markers) are read again
by a query started from the group, and give none again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

GROUP, COLUMN = "sourceoffsetsgroup", "sourceoffsetscolumn"
OPTIONS = {GROUP, COLUMN}
DEFAULT_COLUMN = "source"


@dataclass
class SourcePositions:
    """The source partitions a task's rows came from, and the offset after the highest of each."""
    column: str
    reached: dict = field(default_factory=dict)  # TopicPartition -> next offset

    def take(self, batch):
        """``batch`` without the source column, its source offsets noted.  A row without one
        raises: its record could not be committed past."""
        import pyarrow as pa

        from pykbatch.live.cluster import TopicPartition
        names = batch.schema.names
        if self.column not in names:
            raise ValueError(f"kafka-kbatch sink: sourceOffsetsGroup needs the column {self.column!r} "
                             "(struct<topic, partition, offset> of each row's source record; sourceOffsetsColumn "
                             "names another)")
        source = batch.column(self.column)
        if not pa.types.is_struct(source.type) or {"topic", "partition", "offset"} - {f.name for f in source.type}:
            raise TypeError(f"kafka-kbatch sink: the column {self.column!r} is struct<topic: string, partition: int, "
                            f"offset: long>, not {source.type}")
        parts = {name: source.field(name) for name in ("topic", "partition", "offset")}
        if source.null_count or any(a.null_count for a in parts.values()):
            raise ValueError(f"kafka-kbatch sink: a row's {self.column!r} is null: sourceOffsetsGroup commits the "
                             "source offset of every row")
        if batch.num_rows:
            for (t, p), o in _highest(parts["topic"], parts["partition"], parts["offset"]):
                tp = TopicPartition(t, p)
                self.reached[tp] = max(self.reached.get(tp, 0), o + 1)
        keep = [i for i, name in enumerate(names) if name != self.column]
        return pa.RecordBatch.from_arrays([batch.column(i) for i in keep],
                                          schema=pa.schema([batch.schema.field(i) for i in keep]))


def _highest(topics, partitions, offsets):
    """((topic, partition), highest offset) of each source partition among the rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    bounds = pc.min_max(partitions)
    first = topics[0]
    if bounds["min"] == bounds["max"] and pc.all(pc.equal(topics, first)).as_py():
        # the usual case, a map-only query: one source partition per task (0.05 ms per 10k rows;
        # grouping 0.48)
        return [((first.as_py(), bounds["min"].as_py()), pc.max(offsets).as_py())]
    keyed = pa.table({"t": topics.cast(pa.string()), "p": partitions.cast(pa.int32()), "o": offsets.cast(pa.int64())})
    highest = keyed.group_by(["t", "p"]).aggregate([("o", "max")])
    return [((t, p), o) for t, p, o in zip(*(highest.column(n).to_pylist() for n in ("t", "p", "o_max")))]


def one_task_per_partition(reached: list[dict | None]) -> None:
    """Refuses a micro-batch in which two tasks committed the same source partition (their
    offsets in the group are then whichever came last).  ``reached``: by task (Spark partition),
    None where a task committed none."""
    seen: dict = {}
    for task, positions in enumerate(reached):
        for tp in positions or ():
            if tp in seen:
                raise RuntimeError(
                    f"kafka-kbatch sink: source partition {tp.topic}-{tp.partition} was written by two tasks of one "
                    "batch "
                    f"({seen[tp]} and {task}): sourceOffsetsGroup is exact only when each source partition's rows "
                    "are in one task -- a query with no shuffle (repartition, join, aggregation) between source "
                    "and sink.  The rows were written once; the group's offsets for it may be behind or ahead")
            seen[tp] = task
