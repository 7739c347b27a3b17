"""Other Python Kafka clients as builders and readers of real batches."""
from __future__ import annotations

import aiokafka.record.default_records as aiokafka_records
import aiokafka.record.legacy_records as aiokafka_legacy
import aiokafka.record.memory_records as aiokafka_memory
import kafka.record.default_records as kp_records
import kafka.record.legacy_records as kp_legacy
import kafka.record.memory_records as kp_memory

BUILDERS = {"kafka-python": kp_records.DefaultRecordBatchBuilder,
            "aiokafka": aiokafka_records.DefaultRecordBatchBuilder}
LEGACY_BUILDERS = {"kafka-python": kp_legacy.LegacyRecordBatchBuilder,
                   "aiokafka": aiokafka_legacy.LegacyRecordBatchBuilder}
READERS = {"kafka-python": kp_memory.MemoryRecords, "aiokafka": aiokafka_memory.MemoryRecords}


CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build(peer: str, records, *, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False,
          base_offset=0, compression="none") -> bytes:
    """records: (timestamp, key, value, headers) tuples; offsets are 0..n-1 (plus base_offset)."""
    builder = BUILDERS[peer](magic=2, compression_type=CODECS[compression], is_transactional=transactional,
                             producer_id=producer_id,
                             producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=2**31 - 1)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    data = bytearray(builder.build())
    if base_offset:
        data[0:8] = base_offset.to_bytes(8, "big", signed=True)
    return bytes(data)


def build_legacy(peer: str, records, magic: int, compression="none", base_offset=0) -> bytes:
    """A magic 0/1 message set; records: (timestamp, key, value) tuples."""
    builder = LEGACY_BUILDERS[peer](magic, CODECS[compression], 2**31 - 1)
    for i, (ts, key, value) in enumerate(records):
        builder.append(base_offset + i, timestamp=ts, key=key, value=value)
    return bytes(builder.build())


def read(peer: str, data: bytes):
    """[(offset, timestamp, key, value, headers)] as the peer decodes them."""
    out = []
    records = READERS[peer](data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for r in batch:  # the peers give None for a v0 timestamp where Kafka's reader gives -1
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, _b(r.key), _b(r.value), [(k, _b(v)) for k, v in r.headers]))
    return out


def _b(x):
    return None if x is None else bytes(x)
