"""``kafka-kbatch``: Spark's Kafka source, read by pykbatch's live reader, so a damaged batch
never fails the query or stalls the stream: readable records are delivered, each unreadable range
is skipped by the error policy and dead-lettered (``pykbatch.live``).

    spark_udfs.register(spark)
    df = (spark.read.format("kafka-kbatch")
          .option("kafka.bootstrap.servers", "broker:9092").option("subscribe", "orders")
          .option("startingOffsets", "earliest").option("errors.tolerance", "all").load())
    stream = spark.readStream.format("kafka-kbatch").option(...).option("maxOffsetsPerTrigger", 100000).load()

Options are Spark's Kafka source's (``kafka.*`` client properties, ``subscribe``, ``assign``,
``startingOffsets`` (also ``committed``: the offsets of the group ``kafka.group.id``, earliest
where it has none -- where a read-process-write sink's ``sourceOffsetsGroup`` left off),
``endingOffsets``, ``startingTimestamp``, ``startingOffsetsByTimestamp``,
``includeHeaders``, ``kafka.isolation.level``, ``failOnDataLoss``, ``maxOffsetsPerTrigger``) and
its columns; ``commitOffsets`` (streaming: each micro-batch's end offsets committed to the group
``kafka.group.id`` once Spark commits the batch, for lag tools -- Spark's source never commits);
and Connect's error options: ``errors.tolerance`` (none|all), ``errors.deadletterqueue.topic.name``,
``errors.log.enable``, ``errors.log.include.messages``.
Offsets in the checkpoint are ``{"topic": {"partition": next offset}}``, as Spark's source keeps
them; a micro-batch reads exactly the offsets between two of them, so a restarted query reads
again exactly what its checkpoint says was not committed.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pyarrow as pa

from pykbatch.columns import CONSUMED
from spark_udfs import value_columns

log = logging.getLogger("pykbatch.spark.source")

NAME = "kafka-kbatch"
COMMIT_WAIT_S = 10  # a coordinator moving or loading: asked again this long before the next batch's turn
SOURCE_OPTIONS = {"subscribe", "assign", "subscribepattern", "startingoffsets", "endingoffsets", "startingtimestamp",
                  "startingoffsetsbytimestamp", "includeheaders", "failondataloss", "maxoffsetspertrigger",
                  "minpartitions", "errors.tolerance", "errors.deadletterqueue.topic.name", "errors.log.enable",
                  "errors.log.include.messages", "errors.max", "commitoffsets"}
CLIENT_IGNORED = {"group.id", "isolation.level", "auto.offset.reset", "enable.auto.commit", "key.deserializer",
                  "value.deserializer"}  # the reader's own business, as in Spark's source


def _schema(include_headers: bool) -> pa.Schema:
    return pa.schema([f for f in CONSUMED if f.name != "leader_epoch" and (include_headers or f.name != "headers")])


@dataclass(frozen=True)
class Options:
    """The source's options, read once on the driver and shipped to the executors."""
    props: dict
    assign: str | None
    subscribe: str | None
    starting: str
    ending: str | None
    starting_timestamp: int | None
    starting_by_timestamp: str | None
    include_headers: bool
    isolation_level: str
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    tolerance: str
    dead_letter_topic: str | None
    log_enable: bool
    include_messages: bool
    max_errors: int | None
    decodings: tuple = ()  # values / keys as their schemas say (spark_udfs/value_columns.py)
    group_id: str | None = None  # kafka.group.id: whose offsets startingOffsets=committed resumes
    commit_offsets: bool = False  # each micro-batch's end committed to group_id (lag for the usual tools)

    @classmethod
    def parse(cls, options, *, streaming: bool) -> Options:
        opts = {k.lower() if not k.lower().startswith("kafka.") else k: v for k, v in dict(options).items()}
        if "subscribepattern" in opts:
            raise ValueError("kafka-kbatch: subscribePattern is not supported; name the topics with subscribe or assign")
        props, unknown = {}, []
        for k, v in opts.items():
            if k.lower().startswith("kafka."):
                if k[6:] not in CLIENT_IGNORED:
                    props[k[6:]] = v
            elif k not in SOURCE_OPTIONS and k not in ("path",) and k not in value_columns.option_names() \
                    and not value_columns.is_registry_option(k):
                unknown.append(k)
        if unknown:
            raise ValueError(f"kafka-kbatch: unknown option(s) {', '.join(sorted(unknown))}")
        if "bootstrap.servers" not in props:
            raise ValueError("kafka-kbatch: option kafka.bootstrap.servers is required")
        if ("assign" in opts) == ("subscribe" in opts):
            raise ValueError("kafka-kbatch: give exactly one of the options subscribe and assign")
        ending = opts.get("endingoffsets")
        if streaming and ending is not None:
            raise ValueError("kafka-kbatch: endingOffsets is for batch queries")
        tolerance = opts.get("errors.tolerance", "none").lower()
        if tolerance not in ("none", "all"):
            raise ValueError("kafka-kbatch: errors.tolerance is none or all")
        level = dict(options).get("kafka.isolation.level", "read_uncommitted")
        commit = str(opts.get("commitoffsets", "false")).strip().lower()
        if commit not in ("true", "false"):
            raise ValueError("kafka-kbatch: commitOffsets is true or false")
        starting = opts.get("startingoffsets", "latest" if streaming else "earliest")
        if str(starting).strip().lower() == "committed" and not opts.get("kafka.group.id"):
            raise ValueError("kafka-kbatch: startingOffsets=committed starts from the offsets of the group named by "
                             "kafka.group.id")
        if commit == "true" and not opts.get("kafka.group.id"):
            raise ValueError("kafka-kbatch: commitOffsets=true commits to the group named by kafka.group.id")
        if commit == "true" and not streaming:
            raise ValueError("kafka-kbatch: commitOffsets is for streaming queries (a batch query that writes to "
                             "kafka-kbatch commits its source offsets with the sink's sourceOffsetsGroup)")
        return cls(props, opts.get("assign"), opts.get("subscribe"), starting,
                   None if streaming else (ending or "latest"),
                   int(opts["startingtimestamp"]) if "startingtimestamp" in opts else None,
                   opts.get("startingoffsetsbytimestamp"),
                   str(opts.get("includeheaders", "false")).lower() == "true", level,
                   str(opts.get("failondataloss", "true")).lower() == "true",
                   int(opts["maxoffsetspertrigger"]) if "maxoffsetspertrigger" in opts else None, tolerance,
                   opts.get("errors.deadletterqueue.topic.name") or None,
                   str(opts.get("errors.log.enable", "false")).lower() == "true",
                   str(opts.get("errors.log.include.messages", "false")).lower() == "true",
                   int(opts["errors.max"]) if "errors.max" in opts else None,
                   tuple(value_columns.decodings(options)), opts.get("kafka.group.id"), commit == "true")

    def schema(self) -> pa.Schema:
        return value_columns.extend_schema(_schema(self.include_headers), list(self.decodings))

    def reader(self, **kwargs):
        """A live reader with these options (``kwargs``: its assignment and positions)."""
        from pykbatch.live import Cluster, DeadLetterTopic, Reader
        from pykbatch.policy import ErrorPolicy
        cluster = Cluster(self.props)
        policy = ErrorPolicy(tolerance=self.tolerance, max_errors=self.max_errors, log_enable=self.log_enable,
                             include_messages=self.include_messages)
        sink = DeadLetterTopic(cluster, self.dead_letter_topic) if self.dead_letter_topic else None
        return Reader(cluster, isolation_level=self.isolation_level, fail_on_data_loss=self.fail_on_data_loss,
                      policy=policy, dead_letters=sink, **kwargs)


