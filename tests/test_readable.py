"""One notion of "readable" across commands: the text dump, the JSON dump and an export print the
same records of a damaged segment, whatever the damage (``Batch.readable``), and a repair keeps
exactly those that are also sound (no culprit of their own, in a batch whose CRC matches).

The README's sample is the first case; then damage drawn at random (seed printed)."""
from __future__ import annotations

import json
import os
import random
import re

import pyarrow.parquet as pq
import pytest

import pykbatch as kb
from pykbatch.samples import sample_batches
from tests.test_damage_contract import run

SEED = int(os.environ.get("PYKBATCH_READABLE_SEED", "4242"))
RECORD_LINE = re.compile(r"^\| offset: (\d+) ")


def as_log(batches: list[bytes]) -> bytes:
    """Batches given a log's base offsets, each right after the last offset (its header's
    lastOffsetDelta) of the one before -- a topic not compacted has no gaps -- bytes otherwise as
    they are."""
    out, offset = [], 0
    for b in batches:
        b = bytearray(b)
        b[0:8] = offset.to_bytes(8, "big", signed=True)
        out.append(bytes(b))
        offset += int.from_bytes(b[23:27], "big", signed=True) + 1
    return b"".join(out)


def outputs(log, tmp_path) -> dict[str, list]:
    """(batch position, offset) of every record each output carries."""
    status, text, _ = run(["dump", "--files", str(log), "--deep-iteration"])
    got, position = {}, None
    rows = []
    for line in text.splitlines():
        if line.startswith("baseOffset:"):
            position = int(line.split(" position: ")[1].split()[0])
        m = RECORD_LINE.match(line)
        if m:
            rows.append((position, int(m.group(1))))
    got["text"] = rows
    _, out, _ = run(["dump", "--files", str(log), "--format", "jsonl", "--deep-iteration"])
    got["jsonl"] = [(o["batch_position"], o["offset"]) for o in map(json.loads, out.splitlines())
                    if o["type"] == "record"]
    run(["dump", "--files", str(log), "--to", "parquet", str(tmp_path / "x.parquet")])
    t = pq.read_table(tmp_path / "x.parquet")
    got["parquet"] = list(zip(t["batch_position"].to_pylist(), t["offset"].to_pylist()))
    return got


def repair_keeps(log, tmp_path) -> list:
    """(original batch position, offset) of the records a repair keeps, matched by key and value."""
    data = log.read_bytes()
    run(["repair", str(log), "--out", str(tmp_path / "fixed.log")])
    kept = {(r.key, r.value) for b in kb.iter_batches((tmp_path / "fixed.log").read_bytes()) for r in b}
    return [(b.position, r.offset) for b in kb.iter_batches(data, verify_crc=False)
            for r in b.readable() if isinstance(r, kb.Record) and (r.key, r.value) in kept]


def sound(log) -> set:
    """The readable records a repair may keep: no culprit of their own, CRC matching."""
    data = log.read_bytes()
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    bad = {(c.entry_position, c.record_index) for c in result.culprits}
    # a batch's own fault (its CRC, a count its records do not meet): not sound as a whole
    batch_bad = {c.entry_position for c in result.culprits if c.record_index is None or c.rule.startswith("batch.")}
    out = set()
    for b in kb.iter_batches(data, verify_crc=False):
        if not b.is_valid or b.position in batch_bad:
            continue
        i = 0
        for r in b.readable():
            if isinstance(r, kb.Record) and (b.position, i) not in bad:
                out.add((b.position, r.offset))
            i += 1
    return out


def test_the_readme_sample_reads_alike_everywhere(tmp_path):
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(as_log(sample_batches()))
    got = outputs(log, tmp_path)
    assert got["text"] == got["jsonl"] == got["parquet"], {k: len(v) for k, v in got.items()}
    assert len(got["text"]) == 199  # 9 of batch 7, 10 of 15 (its count says 12), all of the rest
    kept = repair_keeps(log, tmp_path)
    # less the CRC batch's 10, batch 15's 10 (its count says 12: its header is not sound) and
    # batch 11's record 5, whose offset delta goes back (a log's rule)
    assert set(kept) == sound(log) and len(kept) == 199 - 10 - 10 - 1


def damage(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    positions = [b.position for b in kb.iter_batches(data, verify_crc=False)]
    for _ in range(rng.randint(1, 4)):
        start = rng.choice(positions)
        at = start + rng.randint(61, 200)  # inside the records (the header is 61 bytes)
        if at < len(out):
            out[at] = rng.randrange(256)
    return bytes(out)


@pytest.mark.parametrize("case", range(12))
def test_random_damage_reads_alike_everywhere(case, tmp_path):
    rng = random.Random(SEED * 1000 + case)
    print(f"seed {SEED} case {case} (PYKBATCH_READABLE_SEED)")
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(damage(as_log(sample_batches(8)), rng))
    got = outputs(log, tmp_path)
    assert got["text"] == got["jsonl"] == got["parquet"], (SEED, case)
    assert set(repair_keeps(log, tmp_path)) <= sound(log) <= set(got["text"])
