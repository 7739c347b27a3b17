"""The tiered reader's parts without a broker: the broker's metadata cache rules (Kafka's own
examples from RemoteLogLeaderEpochState), read_committed as the consumer decides it, and
retries of a flaky object store.  (tests/test_tiered.py checks the whole against a real broker.)"""
from __future__ import annotations

import uuid

import pytest

import pykbatch as kb
from pykbatch.kafka.control import ABORT, COMMIT
from pykbatch.kafka.isolation import Isolation, open_transactions
from pykbatch.log.indexes import AbortedTxn, SnapshotEntry
from pykbatch.tiered.layouts import LocalTieredStorage
from pykbatch.tiered.metadata import SegmentId, SegmentMetadata, SegmentState, SegmentUpdate, TopicIdPartition
from pykbatch.tiered.remote_log import Lineage, RemotePartition, replay

TIP = TopicIdPartition("t", 0, uuid.UUID(int=1))


def copy(n: int, start: int, end: int, epochs: dict) -> list:
    sid = SegmentId(TIP, uuid.UUID(int=100 + n))
    meta = SegmentMetadata(sid, start, end, 1, 0, 0, epochs, 100, None, SegmentState.COPY_SEGMENT_STARTED, True)
    return [meta, SegmentUpdate(sid, 1, 0, None, SegmentState.COPY_SEGMENT_FINISHED)]


def update(n: int, state: SegmentState) -> SegmentUpdate:
    return SegmentUpdate(SegmentId(TIP, uuid.UUID(int=100 + n)), 1, 0, None, state)


def served(part: RemotePartition, lineage=None) -> list:
    spans, _ = part.plan(lineage)
    return [(s.start, s.end, s.copy.id.id.int - 100 if s.copy else None) for s in spans]


def test_a_later_leaders_copy_of_the_same_offsets_replaces_the_earlier():
    """Kafka's case 1: L0 uploaded 0-100, L1 (same epoch, tier lag) uploaded 0-200."""
    part = replay(copy(0, 0, 100, {0: 0}) + copy(1, 0, 200, {0: 0}))[TIP]
    assert served(part) == [(0, 200, 1)]
    (rejected,) = part.plan()[1]
    assert rejected.copy.id.id.int == 100 and "superseded" in rejected.reason


def test_overlapping_copies_serve_each_offset_from_the_newer_one():
    """Kafka's case 2: L0 uploaded 10-90, L1 uploaded 5-100 and 101-200: offset 95 is S1's."""
    part = replay(copy(0, 10, 90, {0: 10}) + copy(1, 5, 100, {0: 5}) + copy(2, 101, 200, {0: 101}))[TIP]
    assert served(part) == [(5, 100, 1), (101, 200, 2)]


def test_epochs_follow_the_lineage_and_a_diverged_leaders_copy_is_left_out():
    events = copy(0, 0, 99, {0: 0}) + copy(1, 100, 149, {1: 100}) + copy(2, 100, 199, {2: 100}) \
        + copy(3, 200, 299, {2: 200})
    part = replay(events)[TIP]
    assert served(part, Lineage([(0, 0), (2, 100)])) == [(0, 99, 0), (100, 199, 2), (200, 299, 3)]
    reasons = {r.copy.id.id.int - 100: r.reason for r in part.plan(Lineage([(0, 0), (2, 100)]))[1]}
    assert reasons == {1: "outside the leader-epoch lineage"}


def test_deletion_unfinished_uploads_and_invalid_transitions():
    events = copy(0, 0, 99, {0: 0}) + copy(1, 100, 199, {0: 100}) + copy(2, 200, 299, {0: 200})[:1]
    events += [update(0, SegmentState.DELETE_SEGMENT_STARTED), update(1, SegmentState.COPY_SEGMENT_STARTED)]
    part = replay(events)[TIP]
    assert served(part) == [(100, 199, 1)]
    reasons = {r.copy.id.id.int - 100: r.reason for r in part.plan()[1]}
    assert reasons == {0: "DELETE_SEGMENT_STARTED", 2: "COPY_SEGMENT_STARTED"}
    assert [why for _, why in part.dropped_events] == ["COPY_SEGMENT_FINISHED -> COPY_SEGMENT_STARTED"]
    part.apply(update(0, SegmentState.DELETE_SEGMENT_FINISHED))
    assert SegmentId(TIP, uuid.UUID(int=100)) in part.deleted