def resolve(options: Options, which: str):
    """``{topic: {partition: offset}}`` for the assigned partitions: their starting offsets
    (``which="start"``), ending offsets ("end") or the latest ("latest")."""
    from pykbatch.live import Cluster
    from pykbatch.live.offsets import assigned, ending_positions, starting_positions
    level = 1 if options.isolation_level == "read_committed" else 0
    with Cluster(options.props) as cluster:
        tps = assigned(cluster, options.assign, options.subscribe)
        if which == "start":
            got = starting_positions(cluster, tps, options.starting, starting_timestamp=options.starting_timestamp,
                                     starting_offsets_by_timestamp=options.starting_by_timestamp,
                                     group_id=options.group_id, isolation_level=level)
        else:
            got = ending_positions(cluster, tps, options.ending if which == "end" else "latest", isolation_level=level)
    out: dict = {}
    for tp, offset in got.items():
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return out


def read_range(options: Options, topic: str, partition: int, start: int, end: int):
    """The Arrow batches of ``topic``-``partition`` from ``start`` to ``end`` (exclusive)."""
    if end <= start:
        return
    from pykbatch.live import TopicPartition
    schema = _schema(options.include_headers)
    tp = TopicPartition(topic, partition)
    with options.reader(assign={topic: [partition]}, positions={tp: start},
                        ending_offsets={topic: {str(partition): end}}) as reader:
        for poll in reader.polls():
            if poll.table.num_rows:
                batches = poll.table.select(schema.names).cast(schema).to_batches()
                yield from value_columns.decode_batches(batches, list(options.decodings))


