"""Tiered storage read offline, against the real thing: the session's Kafka broker (4.3.1, tiered
storage on, Kafka's own LocalTieredStorage as the remote store, the topic-based metadata
manager) moves a topic's segments to the remote store and off its disk; real producers write
every codec, idempotent and transactional batches (commits, aborts, one transaction left open);
the broker restarts (leader epochs move on) and remote retention deletes copies.  At each stage
the records pykbatch reads offline — remote store plus local segments, remote store alone, the
same store in S3 (moto's server on loopback) — equal what a real consumer reads from the broker
from the earliest offset, read_uncommitted and read_committed.  Damaged stores give their
reports and the rest is still read."""
from __future__ import annotations

import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from pykbatch import tiered
from pykbatch.commands import main
from pykbatch.tiered.metadata import SegmentState, SegmentUpdate, records_of_segments
from tests import kafka_tools

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))

TOPIC = "tiered"
PARTITIONS = 2
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TOPIC_CONFIG = {"remote.storage.enable": "true", "internal.segment.bytes": "1200", "local.retention.ms": "500",
                "retention.ms": "-1", "segment.index.bytes": "4096", "index.interval.bytes": "300"}
ISOLATIONS = ("read_uncommitted", "read_committed")
# reports a sound store can give: uploads the broker itself does not serve
INFORMATIONAL = ("superseded", "copy_unfinished", "outside_lineage")
QUIET = {"logger": __import__("logging").getLogger("librdkafka.tiered")}  # reconnect chatter during restarts
QUIET["logger"].setLevel(__import__("logging").CRITICAL)


@dataclass
class Stage:
    """What the broker held at one moment: its log dirs, its remote store, and what a consumer
    read from it (per isolation level: (partition, offset, timestamp, key, value, headers) rows)."""
    name: str
    data: Path
    remote: Path
    consumed: dict


def produce_round(bootstrap: str, round_: int, txn) -> None:
    from confluent_kafka import Producer
    from kafka import KafkaProducer
    for codec in CODECS:
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec, linger_ms=5)
        for i in range(30):
            p.send(TOPIC, partition=i % PARTITIONS, key=None if i % 7 == 3 else b"k%d-%d" % (round_, i),
                   value=None if i % 11 == 0 else ("välue-%d-%s" % (i, codec)).encode() * (1 + i % 4),
                   headers=[("h", b"x"), ("n", b"")] if i % 5 == 0 else None)
            if i % 6 == 5:
                p.flush()
        p.close()
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "zstd", **QUIET})
    for i in range(40):
        idem.produce(TOPIC, partition=i % PARTITIONS, key=b"idem-%d" % i, value=b"i" * (i % 9))
        if i % 10 == 9:
            idem.flush(30)
    idem.flush(30)
    for commit in (True, False, True, False):
        txn.begin_transaction()
        for i in range(12):
            txn.produce(TOPIC, partition=i % PARTITIONS, key=b"t%d-%d" % (round_, i), value=b"committed" if commit else b"aborted")
        txn.flush(30)  # sent before the outcome: an abort leaves records, markers and .txnindex entries
        (txn.commit_transaction if commit else txn.abort_transaction)(30)


