"""Differential test over the wire: raw ProduceRequests (v3-13) to a real Kafka 4.3.1 broker (the
session's ``kafka_broker``), the partition's ``error_code``, ``record_errors`` and
``error_message`` compared with ``pykbatch.validate(..., strict=False)`` under the same topic
configs and request version.

The records field carries the bytes as generated: valid batches of every magic and codec, damaged
headers, CRCs and records, extra batches, framing faults, and the inputs where Kafka's own code
fails (UNKNOWN_SERVER_ERROR), against topics that are compacted, use LogAppendTime, have a small
``max.message.bytes``, tight timestamp windows, a ``compression.type`` other than ``producer`` or a
small segment size.  Idempotent batches carry a producer id from InitProducerId.  KIP-467's
``record_errors`` and ``error_message`` exist from ProduceRequest v8 on; before that only the code
is compared.  Every case must agree: where the broker's answer is a quirk of its code, pykbatch's
verdict reproduces it (docs/differences.md lists them with their reasons).
"""
from __future__ import annotations

import os
import random
import re
import struct
import time

import pytest

import pykbatch as kb
from tests.kafka_cases import damage, random_batch
from tests.samples import batch_of_records, record, recrc, zz

CASES = int(os.environ.get("PYKBATCH_WIRE_CASES", "420"))
SEED = int(os.environ.get("PYKBATCH_WIRE_SEED", "467"))

# topic -> (its configs, the ValidationConfig fields that say the same)
TOPICS = {
    "wire-default": ({}, {}),
    "wire-compacted": ({"cleanup.policy": "compact"}, {"compacted": True}),
    "wire-logappend": ({"message.timestamp.type": "LogAppendTime"}, {"timestamp_type": "LogAppendTime"}),
    "wire-small": ({"max.message.bytes": "180"}, {"max_message_bytes": 180}),
    "wire-window": ({"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"},
                    {"timestamp_before_max_ms": 60000, "timestamp_after_max_ms": 60000}),
    "wire-uncompressed": ({"compression.type": "uncompressed"}, {"target_compression": "uncompressed"}),
    "wire-uncompressed-small": ({"compression.type": "uncompressed", "max.message.bytes": "300"},
                                {"target_compression": "uncompressed", "max_message_bytes": 300}),
    "wire-gzip": ({"compression.type": "gzip"}, {"target_compression": "gzip"}),
    "wire-lz4": ({"compression.type": "lz4"}, {"target_compression": "lz4"}),
    "wire-zstd": ({"compression.type": "zstd"}, {"target_compression": "zstd"}),
    "wire-segment": ({"internal.segment.bytes": "400"}, {"segment_bytes": 400}),
    "wire-uncompressed-segment": ({"compression.type": "uncompressed", "internal.segment.bytes": "400"},
                                  {"target_compression": "uncompressed", "segment_bytes": 400}),
    "wire-gzip-segment": ({"compression.type": "gzip", "internal.segment.bytes": "400"},
                          {"target_compression": "gzip", "segment_bytes": 400}),
}


@pytest.fixture(scope="module")
def wire(kafka_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.kafka_wire import Connection
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=configs) for name, (configs, _) in TOPICS.items()])
    for future in futures.values():
        future.result(timeout=60)
    with Connection(kafka_broker.bootstrap) as conn:
        deadline = time.monotonic() + 30
        ids = conn.topic_ids(list(TOPICS))
        while len(ids) < len(TOPICS) and time.monotonic() < deadline:
            time.sleep(0.2)
            ids = conn.topic_ids(list(TOPICS))
        yield conn, ids


# -- the cases ------------------------------------------------------------------------------------

def framing(size: int, tail: bytes = b"") -> bytes:
    """An entry whose size field says ``size`` (its bytes after the size field: ``tail``)."""
    return struct.pack(">qi", 0, size) + tail


