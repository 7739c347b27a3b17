"""``spark.read.format("kafka-segment")``: Kafka log segments as a DataFrame, read in parallel.

    spark_udfs.register(spark)
    df = spark.read.format("kafka-segment").load("/data/kafka")       # a log dir, a partition dir or a file
    df = spark.read.format("kafka-segment").option("mode", "batches").load(path)   # header-only

One row per record (``mode=records`` or ``deep=true``, the default) or per batch header
(``mode=batches`` or ``deep=false``: no record is decoded), with the topic
and partition taken from the ``<topic>-<partition>`` directory, the segment's base offset and the
batch columns.  Segments are split at batch boundaries (positions from the ``.index`` file the log confirms)
into input partitions of about ``splitBytes`` (default 64 MiB).  Options:
``validate`` (default true in records mode, false in batches mode: each row's batch's verdict --
``batch_ok``, ``batch_error``, ``error_rule``, ``error_code`` -- from the validator, origin log, and
a row of its own for every range whose records cannot be read -- ``lost_bytes``,
``lost_first_offset``, ``lost_last_offset`` --, ``pykbatch.log.split_truth``; false: records as
their bytes say, unmarked), ``compacted`` (true: offsets missing between entries are the log
cleaner's, not damage),
``includePath`` (true: a leading ``path`` column naming the segment file),
``startingOffset`` / ``endingOffset`` (inclusive/exclusive record offsets),
``startingTimestamp`` / ``endingTimestamp`` (inclusive/exclusive record timestamps, epoch ms),
``splitBytes``, ``windowBytes`` (log bytes per Arrow batch handed to Spark, default 8 MiB),
``format`` (``redpanda``: Redpanda's native segments, ``<topic>/<partition>_<rev>/<base>-<term>-v1.log``,
re-framed as Kafka's batches; one split per segment),
``decode`` (an internal topic's record type: ``offsets`` / ``OffsetCommit``, ``group-metadata``,
``transactions``, ``TopicRecord``...: one row per such record, one column per field, tombstones
marked, undecodable records as rows with ``decode_error``; pykbatch.topics.tables),
``pushFilters`` (true: WHERE clauses on offset, timestamp, topic and partition prune too; needs
``spark.sql.python.filterPushdown.enabled=true``, off by default in Spark 4.3).
Ranges prune before reading: whole segments by the base offsets in their names
(a segment holds offsets below the next one's), the start of a segment through its ``.index`` /
``.timeindex`` (trusted only where they point at a whole, CRC-checked batch: a stale index is ignored), then
batches by their headers (offsets, and ``maxTimestamp`` against ``startingTimestamp``, as Kafka's
own lookups by time trust it); records are filtered exactly.  In ``batches`` mode a batch is kept
when its offsets overlap the offset range, its ``max_timestamp`` is at or after
``startingTimestamp`` and its first timestamp is before ``endingTimestamp``.
Local paths are read through mmap; other URLs (s3://, hdfs://...) through fsspec when installed.
"""
from __future__ import annotations

import itertools
import os

import pyarrow as pa

from pykbatch.columns import LOCATION, fields
from pykbatch.log import Segment, base_offset_of, entry_windows
from pykbatch.retry import retry_io  # noqa: F401  (kafka-segment's remote reads; tests import it from here)

from . import tiered_source, value_columns
from .segment_columns import (  # noqa: F401 (tests and the tiered source read them here too)
    BATCH_COLUMNS, LOG, NAME, PATH_COLUMN, PYTHON_NAME, RECORD_COLUMNS, VALIDATION_COLUMNS, arrow_schema, entries_batch,
    lost_rows, split_truth,
)
from .segment_plan import (
    Ranges, _fsspec, _is_local, _local, narrow, path_not_found, plan_splits, read_mode, validates,
)


# Log bytes per Arrow batch handed to Spark: batches of 1-16 MiB move fastest through the
# Python worker (../shared/research/spark-notes.md); measured in benchmarks/segment_source.py.
WINDOW_BYTES = 8 << 20


def _flag(options, key: str) -> bool:
    """A true/false option (Spark passes every option as a string)."""
    return str(options.get(key, "false")).lower() == "true"


