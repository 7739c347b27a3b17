"""Other Python Kafka clients as builders and readers of real batches."""
from __future__ import annotations

import aiokafka.record.default_records as aiokafka_records
import aiokafka.record.memory_records as aiokafka_memory
import kafka.record.default_records as kp_records
import kafka.record.memory_records as kp_memory

BUILDERS = {"kafka-python": kp_records.DefaultRecordBatchBuilder,
            "aiokafka": aiokafka_records.DefaultRecordBatchBuilder}
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


def read(peer: str, data: bytes):
    """[(offset, timestamp, key, value, headers)] as the peer decodes them."""
    out = []
    records = READERS[peer](data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        for r in batch:
            out.append((r.offset, r.timestamp, _b(r.key), _b(r.value), [(k, _b(v)) for k, v in r.headers]))
    return out


def _b(x):
    return None if x is None else bytes(x)