def consume(bootstrap: str, isolation: str, start: int | None = None) -> list[tuple]:
    """Everything a consumer reads from the earliest offset (or fetching from ``start`` in every
    partition) until the end (the high watermark, or the last stable offset for read_committed),
    as rows."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{isolation}-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False,
                  **QUIET})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING if start is None else start) for p in range(PARTITIONS)])
    rows, done, deadline = [], set(), time.monotonic() + 90
    while len(done) < PARTITIONS and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                done.add(m.partition())
                continue
            raise RuntimeError(str(m.error()))
        done.discard(m.partition())
        rows.append((m.partition(), m.offset(), m.timestamp()[1], m.key(), m.value(),
                     tuple((k, v) for k, v in (m.headers() or []))))
    c.close()
    assert len(done) == PARTITIONS, "the consumer did not reach the end in time"
    return sorted(rows)


def offline(store, metadata, local=None, isolation="read_uncommitted", topic=TOPIC):
    """The same rows, read offline; and every report."""
    topic_store = tiered.TieredTopicStore(store, metadata)
    rows, reports = [], []
    for part in topic_store.partitions(local_dirs=[local] if local else [], topics=[topic]):
        for b, r in part.records(isolation):
            rows.append((part.partition.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers)))
        reports += part.reports
    return sorted(rows), reports


def wait_until(condition, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting until {what}")


def tiered_off_disk(broker, uploads: int) -> bool:
    """Each partition has at least ``uploads`` remote copies and its first local segment is gone."""
    for p in range(PARTITIONS):
        local = sorted((broker.data / f"{TOPIC}-{p}").glob("*.log"))
        remote = list(broker.remote.glob(f"{TOPIC}-{p}-*/*.log"))
        if len(remote) < uploads or not local or local[0].name == "00000000000000000000.log":
            return False
    return True


def live_events(broker) -> list:
    files = sorted(str(p) for p in (broker.data / "__remote_log_metadata-0").glob("*.log"))
    return [r.event for r in records_of_segments(files) if r.event is not None]


def deleted_copies(broker, partition: int) -> bool:
    return any(isinstance(e, SegmentUpdate) and e.partition.partition == partition and e.partition.topic == TOPIC
               and e.state == SegmentState.DELETE_SEGMENT_FINISHED for e in live_events(broker))


def metadata_settled(broker, quiet: float = 3.0) -> bool:
    """No deletion of the topic's copies is half-way and the metadata has not changed for
    ``quiet`` seconds.  (An upload a restart interrupted stays COPY_SEGMENT_STARTED for good:
    a real half-finished upload, which the readers must leave out.)"""
    count = len(live_events(broker))
    time.sleep(quiet)
    events = live_events(broker)
    state = {e.segment_id: e.state for e in events
             if hasattr(e, "segment_id") and e.partition.topic == TOPIC}
    return len(events) == count and SegmentState.DELETE_SEGMENT_STARTED not in state.values()


def set_retention_bytes(admin, value: int) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    entry = ConfigEntry("retention.bytes", str(value), incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource("topic", TOPIC, incremental_configs=[entry])]).values():
        f.result(60)


def capture(broker, into: Path, name: str) -> Stage:
    """The broker's files as a clean shutdown leaves them, copied; then what consumers read
    (the restart in between moves every leader epoch on)."""
    broker.stop()
    try:
        shutil.copytree(broker.data, into / name / "data")
        shutil.copytree(broker.remote, into / name / "remote")
    finally:
        broker.start()
    consumed = {iso: consume(broker.bootstrap, iso) for iso in ISOLATIONS}
    # consumers fetching from offsets inside the log: just after an aborted transaction began
    # (its marker is past the fetch offset, a later transaction of the producer commits), and half-way
    if name == "retained":
        aborted = [r[1] for r in consumed["read_uncommitted"] if r[0] == 0 and r[4] == b"aborted"]
        block_end = next(o for i, o in enumerate(aborted) if i + 1 == len(aborted) or aborted[i + 1] != o + 1)
        offsets = [[r[1] for r in consumed["read_uncommitted"] if r[0] == p] for p in range(PARTITIONS)]
        first, last = max(o[0] for o in offsets), min(o[-1] for o in offsets)  # in every partition's log
        # inside an aborted transaction; just past its ABORT marker (the producer commits later:
        # a reader that keeps the abort without its marker loses those); half-way
        starts = {aborted[0] + 1, block_end + 2, (first + last) // 2} & set(range(first, last))
        for start in sorted(starts):
            for iso in ISOLATIONS:
                consumed[(iso, start)] = consume(broker.bootstrap, iso, start)
    return Stage(name, into / name / "data", into / name / "remote", consumed)


@pytest.fixture(scope="module")
def stages(kafka_broker, tmp_path_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    bootstrap = kafka_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=TOPIC_CONFIG)]).values():
        f.result(60)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tiered-txn", "compression.type": "lz4", **QUIET})
    txn.init_transactions(30)
    into = tmp_path_factory.mktemp("tiered")
    out = {}
    produce_round(bootstrap, 0, txn)
    wait_until(lambda: tiered_off_disk(kafka_broker, 3), "segments moved to the remote store")
    out["tiered"] = capture(kafka_broker, into, "tiered")  # restarts: leader epoch 1
    produce_round(bootstrap, 1, txn)
    wait_until(lambda: tiered_off_disk(kafka_broker, 6), "the new epoch's segments moved too")
    out["restarted"] = capture(kafka_broker, into, "restarted")
    total = sum(p.stat().st_size for p in kafka_broker.remote.glob(f"{TOPIC}-0-*/*.log"))
    set_retention_bytes(admin, total // 2)
    wait_until(lambda: all(deleted_copies(kafka_broker, p) for p in range(PARTITIONS)), "remote retention deleted copies")
    set_retention_bytes(admin, -1)  # no more deletions: what is captured is what consumers read
    wait_until(lambda: metadata_settled(kafka_broker), "the remote log metadata settled")
    # a transaction left open at the end: read_committed stops at its first offset
    txn.begin_transaction()
    for i in range(4):
        txn.produce(TOPIC, partition=1, key=b"open-%d" % i, value=b"not yet")
    txn.flush(30)
    out["retained"] = capture(kafka_broker, into, "retained")
    txn.abort_transaction(30)
    return out


def metadata_of(stage: Stage) -> list[str]:
    return [str(stage.data / "__remote_log_metadata-0")]


def local_store(stage: Stage):
    return tiered.open_store(str(stage.remote))


STAGES = ("tiered", "restarted", "retained")


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_remote_and_local_read_like_a_consumer(stages, stage, isolation):
    s = stages[stage]
    rows, reports = offline(local_store(s), metadata_of(s), str(s.data), isolation)
    assert rows == s.consumed[isolation]
    assert [r for r in reports if r.kind not in INFORMATIONAL] == []


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_remote_store_alone_reads_like_a_consumer_up_to_its_end(stages, stage, isolation):
    """Without the broker's disk: the remote copies' records are the consumer's, up to the
    last offset uploaded (read_committed: where the uploaded producer state leaves it)."""
    s = stages[stage]
    rows, reports = offline(local_store(s), metadata_of(s), None, isolation)
    assert rows, "nothing was read from the remote store"
    last = {p: max(r[1] for r in rows if r[0] == p) for p in range(PARTITIONS)}
    want = [r for r in s.consumed[isolation] if r[1] <= last[r[0]]]
    assert rows == want
    assert not [r for r in reports if r.kind in ("hole", "missing_object", "truncated_object", "damaged")]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_store_in_s3_reads_the_same(stages, s3_server, isolation):
    s = stages["retained"]
    url = s3_server.upload(s.remote, "tiered-store", f"retained-{isolation}")
    store = tiered.open_store(url, **s3_server.storage_options())
    rows, _ = offline(store, metadata_of(s), str(s.data), isolation)
    assert rows == s.consumed[isolation]


def windows(stage: Stage) -> list[tuple[str, int, int | None]]:
    """(isolation, start, end) of every window a consumer fetched from at capture time, with an
    open end and an end inside the log."""
    out = []
    for key in stage.consumed:
        if isinstance(key, tuple):
            isolation, start = key
            out += [(isolation, start, None), (isolation, start, start + 40)]
    return sorted(out, key=str)


def fetched(stage: Stage, isolation: str, start: int, end: int | None) -> list[tuple]:
    """What the consumer fetching from ``start`` received, up to offset ``end``."""
    return [r for r in stage.consumed[(isolation, start)] if end is None or r[1] <= end]


@pytest.mark.parametrize("trusted_listing", [False, True])
def test_every_window_reads_what_a_consumer_fetching_from_its_start_receives(stages, trusted_listing):
    """Python's ``records(isolation, start, end)`` and the Arrow tables (the CLI export's and the
    Spark source's road) for each window a real consumer fetched; with the metadata, or with the
    store's listing trusted and the broker's local dirs."""
    from pykbatch.tiered.tables import partition_tables
    s = stages["retained"]
    metadata = [] if trusted_listing else metadata_of(s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tiered.NoMetadataWarning)
        parts = tiered.TieredTopicStore(local_store(s), metadata).partitions([str(s.data)], [TOPIC])
    assert windows(s)
    for isolation, start, end in windows(s):
        want = fetched(s, isolation, start, end)
        assert want, (isolation, start, end)
        rows = sorted((part.partition.partition, r.offset, r.timestamp, r.key, r.value, tuple(r.headers))
                      for part in parts for _, r in part.records(isolation, start, end))
        assert rows == want, (isolation, start, end)
        tables = [t for part in parts for t in partition_tables(part, isolation, start, end)]
        assert table_rows(__import__("pyarrow").concat_tables(tables)) == want, (isolation, start, end)


def test_every_window_exported_by_the_cli_and_read_by_spark_is_what_a_consumer_receives(stages, tmp_path, capsys):
    import pyarrow.parquet as pq
    s = stages["retained"]
    for n, (isolation, start, end) in enumerate(windows(s)):
        out = tmp_path / f"w{n}.parquet"
        argv = ["tiered", "export", str(s.remote), "--metadata", metadata_of(s)[0], "--local-dir", str(s.data),
                "--topic", TOPIC, "--isolation-level", isolation, "--start-offset", str(start), "--to", "parquet",
                str(out)] + ([] if end is None else ["--end-offset", str(end)])
        assert main(argv) == 0, capsys.readouterr()
        assert table_rows(pq.read_table(out)) == fetched(s, isolation, start, end), (isolation, start, end)
        extra = {"startingOffset": str(start)} | ({} if end is None else {"endingOffset": str(end + 1)})
        assert spark_source_rows(s, isolation, **extra) == fetched(s, isolation, start, end), (isolation, start, end)


@pytest.mark.spark
def test_every_window_read_by_a_spark_job_is_what_a_consumer_receives(stages, spark):
    s = stages["retained"]
    for isolation, start, end in windows(s):
        reader = (spark.read.format("kafka-segment").option("remoteLogMetadata", metadata_of(s)[0])
                  .option("localDirs", str(s.data)).option("isolationLevel", isolation)
                  .option("startingOffset", str(start)))
        if end is not None:
            reader = reader.option("endingOffset", str(end + 1))
        df = reader.load(str(s.remote)).where(f"topic = '{TOPIC}'")
        got = sorted((r.partition, r.offset, millis(r.timestamp), None if r.key is None else bytes(r.key),
                      None if r.value is None else bytes(r.value),
                      tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers))
                     for r in df.collect())
        assert got == fetched(s, isolation, start, end), (isolation, start, end)


def test_the_stages_cover_what_they_should(stages):
    s = stages["retained"]
    events = [r.event for r in records_of_segments(
        sorted(str(p) for p in (s.data / "__remote_log_metadata-0").glob("*.log")))]
    states = {e.state for e in events if isinstance(e, SegmentUpdate)}
    assert {SegmentState.COPY_SEGMENT_FINISHED, SegmentState.DELETE_SEGMENT_STARTED,
            SegmentState.DELETE_SEGMENT_FINISHED} <= states
    epochs = {e for ev in events if hasattr(ev, "leader_epochs") for e in ev.leader_epochs}
    assert len(epochs) >= 2, f"the remote copies span one leader epoch only: {epochs}"
    assert list(stages["restarted"].remote.rglob("*.txnindex")), "no aborted transaction reached the remote store"
    committed, uncommitted = s.consumed["read_committed"], s.consumed["read_uncommitted"]
    assert any(r[4] == b"aborted" for r in uncommitted) and not any(r[4] == b"aborted" for r in committed)
    assert any(r[4] == b"not yet" for r in uncommitted) and not any(r[4] == b"not yet" for r in committed)
    first = {p: min(r[1] for r in uncommitted if r[0] == p) for p in range(PARTITIONS)}
    assert all(o > 0 for o in first.values()), "remote retention moved no log start offset"


def test_remote_log_metadata_dumps_like_kafka(stages, capsys):
    s = stages["retained"]
    files = sorted(str(p) for p in (s.data / "__remote_log_metadata-0").glob("*.log"))
    theirs, _ = kafka_tools.dump(files, "--remote-log-metadata-decoder")
    main(["dump", "--files", ",".join(files), "--remote-log-metadata-decoder", "--no-progress"])
    ours = capsys.readouterr().out
    assert ours.splitlines() == theirs.splitlines()
    assert "state=DELETE_SEGMENT_FINISHED" in ours and "RemoteLogSegmentMetadata{" in ours


# -- damaged stores -----------------------------------------------------------------------------

def damaged_copy(stage: Stage, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(stage.remote, root)
    return root


def uploads(root: Path, partition: int) -> list[Path]:
    return sorted(root.glob(f"{TOPIC}-{partition}-*/*.log"))


def rows_outside(rows, partition, start, end):
    return [r for r in rows if not (r[0] == partition and start <= r[1] <= end)]


def _span(log: Path) -> tuple[int, int]:
    import pykbatch as kb
    with kb.read_segment(str(log)) as seg:
        offsets = [b.last_offset for b in seg.batches()]
    return int(log.name.split("-")[0]), offsets[-1]


def test_a_deleted_object_is_reported_and_the_rest_read(stages, tmp_path):
    s = stages["restarted"]
    root = damaged_copy(s, tmp_path)
    victim = uploads(root, 0)[1]
    start, end = _span(victim)
    victim.unlink()
    rows, reports = offline(tiered.open_store(str(root)), metadata_of(s), None)
    missing = [r for r in reports if r.kind == "missing_object"]
    assert [(r.partition, r.start, r.end) for r in missing] == [(f"{TOPIC}-0", start, end)]
    whole, _ = offline(local_store(s), metadata_of(s), None)
    assert rows == rows_outside(whole, 0, start, end)


def test_a_duplicated_upload_is_reported_not_read_twice(stages, tmp_path):
    s = stages["restarted"]
    root = damaged_copy(s, tmp_path)
    original = uploads(root, 1)[0]
    stem = original.name.split(".")[0]
    offset, _ = stem.split("-", 1)
    for f in original.parent.glob(stem + ".*"):
        shutil.copy(f, f.with_name(f"{offset}-AAAAAAAAAAAAAAAAAAAAAA{f.suffix}"))
    rows, reports = offline(tiered.open_store(str(root)), metadata_of(s), None)
    whole, _ = offline(local_store(s), metadata_of(s), None)
    assert rows == whole
    assert [r.kind for r in reports if r.path and "AAAAAAAAAAAAAAAAAAAAAA" in r.path] == ["unknown_object"]


def test_a_truncated_object_is_reported_and_the_rest_read(stages, tmp_path):
    s = stages["restarted"]
    root = damaged_copy(s, tmp_path)
    victim = uploads(root, 1)[1]
    start, end = _span(victim)
    data = victim.read_bytes()
    victim.write_bytes(data[:len(data) // 2])
    rows, reports = offline(tiered.open_store(str(root)), metadata_of(s), None)
    truncated = [r for r in reports if r.kind == "truncated_object"]
    assert len(truncated) == 1 and truncated[0].end == end and start < truncated[0].start <= end
    whole, _ = offline(local_store(s), metadata_of(s), None)
    assert rows == rows_outside(whole, 1, truncated[0].start, end)
    assert any(r[0] == 1 and start <= r[1] < truncated[0].start for r in rows), "the whole part was lost too"


def test_a_half_finished_upload_is_reported_and_not_read(stages, tmp_path):
    """Metadata that announced a copy and never finished it (the broker died mid-upload): the
    copy is not served, the offsets only it held are a hole, both reported."""
    s = stages["tiered"]
    files = sorted(str(p) for p in (s.data / "__remote_log_metadata-0").glob("*.log"))
    events = [r.event for r in records_of_segments(files)]
    finish = [e for e in events if isinstance(e, SegmentUpdate) and e.state == SegmentState.COPY_SEGMENT_FINISHED
              and e.partition.partition == 0]
    dropped = finish[1]
    store = tiered.TieredTopicStore.from_events(local_store(s), [e for e in events if e is not dropped])
    copy = store.remote[dropped.partition].copies[dropped.segment_id]
    (part,) = [p for p in store.partitions(topics=[TOPIC]) if p.partition.partition == 0]
    rows = [r.offset for _, r in part.records()]
    kinds = {(r.kind, r.start, r.end) for r in part.reports}
    assert ("copy_unfinished", copy.start, copy.end) in kinds
    assert ("hole", copy.start, copy.end) in kinds
    assert rows and not [o for o in rows if copy.start <= o <= copy.end]


def test_without_metadata_the_listing_is_trusted_with_a_warning(stages):
    s = stages["restarted"]
    with pytest.warns(tiered.NoMetadataWarning):
        rows, reports = offline(local_store(s), [], None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole, with_metadata = offline(local_store(s), metadata_of(s), None)
    # The listing cannot tell an upload still in progress when the store was copied (which the
    # metadata calls unfinished) from a finished one: such an upload's offsets are read too.
    unfinished = [(r.partition, r.start, r.end) for r in with_metadata if r.kind == "copy_unfinished"]
    extra = [r for r in rows if r not in whole]
    assert all(any(p == f"{TOPIC}-{r[0]}" and a <= r[1] <= b for p, a, b in unfinished) for r in extra)
    assert [r for r in rows if r not in extra] == whole


# -- Arrow tables and the command line ----------------------------------------------------------

def table_rows(table) -> list[tuple]:
    """Rows of an export (timestamps as epoch ms) or of the Spark source (a TimestampType: its
    epoch value in milliseconds, whatever unit and zone the file carries)."""
    import pyarrow as pa
    cols = [table[c] for c in ("partition", "offset", "timestamp", "key", "value", "headers")]
    if pa.types.is_timestamp(cols[2].type):
        cols[2] = cols[2].cast(pa.timestamp("ms", tz=cols[2].type.tz)).cast(pa.int64())
    cols = [c.to_pylist() for c in cols]
    return sorted((p, o, t, k, v, tuple((x["key"], x["value"]) for x in h)) for p, o, t, k, v, h in zip(*cols))


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_cli_export_writes_what_a_consumer_reads(stages, tmp_path, isolation, capsys):
    import pyarrow.parquet as pq
    s = stages["retained"]
    out = tmp_path / "out.parquet"
    code = main(["tiered", "export", str(s.remote), "--metadata", metadata_of(s)[0], "--local-dir", str(s.data),
                 "--topic", TOPIC, "--isolation-level", isolation, "--to", "parquet", str(out)])
    assert code == 0, capsys.readouterr()
    table = pq.read_table(out)
    assert table_rows(table) == s.consumed[isolation]
    # the lineage's epoch is the one the leader stamped on the batch
    assert table["leader_epoch"].to_pylist() == table["partition_leader_epoch"].to_pylist()


def test_cli_plan_names_the_damage_and_exits_1(stages, tmp_path, capsys):
    s = stages["restarted"]
    root = damaged_copy(s, tmp_path)
    victim = uploads(root, 0)[1]
    start, end = _span(victim)
    victim.unlink()
    code = main(["tiered", "plan", str(root), "--metadata", metadata_of(s)[0], "--json"])
    doc = __import__("json").loads(capsys.readouterr().out)
    assert code == 1
    (p0,) = [d for d in doc if d["partition"] == f"{TOPIC}-0"]
    assert {"kind": "missing_object", "start": start, "end": end} in [
        {k: r[k] for k in ("kind", "start", "end")} for r in p0["reports"]]


def test_cli_tiered_refuses_what_it_cannot_open(tmp_path, capsys):
    assert main(["tiered", "plan", str(tmp_path)]) == 2
    assert "no known remote store layout" in capsys.readouterr().err
    assert main(["tiered", "plan", str(tmp_path), "--layout", "nope"]) == 2
    assert main(["tiered", "plan", str(tmp_path), "--storage-option", "nokeyvalue"]) == 2


# -- Spark: kafka-segment over the remote store ------------------------------------------------

def millis(ts) -> int:
    """A Spark TimestampType value (an aware datetime from Arrow, a naive local one from a Row)
    in epoch milliseconds, as the consumer reports timestamps."""
    import datetime
    if ts.tzinfo is None:
        ts = ts.astimezone()
    return (ts - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(milliseconds=1)


def spark_source_rows(stage: Stage, isolation: str, **extra) -> list[tuple]:
    """kafka-segment's tiered reader without Spark: every split the driver plans, read as the tasks would."""
    from spark_udfs import tiered_source
    from spark_udfs.segment_plan import Ranges
    options = {"path": str(stage.remote), "remoteLogMetadata": metadata_of(stage)[0], "localDirs": str(stage.data),
               "isolationLevel": isolation, **extra}
    ranges = Ranges.from_options(options)
    rows = []
    for split in tiered_source.plan(options, ranges, split_bytes=700):
        for rb in tiered_source.read_split(split, "records", False, ranges, 4096, False):
            t = rb.to_pydict()
            rows += [(p, o, millis(ts), k, v, tuple((x["key"], x["value"]) for x in h)) for p, o, ts, k, v, h in
                     zip(t["partition"], t["offset"], t["timestamp"], t["key"], t["value"], t["headers"])]
    return sorted(rows)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_the_spark_reader_splits_and_reads_like_a_consumer(stages, isolation):
    s = stages["retained"]
    assert spark_source_rows(s, isolation) == s.consumed[isolation]