def quirks(now: int) -> list[tuple[str, bytes]]:
    """Inputs where Kafka's answer comes from where its code stops, not from a validation rule."""
    good = kb.build_batch([{"key": b"k", "value": b"v", "timestamp": now}] * 3)
    magic3 = bytearray(good)
    magic3[16] = 3
    out = [("size 5 first", framing(5, tail=bytes(5))),
           ("size 13 first", framing(13, tail=bytes(13))),
           ("magic 3 first", bytes(magic3)), ("magic -1 first", good[:16] + b"\xff" + good[17:]),
           ("size 5 second", good + framing(5, tail=bytes(5))), ("magic 3 second", good + bytes(magic3)),
           ("truncated first", good[:40]), ("empty", b"")]
    for length in (14, 20, 26, 30, 38, 39, 40, 44, 48, 49):
        out.append((f"batchLength {length}", struct.pack(">qi", 0, length) + good[12:12 + length]))
    six = b"\x80\x80\x80\x80\x80\x01"  # a varint of six bytes
    rec = record(0, 0, b"k", b"v")
    for where, records in {"length varint 6 bytes": [rec, six + rec[1:]],
                           "length varint 6 bytes first": [six + rec[1:], record(1)],
                           "key length varint 6 bytes": [rec, rec[:1] + rec[1:4] + six + rec[5:]]}.items():
        out.append((where, batch_of_records(*records, count=2)))
    for codec in ("gzip", "lz4", "snappy", "zstd", "none"):  # offset deltas out of order
        recs = [{"key": b"k%d" % i, "value": b"v" * 20, "timestamp": now} for i in range(4)]
        data = kb.build_batch(recs, compression=codec)
        out.append((f"{codec} offsets swapped", _swap_offset_deltas(data, codec, now)))
    for codec in ("gzip", "snappy", "lz4", "zstd"):  # re-encoded by compression.type=uncompressed
        recs = [{"key": b"k", "value": b"x" * 60, "timestamp": now} for _ in range(6)]
        out.append((f"{codec} compressible", kb.build_batch(recs, compression=codec)))
    for field in ("key", "value", "header"):  # lengths below -1 (Kafka reads them as null)
        out.append((f"{field} length -2", batch_of_records(_record_with_length(field, -2), record(1))))
    return out


def targeted(now: int) -> list[tuple[str, str, bytes]]:
    """Cases for one topic's setting: (name, topic, records)."""
    big = [{"key": b"k%d" % i, "value": bytes(range(256)) * 2, "timestamp": now} for i in range(2)]
    small = [{"key": b"k", "value": b"x" * 60, "timestamp": now}]
    six = b"\x80\x80\x80\x80\x80\x01"
    rec = record(0, 0, b"k", b"v")
    plain = batch_of_records(rec, six + rec[1:], count=2)
    from pykbatch.codecs import compress
    gz = bytearray(kb.build_batch([{"key": b"k", "value": b"v", "timestamp": now}] * 2, compression="gzip"))
    body = compress(1, plain[61:])
    struct.pack_into(">i", gz, 8, 49 + len(body))
    return [("over the segment size", "wire-segment", kb.build_batch(big)),
            ("over the segment size, gzip", "wire-segment", kb.build_batch(big * 3, compression="gzip")),
            ("under the segment size", "wire-segment", kb.build_batch(big[:1])),
            ("gzip length varint 6 bytes", "wire-default", recrc(bytes(gz[:61]) + body)),
            ("gzip length varint 6 bytes, re-encoded", "wire-uncompressed", recrc(bytes(gz[:61]) + body)),
            ("size 5, no tail", "wire-default", framing(5)),
            ("size 5 after 2 bytes", "wire-default", framing(5, tail=b"ab")),
            ("compressible lz4 to gzip", "wire-gzip", kb.build_batch(big, compression="lz4")),
            ("compressible to zstd", "wire-zstd", kb.build_batch(big * 3)),
            # segment.bytes is checked on the batch the broker writes
            ("gzip inflated past the segment size", "wire-uncompressed-segment",
             kb.build_batch(small * 8, compression="gzip")),
            ("over the segment size, compressed under it", "wire-gzip-segment", kb.build_batch(small * 8)),
            ("over the segment size, kept", "wire-uncompressed-segment", kb.build_batch(small * 8))]


def _record_with_length(field: str, length: int) -> bytes:
    body = bytes([0]) + zz(0) + zz(0)
    if field == "key":
        body += zz(length) + zz(1) + b"v" + zz(0)
    elif field == "value":
        body += zz(1) + b"k" + zz(length) + zz(0)
    else:
        body += zz(1) + b"k" + zz(1) + b"v" + zz(1) + zz(1) + b"h" + zz(length)
    return zz(len(body)) + body


