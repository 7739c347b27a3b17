"""Real damage on a real broker's disk, for the live reader's tests.

A topic is written by kafka-python (a real client) in batches of a known size; the session's
broker is stopped cleanly (segments closed, indexes trimmed), bytes of closed segments are
damaged in place, and the broker is started again: it serves those bytes as they are.  What the
tests expect is written from the damage plan (which offsets can no longer be read), not from
pykbatch's own report.
"""
from __future__ import annotations

import random
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import pykbatch as kb

BATCH = 20  # records per batch: the producer flushes after each 20


def value_of(offset: int) -> bytes:
    return b"record %06d " % offset + bytes((offset * 7 + i) % 251 for i in range(60))


def key_of(offset: int) -> bytes:
    return b"k%d" % offset


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config={k: str(v) for k, v in config.items()})])[topic] \
        .result(timeout=60)


def produce_batches(bootstrap: str, topic: str, batches: int, *, compressed=(), codec: str = "lz4",
                    partition: int = 0, first_offset: int = 0) -> None:
    """``batches`` batches of ``BATCH`` records (key ``k<offset>``, ``value_of(offset)``); the
    batches whose index is in ``compressed`` use ``codec``."""
    from kafka import KafkaProducer
    producers = {}
    for i in range(batches):
        codec_of = codec if i in compressed else None
        if codec_of not in producers:
            producers[codec_of] = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec_of,
                                                linger_ms=10_000, batch_size=1 << 20, acks="all")
        p = producers[codec_of]
        for j in range(BATCH):
            offset = first_offset + i * BATCH + j
            p.send(topic, key=key_of(offset), value=value_of(offset), partition=partition,
                   headers=[("n", str(offset).encode())] if j == 0 else None)
        p.flush()
    for p in producers.values():
        p.close()


@dataclass
class OnDisk:
    path: Path
    position: int
    size: int
    base_offset: int
    last_offset: int
    compression: str
    is_control: bool = False


def batches_on_disk(partition_dir: Path) -> list[OnDisk]:
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        data = log.read_bytes()
        for b in kb.iter_batches(data, verify_crc=False):
            out.append(OnDisk(log, b.position, b.size, b.base_offset, b.last_offset, b.compression, b.is_control))
    return out


def fix_crc(data: bytearray, start: int) -> None:
    struct.pack_into(">I", data, start + 17, kb.crc32c(bytes(data[start + 21:start + _size(data, start)])))


def _size(data, start: int) -> int:
    return struct.unpack_from(">i", data, start + 8)[0] + 12