def test_the_spark_reader_keeps_an_offset_range(stages):
    s = stages["retained"]
    rows = spark_source_rows(s, "read_committed", startingOffset="150", endingOffset="200")
    assert rows == [r for r in s.consumed["read_committed"] if 150 <= r[1] < 200]


@pytest.mark.spark
def test_spark_reads_the_tiered_topic_in_s3(stages, s3_server, spark):
    s = stages["retained"]
    url = s3_server.upload(s.remote, "tiered-store", "spark")
    reader = (spark.read.format("kafka-segment").option("remoteLogMetadata", metadata_of(s)[0])
              .option("localDirs", str(s.data)).option("isolationLevel", "read_committed")
              .option("splitBytes", "700"))
    for key, value in s3_server.storage_options().items():
        if isinstance(value, dict):
            for k, v in value.items():
                reader = reader.option(f"fs.{key}.{k}", v)
        else:
            reader = reader.option(f"fs.{key}", value)
    df = reader.load(url)
    assert "leader_epoch" in df.columns
    assert "pykbatch's core on the JVM" not in df._jdf.queryExecution().executedPlan().toString()  # fsspec's store
    got = sorted((r.partition, r.offset, millis(r.timestamp), r.key, r.value, tuple((h.key, h.value) for h in r.headers))
                 for r in df.where(f"topic = '{TOPIC}'").collect())
    got = [(p, o, t, bytes(k) if k is not None else None, bytes(v) if v is not None else None,
            tuple((hk, bytes(hv) if hv is not None else None) for hk, hv in h)) for p, o, t, k, v, h in got]
    assert got == s.consumed["read_committed"]
    epochs = spark.sql("select 1").count()  # the session stays usable
    assert epochs == 1