def _swap_offset_deltas(data: bytes, codec: str, now: int) -> bytes:
    """The same batch with records 1 and 2 carrying each other's offset delta (records
    rebuilt by hand, then compressed as the codec does)."""
    recs = [record(d, 0, b"k%d" % i, b"v" * 20) for i, d in enumerate([0, 2, 1, 3])]
    plain = batch_of_records(*recs)
    if codec == "none":
        return plain
    from pykbatch.codecs import compress
    body = compress({"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec], plain[61:])
    header = bytearray(data[:61])
    struct.pack_into(">i", header, 8, 49 + len(body))
    struct.pack_into(">q", header, 27, now)
    struct.pack_into(">q", header, 35, now)
    return recrc(bytes(header) + body)


def generated(rng: random.Random, i: int, now: int) -> bytes:
    magic = rng.choice([2] * 8 + [1, 0])
    extra = {} if magic < 2 else {"producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
                                 "is_transactional": False}
    data = random_batch(rng, magic, now, **extra)
    if magic == 2 and rng.random() < 0.4:
        data = damage(rng, data)
    if rng.random() < 0.06:
        data += random_batch(rng, rng.choice([magic, 2, 1]), now, **(extra if magic == 2 else {}))
    return data


def cases(conn) -> list[tuple[str, str, int, bytes, str | None, dict]]:
    """(id, topic, request version, records, transactional id, ValidationConfig fields)."""
    rng = random.Random(SEED)
    now = int(time.time() * 1000)
    out = []
    for name, data in quirks(now):
        for topic in ("wire-default", "wire-uncompressed", "wire-uncompressed-small", "wire-compacted"):
            out.append((f"{name} @{topic}", topic, rng.choice([8, 9, 11, 12, 13]), data, None))
    for name, topic, data in targeted(now):
        out.append((f"{name} @{topic}", topic, rng.choice([8, 10, 12, 13]), data, None))
    i = 0
    while len(out) < CASES:
        topic = rng.choice(list(TOPICS))
        version = rng.randint(3, 13)
        txn = None
        if rng.random() < 0.2:  # an idempotent or transactional producer of the broker's own
            if rng.random() < 0.3:  # transactional: ProduceRequest v12+ adds the partition itself
                txn, version = f"wire-txn-{i}", rng.choice([12, 13])
            pid, epoch = conn.init_producer_id(txn)
            recs = [{"key": b"k%d" % j, "value": b"v", "timestamp": now} for j in range(rng.randint(1, 3))]
            data = kb.build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                  is_transactional=txn is not None,
                                  compression=rng.choice(["none", "gzip", "snappy", "lz4", "zstd"]))
            if rng.random() < 0.3:
                data = damage(rng, data)
        else:
            data = generated(rng, i, now)
        out.append((f"gen{i} @{topic}", topic, version, data, txn))
        i += 1
    return [(cid, topic, version, data, txn, {**TOPICS[topic][1], "produce_version": version})
            for cid, topic, version, data, txn in out]


def ours(data: bytes, topic: str, fields: dict, now: int) -> kb.ValidationResult:
    config = kb.ValidationConfig(origin="client", strict=False, single_append=True, now_ms=now,
                                 topic_partition=f"{topic}-0", **fields)
    return kb.validate(data, config)


WINDOW = re.compile(r"within \[(-?\d+), (-?\d+)\]")


def same_clock(a, b) -> bool:
    """Equal, but for the broker's clock: a timestamp window in a message is [now - before, now +
    after] on the broker's clock, read some milliseconds from ours."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_clock(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str):
        wa, wb = WINDOW.findall(a), WINDOW.findall(b)
        return (WINDOW.sub("within []", a) == WINDOW.sub("within []", b) and len(wa) == len(wb)
                and all(abs(int(x) - int(y)) < 10_000 for pa, pb in zip(wa, wb) for x, y in zip(pa, pb)))
    return a == b


def disagreement(version: int, mine: kb.ValidationResult, theirs) -> str | None:
    want = (theirs.error_code,)
    got = (mine.error_code,)
    if version >= 8:  # KIP-467's fields
        want += (theirs.record_errors, theirs.error_message)
        got += ([(i, m) for i, m in mine.error_records], mine.error_message)
    if same_clock(want, got):
        return None
    rules = [(c.rule, c.position) for c in mine.culprits[:3]]
    return f"Kafka {want} pykbatch {got} {rules}"


@pytest.fixture(scope="module")
def answers(wire):
    conn, ids = wire
    out = []
    for cid, topic, version, data, txn, fields in cases(conn):
        now = int(time.time() * 1000)
        theirs = conn.produce(topic, ids[topic], data, version, transactional_id=txn)
        out.append((cid, topic, version, data, txn, fields, now, theirs))
    return out


def test_every_case_gets_the_brokers_answer(answers):
    wrong, full = [], []
    for cid, topic, version, data, txn, fields, now, theirs in answers:
        found = disagreement(version, ours(data, topic, fields, now), theirs)
        if found:
            wrong.append(f"{cid} v{version} {data.hex()[:160]}: {found}")
            full.append(f"{cid} v{version} {data.hex()}: {found}")
    report = os.environ.get("PYKBATCH_WIRE_REPORT")  # every disagreement with its bytes, for a long run
    if report:
        with open(report, "w") as f:
            f.write("\n".join(full) + "\n")
    assert not wrong, f"{len(wrong)} of {len(answers)} cases disagree:\n" + "\n".join(wrong[:25])


def test_the_cases_reach_every_kind_of_answer(answers):
    codes = {theirs.error_code for *_, theirs in answers}
    assert {0, 2, 10, 18, 32, 87, -1} <= codes, codes
    assert sum(1 for *_, theirs in answers if theirs.record_errors) >= 20
    assert sum(1 for *_, theirs in answers if theirs.error_message and not theirs.record_errors) >= 4
    assert len(answers) >= 300
    assert sum(1 for _, _, _, _, txn, *_ in answers if txn) >= 5  # transactional producers
