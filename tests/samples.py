"""Small batch factories for tests."""
import random
import struct

import pykbatch as kb
from pykbatch.log import segment_file_name


def batch(n=3, base_offset=0, value=b"value", headers=(), **fields) -> bytes:
    recs = [{"key": b"k%d" % i, "value": value, "timestamp": 1000 + i, "headers": list(headers)} for i in range(n)]
    return kb.build_batch(recs, base_offset=base_offset, **fields)


def recrc(data: bytes) -> bytes:
    """The same v2 batch with its CRC recomputed (to reach the checks after the CRC)."""
    crc = kb.crc32c(data[21:])
    return data[:17] + struct.pack(">I", crc) + data[21:]


def patch(data: bytes, pos: int, new: bytes, fix_crc=True) -> bytes:
    out = data[:pos] + new + data[pos + len(new):]
    return recrc(out) if fix_crc else out


def batch_of_records(*records: bytes, count=None, last_offset_delta=None) -> bytes:
    """A v2 batch around hand-made record bytes."""
    n = len(records) if count is None else count
    lod = n - 1 if last_offset_delta is None else last_offset_delta
    body = struct.pack(">hiqqqhii", 0, lod, 1000, 1000, -1, -1, -1, n) + b"".join(records)
    return struct.pack(">qiib", 0, len(body) + 9, -1, 2) + struct.pack(">I", kb.crc32c(body)) + body


def record(offset_delta=0, ts_delta=0, key=b"k", value=b"v", headers=(), attributes=0) -> bytes:
    """Bytes of one v2 record (length varint included)."""
    return _record(offset_delta, ts_delta, key, value, headers, attributes)


def zz(n: int) -> bytes:
    """Zigzag varint of n (64-bit)."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _blob(b):
    return zz(-1) if b is None else zz(len(b)) + b


def _record(offset_delta, ts_delta, key, value, headers, attributes):
    body = bytes([attributes]) + zz(ts_delta) + zz(offset_delta) + _blob(key) + _blob(value) + zz(len(headers))
    for hk, hv in headers:
        body += _blob(hk) + _blob(hv)
    return zz(len(body)) + body


def write_partition(directory, segments=3, batches=12, records=5, index_bytes=600, seed=0):
    """A partition dir of ``segments`` segments written as a broker does: an .index entry (last
    offset, position) and a .timeindex entry (max timestamp so far, its batch's last offset) after
    every ~index_bytes of log.  Timestamps mostly rise, with some batches from the past."""
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    offset, clock = 0, 1_000
    for _ in range(segments):
        base = offset
        log, index, timeindex = bytearray(), bytearray(), bytearray()
        since_index, max_ts, max_ts_offset, indexed_ts = 0, -1, base, -1
        for _ in range(batches):
            clock += rng.randint(1, 50)
            ts = clock - rng.choice([0, 0, 0, 400])  # a producer with a slow clock, now and then
            recs = [{"key": b"k%d" % (offset + i), "value": b"v" * rng.randint(1, 80),
                     "timestamp": ts + i - (30 if i == 2 else 0)}  # a record older than its batch's first
                    for i in range(records)]
            batch = kb.build_batch(recs, base_offset=offset)
            last = offset + records - 1
            if max(r["timestamp"] for r in recs) > max_ts:
                max_ts, max_ts_offset = max(r["timestamp"] for r in recs), last
            if since_index >= index_bytes:
                index += struct.pack(">ii", last - base, len(log))
                if max_ts > indexed_ts:  # TimeIndex.maybeAppend: only a larger timestamp
                    timeindex += struct.pack(">qi", max_ts, max_ts_offset - base)
                    indexed_ts = max_ts
                since_index = 0
            log += batch
            since_index += len(batch)
            offset += records
        (directory / segment_file_name(base, ".log")).write_bytes(log)
        (directory / segment_file_name(base, ".index")).write_bytes(index)
        (directory / segment_file_name(base, ".timeindex")).write_bytes(timeindex)
    return directory
