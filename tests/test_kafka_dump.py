"""pykbatch dump beside Apache Kafka's own kafka-dump-log (4.3.1, from Maven Central), line for
line: on segments a real single-node KRaft broker wrote for this test (every codec, idempotent
and transactional producers with committed and aborted transactions, a compacted topic the
cleaner rewrote, consumer offsets, the cluster metadata log), on their index and state files,
and on the conformance corpus's real segments."""
from __future__ import annotations

import collections
import time

import pytest

from pykbatch.commands import main
from tests import kafka_tools
from tests.conftest import CONFORMANCE, shared_file

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"codec-{c}", 1, 1) for c in CODECS] + [
        NewTopic("txn", 1, 1),
        NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact", "segment.ms": "200",
                                            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
                                            "min.compaction.lag.ms": "0"})]
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)


def produce(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaProducer
    for codec in CODECS:  # kafka-python: a few batches per codec, headers, null keys and values
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                          linger_ms=5)
        for i in range(40):
            p.send(f"codec-{codec}", key=None if i % 7 == 3 else b"key-%d" % i,
                   value=None if i % 11 == 0 else ("välue-%d" % i).encode() * (1 + i % 3),
                   headers=[("h", b"x"), ("n", b"")] if i % 5 == 0 else None)
            if i % 10 == 9:
                p.flush()
        p.close()
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t1", "compression.type": "lz4"})
    txn.init_transactions(30)
    for commit in (True, False, True):  # committed, aborted, committed: markers and a .txnindex entry
        txn.begin_transaction()
        for i in range(5):
            txn.produce("txn", key=b"t%d" % i, value=b"in a transaction")
        txn.flush(30)  # sent before the outcome, so an abort leaves records and a marker behind
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for round_ in range(6):  # keys rewritten across segments rolled every 200 ms: the cleaner compacts
        for k in range(4):
            idem.produce("compacted", key=b"k%d" % k, value=b"round %d" % round_)
        idem.produce("compacted", key=b"gone", value=None if round_ == 5 else b"x")
        idem.flush(30)
        time.sleep(0.3)
    # a classic group (g1) and a KIP-848 consumer group (g848) committing offsets
    for group, extra in (("g1", {}), ("g848", {"group.protocol": "consumer"})):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, **extra})
        consumer.subscribe(["codec-gzip"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and consumer.poll(1.0) is None:
            pass
        consumer.commit(asynchronous=False)
        consumer.close()
    share_group(bootstrap)
    metadata_changes(bootstrap)
    time.sleep(3)  # let the cleaner run over the compacted topic's rolled segments


def share_group(bootstrap: str) -> None:
    """A share group (KIP-932) acquiring and accepting records: __share_group_state records."""
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.GROUP, "gshare",
                                                             incremental_configs=[entry])]).values():
        f.result(30)
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "gshare"})
    share.subscribe(["codec-none"])
    got, deadline = 0, time.monotonic() + 30
    while time.monotonic() < deadline and got < 5:
        got += len(share.poll(1.0) or [])
    share.commit_sync()
    share.close()


def metadata_changes(bootstrap: str) -> None:
    """A config change and a topic deleted: CONFIG_RECORD and REMOVE_TOPIC_RECORD in the metadata log."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource(ConfigResource.Type.TOPIC, "codec-none",
                                                             incremental_configs=[entry])]).values():
        f.result(30)
    for f in admin.create_topics([NewTopic("doomed", 1, 1)]).values():
        f.result(30)
    for f in admin.delete_topics(["doomed"]).values():
        f.result(30)


TOPICS = ("codec-*", "txn", "compacted", "__*")  # this module's, and the broker's own


@pytest.fixture(scope="module")
def broker_files(kafka_broker, tmp_path_factory):
    create_topics(kafka_broker.bootstrap)
    produce(kafka_broker.bootstrap)
    data = kafka_broker.snapshot(tmp_path_factory.mktemp("dumped"), TOPICS)
    files = sorted(str(p) for p in data.rglob("*") if p.is_file() and p.suffix in (
        ".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".checkpoint"))
    assert any(f.endswith(".txnindex") for f in files), "the aborted transaction left no .txnindex"
    return files


def ours(files: list[str], flags: tuple, capsys) -> tuple[str, str]:
    main(["dump", "--files", ",".join(files), "--no-progress", *flags])
    captured = capsys.readouterr()
    return captured.out, captured.err


def blocks(stderr: str) -> collections.Counter:
    """stderr as a multiset of report blocks: Kafka keeps them in hash maps, so their order
    between files is the JVM's."""
    out, current = [], []
    for line in stderr.splitlines():
        if not line.startswith(" ") and not line.startswith("Indexed offset") and current:
            out.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        out.append("\n".join(current))
    return collections.Counter(out)