def test_a_hole_in_the_remote_log_is_a_span_without_a_copy():
    part = replay(copy(0, 0, 99, {0: 0}) + copy(1, 150, 199, {0: 150}))[TIP]
    assert served(part) == [(0, 99, 0), (100, 149, None), (150, 199, 1)]


# -- read_committed ----------------------------------------------------------------------------

def txn_batch(offset: int, pid: int, n: int = 2, control=None) -> bytes:
    if control is not None:
        key = (0).to_bytes(2, "big") + control.to_bytes(2, "big")
        return kb.build_batch([{"key": key, "value": b"\x00\x00\x00\x00\x00\x00"}], base_offset=offset,
                              producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)
    return kb.build_batch([{"key": b"k", "value": b"%d" % (offset + i)} for i in range(n)], base_offset=offset,
                          producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True)


def consumed(data: bytes, iso: Isolation) -> list[int]:
    out = []
    for b in kb.iter_batches(data):
        if iso.past_end(b):
            break
        if iso.keeps(b):
            out += [r.offset for r in b if iso.keeps_offset(r.offset)]
    return out


def test_read_committed_drops_aborted_transactions_as_the_consumer_does():
    # producer 1 commits 0-1, producer 2 aborts 2-3 (marker 6), producer 1 again 4-5 (commit 7),
    # producer 2 commits 8-9 (marker 10)
    log = (txn_batch(0, 1) + txn_batch(2, 2) + txn_batch(4, 1) + txn_batch(6, 2, control=ABORT)
           + txn_batch(7, 1, control=COMMIT) + txn_batch(8, 2) + txn_batch(10, 2, control=COMMIT))
    aborted = [AbortedTxn(0, 2, 2, 6, 2)]
    assert consumed(log, Isolation("read_uncommitted")) == [0, 1, 2, 3, 4, 5, 8, 9]
    assert consumed(log, Isolation("read_committed", aborted)) == [0, 1, 4, 5, 8, 9]
    assert consumed(log, Isolation("read_committed", aborted, last_stable_offset=8)) == [0, 1, 4, 5]
    with pytest.raises(ValueError, match="isolation level"):
        Isolation("serializable")


def test_open_transactions_from_a_snapshot_and_the_batches_after_it():
    snapshot = [SnapshotEntry(7, 0, 1, 3, 1, 0, 0, 2), SnapshotEntry(8, 0, 1, 3, 1, 0, 0, -1)]
    after = list(kb.iter_batches(txn_batch(4, 8) + txn_batch(6, 7, control=COMMIT) + txn_batch(7, 9)))
    assert open_transactions(snapshot, after) == {8: 4, 9: 7}


# -- a flaky object store ----------------------------------------------------------------------

class Flaky:
    """An fsspec-like filesystem whose first reads fail as a congested endpoint's do."""
    protocol = "s3"

    def __init__(self, failures: int):
        self.failures, self.calls = failures, 0

    def cat_file(self, path, start=None, end=None):
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionResetError("connection reset by peer")
        return b"0123456789"[start or 0:end]

    def unstrip_protocol(self, path):
        return f"s3://{path}"