@pytest.mark.spark
def test_the_backfill_job_is_idempotent_and_dead_letters_damaged_batches(stages, spark, tmp_path):
    """A tiered topic into a Parquet table twice: the second run adds nothing; a batch whose CRC
    no longer holds goes to the dead letters (once), its records never into the table."""
    import pyarrow.parquet as pq

    import pykbatch as kb
    from spark_udfs.backfill import backfill
    s = stages["restarted"]
    root = damaged_copy(s, tmp_path)
    victim = uploads(root, 0)[2]
    data = bytearray(victim.read_bytes())
    bad = list(kb.iter_batches(bytes(data)))[1]
    data[bad.position + bad.size - 1] ^= 0xFF  # inside the records: the CRC fails, the framing holds
    victim.write_bytes(bytes(data))
    table, dead = str(tmp_path / "table"), str(tmp_path / "dead")
    options = {"remoteLogMetadata": metadata_of(s)[0]}
    first = backfill(spark, str(root), table, dead, topics=[TOPIC], **options)
    second = backfill(spark, str(root), table, dead, topics=[TOPIC], **options)
    assert (second.appended, second.dead_batches, second.already_there) == (0, 0, first.appended)
    assert first.dead_batches == 1
    rows = table_rows(pq.read_table(table, columns=["partition", "offset", "timestamp", "key", "value", "headers"]))
    remote_rows, _ = offline(local_store(s), metadata_of(s), None, "read_committed")
    lost = range(bad.base_offset, bad.last_offset + 1)
    assert rows == [r for r in remote_rows if not (r[0] == 0 and r[1] in lost)]
    dead_rows = pq.read_table(dead).to_pylist()
    assert [(d["base_offset"], d["batch_ok"]) for d in dead_rows] == [(bad.base_offset, False)]
    assert "crc" in dead_rows[0]["batch_error"].lower()


