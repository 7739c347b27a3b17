"""A log's offsets only increase: offsets that go backwards or repeat (a flipped base-offset byte,
which the v2 CRC does not cover; a segment concatenated with itself) are damage for validate,
dump and repair of a .log -- one rule, log.offsets_not_increasing, from the validator's walk."""
from __future__ import annotations

import os
import random
import struct

import pytest

import pykbatch as kb
from pykbatch.commands import DAMAGED, OK
from tests.test_damage_contract import run

LOG0 = "00000000000000000000.log"
RULE = "log.offsets_not_increasing"
SEED = int(os.environ.get("PYKBATCH_ORDER_SEED", "20261126"))


def sound_log(batches: int = 10, records: int = 5) -> bytes:
    return b"".join(kb.build_batch([{"key": b"k", "value": b"v%d" % j} for j in range(records)],
                                   base_offset=records * i) for i in range(batches))


def with_base_offset(data: bytes, position: int, offset: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">q", out, position, offset)
    return bytes(out)


def cases():
    data = sound_log()
    second = [b.position for b in kb.iter_batches(data)][5]
    flipped = bytearray(data)
    flipped[second] ^= 0x5A  # 25 -> a huge offset: the batch after it goes back
    yield "a flipped base-offset byte", bytes(flipped)
    yield "a segment concatenated with itself", data + data


@pytest.mark.parametrize("which", [0, 1])
def test_validate_dump_and_repair_say_damage(which, tmp_path):
    name, data = list(cases())[which]
    log = tmp_path / LOG0
    log.write_bytes(data)
    status, out, _ = run(["validate", str(log)])
    assert status == DAMAGED and RULE in out, (name, out)
    for argv in (["dump", "--files", str(log)], ["dump", "--files", str(log), "--deep-iteration"],
                 ["dump", "--files", str(log), "--format", "jsonl"],
                 ["dump", "--files", str(log), "--to", "parquet", str(tmp_path / "x.parquet")]):
        status, out, err = run(argv)
        assert status == DAMAGED and RULE in out + err, (name, argv)
    status, out, _ = run(["repair", str(log), "--out", str(tmp_path / "fixed.log")])
    assert status == DAMAGED and "not fixed: " in out and RULE in out, (name, out)
    # the repair cannot say which batch is wrong: it keeps both, and the output still has the fault
    assert (tmp_path / "fixed.log").read_bytes() == data


def test_a_sound_log_stays_ok(tmp_path):
    log = tmp_path / LOG0
    log.write_bytes(sound_log())
    for argv in (["validate", str(log)], ["dump", "--files", str(log), "--deep-iteration"],
                 ["repair", str(log), "--out", str(tmp_path / "fixed.log")]):
        assert run(argv)[0] == OK, argv


def expected_backwards(data: bytes) -> list[int]:
    """Positions of the batches whose base offset is not above the last offset before them,
    read from the headers here (the reference the validator is held to)."""
    out, last = [], None
    for b in kb.iter_batches(data, verify_crc=False):
        if last is not None and b.base_offset <= last:
            out.append(b.position)
        last = b.base_offset + max(b.last_offset - b.base_offset, 0)
    return out


def test_random_offset_damage_is_named_exactly_where_it_is():
    """Base offsets rewritten, batches repeated, swapped and dropped at random positions (seed
    printed): the validator names exactly the batches that go back, no more, no fewer."""
    rng = random.Random(SEED)
    print(f"seed {SEED} (PYKBATCH_ORDER_SEED)")
    for case in range(300):
        counts = [rng.randint(1, 4) for _ in range(rng.randint(1, 12))]
        pieces, offset = [], rng.randint(0, 2**40)
        for n in counts:  # a sound log first: increasing, with gaps now and then
            pieces.append(kb.build_batch([(b"k", b"v")] * n, base_offset=offset))
            offset += n + rng.choice((0, 0, 0, 1, 7))
        for _ in range(rng.randint(0, 3)):
            kind = rng.choice(("offset", "repeat", "swap", "drop", "byte"))
            i = rng.randrange(len(pieces))
            if kind == "offset":
                pieces[i] = with_base_offset(pieces[i], 0, rng.choice((0, -1, 2**63 - 1, rng.randint(0, 2**41))))
            elif kind == "repeat":
                pieces.insert(rng.randrange(len(pieces) + 1), pieces[i])
            elif kind == "swap":
                j = rng.randrange(len(pieces))
                pieces[i], pieces[j] = pieces[j], pieces[i]
            elif kind == "drop" and len(pieces) > 1:
                pieces.pop(i)
            else:
                b = bytearray(pieces[i])
                b[rng.randrange(8)] ^= 1 << rng.randrange(8)
                pieces[i] = bytes(b)
        data = b"".join(pieces)
        got = [c.position for c in kb.validate(data, kb.ValidationConfig(origin="log")).culprits if c.rule == RULE]
        assert got == expected_backwards(data), (case, SEED)