def test_remote_reads_are_retried_through_transient_errors(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    fs = Flaky(failures=2)
    assert LocalTieredStorage(fs, "bucket/root").read("bucket/root/x.log", 2, 5) == b"234"
    assert fs.calls == 3


def test_a_trusted_listing_with_local_dirs_plans_the_newest_upload_up_to_the_local_log(tmp_path):
    """Without metadata the newest upload's end is not known: it ends where the broker's local
    log starts (a listing and local dirs together once failed with a TypeError).  The store is
    found from rsm.config.dir too, one folder above LocalTieredStorage's own."""
    import warnings

    from pykbatch import tiered
    from pykbatch.kafka.definitions import kafka_uuid
    from pykbatch.log import segment_file_name
    root = tmp_path / "rsm" / "kafka-tiered-storage"
    folder = root / f"t-0-{kafka_uuid(uuid.UUID(int=1))}"
    folder.mkdir(parents=True)
    for start in (0, 10):
        data = b"".join(kb.build_batch([(b"k", b"v%d" % o)], base_offset=o) for o in range(start, start + 10))
        (folder / f"{start:020d}-{kafka_uuid(uuid.uuid4())}.log").write_bytes(data)
    local = tmp_path / "data" / "t-0"
    local.mkdir(parents=True)
    (local / segment_file_name(15, ".log")).write_bytes(
        b"".join(kb.build_batch([(b"k", b"v%d" % o)], base_offset=o) for o in range(15, 25)))
    store = tiered.open_store(str(tmp_path / "rsm"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tiered.NoMetadataWarning)
        (part,) = tiered.TieredTopicStore(store).partitions([str(tmp_path / "data")])
    assert [(p.start, p.end, p.source) for p in part.pieces] == [(0, 9, "remote"), (10, 14, "remote"), (15, None, "local")]
    assert [r.offset for _, r in part.records()] == list(range(25))


def test_the_sessions_s3a_settings_reach_the_store_as_s3fs_options():
    """What a Spark session reads s3a:// with (Hadoop's fs.s3a.*) is what the tiered plan reaches
    the store with: an endpoint without a scheme takes http when SSL is off, a bucket's own
    settings win over the general ones, anonymous access and path-style addressing carry over."""
    from pykbatch.tiered.layouts import storage_options
    from spark_udfs import s3a_options
    hadoop = {"fs.s3a.endpoint": "127.0.0.1:9000", "fs.s3a.connection.ssl.enabled": "false",
              "fs.s3a.path.style.access": "true", "fs.s3a.access.key": "general", "fs.s3a.secret.key": "s",
              "fs.s3a.endpoint.region": "eu-west-1", "fs.s3a.bucket.logs.access.key": "for-logs",
              "fs.s3a.bucket.other.endpoint": "https://elsewhere", "fs.s3a.threads.max": "64", "fs.defaultFS": "x"}
    got = storage_options(s3a_options.storage_options(hadoop, "s3a://logs/tiered").items())
    assert got == {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
                   "use_ssl": False, "config_kwargs": {"s3": {"addressing_style": "path"}},
                   "key": "for-logs", "secret": "s"}
    other = s3a_options.storage_options(hadoop, "s3a://other/x")
    assert other["client_kwargs.endpoint_url"] == "https://elsewhere" and other["key"] == "general"
    assert s3a_options.storage_options({"fs.s3a.endpoint": "s3.example.com"}, "s3a://b") == \
        {"client_kwargs.endpoint_url": "https://s3.example.com"}
    anon = {"fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"}
    assert s3a_options.storage_options(anon, "s3a://b") == {"anon": "true"}
    assert s3a_options.storage_options({}, "s3a://b") == {}


def test_the_planner_uses_the_reads_fs_options_before_the_sessions():
    from spark_udfs.tiered_plan import read_options
    hadoop = {"fs.s3a.access.key": "from-session"}
    assert read_options({"options": {"path": "s3a://b/t"}, "hadoop": hadoop})["fs.key"] == "from-session"
    mine = read_options({"options": {"path": "s3a://b/t", "fs.key": "mine"}, "hadoop": hadoop})
    assert mine["fs.key"] == "mine" and "fs.secret" not in mine
    assert read_options({"options": {"path": "/local/store"}, "hadoop": hadoop}) == {"path": "/local/store"}
