"""Shared fixtures: paths to ../shared (Kafka's vectors, the conformance corpus)."""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import settings

# CI must be repeatable: derandomised examples there; local runs keep exploring new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PYKBATCH_SHARED", ROOT.parent / "shared"))
KAFKA_VECTORS = SHARED / "kafka" / "kafka-vectors.json"
CONFORMANCE = SHARED / "conformance"


@lru_cache(maxsize=None)
def load_json(path: Path):
    """The parsed file, or None when ../shared is not beside the checkout."""
    if not path.exists():
        return None
    with open(path) as f:
        return json.load(f)


def kafka_vectors(predicate=lambda v: True):
    """pytest params over Kafka's own vectors (one skipped param when absent)."""
    data = load_json(KAFKA_VECTORS)
    if data is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{KAFKA_VECTORS} not present"))]
    return [pytest.param(v, id=v["name"]) for v in data if predicate(v)]


def conformance_vectors(predicate=lambda v: True):
    data = load_json(CONFORMANCE / "vectors.json")
    if data is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{CONFORMANCE} not present"))]
    return [pytest.param(v, id=v["id"]) for v in data["vectors"] if predicate(v)]


def vector_bytes(v) -> bytes:
    if "hex" in v:
        return bytes.fromhex(v["hex"])
    return (CONFORMANCE / v["hex_file"]).read_bytes()


def arrow_matches_iteration(data: bytes) -> None:
    """to_arrow (copying and zero-copy) holds exactly the records iteration yields."""
    import pykbatch as kb
    want = [(r.offset, r.timestamp, r.key, r.value, [{"key": k, "value": v} for k, v in r.headers])
            for b in kb.iter_batches(data) for r in b]
    for zero_copy in (False, True):
        t = kb.to_arrow(data, zero_copy=zero_copy)
        t.validate(full=True)
        got = list(zip(*(t.column(c).to_pylist() for c in ("offset", "timestamp", "key", "value", "headers"))))
        assert [tuple(g) for g in got] == want
