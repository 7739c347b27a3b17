"""Sample data made on the spot: realistic v2 producer batches with a few planted faults,
for the demo job, the README and quick experiments (nothing is shipped as binary files)."""
from __future__ import annotations

import json
import random
import struct
from typing import Iterator

from pykbatch import _native

# batch index -> the damage done to it (and what validation must report)
FAULTS = {
    3: "one bit flipped in a value: CRC mismatch (CORRUPT_MESSAGE, retriable)",
    7: "record 2's key length says 63 bytes, so its fields run past the batch (INVALID_RECORD)",
    11: "records 4 and 5 carry each other's offset delta: offsets out of order (INVALID_RECORD)",
    15: "the header says 12 records, the batch holds 10: premature EOF (INVALID_RECORD)",
}


def _order(rng: random.Random, i: int) -> bytes:
    return json.dumps({"order_id": i, "sku": f"SKU-{rng.randrange(1000):04d}", "qty": rng.randrange(1, 9),
                       "price": round(rng.uniform(1, 500), 2)}).encode()


def _with_crc(batch: bytearray) -> bytes:
    """Recompute the CRC so the planted fault is found by the check it targets, not the CRC."""
    struct.pack_into(">I", batch, 17, _native.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _key_length_position(batch: bytes, record_index: int) -> int:
    """Byte position of a sample record's key-length varint (keys start with b'customer-')."""
    rec = list(next(_native.iter_batches(batch, verify_crc=False)))[record_index]
    return batch.index(b"customer-", rec.position) - 1


def sample_batches(n_batches: int = 20, records_per_batch: int = 10, seed: int = 7) -> list[bytes]:
    """Producer batches of JSON orders; the batches named in FAULTS are damaged as described."""
    return list(iter_sample_batches(n_batches, records_per_batch, seed))


def iter_sample_batches(n_batches: int = 20, records_per_batch: int = 10, seed: int = 7) -> Iterator[bytes]:
    """``sample_batches`` one at a time (a large sample is written without being held)."""
    rng = random.Random(seed)
    for b in range(n_batches):
        recs = [{"key": b"customer-%02d" % rng.randrange(100), "value": _order(rng, b * records_per_batch + i),
                 "timestamp": 1_700_000_000_000 + 1000 * b + i,
                 "headers": [("source", b"web"), ("trace-id", b"%08x" % rng.getrandbits(32))]}
                for i in range(records_per_batch)]
        batch = bytearray(_native.build_batch(recs, producer_id=1000 + b, producer_epoch=0, base_sequence=0))
        if b == 3:
            batch[-10] ^= 0x04
        elif b == 7:
            batch[_key_length_position(bytes(batch), 2)] = 0x7E  # zigzag 63
            batch = bytearray(_with_crc(batch))
        elif b == 11:
            p4 = _key_length_position(bytes(batch), 4) - 1  # offset deltas are one byte here
            p5 = _key_length_position(bytes(batch), 5) - 1
            batch[p4], batch[p5] = batch[p5], batch[p4]
            batch = bytearray(_with_crc(batch))
        elif b == 15:
            struct.pack_into(">i", batch, 23, 11)  # lastOffsetDelta, consistent with the count
            struct.pack_into(">i", batch, 57, 12)
            batch = bytearray(_with_crc(batch))
        yield bytes(batch)


def sample_log(**kwargs) -> bytes:
    """The sample batches back to back, as in a .log segment or a fetch response."""
    return b"".join(sample_batches(**kwargs))