# -- kafka-segment's JVM reader over a tiered store -----------------------------------------------

def _spark_rows(df) -> list[dict]:
    from tests.test_spark import collect_plain
    return sorted(collect_plain(df), key=lambda r: (r["topic"], r["partition"], r.get("offset", r.get("base_offset")),
                                       r.get("batch_position", 0)))


def _damage_store(rng, root: Path) -> list[str]:
    """Bytes of drawn remote copies flipped, cut or zeroed at drawn places: what was done."""
    done = []
    for log in rng.sample(sorted(root.glob("*/*.log")), k=2):
        data = bytearray(log.read_bytes())
        if not data:
            continue
        kind, at = rng.choice(["flip", "cut", "zero"]), rng.randrange(len(data))
        if kind == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif kind == "cut":
            del data[at:]
        else:
            n = rng.choice([4, 12, 61])
            data[at:at + n] = bytes(len(data[at:at + n]))
        log.write_bytes(bytes(data))
        done.append(f"{kind} {log.name} at {at}")
    return done


def _drawn_options(rng, stage: Stage) -> dict:
    """A tiered read's options, drawn: isolation, includePath, split and window sizes, batches
    mode, local dirs or not, an offset or timestamp range -- not validated: a validated tiered
    read runs on the Python source (SegmentSource.served; its rows are held to the partition's
    one verdict by tests/test_partition_truth_tiered.py)."""
    return {"remoteLogMetadata": metadata_of(stage)[0], "isolationLevel": rng.choice(ISOLATIONS),
            "validate": "false", "includePath": rng.choice(["true", "false"]),
            "splitBytes": str(rng.choice([700, 64 << 20])), "windowBytes": str(rng.choice([1, 900, 8 << 20])),
            **rng.choice([{}, {}, {"mode": "batches"}]),
            **({"localDirs": str(stage.data)} if rng.random() < 0.6 else {}),
            **rng.choice([{}, {"startingOffset": str(rng.randrange(0, 200))},
                          {"endingOffset": str(rng.randrange(1, 300))},
                          {"startingTimestamp": "0", "endingTimestamp": str(2**62)}])}


