"""Index and state files: Kafka's vectors, dumps line for line, sanity checks, lookups, and every
index/snapshot/checkpoint file of the conformance corpus."""
import os
import struct

import pytest

import pykbatch as kb
from pykbatch.commands import main
from pykbatch.log import (
    Checkpoint, CorruptIndexError, OffsetIndex, ProducerSnapshot, TimeIndex, TxnIndex, open_partition, read_segment,
    segment_file_name,
)
from tests.conftest import CONFORMANCE, kafka_vector as vector, shared_params


OFFSET_INDEX = "offset index, baseOffset=1000, entries (1000,0),(1017,4168),(1042,8390)"
TIME_INDEX = "time index, baseOffset=1000, entries (1600000000000,1016),(1600000000500,1041)"


def batch_of_size(base_offset: int, count: int, size: int, timestamp: int = 1000) -> bytes:
    """A v2 batch of exactly `size` bytes (its first value padded)."""
    pad = 0
    while True:
        recs = [{"key": b"k", "value": b"x" * (pad if i == 0 else 1), "timestamp": timestamp + i}
                for i in range(count)]
        data = kb.build_batch(recs, base_offset=base_offset)
        if len(data) == size:
            return data
        pad += max(1, size - len(data)) if len(data) < size else -1


def segment_for_the_index_vector(tmp_path):
    """The log Kafka's offset-index vector describes: batches ending at 1000, 1017 and 1042 at
    positions 0, 4168 and 8390."""
    log = batch_of_size(1000, 1, 4168) + batch_of_size(1001, 17, 8390 - 4168) + batch_of_size(1018, 25, 5000)
    (tmp_path / segment_file_name(1000, ".log")).write_bytes(log)
    (tmp_path / segment_file_name(1000, ".index")).write_bytes(bytes.fromhex(vector(OFFSET_INDEX)["hex"]))
    return tmp_path / segment_file_name(1000, ".index")


def test_offset_index_vector_reads_and_dumps(tmp_path, capsys):
    path = segment_for_the_index_vector(tmp_path)
    index = OffsetIndex.from_file(str(path))
    assert index.entries == [(1000, 0), (1017, 4168), (1042, 8390)]
    assert index.lookup(1020) == (1017, 4168) and index.lookup(5) == (1000, 0)
    index.sanity_check()
    assert main(["dump", "--files", str(path)]) == 0
    assert capsys.readouterr().out == (f"Dumping {path}\noffset: 1000 position: 0\noffset: 1017 position: 4168\n"
                                       f"offset: 1042 position: 8390\n")
    assert main(["dump", "--files", str(path), "--index-sanity-check"]) == 0
    assert capsys.readouterr().out == f"Dumping {path}\n{path} passed sanity check.\n"


