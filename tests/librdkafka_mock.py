"""Real librdkafka batches: produce with confluent-kafka into librdkafka's built-in mock cluster
(``test.mock.num.brokers``) and read the partition back raw with a minimal Fetch v4 request, so
the bytes are exactly what librdkafka wrote (control markers included)."""
from __future__ import annotations

import logging
import re
import socket
import struct

import confluent_kafka


def _log_addresses():
    found = []

    class Catch(logging.Handler):
        def emit(self, record):
            found.extend(re.findall(r"127\.0\.0\.1:\d+", record.getMessage()))

    log = logging.getLogger(f"pykbatch-mock-{id(found)}")
    log.setLevel(logging.DEBUG)
    log.addHandler(Catch())
    log.propagate = False
    return found, log


def producer(**config):
    """A Producer on a fresh one-broker mock cluster, and the addresses its debug log named."""
    found, log = _log_addresses()
    p = confluent_kafka.Producer({"test.mock.num.brokers": 1, "debug": "mock", "logger": log, **config})
    return p, found


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def fetch_raw(address: str, topic: str, partition: int = 0, offset: int = 0, max_bytes: int = 1 << 24) -> bytes:
    """The records bytes of one partition from `offset`, read_uncommitted (Fetch v4)."""
    host, port = address.split(":")
    body = struct.pack(">iiiib", -1, 100, 1, max_bytes, 0) + struct.pack(">i", 1) + _string(topic) + \
        struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, max_bytes)
    header = struct.pack(">hhi", 1, 4, 7) + _string("pykbatch-tests")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        request = header + body
        s.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(s, 4))[0]
        resp = _read(s, size)
    pos = 4 + 4  # correlation id, throttle time
    (n_topics,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    for _ in range(n_topics):
        (tlen,) = struct.unpack_from(">h", resp, pos)
        pos += 2 + tlen
        (n_parts,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(n_parts):
            part, error = struct.unpack_from(">ih", resp, pos)
            pos += 4 + 2 + 8 + 8
            (n_aborted,) = struct.unpack_from(">i", resp, pos)
            pos += 4 + max(n_aborted, 0) * 16
            (rlen,) = struct.unpack_from(">i", resp, pos)
            pos += 4
            records = resp[pos:pos + max(rlen, 0)]
            pos += max(rlen, 0)
            if part == partition:
                if error:
                    raise RuntimeError(f"fetch error {error}")
                return records
    raise RuntimeError("partition not in the fetch response")


def _read(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("mock broker closed the connection")
        buf += chunk
    return buf


def fetch_all(address, topic, partition=0):
    """Every batch of the partition: fetch again from the next offset until nothing comes back
    (the mock broker may answer one batch at a time)."""
    import pykbatch
    out, offset = [], 0
    while True:
        raw = fetch_raw(address, topic, partition, offset)
        batches = list(pykbatch.iter_batches(raw, verify_crc=False))
        if not batches:
            return b"".join(out)
        complete = batches[-1].position + batches[-1].size
        out.append(raw[:complete])
        offset = batches[-1].next_offset


def fetch_any(addresses, topic, partition=0):
    """Fetch from whichever logged address is the partition's broker."""
    errors = []
    for address in dict.fromkeys(addresses):
        try:
            return fetch_all(address, topic, partition)
        except (OSError, RuntimeError, struct.error) as exc:
            errors.append(f"{address}: {exc}")
    raise RuntimeError("no mock broker answered: " + "; ".join(errors))