def damage(b: OnDisk, how: str, *, record: int = 0, seed: int = 0) -> None:
    """Damages ``b`` in its file: ``flip`` (a byte of the records: CRC mismatch),
    ``codec`` (the frame descriptor of a compressed payload, CRC made to match so only the codec sees it),
    ``length`` (record ``record``'s length varint made larger, CRC made to match), ``garbage``
    (every byte of the batch random), ``zeros`` (every byte zero)."""
    data = bytearray(b.path.read_bytes())
    s = b.position
    if how == "flip":
        data[s + 61 + min(30, (b.size - 61) // 2)] ^= 0x20
    elif how == "codec":  # the frame's descriptor (a flipped literal would decompress, silently wrong)
        data[s + 61 + 4] ^= 0x0F
        fix_crc(data, s)
    elif how == "length":
        batch = next(iter(kb.iter_batches(bytes(data[s:s + b.size]))))
        at = s + [r.position for r in batch][record]
        data[at] += 8  # zig-zag: +4 bytes claimed
        fix_crc(data, s)
    elif how == "garbage":
        data[s:s + b.size] = random.Random(seed).randbytes(b.size)
    elif how == "zeros":  # as a preallocated, never written region reads: the broker's own scan fails on it
        data[s:s + b.size] = bytes(b.size)
    else:
        raise ValueError(how)
    b.path.write_bytes(bytes(data))


def damaged_broker(broker, topic: str, plan, also=()) -> list[tuple[list[OnDisk], dict]]:
    """Stops ``broker`` cleanly, damages batch ``i`` as ``plan(on_disk)[i]`` says (``(how,
    kwargs)``), and starts it again on the same data; for ``topic``'s partition 0, then each of
    ``also`` (more ``(partition directory name, plan)`` damaged in the same stop): the batches as
    they were on disk, and the plan."""
    broker.stop()
    try:
        plans = []
        for name, planned in ((f"{topic}-0", plan), *also):
            on_disk = batches_on_disk(broker.data / name)
            last_segment = max(b.path for b in on_disk)
            planned = planned(on_disk)
            for i, (how, kwargs) in planned.items():
                assert on_disk[i].path != last_segment, "damage goes into closed segments"
                damage(on_disk[i], how, **kwargs)
            plans.append((on_disk, planned))
    finally:
        broker.start()
    wait_until_served(broker.bootstrap, topic)
    return plans


def wait_until_served(bootstrap: str, topic: str, timeout: float = 60) -> None:
    """After a restart: the partition has a leader again."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and not t.error and all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{topic} has no leader {timeout}s after the restart")


# -- the session's damaged topic (the ``live_damaged`` fixture in tests/conftest.py) ---------------
TOPIC = "live-damaged"
BATCHES = 100
COMPRESSED = range(40, 50)
# batch index -> the damage, and the offsets it leaves unreadable (from the plan, not from pykbatch)
PLAN = {
    15: ("flip", {}),                    # CRC mismatch: the whole batch
    44: ("codec", {}),                   # lz4 payload damaged, CRC matching: the codec refuses it
    60: ("length", {"record": 7}),       # record 7's length lies, CRC matching: records 0-6 readable
    80: ("garbage", {"seed": 80}),       # a whole batch of random bytes between two sound ones
}


def plan(on_disk) -> dict:
    """PLAN, a CRC flip in the last batch of a segment (a fetch response never spans segments, so
    nothing sound follows it in the response that holds it), and a batch of zero bytes inside a
    later segment (as a preallocated region never written reads): the broker's own offset search
    fails on it, so a fetch that starts at it gets CORRUPT_MESSAGE and no records."""
    def inside(i):
        return on_disk[i - 1].path == on_disk[i].path == on_disk[i + 1].path
    segment_end = next(i for i in range(20, 40) if on_disk[i].path != on_disk[i + 1].path)
    zeros = next(i for i in range(85, 98) if inside(i))
    return {**PLAN, segment_end: ("flip", {}), zeros: ("zeros", {})}


def index_of(done, how) -> int:
    """The batch the plan added (beyond PLAN) damaged ``how``."""
    (i,) = [i for i, (h, _) in done.items() if h == how and i not in PLAN]
    return i


# a consumer group's topic damaged in the same restart: six partitions of GROUP_BATCHES batches,
# two of them damaged (partition -> batch index -> damage)
GROUP_TOPIC = "live-damaged-group"
GROUP_PARTITIONS = 6
GROUP_BATCHES = 24
GROUP_PLAN = {1: {8: ("flip", {})}, 4: {5: ("length", {"record": 3}), 15: ("garbage", {"seed": 4})}}


@dataclass
class DamagedTopic:
    broker: object
    on_disk: list
    done: dict
    group_on_disk: dict = None
    """GROUP_TOPIC's damaged partitions: partition -> (batches as they were on disk, the damage done)."""

    def group_unreadable(self) -> dict[int, set[int]]:
        """GROUP_TOPIC's offsets the plan made unreadable, by partition."""
        return {p: unreadable(on_disk, done) for p, (on_disk, done) in self.group_on_disk.items()}


def make_damaged_topic(broker) -> DamagedTopic:
    """``TOPIC`` written in ``BATCHES`` batches and ``GROUP_TOPIC`` in ``GROUP_BATCHES`` per
    partition, then damaged on disk as ``plan`` and ``GROUP_PLAN`` say (one restart)."""
    create_topic(broker.bootstrap, TOPIC, **{"internal.segment.bytes": 16384})
    produce_batches(broker.bootstrap, TOPIC, BATCHES, compressed=COMPRESSED)
    create_topic(broker.bootstrap, GROUP_TOPIC, GROUP_PARTITIONS, **{"internal.segment.bytes": 8192})
    for p in range(GROUP_PARTITIONS):
        produce_batches(broker.bootstrap, GROUP_TOPIC, GROUP_BATCHES, partition=p)
    also = [(f"{GROUP_TOPIC}-{p}", lambda on_disk, p=p: GROUP_PLAN[p]) for p in sorted(GROUP_PLAN)]
    (on_disk, done), *group = damaged_broker(broker, TOPIC, plan, also)
    return DamagedTopic(broker, on_disk, done, dict(zip(sorted(GROUP_PLAN), group)))


def unreadable(on_disk, done) -> set[int]:
    """The offsets the plan made unreadable."""
    out = set()
    for i, (how, kwargs) in done.items():
        b = on_disk[i]
        first = b.base_offset + kwargs.get("record", 0)
        out |= set(range(first, b.last_offset + 1))
    return out