def commit_to_group(options: Options, end: dict) -> bool:
    """A committed micro-batch's end offsets, committed to ``options.group_id`` so that lag tools
    (``kafka-consumer-groups --describe``, Burrow, ...) see the query as a consumer; the
    checkpoint stays what the query resumes from.  A commit the cluster refuses for a while is
    logged and left to the next micro-batch's (False); one the group's ACLs refuse fails the query."""
    from pykbatch.live import AuthorizationError, Cluster, ClusterError, TopicPartition
    from pykbatch.live.cluster import asked_until_answered
    offsets = {TopicPartition(t, int(p)): int(o) for t, parts in end.items() for p, o in parts.items()}
    if not offsets:
        return True
    try:
        with Cluster(options.props) as cluster:
            asked_until_answered(lambda: cluster.commit(options.group_id, offsets), COMMIT_WAIT_S)
        return True
    except AuthorizationError:
        raise
    except ClusterError as exc:
        log.warning("kafka-kbatch: the end offsets of a micro-batch were not committed to group %r (%s); the next "
                    "trigger's commit carries them", options.group_id, exc)
        return False


def _ranges(start: dict, end: dict):
    for topic, parts in end.items():
        for p, last in parts.items():
            first = start.get(topic, {}).get(p, 0)
            if last > first:
                yield topic, int(p), first, last


def data_source_class():
    """The DataSource class (made on demand: pyspark is imported lazily)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    class Range(InputPartition):
        def __init__(self, topic, partition, start, end):
            self.topic, self.partition, self.start, self.end = topic, partition, start, end

    class BatchReader(DataSourceReader):
        def __init__(self, options: Options):
            self.options = options

        def partitions(self):
            start, end = resolve(self.options, "start"), resolve(self.options, "end")
            return [Range(*r) for r in _ranges(start, end)] or [Range("", 0, 0, 0)]

        def read(self, r):
            return read_range(self.options, r.topic, r.partition, r.start, r.end)

    class StreamReader(DataSourceStreamReader):
        def __init__(self, options: Options):
            self.options = options
            self._group_at = None  # what was last committed to the group (commitOffsets)

        def initialOffset(self):
            return resolve(self.options, "start")

        def getDefaultReadLimit(self):
            n = self.options.max_offsets_per_trigger
            return ReadMaxRows(n) if n else ReadAllAvailable()

        def latestOffset(self, start=None, limit=None):
            if start is not None:  # asked at every trigger, once the micro-batch ending at start is done
                self._committed_to_group(start)
            latest = resolve(self.options, "latest")
            if start is None or limit is None or not isinstance(limit, ReadMaxRows):
                return latest
            return admitted(start, latest, limit.max_rows)

        def partitions(self, start, end):
            return [Range(*r) for r in _ranges(start, end)]

        def read(self, r):
            return read_range(self.options, r.topic, r.partition, r.start, r.end)

        def commit(self, end):
            # the checkpoint holds the offsets, as for Spark's own source; the group is told when asked
            self._committed_to_group(end)

        def _committed_to_group(self, end):
            # Spark commits a batch to its source only when it plans the next one, which waits for
            # new records: the end of the last batch is also committed from latestOffset, which
            # Spark asks at every trigger once the batch before it is done (not with
            # asyncProgressTrackingEnabled, where planning runs ahead of the batches)
            if self.options.commit_offsets and end != self._group_at and commit_to_group(self.options, end):
                self._group_at = end

    class KafkaKbatchDataSource(DataSource):
        @classmethod
        def name(cls):
            return NAME

        def schema(self):
            return from_arrow_schema(value_columns.extend_schema(
                _schema(str(self._opt("includeHeaders", "false")).lower() == "true"),
                value_columns.decodings(self.options)))

        def _opt(self, key, default):
            for k, v in self.options.items():
                if k.lower() == key.lower():
                    return v
            return default

        def reader(self, schema):
            return BatchReader(Options.parse(self.options, streaming=False))

        def streamReader(self, schema):
            return StreamReader(Options.parse(self.options, streaming=True))

        # the same name as a sink: pykbatch's producer (spark_udfs/live_sink.py)
        def writer(self, schema, overwrite):
            from spark_udfs.live_sink import refuse_overwrite, writer_classes
            refuse_overwrite(overwrite)
            return writer_classes()[0](self.options)

        def streamWriter(self, schema, overwrite):
            from spark_udfs.live_sink import refuse_overwrite, writer_classes
            refuse_overwrite(overwrite)
            return writer_classes()[1](self.options)

    return KafkaKbatchDataSource


def admitted(start: dict, latest: dict, max_rows: int) -> dict:
    """Admission control (``maxOffsetsPerTrigger``): at most ``max_rows`` offsets in all, shared
    between the partitions in proportion to what each has waiting, as Spark's source shares it."""
    waiting = {(t, p): max(0, end - start.get(t, {}).get(p, 0)) for t, parts in latest.items() for p, end in parts.items()}
    total = sum(waiting.values())
    out = json.loads(json.dumps(latest))
    if total <= max_rows:
        return out
    for (t, p), lag in waiting.items():
        share = lag * max_rows // total if total else 0
        out[t][p] = start.get(t, {}).get(p, 0) + (share if share or not lag else 1)
    return out