FLAG_SETS = [(), ("--deep-iteration",), ("--print-data-log",), ("--print-data-log", "--skip-record-metadata"),
             ("--verify-index-only",), ("--index-sanity-check",), ("--max-bytes", "3000")]


@pytest.mark.parametrize("flags", FLAG_SETS, ids=lambda f: " ".join(f) or "default")
def test_broker_written_files_dump_like_kafka(broker_files, flags, capsys):
    theirs_out, theirs_err = kafka_tools.dump(broker_files, *flags)
    our_out, our_err = ours(broker_files, flags, capsys)
    assert our_out.splitlines() == theirs_out.splitlines()
    assert blocks(our_err) == blocks(theirs_err)


def test_the_broker_files_cover_what_they_should(broker_files, capsys):
    out, _ = ours([f for f in broker_files if f.endswith(".log")], ("--print-data-log",), capsys)
    for codec in CODECS:
        assert f"compresscodec: {codec}" in out
    assert "endTxnMarker: ABORT" in out and "endTxnMarker: COMMIT" in out
    assert "isTransactional: true" in out and "LeaderChange:" in out
    assert "payload: välue-1" in out  # UTF-8 values decode as Kafka's tool decodes them
    cleaned = [f for f in broker_files if "/compacted-0/00000000000000000000.log" in f]
    import pykbatch as kb
    with kb.read_segment(cleaned[0]) as seg:  # the cleaner rewrote it: rewritten keys are gone
        offsets = [r.offset for b in seg.batches() for r in b]
    assert offsets and offsets[0] > 0 and len(offsets) < 25


def corpus_files() -> list[str]:
    root = shared_file(CONFORMANCE / "segments")
    files = sorted(str(p) for p in root.rglob("*") if p.suffix in (".log", ".snapshot", ".index", ".timeindex"))
    # Kafka's tool dies on an index whose .log is missing: leave those out
    return [f for f in files if f.endswith((".log", ".snapshot")) or f.rsplit(".", 1)[0] + ".log" in files]


@pytest.mark.parametrize("flags", [("--print-data-log",), ("--verify-index-only",)], ids=lambda f: " ".join(f))
def test_corpus_files_dump_like_kafka(flags, capsys):
    files = corpus_files()
    theirs_out, theirs_err = kafka_tools.dump(files, *flags)
    our_out, our_err = ours(files, flags, capsys)
    assert our_out.splitlines() == theirs_out.splitlines()
    assert blocks(our_err) == blocks(theirs_err)


# kafka-dump-log's structured decoders, each on its own topic's files (and the metadata log's
# snapshots for --cluster-metadata-decoder)
DECODERS = {"--offsets-decoder": "__consumer_offsets-", "--transaction-log-decoder": "__transaction_state-",
            "--cluster-metadata-decoder": "__cluster_metadata-", "--remote-log-metadata-decoder": "__remote_log_metadata-",
            "--share-group-state-decoder": "__share_group_state-"}


@pytest.mark.parametrize("flag", DECODERS)
def test_internal_topics_decode_like_kafka(broker_files, flag, capsys):
    files = [f for f in broker_files if DECODERS[flag] in f and f.endswith((".log", ".checkpoint"))]
    assert files, f"the broker wrote no {DECODERS[flag]} files"
    theirs_out, theirs_err = kafka_tools.dump(files, flag)
    our_out, _ = ours(files, (flag,), capsys)
    assert our_out.splitlines() == theirs_out.splitlines()
    assert "Exception" not in theirs_err


def test_the_decoders_cover_what_they_should(broker_files, capsys):
    files = lambda prefix: [f for f in broker_files if prefix in f and f.endswith(".log")]  # noqa: E731
    offsets, _ = ours(files("__consumer_offsets-"), ("--offsets-decoder",), capsys)
    # classic group metadata with its members' decoded subscriptions, offset commits, KIP-848 group
    # metadata (type 3) and member metadata (type 5), share group metadata (type 10)
    for text in ('"group":"g1"', '"type":"1"', '"subscription":{"topics":["codec-gzip"]', '"groupId":"g848"',
                 '"type":"3"', '"type":"5"', '"type":"10"'):
        assert text in offsets, text
    txns, _ = ours(files("__transaction_state-"), ("--transaction-log-decoder",), capsys)
    assert '"transactionalId":"t1"' in txns and '"transactionStatus":' in txns
    meta, _ = ours(files("__cluster_metadata-"), ("--cluster-metadata-decoder",), capsys)
    for text in ("TOPIC_RECORD", "CONFIG_RECORD", "REMOVE_TOPIC_RECORD", "PARTITION_RECORD", "FEATURE_LEVEL_RECORD"):
        assert text in meta, text
    share, _ = ours(files("__share_group_state-"), ("--share-group-state-decoder",), capsys)
    assert '"groupId":"gshare"' in share