@pytest.mark.spark
def test_the_jvm_reader_reads_a_tiered_store_as_the_python_source_does(stages, spark, tmp_path):
    """kafka-segment over a tiered store on a local file system, on the JVM (planned by pykbatch's
    Python on the driver, read by the core as a consumer receives it) and by the Python source: the
    same rows, leader_epoch and verdicts included, over every stage with drawn options (isolation,
    local dirs or not, offset and timestamp ranges, batches mode, includePath, split and
    window sizes, a WHERE clause with pushFilters) and stores damaged at drawn bytes.  Seed
    printed; PYKBATCH_TIERED_SEED repeats a run.  read_committed over the sound store is what the
    consumer read."""
    import random

    from spark_udfs.functions import register
    from spark_udfs.segment_source import NAME, PYTHON_NAME
    from tests.conftest import require_jvm_path
    from tests.test_spark_segment_jvm import JVM_SCAN, _first_difference
    require_jvm_path(spark)
    register(spark)
    seed = int(os.environ.get("PYKBATCH_TIERED_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_TIERED_SEED={seed}")
    rng = random.Random(seed)
    s = stages["retained"]
    sound = (spark.read.format(NAME).option("remoteLogMetadata", metadata_of(s)[0]).option("localDirs", str(s.data))
             .option("isolationLevel", "read_committed").option("validate", "false").load(str(s.remote))
             .where(f"topic = '{TOPIC}'"))
    assert JVM_SCAN in sound._jdf.queryExecution().executedPlan().toString()
    validated = spark.read.format(NAME).option("remoteLogMetadata", metadata_of(s)[0]).load(str(s.remote))
    assert JVM_SCAN not in validated._jdf.queryExecution().executedPlan().toString()  # records mode validates
    got = sorted((r.partition, r.offset, millis(r.timestamp), None if r.key is None else bytes(r.key),
                  None if r.value is None else bytes(r.value),
                  tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers)) for r in sound.collect())
    assert got == s.consumed["read_committed"]
    compared = 0
    for trial in range(6):
        stage = stages[rng.choice(STAGES)]
        root, damage = Path(stage.remote), []
        if rng.random() < 0.5:
            root = tmp_path / f"store{trial}"
            shutil.copytree(stage.remote, root)
            damage = _damage_store(rng, root)
        options = _drawn_options(rng, stage)
        if trial < 2:  # the cases the class turns on, whatever the draw: splits cut inside a piece, read_committed
            options.update(splitBytes="700", isolationLevel="read_committed", **({"mode": "batches"} if trial else {}))
        where = (seed, trial, stage.name, damage, options)
        jvm_df = spark.read.format(NAME).options(**options).load(str(root))
        python_df = spark.read.format(PYTHON_NAME).options(**options).load(str(root))
        assert JVM_SCAN in jvm_df._jdf.queryExecution().executedPlan().toString(), where
        assert jvm_df.schema == python_df.schema and jvm_df.columns[-1] == "leader_epoch", where
        jvm, python = _spark_rows(jvm_df), _spark_rows(python_df)
        assert jvm == python, (where, _first_difference(jvm, python))
        assert jvm_df.count() == len(python), where
        compared += len(jvm)
        if "offset" in jvm_df.columns and rng.random() < 0.5:
            clause = rng.choice(["offset >= 100 AND offset < 180", "partition = 1 AND offset < 60",
                                 "timestamp >= timestamp_millis(0)"])
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
            try:
                pushed = {**options, "pushFilters": "true"}
                jvm_where = _spark_rows(spark.read.format(NAME).options(**pushed).load(str(root)).where(clause))
                python_where = _spark_rows(spark.read.format(PYTHON_NAME).options(**pushed).load(str(root))
                                           .where(clause))
                assert jvm_where == python_where, (where, clause, _first_difference(jvm_where, python_where))
            finally:
                spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert compared > 0