def _open(path: str, fmt: str = "kafka"):
    if fmt == "redpanda":  # Redpanda's native batches re-framed as Kafka's (pykbatch.log.redpanda)
        from pykbatch.log import redpanda
        with open(_local(path), "rb") as f:
            kafka, _ = redpanda.kafka_log(f.read())
        return Segment.in_memory(kafka, 0, path)
    if _is_local(path):
        return Segment(_local(path))
    fsspec = _fsspec(path)

    def fetch():
        with fsspec.open(path, "rb") as f:  # spooled to a local temporary file: bounded memory; the
            return Segment(f, base_offset_of(path))  # base offset from the URL (a store's file has no name)
    return retry_io(fetch)


# the log's own topic, partition and segment: "log_" names, as the records' fields may be called topic/partition
DECODED_LOCATION = [pa.field(f"log_{f.name}", f.type) for f in fields(LOCATION, "topic partition segment")]


def decoded_schema(decode: str) -> pa.Schema:
    """``decode`` (an internal record type or alias, pykbatch.topics.tables): its columns."""
    from pykbatch.topics.tables import ERROR_COLUMN, ALIASES, record_type
    return pa.schema(DECODED_LOCATION + list(record_type(ALIASES.get(decode, decode)).schema()) + [ERROR_COLUMN])


def read_decoded_split(path: str, topic: str, partition: int, start: int, end: int | None, decode: str,
                       window_bytes: int = WINDOW_BYTES):
    """An internal topic's split decoded: one row per record of type ``decode``, one column per
    field; records that do not decode are rows with ``decode_error`` set."""
    from pykbatch.topics.tables import record_table
    schema = decoded_schema(decode)
    with _open(path) as seg:
        data = seg.view()
        in_split = itertools.takewhile(lambda b: end is None or b.position < end, seg.batches(start=start))
        for run in entry_windows(in_split, window_bytes):
            table, _ = record_table(data[run[0][0]:run[-1][0] + run[-1][1]], decode, error_rows=True)
            n = table.num_rows
            location = [pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int32()), n),
                        pa.repeat(pa.scalar(seg.base_offset, pa.int64()), n)]
            for batch in pa.Table.from_arrays(location + table.columns, schema=schema).to_batches():
                yield batch
        del data


def read_split(path: str, topic: str, partition: int, start: int, end: int | None, mode: str, validate: bool,
               ranges: Ranges = Ranges(), window_bytes: int = WINDOW_BYTES, include_path: bool = False,
               fmt: str = "kafka", next_base: int | None = None, follows: bool = False, compacted: bool = False,
               previous: int | None = None):
    """The Arrow record batches of the entries starting in [start, end) of one segment
    (``fmt``: "kafka", or "redpanda" for Redpanda's native segments).  Validated, a range whose
    records cannot be read is a row of its own (``segment_columns.lost_rows``); ``next_base`` (the
    next segment's base offset, None: this is the partition's last), ``follows`` (a segment
    precedes this one) and ``compacted`` say what the partition around the segment makes of its
    ends, ``previous`` (the start of the split before this one) lets the checks between two entries
    see across the split's edge (``pykbatch.log.split_truth``)."""
    schema = arrow_schema(mode, validate, True)
    for batch in _read_split(path, topic, partition, start, end, mode, validate, ranges, window_bytes, fmt,
                             next_base, follows, compacted, previous):
        if include_path:
            batch = pa.RecordBatch.from_arrays([pa.repeat(pa.scalar(path, pa.string()), batch.num_rows)]
                                               + batch.columns, schema=schema)
        yield batch


def _read_split(path, topic, partition, start, end, mode, validate, ranges, window_bytes, fmt="kafka",
                next_base=None, follows=False, compacted=False, previous=None):
    schema = arrow_schema(mode, validate)
    with _open(path, fmt) as seg:
        data = seg.view()
        truth = split_truth(data, path, seg.base_offset, topic, partition, start, end, next_base, follows,
                            compacted, previous) if validate else None
        if truth is not None:
            in_split = truth.walk(seg)
        else:
            in_split = itertools.takewhile(lambda b: end is None or b.position < end, seg.batches(start=start))
        # a window is a contiguous run of entries: its entry indexes are its own
        for run in entry_windows(in_split, window_bytes, lambda b: ranges.keeps_batch(b, mode)):
            yield from entries_batch(data, run, seg.base_offset, topic, partition, mode, validate, schema, ranges,
                                     truth)
        if truth is not None:
            named = truth.finish()
            if named:
                yield lost_rows(named, seg.base_offset, topic, partition, schema, ranges)
        del data


