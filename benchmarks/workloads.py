"""Workloads A/B/C of shared/research/perf-anchors.md: 64 uncompressed v2 batches
concatenated like a fetch response, 16-byte keys, JSON-like values."""
import json
import random

import pykbatch as kb

WORKLOADS = {
    "A": dict(records=1000, value_size=100, headers=0),
    "B": dict(records=100, value_size=1024, headers=2),
    "C": dict(records=10, value_size=10240, headers=0),
}


def json_value(rng: random.Random, size: int) -> bytes:
    doc = {"id": rng.randrange(10**9), "user": f"user-{rng.randrange(10**6)}", "pad": ""}
    base = json.dumps(doc).encode()
    pad = size - len(base)
    doc["pad"] = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(max(pad, 0)))
    return json.dumps(doc).encode()[:size]


def build(name: str, batches: int = 64, seed: int = 1, as_produced: bool = False) -> bytes:
    """The workload as log data; ``as_produced``: each batch as its producer sent it (baseOffset 0),
    the bytes a partition leader validates."""
    spec = WORKLOADS[name]
    rng = random.Random(seed)
    values = [json_value(rng, spec["value_size"]) for _ in range(64)]
    out, offset = [], 0
    for b in range(batches):
        recs = [{"key": b"%016d" % (offset + i), "value": values[(offset + i) % 64], "timestamp": 1_700_000_000_000 + i,
                 "headers": [("trace-id", b"%016x" % i), ("source", b"bench")][:spec["headers"]]}
                for i in range(spec["records"])]
        out.append(kb.build_batch(recs, base_offset=0 if as_produced else offset, producer_id=7, producer_epoch=0, base_sequence=offset))
        offset += spec["records"]
    return b"".join(out)


def record_count(name: str, batches: int = 64) -> int:
    return WORKLOADS[name]["records"] * batches
