"""Generated produce payloads for the differential tests against Kafka (tests/test_kafka_broker.py,
in-process; tests/test_kafka_wire.py, over the wire): random batches of every magic and codec with
producer fields, control and LogAppendTime batches, and damage to their headers, CRCs and records."""
from __future__ import annotations

import random
import struct

import pykbatch as kb
from tests.kafka_broker import NOW_MS
from tests.samples import recrc


def random_records(rng: random.Random, n: int, magic: int, now: int = NOW_MS) -> list[dict]:
    records = []
    for _ in range(n):
        offset_ms = rng.choice([0, -10, 500, -5000, 7_200_000, -7_200_000, -10**9])
        records.append({
            "key": None if rng.random() < 0.15 else rng.randbytes(rng.randint(0, 6)),
            "value": None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 30)),
            "timestamp": now + offset_ms,
            "headers": [("h", rng.randbytes(2))] if magic == 2 and rng.random() < 0.2 else [],
        })
    return records


def random_batch(rng: random.Random, magic: int, now: int = NOW_MS, **extra) -> bytes:
    codecs = ["none", "none", "none", "gzip", "snappy", "lz4"] + (["zstd"] if magic == 2 else [])
    fields = {"compression": rng.choice(codecs), "magic": magic}
    if magic == 2:
        if rng.random() < 0.25:
            fields.update(producer_id=1000, producer_epoch=0, base_sequence=rng.choice([0, 0, 7, -2]),
                          is_transactional=rng.random() < 0.4)
        if rng.random() < 0.04:
            fields["is_control"] = True
    if magic > 0 and rng.random() < 0.1:
        fields.update(timestamp_type="LogAppendTime", max_timestamp=now)
    fields.update(extra)
    return kb.build_batch(random_records(rng, rng.randint(1, 4), magic, now), **fields)


def damage(rng: random.Random, data: bytes) -> bytes:
    """One header field, CRC or record byte of a v2 batch changed (the CRC fixed after, but for
    the CRC damage itself)."""
    what = rng.choice(["base_offset", "last_offset_delta", "count", "crc", "record_byte", "truncate"])
    if what == "base_offset":
        return struct.pack(">q", rng.choice([1, 5, -1])) + data[8:]
    if what == "last_offset_delta":
        return recrc(data[:23] + struct.pack(">i", rng.choice([-1, 0, 1, 5])) + data[27:])
    if what == "count":
        return recrc(data[:57] + struct.pack(">i", rng.choice([-1, 0, 2, 9])) + data[61:])
    if what == "crc":
        return data[:17] + bytes([data[17] ^ 0x40]) + data[18:]
    if what == "record_byte" and len(data) > 62:
        pos = rng.randrange(61, len(data))
        return recrc(data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:])
    return data[:rng.randrange(len(data) - 12, len(data))]