def test_where_kafkas_decoder_dies_the_dump_goes_on(broker_files, capsys):
    """A key-less record under --offsets-decoder: Kafka's tool throws ("message had a missing key")
    half-way through the line; pykbatch names it and dumps the rest."""
    files = [f for f in broker_files if "/codec-none-0/" in f and f.endswith(".log")]
    theirs_out, theirs_err = kafka_tools.dump(files, "--offsets-decoder")
    our_out, _ = ours(files, ("--offsets-decoder",), capsys)
    assert "message had a missing key" in theirs_err
    theirs_lines, our_lines = theirs_out.splitlines(), our_out.splitlines()
    assert our_lines[:len(theirs_lines) - 1] == theirs_lines[:-1]
    assert our_lines[len(theirs_lines) - 1].startswith(theirs_lines[-1]) and "no key" in our_lines[len(theirs_lines) - 1]
    assert len(our_lines) > len(theirs_lines)


@pytest.mark.parametrize("flag", ["--offsets-decoder", "--cluster-metadata-decoder"])
def test_corpus_internal_topics_decode_like_kafka(flag, capsys):
    """The corpus's real __consumer_offsets (42 files, older group formats) and KRaft metadata
    logs (ZooKeeper-migration records included)."""
    files = [f for f in corpus_files() if DECODERS[flag] in f and f.endswith(".log")]
    assert files
    theirs_out, _ = kafka_tools.dump(files, flag)
    our_out, _ = ours(files, (flag,), capsys)
    assert our_out.splitlines() == theirs_out.splitlines()


def snaked(value):
    """Kafka's JSON with nested field names as the Arrow struct fields name them."""
    from pykbatch.topics.tables import snake
    if isinstance(value, dict):
        return {snake(k): snaked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snaked(v) for v in value]
    return value


TABLE_TYPES = {"OffsetCommit": "__consumer_offsets-", "ConsumerGroupMetadata": "__consumer_offsets-",
               "ConsumerGroupMemberMetadata": "__consumer_offsets-", "TransactionLog": "__transaction_state-",
               "ShareGroupMetadata": "__consumer_offsets-", "TopicRecord": "__cluster_metadata-",
               "PartitionRecord": "__cluster_metadata-", "ConfigRecord": "__cluster_metadata-"}


@pytest.mark.parametrize("name", TABLE_TYPES)
def test_arrow_columns_equal_the_json_kafkas_tool_prints(broker_files, name, capsys):
    """One column per field, each row equal to the key and payload JSON kafka-dump-log prints for
    that record (camelCase names in snake_case; uuids as Kafka's text)."""
    import json

    from pykbatch.topics import tables
    files = [f for f in broker_files if TABLE_TYPES[name] in f and f.endswith(".log")]
    flag = next(k for k, v in DECODERS.items() if v == TABLE_TYPES[name])
    printed = {}
    for line in kafka_tools.dump(files, flag)[0].splitlines():
        if line.startswith("| offset: ") and (" payload: {" in line or " payload: <DELETE>" in line):
            offset = int(line.split()[2])
            key = json.loads(line.split(" key: ", 1)[1].split(" payload: ", 1)[0]) if " key: " in line else {}
            payload = line.split(" payload: ", 1)[1]
            tombstone = payload == "<DELETE>"
            printed[offset] = {**key.get("data", {}), **({} if tombstone else json.loads(payload)["data"]),
                               "__tombstone": tombstone}
    rows = []
    for f in files:
        table, errors = tables.record_table(open(f, "rb").read(), name)
        assert errors == []
        rows += table.to_pylist()
    assert rows, f"no {name} record in the broker's files"
    for row in rows:
        want = dict(printed[row["log_offset"]])
        assert row["tombstone"] == want.pop("__tombstone")
        for field, value in want.items():
            column = tables.snake(field)
            column = column if column in row and column not in ("log_offset",) else f"value_{column}"
            assert row[column] == snaked(value), (name, row["log_offset"], field)