S3A_TIERED_JOB = r"""
import json, sys
from spark_udfs.session import quiet_session
from spark_udfs.functions import register
from spark_udfs.segment_source import NAME, PYTHON_NAME
from tests.test_tiered import _spark_rows
endpoint, jars, runs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spark = quiet_session("local[2]", "s3a-tiered", **{
    "spark.jars": jars, "spark.hadoop.fs.s3a.endpoint": endpoint.split("://", 1)[1],
    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false", "spark.hadoop.fs.s3a.path.style.access": "true",
    "spark.hadoop.fs.s3a.access.key": "testing", "spark.hadoop.fs.s3a.secret.key": "testing",
    "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"})
register(spark)
out = []
for run in runs:
    jvm = spark.read.format(NAME).options(**run["options"]).load(run["url"])
    python = spark.read.format(PYTHON_NAME).options(**run["options"], **run["fs"]).load(run["url"])
    out.append({"jvm_scan": "pykbatch's core on the JVM" in jvm._jdf.queryExecution().executedPlan().toString(),
                "same_schema": jvm.schema == python.schema, "count": jvm.count(),
                "jvm": json.loads(json.dumps(_spark_rows(jvm), default=repr)),
                "python": json.loads(json.dumps(_spark_rows(python), default=repr))})
print("ANSWERS " + json.dumps(out))
"""


