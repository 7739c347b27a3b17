"""A tiered-storage remote store for benchmarks, laid out as Kafka's LocalTieredStorage writes it,
with its ``__remote_log_metadata`` segment, and the same ``.log`` bytes as a broker's partition
directories (so the tiered reader and today's kafka-segment read the very same bytes).

    store, metadata, broker = write_store(root, partitions=2, segments=4, mib=16)
"""
from __future__ import annotations

import os
import struct
import sys
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pykbatch as kb  # noqa: E402
from pykbatch.log import segment_file_name  # noqa: E402
from pykbatch.tiered.metadata import encode_value, kafka_uuid  # noqa: E402
from workloads import build  # noqa: E402

TOPIC = "bench"
INDEX_INTERVAL = 4096  # index.interval.bytes, Kafka's default


def _segments(data: bytes, segment_bytes: int):
    """(base offset, last offset, bytes, index bytes) of segments cut at batch boundaries."""
    start, base, since, index, last = 0, None, 0, bytearray(), None
    for b in kb.iter_batches(data, verify_crc=False):
        if base is None:
            base, start, since = b.base_offset, b.position, 0
        if since >= INDEX_INTERVAL:
            index += struct.pack(">ii", b.last_offset - base, b.position - start)
            since = 0
        since += b.size
        last = b.last_offset
        if b.position + b.size - start >= segment_bytes:
            yield base, last, data[start:b.position + b.size], bytes(index)
            base, index = None, bytearray()
    if base is not None:
        yield base, last, data[start:], bytes(index)


def write_store(root: Path, partitions: int = 2, segments: int = 4, mib: float = 16, workload: str = "A"):
    """Returns (store root, metadata segment dir, broker log dir)."""
    store, meta, broker = root / "remote", root / "meta" / "__remote_log_metadata-0", root / "logs"
    meta.mkdir(parents=True)
    topic_id = uuid.UUID(int=0x7E57)
    sample = build(workload, batches=4)
    batches = max(1, int(segments * mib * 2**20 / (len(sample) / 4)))
    data = build(workload, batches=batches)
    values = []
    for p in range(partitions):
        tdir = store / f"{TOPIC}-{p}-{kafka_uuid(topic_id)}"
        bdir = broker / f"{TOPIC}-{p}"
        tdir.mkdir(parents=True)
        bdir.mkdir(parents=True)
        tip = {"Name": TOPIC, "Id": topic_id, "Partition": p}
        for base, last, log, index in _segments(data, int(mib * 2**20)):
            seg = uuid.UUID(int=(p << 64) + base + 1)
            stem = f"{base:020d}-{kafka_uuid(seg)}"
            (tdir / f"{stem}.log").write_bytes(log)
            (tdir / f"{stem}.index").write_bytes(index)
            (tdir / f"{stem}.leader_epoch_checkpoint").write_text("0\n1\n0 0\n")
            (bdir / segment_file_name(base, ".log")).write_bytes(log)
            (bdir / segment_file_name(base, ".index")).write_bytes(index)
            sid = {"TopicIdPartition": tip, "Id": seg}
            values.append(encode_value("RemoteLogSegmentMetadataRecord", {
                "RemoteLogSegmentId": sid, "StartOffset": base, "EndOffset": last, "BrokerId": 1,
                "MaxTimestampMs": 1_700_000_000_000, "EventTimestampMs": 1, "SegmentLeaderEpochs": [
                    {"LeaderEpoch": 0, "Offset": base}], "SegmentSizeInBytes": len(log), "RemoteLogSegmentState": 0,
                "TxnIndexEmpty": True}))
            values.append(encode_value("RemoteLogSegmentMetadataUpdateRecord", {
                "RemoteLogSegmentId": sid, "BrokerId": 1, "EventTimestampMs": 2, "RemoteLogSegmentState": 1}))
    (meta / segment_file_name(0, ".log")).write_bytes(
        kb.build_batch([{"key": None, "value": v, "timestamp": 1} for v in values]))
    return store, meta, broker