def data_source_class(name: str = NAME):
    """The DataSource class (made on demand: pyspark is imported lazily), registered as ``name``."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_schema

    class SegmentSplit(InputPartition):
        def __init__(self, path, topic, partition, start, end, next_base=None, follows=False, previous=None):
            super().__init__((path, start))
            self.path, self.topic, self.partition, self.start, self.end = path, topic, partition, start, end
            self.next_base, self.follows, self.previous = next_base, follows, previous

    class TieredInput(InputPartition):
        def __init__(self, split):
            super().__init__((split.piece.path, split.lo))
            self.split = split

    class KafkaSegmentReader(DataSourceReader):
        def __init__(self, options):
            self.path = options.get("path")
            if not self.path:
                raise ValueError("kafka-segment: give a path (load(path))")
            self.options = options
            self.tiered = tiered_source.is_tiered(self.options)
            self.decode = options.get("decode")
            self.format = options.get("format", "kafka")
            if self.format not in ("kafka", "redpanda"):
                raise ValueError(f"kafka-segment: format is 'kafka' or 'redpanda', not {self.format!r}")
            self.mode = read_mode(options)
            self.validate = validates(options, self.mode)
            self.compacted = _flag(options, "compacted")  # offsets missing between entries are the cleaner's
            self.include_path = _flag(options, "includePath")
            self.split_bytes = int(options.get("splitBytes", 64 * 1024 * 1024))
            self.ranges = Ranges.from_options(options)
            self.window_bytes = int(options.get("windowBytes", WINDOW_BYTES))
            # the reader schemas, fetched once here on the driver (not per split on the executors)
            self.decodings = [] if self.decode else value_columns.decodings(options)

        def partitions(self):
            if self.tiered:
                splits = [TieredInput(s) for s in tiered_source.plan(self.options, self.ranges, self.split_bytes)]
                return splits or [SegmentSplit(None, "", -1, 0, 0)]
            if self.format == "redpanda":  # a native segment is one split
                from pykbatch.log import redpanda
                if not os.path.exists(_local(self.path)):
                    raise FileNotFoundError(path_not_found(self.path))
                return [SegmentSplit(f, t, p, 0, None) for f, t, p in redpanda.find_segments(_local(self.path))] \
                    or [SegmentSplit(None, "", -1, 0, 0)]
            splits = [SegmentSplit(*split) for split in plan_splits(self.path, self.split_bytes, self.ranges)]
            return splits or [SegmentSplit(None, "", -1, 0, 0)]

        def read(self, split):
            batches = self._read(split)
            return value_columns.decode_batches(batches, self.decodings) if self.decodings else batches

        def _read(self, split):
            if isinstance(split, TieredInput):
                return tiered_source.read_split(split.split, self.mode, self.validate, self.ranges, self.window_bytes,
                                                self.include_path)
            if split.path is None:
                return iter(())
            if self.decode:
                return read_decoded_split(split.path, split.topic, split.partition, split.start, split.end,
                                          self.decode, self.window_bytes)
            return read_split(split.path, split.topic, split.partition, split.start, split.end, self.mode,
                              self.validate, self.ranges, self.window_bytes, include_path=self.include_path,
                              fmt=self.format, next_base=split.next_base, follows=split.follows,
                              compacted=self.compacted, previous=split.previous)

    class PushdownSegmentReader(KafkaSegmentReader):
        """With option pushFilters=true (and spark.sql.python.filterPushdown.enabled=true, without
        which Spark refuses a reader that takes filters): WHERE clauses on offset, timestamp,
        topic and partition prune like the range options."""
        def pushFilters(self, filters):
            self.ranges = narrow(self.ranges, filters, self.mode)
            return filters  # Spark still evaluates each one: the pruning only has to be conservative

    class KafkaSegmentDataSource(DataSource):
        @classmethod
        def name(cls):
            return name

        def schema(self):
            if self.options.get("decode"):
                return from_arrow_schema(decoded_schema(self.options["decode"]))
            mode = read_mode(self.options)
            schema = arrow_schema(mode, validates(self.options, mode), _flag(self.options, "includePath"))
            if tiered_source.is_tiered(self.options):
                schema = schema.append(tiered_source.EPOCH_COLUMN)
            return from_arrow_schema(value_columns.extend_schema(schema, value_columns.decodings(self.options)))

        def reader(self, schema):
            if _flag(self.options, "pushFilters"):
                return PushdownSegmentReader(self.options)
            return KafkaSegmentReader(self.options)

    return KafkaSegmentDataSource