@pytest.mark.spark
def test_the_jvm_reader_reads_a_tiered_store_in_s3_as_the_python_source_does(stages, s3_server, tmp_path):
    """A tiered store in an S3-compatible server (moto), read as s3a:// by a session whose only
    settings for it are Hadoop's fs.s3a.* (no AWS environment): on the JVM (the plan reaches the
    store with those settings said as s3fs options; each split fetches the byte ranges the plan
    names) with the Python source's rows (fsspec with the fs.* options), read_committed over the
    sound store what the consumer read, over drawn stages, options and damage (bytes flipped, cut
    or zeroed; an object deleted).  Seed printed;
    PYKBATCH_TIERED_SEED repeats a run."""
    import json
    import random
    import subprocess
    import sys

    from tests.test_spark_segment_jvm import _first_difference
    JVM_S3_TRIALS = int(os.environ.get("PYKBATCH_TIERED_JVM_TRIALS") or (2 if os.environ.get("CI") else 4))
    jars = kafka_tools.s3a_jars_or_skip("the tiered plan reaches s3a:// through s3fs")
    seed = int(os.environ.get("PYKBATCH_TIERED_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_TIERED_SEED={seed}")
    rng = random.Random(seed)
    fs = {f"fs.{k}.{kk}" if isinstance(v, dict) else f"fs.{k}": vv
          for k, v in s3_server.storage_options().items()
          for kk, vv in (v.items() if isinstance(v, dict) else [(None, v)])}
    s = stages["retained"]
    runs = [{"url": s3_server.upload(s.remote, "tiered-jvm", "sound").replace("s3://", "s3a://", 1),
             "options": {"remoteLogMetadata": metadata_of(s)[0], "localDirs": str(s.data),
                         "isolationLevel": "read_committed", "splitBytes": "700", "validate": "false"}, "fs": fs,
             "why": "sound"}]
    for trial in range(JVM_S3_TRIALS):
        stage = stages[rng.choice(STAGES)]
        root, damage = Path(stage.remote), []
        if trial % 2 or rng.random() < 0.5:
            root = tmp_path / f"store{trial}"
            shutil.copytree(stage.remote, root)
            damage = _damage_store(rng, root)
            if trial == JVM_S3_TRIALS - 1:  # an object the metadata names and the store lost: reported, nothing read
                lost = rng.choice(uploads(root, rng.randrange(2)))
                lost.unlink()
                damage.append(f"deleted {lost.name}")
        options = _drawn_options(rng, stage)
        if trial < 2:  # ranged fetches inside a piece, whatever the draw
            options.update(splitBytes="700", isolationLevel="read_committed")
        runs.append({"url": s3_server.upload(root, "tiered-jvm", f"trial{trial}").replace("s3://", "s3a://", 1),
                     "options": options, "fs": fs, "why": [seed, trial, stage.name, damage, options]})
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, AWS_EC2_METADATA_DISABLED="true")
    proc = subprocess.run([sys.executable, "-c", S3A_TIERED_JOB, s3_server.endpoint, jars, json.dumps(runs)],
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    answers = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("ANSWERS "))[len("ANSWERS "):])
    for run, answer in zip(runs, answers):
        assert answer["jvm_scan"] and answer["same_schema"], run["why"]
        assert answer["jvm"] == answer["python"], (run["why"], _first_difference(answer["jvm"], answer["python"]))
        assert answer["count"] == len(answer["jvm"]), run["why"]
    sound = sorted((r["partition"], r["offset"], r["timestamp"], r["key"], r["value"]) for r in answers[0]["jvm"]
                   if r["topic"] == TOPIC)
    consumed = s.consumed["read_committed"]
    assert [(p, o) for p, o, *_ in sound] == [(p, o) for p, o, *_ in consumed]
    assert sum(len(a["jvm"]) for a in answers[1:]) > 0