def test_offset_index_mismatches_are_reported_like_kafka(tmp_path, capsys):
    path = segment_for_the_index_vector(tmp_path)
    (tmp_path / segment_file_name(1000, ".log")).write_bytes(batch_of_size(1000, 3, 9000))
    assert main(["dump", "--files", str(path), "--verify-index-only"]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"Dumping {path}\n"
    assert captured.err == (f"Mismatches in :{os.path.abspath(path)}\n  Index offset: 1042, log offset: -1\n"
                            f"  Index offset: 1017, log offset: -1\n  Index offset: 1000, log offset: 1002\n")


def test_a_preallocated_index_ends_at_its_zero_entries(tmp_path):
    data = bytes.fromhex(vector(OFFSET_INDEX)["hex"]) + bytes(8 * 100)
    index = OffsetIndex(data, 1000)
    assert len(index.entries) == 3 and index.slots == 103


def test_index_sanity_checks_refuse_what_the_broker_refuses():
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        OffsetIndex(bytes(12), 0).sanity_check()
    with pytest.raises(CorruptIndexError, match="less than the base offset"):
        OffsetIndex(struct.pack(">ii", -5, 0), 1000).sanity_check()
    with pytest.raises(CorruptIndexError, match="less than the first timestamp"):
        TimeIndex(struct.pack(">qiqi", 2000, 1, 1000, 2), 0).sanity_check()


def test_time_index_vector(tmp_path, capsys):
    tindex = TimeIndex(bytes.fromhex(vector(TIME_INDEX)["hex"]), 1000)
    assert tindex.entries == [(1600000000000, 1016), (1600000000500, 1041)]
    assert tindex.lookup(1600000000200) == (1600000000000, 1016)
    tindex.sanity_check()
    # a log whose batches end at 1016 and 1041 with those largest timestamps, and one more
    log = (batch_of_size(1000, 17, 3000, timestamp=1600000000000 - 16)
           + batch_of_size(1017, 25, 3000, timestamp=1600000000500 - 24))
    (tmp_path / segment_file_name(1000, ".log")).write_bytes(log)
    path = tmp_path / segment_file_name(1000, ".timeindex")
    path.write_bytes(bytes.fromhex(vector(TIME_INDEX)["hex"]))
    assert main(["dump", "--files", str(path)]) == 0
    assert capsys.readouterr().out == (f"Dumping {path}\ntimestamp: 1600000000000 offset: 1016\n"
                                       f"timestamp: 1600000000500 offset: 1041\n")


def test_time_index_mismatches(tmp_path, capsys):
    log = batch_of_size(1000, 17, 3000, timestamp=5)
    (tmp_path / segment_file_name(1000, ".log")).write_bytes(log)
    path = tmp_path / segment_file_name(1000, ".timeindex")
    path.write_bytes(bytes.fromhex(vector(TIME_INDEX)["hex"]))
    assert main(["dump", "--files", str(path), "--verify-index-only"]) == 1
    err = capsys.readouterr().err
    assert err == (f"Found timestamp mismatch in :{os.path.abspath(path)}\n"
                   f"  Index timestamp: 1600000000000, log timestamp: 21\n"
                   f"The following indexed offsets are not found in the log.\n"
                   f"Indexed offset: 1041, found log offset: -1\n")


def test_txn_index_vector(tmp_path, capsys):
    v = vector("txn index, one aborted txn pid=12345 first=1001 last=1010 lso=1005")
    path = tmp_path / segment_file_name(1000, ".txnindex")
    path.write_bytes(bytes.fromhex(v["hex"]))
    assert TxnIndex.from_file(str(path)).entries == [(0, 12345, 1001, 1010, 1005)]
    assert main(["dump", "--files", str(path)]) == 0
    assert capsys.readouterr().out == f"Dumping {path}\n{v['expected']['dumpLine']}\n"


def test_producer_snapshot_vector(tmp_path, capsys):
    v = vector("producer snapshot file (2 entries)")
    data = bytes.fromhex(v["hex"])
    snap = ProducerSnapshot(data)
    assert snap.crc == v["expected"]["crc32c_over_bytes_6_to_end"]
    for entry, want in zip(snap.entries, v["expected"]["entries"]):
        assert (entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.timestamp,
                entry.current_txn_first_offset, entry.first_sequence, entry.last_sequence, entry.last_offset,
                entry.offset_delta) == (want["producerId"], want["producerEpoch"], want["coordinatorEpoch"],
                                        want["lastTimestamp"], want["currentTxnFirstOffset"], want["firstSeq"],
                                        want["lastSeq"], want["lastDataOffset"], want["lastOffsetDelta"])
    path = tmp_path / segment_file_name(100, ".snapshot")
    path.write_bytes(data)
    assert main(["dump", "--files", str(path)]) == 0
    assert capsys.readouterr().out == (
        f"Dumping {path}\n"
        "producerId: 777 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1600000000005 firstSequence: 0 lastSequence: 4 lastOffset: 99 offsetDelta: 4 "
        "timestamp: 1600000000005\n"
        "producerId: 12345 producerEpoch: 2 coordinatorEpoch: 9 currentTxnFirstOffset: OptionalLong[40] "
        "lastTimestamp: 1600000000000 firstSequence: 4 lastSequence: 6 lastOffset: 44 offsetDelta: 2 "
        "timestamp: 1600000000000\n")
    bad = bytearray(data)
    bad[-1] ^= 1
    path.write_bytes(bytes(bad))
    assert main(["dump", "--files", str(path)]) == 1
    assert capsys.readouterr().err.startswith("Snapshot is corrupt (CRC is no longer valid). Stored crc: 2817057068.")


def test_segment_file_names_match_kafkas():
    v = vector("segment file name for base offset 1000")["expected"]
    assert [segment_file_name(1000, s) for s in (".log", ".index", ".timeindex", ".txnindex", ".snapshot")] == \
        [v["logFile"], v["indexFile"], v["timeIndexFile"], v["txnIndexFile"], v["snapshotFile"]]


def test_checkpoint_files():
    cp = Checkpoint.parse("0\n2\n0 0\n3 1200\n")
    assert cp == (0, [(0, 0), (3, 1200)])
    assert Checkpoint.parse("0\n1\ntopic-a 3 42\n").entries == [("topic-a", 3, 42)]
    with pytest.raises(CorruptIndexError, match="Expected 3 entries"):
        Checkpoint.parse("0\n3\n0 0\n")


def test_segments_and_partitions_find_offsets_and_times(tmp_path):
    part_dir = tmp_path / "t-0"
    part_dir.mkdir()
    for base in (0, 30):
        data = b"".join(kb.build_batch([{"key": b"k", "value": b"v", "timestamp": 1000 + base + 3 * b + i}
                                        for i in range(3)], base_offset=base + 3 * b) for b in range(10))
        (part_dir / segment_file_name(base, ".log")).write_bytes(data + bytes(9))
    (part_dir / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    part = open_partition(str(part_dir))
    assert part.base_offsets == [0, 30] and part.leader_epochs.entries == [(0, 0)]
    assert part.find_offset(40).base_offset == 39 and part.find_offset(100) is None
    assert part.find_timestamp(1031).base_offset == 30 and part.find_timestamp(1007).base_offset == 6
    assert sum(1 for _ in part.batches()) == 20
    with read_segment(str(part_dir / segment_file_name(30, ".log"))) as seg:
        assert seg.base_offset == 30 and sum(1 for _ in seg.batches()) == 10
        assert seg.invalid_tail_bytes == 9
    with open(part_dir / segment_file_name(30, ".log"), "rb") as f:
        import io
        with read_segment(io.BytesIO(f.read())) as seg:  # a stream without a descriptor is spooled
            assert sum(1 for _ in seg.batches()) == 10


def corpus_files(suffix):
    root = CONFORMANCE / "segments"
    return shared_params(root, lambda: sorted(str(p) for p in root.rglob(f"*{suffix}")))


@pytest.mark.parametrize("path", corpus_files(".snapshot"))
def test_corpus_snapshots_read(path):
    ProducerSnapshot.from_file(path)


@pytest.mark.parametrize("path", corpus_files(".index") + corpus_files(".timeindex"))
def test_corpus_indexes_dump_without_error(path, capsys):
    main(["dump", "--files", path])
    err = capsys.readouterr().err
    log = path.rsplit(".", 1)[0] + ".log"
    if os.path.exists(log):
        assert "Error while dumping" not in err
    else:  # the corpus kept some indexes without their log: said precisely, nothing else breaks
        assert err.startswith(f"Error while dumping {path}: [Errno 2] No such file or directory: '{log}'")


@pytest.mark.parametrize("path", corpus_files("leader-epoch-checkpoint")[:40])
def test_corpus_leader_epoch_checkpoints_parse(path):
    cp = Checkpoint.from_file(path)
    assert cp.version == 0 and all(len(e) == 2 for e in cp.entries)
