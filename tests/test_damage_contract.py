"""Never "ok" on damage: one contract for every command, every file of a partition, every output.

Damaged inputs of every kind a user can hand the tool, built from the files a real broker wrote
(tests/kafka/broker-files) and a broker-style partition with offset and time indexes: a lying
length at the first, a middle and the last entry, a size below the minimum, a CRC mismatch, each
index and state file damaged, wrong file types, empty and large files, a log.dirs folder, standard
input and a closed pipe.  For every command the exit status follows the rule (0 nothing wrong, 1
damage found, 2 could not run), nothing ends in a traceback, and every sound record is still
printed, exported and kept.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import pykbatch as kb
from pykbatch.commands import CANNOT_RUN, DAMAGED, OK, main
from tests.conftest import ROOT
from tests.samples import write_partition

BROKER_FILES = ROOT / "tests" / "kafka" / "broker-files"
LOG0 = "00000000000000000000.log"
TOPIC_ID = base64.urlsafe_b64encode(bytes(range(16))).decode().rstrip("=")


def run(argv: list[str]) -> tuple[int, str, str]:
    """main(argv) in-process: (exit status, stdout, stderr).  An exception escaping is a failure
    of the contract, so it is not caught."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            status = exc.code
    assert "Traceback" not in err.getvalue()
    return status, out.getvalue(), err.getvalue()


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """The installed command, in its own process (standard input, pipes)."""
    return subprocess.run([sys.executable, "-m", "pykbatch", *args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=120)


def partition(tmp_path: Path, name: str = "codec-none-0") -> Path:
    """A copy of a partition the broker wrote, with a partition.metadata beside its files."""
    directory = tmp_path / name
    shutil.copytree(BROKER_FILES / name, directory)
    (directory / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}\n")
    return directory


def batches(data: bytes) -> list:
    return list(kb.iter_batches(data, verify_crc=False))


def records(data: bytes, skip=()) -> list[tuple]:
    """(offset, key, value) of every record, leaving out the batches at the positions ``skip``."""
    return [(r.offset, r.key, r.value) for b in batches(data) if b.position not in skip for r in b]


def lie(data: bytes, position: int, size: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">i", out, position + 8, size)
    return bytes(out)


def exported(path: Path) -> list[tuple]:
    table = pq.read_table(path)
    return list(zip(table["offset"].to_pylist(), table["key"].to_pylist(), table["value"].to_pylist()))


# -- lying lengths and lost framing ------------------------------------------------------------

@pytest.mark.parametrize("which, size", [("first", 10**8), ("middle", 10**8), ("middle", 3), ("first", 0)])
def test_lost_framing_is_damage_and_every_sound_batch_after_it_is_reached(tmp_path, which, size):
    directory = partition(tmp_path)
    log = directory / LOG0
    original = log.read_bytes()
    positions = [b.position for b in batches(original)]
    hit = positions[0] if which == "first" else positions[len(positions) // 2]
    log.write_bytes(lie(original, hit, size))
    sound = records(original, skip={hit})
    assert len(sound) >= 20
    rule = "framing.size_past_end" if size > 100 else "framing.size_too_small"

    status, out, _ = run(["validate", str(log)])
    assert status == DAMAGED and f"at byte {hit + 8}: CORRUPT_MESSAGE(2) {rule}" in out
    assert f"{len(positions) - 1} batches, {len(sound)} records" in out
    status, out, _ = run(["dump", "--files", str(log), "--deep-iteration"])
    assert status == DAMAGED and f"unreadable: position: {hit}" in out
    assert [line.split()[2] for line in out.splitlines() if line.startswith("| offset:")] == [str(o) for o, _, _ in sound]
    status, _, err = run(["dump", "--files", str(log), "--to", "parquet", str(tmp_path / "x.parquet")])
    assert status == DAMAGED and f"unreadable byte(s) at byte {hit}" in err
    assert exported(tmp_path / "x.parquet") == sound
    status, out, _ = run(["repair", str(log), "--out", str(tmp_path / "fixed.log"),
                          "--dead-letter", str(tmp_path / "dead.jsonl")])
    assert status == DAMAGED and records((tmp_path / "fixed.log").read_bytes()) == sound
    letters = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert [(x["kind"], x["position"]) for x in letters] == [("unreadable", hit)]
    status, out, _ = run(["validate", "--segment", str(directory)])
    assert status == DAMAGED and rule in out and out.rstrip().endswith("problems found")


def test_a_lying_size_inside_a_buffer_fails_its_decode_instead_of_ending_it_quietly():
    """to_arrow (and so Spark's kbatch_decode) raises the first problem: a size that runs past the
    end while sound batches follow is one, where a torn tail is not."""
    import pyarrow as pa

    from pykbatch.arrow import decode_array
    good = [kb.build_batch([(b"k", b"v%d" % i)], base_offset=i) for i in range(3)]
    lying = good[0] + lie(good[1], 0, 10**6) + good[2]
    with pytest.raises(kb.CorruptRecordError, match="framing.size_past_end"):
        kb.to_arrow(lying)
    assert kb.to_arrow(good[0] + good[1][:-3]).num_rows == 1  # a torn tail: the records before it
    decoded = decode_array(pa.array([lying, good[0]], pa.binary()))
    assert decoded[0].as_py() is None and len(decoded[1].as_py()) == 1


def test_a_lie_at_the_last_entry_is_damage_a_cut_is_a_torn_tail(tmp_path):
    """A last size raised past the end while the bytes that follow are a whole batch by its
    checksum: a sound batch Kafka's recovery would truncate (framing.tail_size_lies).  The same
    entry really cut short is the active segment's torn write, which Kafka trims on recovery: not
    damage unless --strict (the file alone cannot tell it is the active segment)."""
    directory = partition(tmp_path)
    log = directory / LOG0
    original = log.read_bytes()
    last = batches(original)[-1].position
    log.write_bytes(lie(original, last, 10**8))
    status, out, _ = run(["validate", str(log)])
    assert status == DAMAGED and "batch 3 (offsets " in out and f"at byte {last + 8}" in out
    assert "framing.tail_size_lies" in out
    assert run(["dump", "--files", str(log)])[0] == DAMAGED
    log.write_bytes(original[:-5])
    status, out, _ = run(["validate", str(log)])
    assert status == OK and f"batch 3 at byte {last}: CORRUPT_MESSAGE(2) log.tail_incomplete" in out
    assert run(["validate", "--strict", str(log)])[0] == DAMAGED
    status, out, _ = run(["dump", "--files", str(log)])
    assert status == OK and f"Found {len(original) - 5 - last} invalid bytes at the end" in out


def test_a_crc_mismatch_is_damage_for_every_command(tmp_path):
    directory = partition(tmp_path)
    log = directory / LOG0
    data = bytearray(log.read_bytes())
    second = batches(bytes(data))[1]
    data[second.position + second.size - 1] ^= 0x40
    log.write_bytes(bytes(data))
    assert run(["dump", "--files", str(log)])[0] == DAMAGED
    assert run(["dump", "--files", str(log), "--format", "jsonl"])[0] == DAMAGED
    assert run(["validate", str(log)])[0] == DAMAGED
    status, _, _ = run(["repair", str(log), "--out", str(tmp_path / "fixed.log")])
    fixed = (tmp_path / "fixed.log").read_bytes()
    assert status == DAMAGED and kb.validate(fixed, kb.ValidationConfig(origin="log")).ok
    assert records(fixed) == records(bytes(data), skip={second.position})


# -- every file of a partition -------------------------------------------------------------------

def _flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


STATE_DAMAGE = {
    "snapshot crc": ("*.snapshot", _flip_last, "Snapshot is corrupt"),
    "snapshot cut": ("*.snapshot", lambda d: d[:7], "Snapshot failed schema validation"),
    "txn version": ("*.txnindex", lambda d: b"\x00\x05" + d[2:], "Unexpected aborted transaction version 5"),
    "txn partial": ("*.txnindex", lambda d: d + b"\x00" * 5, "do not make a whole 34-byte entry"),
    "txn backwards": ("*.txnindex", lambda d: d[:10] + (2**40).to_bytes(8, "big") + d[18:],
                      "first <= last offsets expected"),
    "epochs binary": ("leader-epoch-checkpoint", lambda d: b"\xff\xfe\x00garbage", "is not UTF-8 text"),
    "epochs words": ("leader-epoch-checkpoint", lambda d: b"0\n1\nzero 0\n", "expected an epoch and a start offset"),
    "epochs backwards": ("leader-epoch-checkpoint", lambda d: b"0\n2\n5 100\n3 50\n", "epochs must increase"),
    "epochs count": ("leader-epoch-checkpoint", lambda d: b"0\n3\n0 0\n", "Expected 3 entries"),
    "metadata": ("partition.metadata", lambda d: b"version: 0\ntopic_id: nope\n", "is not a 22-character base64 Uuid"),
    "metadata version": ("partition.metadata", lambda d: d.replace(b"version: 0", b"version: 7"),
                         "Unrecognized version"),
    "timeindex": ("*.timeindex", lambda d: d + b"\x01\x02\x03", "time index"),
}


@pytest.mark.parametrize("case", sorted(STATE_DAMAGE))
def test_each_state_file_damaged_is_found_by_the_audit_and_by_validate(tmp_path, case):
    pattern, damage, words = STATE_DAMAGE[case]
    directory = partition(tmp_path, "txn-0")
    target = sorted(directory.glob(pattern))[0]
    assert run(["validate", str(target)])[0] == OK  # sound, it is checked as what it is
    target.write_bytes(damage(target.read_bytes()))
    status, out, _ = run(["validate", "--segment", str(directory)])
    assert status == DAMAGED and target.name in out and words.lower() in out.lower()
    status, out, _ = run(["validate", str(target)])
    assert status == DAMAGED and words.lower() in out.lower()
    status, out, _ = run(["validate", str(target), "--json"])
    doc = json.loads(out)
    assert status == DAMAGED and not doc["ok"] and doc["problems"]


def test_offset_index_damage_is_found(tmp_path):
    directory = write_partition(tmp_path / "p-0", segments=2, batches=10, index_bytes=300)
    index = sorted(directory.glob("*.index"))[0]
    assert run(["validate", str(index)])[0] == OK
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, 7)  # the first entry points into the middle of a batch
    index.write_bytes(bytes(data))
    status, out, _ = run(["validate", str(index)])
    assert status == DAMAGED and index.name in out
    assert run(["validate", "--segment", str(directory)])[0] == DAMAGED


# -- wrong inputs ----------------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"hello\n", b"\x00" * 5, b"x" * 11])
def test_a_file_too_short_for_one_entry_is_no_kafka_file(tmp_path, content):
    """Shorter than an entry's header and not named as a log: nothing in it reads as Kafka's, so
    it is refused (2), never "0 batches, ok"."""
    short = tmp_path / "short.bin"
    short.write_bytes(content)
    status, out, err = run(["validate", str(short)])
    assert status == CANNOT_RUN and "no Kafka record batch or message in it" in err and "ok" not in out
    status, _, _ = run(["repair", str(short), "--out", str(tmp_path / "o.bin")])
    assert status == CANNOT_RUN and not (tmp_path / "o.bin").exists()
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert run(["validate", str(empty)])[0] == OK  # an empty produce request holds nothing wrong

def test_wrong_file_types_and_paths_are_refused_with_a_hint(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\nnot a kafka log\n")
    status, _, err = run(["validate", str(text)])
    assert status == CANNOT_RUN and "no Kafka record batch or message in it" in err
    status, _, err = run(["repair", str(text), "--out", str(tmp_path / "o.log")])
    assert status == CANNOT_RUN and not (tmp_path / "o.log").exists()
    snapshot = sorted((BROKER_FILES / "txn-0").glob("*.snapshot"))[0]
    status, _, err = run(["repair", str(snapshot), "--out", str(tmp_path / "o.log")])
    assert status == CANNOT_RUN and "is a producer snapshot, not a log segment" in err
    status, _, err = run(["validate", str(tmp_path)])
    assert status == CANNOT_RUN and f"--segment {tmp_path}" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    status, _, err = run(["validate", "--segment", str(empty)])
    assert status == CANNOT_RUN and "no log segments" in err
    status, _, err = run(["dump", "--files", str(text)])
    assert status == CANNOT_RUN and f"Ignoring unknown file {text}" in err
    assert run(["validate", "--segment", str(text)])[0] == CANNOT_RUN
    assert run(["validate", str(tmp_path / "missing.log")])[0] == CANNOT_RUN
    assert run(["sample", "--out", str(tmp_path / "s"), "--batches", "-3"])[0] == CANNOT_RUN
    status, _, err = run(["dump", "--files", str(text), "--to", "csv", str(tmp_path / "x")])
    assert status == CANNOT_RUN and "not 'csv'" in err
    status, _, err = run(["redpanda", str(text)])
    assert status == CANNOT_RUN and "not a Redpanda native segment" in err
    status, _, err = run(["tiered", "plan", str(tmp_path / "no-store")])
    assert status == CANNOT_RUN and "no such file or directory" in err
    status, _, err = run(["rules", "nosuch."])
    assert status == CANNOT_RUN and "no rule id starts with 'nosuch.'" in err


def test_a_partition_directory_given_to_dump_stands_for_its_files(tmp_path):
    directory = partition(tmp_path, "txn-0")
    status, out, err = run(["dump", "--files", str(directory)])
    assert status == OK and not err
    dumped = [line.split()[1] for line in out.splitlines() if line.startswith("Dumping ")]
    assert [os.path.basename(p) for p in dumped] == [
        "00000000000000000000.log", "00000000000000000000.timeindex", "00000000000000000000.txnindex",
        "00000000000000000018.snapshot"]


def test_empty_and_large_files(tmp_path):
    empty = tmp_path / LOG0
    empty.write_bytes(b"")
    assert run(["validate", str(empty)])[:2] == (OK, f"{empty}: 0 batches, 0 records, ok\n")
    assert run(["dump", "--files", str(empty)])[0] == OK
    zeros = tmp_path / "00000000000000000100.log"  # a preallocated segment nothing was written to
    with open(zeros, "wb") as f:
        f.truncate(64 << 20)
    status, out, _ = run(["validate", str(zeros)])
    assert status == OK and "batch 0 at byte 0: CORRUPT_MESSAGE(2) log.tail_incomplete" in out
    assert run(["validate", "--strict", str(zeros)])[0] == DAMAGED  # unless it is the active segment
    assert run(["dump", "--files", str(zeros)])[0] == OK
    noise = random.Random(5).randbytes(16 << 20)
    (tmp_path / "noise.bin").write_bytes(noise)
    (tmp_path / "00000000000000000200.log").write_bytes(noise)
    assert run(["validate", str(tmp_path / "noise.bin")])[0] == CANNOT_RUN
    status, out, _ = run(["validate", str(tmp_path / "00000000000000000200.log")])
    assert status == DAMAGED and "0 batches" in out


def test_a_log_dirs_folder_audits_each_partition(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    partition(root, "codec-none-0")
    partition(root, "txn-0")
    status, out, _ = run(["validate", "--segment", str(root)])
    assert status == OK and out.rstrip().endswith(f"{root}: 2 partition(s), ok")
    (root / "txn-0" / "leader-epoch-checkpoint").write_bytes(b"\x00garbage")
    status, out, _ = run(["validate", "--segment", str(root)])
    assert status == DAMAGED and out.rstrip().endswith("problems in 1: txn-0")


def test_standard_input_is_read_where_a_file_is_expected(tmp_path):
    data = (BROKER_FILES / "txn-0" / LOG0).read_bytes()
    done = cli("validate", "-", stdin=data)
    assert done.returncode == OK and b"-: 6 batches, 18 records, ok" in done.stdout
    done = cli("validate", "-", stdin=lie(data, 0, 10**8))
    assert done.returncode == DAMAGED and b"framing.size_past_end" in done.stdout
    done = cli("repair", "-", "--out", str(tmp_path / "fixed.log"), stdin=lie(data, 0, 10**8))
    assert done.returncode == DAMAGED and records((tmp_path / "fixed.log").read_bytes()) == records(data)[5:]
    done = cli("dump", "--files", "-", "--deep-iteration", stdin=data)
    assert done.returncode == OK and done.stdout.count(b"| offset:") == 18


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    big = write_partition(tmp_path / "p-0", segments=1, batches=400, records=20)
    proc = subprocess.Popen([sys.executable, "-m", "pykbatch", "dump", "--files", str(big / LOG0),
                             "--deep-iteration"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout.readline().startswith(b"Dumping ")
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == OK and err == b""


def test_a_missing_optional_package_is_named_with_its_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # as if pykbatch[remote] were not installed
    status, _, err = run(["tiered", "plan", str(tmp_path)])
    assert status == CANNOT_RUN and "pip install 'pykbatch[remote]'" in err


# -- outputs lose nothing ---------------------------------------------------------------------------

def test_json_dump_carries_every_byte(tmp_path):
    rng = random.Random(11)

    def blob():
        return None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 40))
    recs = [{"key": blob(), "value": blob(), "timestamp": i,
             "headers": [(f"h{j}", blob()) for j in range(rng.randint(0, 3))]} for i in range(300)]
    directory = tmp_path / "bytes-3"
    directory.mkdir()
    (directory / LOG0).write_bytes(b"".join(kb.build_batch(recs[i:i + 30], base_offset=i) for i in range(0, 300, 30)))
    status, out, _ = run(["dump", "--files", str(directory / LOG0), "--format", "jsonl", "--print-data-log"])
    assert status == OK
    lines = [json.loads(line) for line in out.splitlines()]
    got = [x for x in lines if x["type"] == "record"]

    def back(text, encoding):
        return None if text is None else base64.b64decode(text) if encoding == "base64" else text.encode()
    assert [(back(x["key"], x["key_encoding"]), back(x["value"], x["value_encoding"]),
             [(h["key"], back(h["value"], h["value_encoding"])) for h in x["headers"]]) for x in got] == \
        [(r["key"], r["value"], r["headers"]) for r in recs]
    assert {(x["topic"], x["partition"]) for x in got} == {("bytes", 3)}
    assert {x["key_encoding"] for x in got} >= {"utf8", "base64", None}


def test_decoders_apply_to_json_output(tmp_path):
    directory = partition(tmp_path, "__consumer_offsets-0")
    status, out, _ = run(["dump", "--files", str(directory / LOG0), "--format", "jsonl", "--offsets-decoder"])
    decoded = [json.loads(line)["decoded"] for line in out.splitlines() if '"type": "record"' in line]
    assert status == OK and decoded and all(d["key"] or d["payload"] for d in decoded)


# -- one repair answer --------------------------------------------------------------------------

def damaged_inputs(count: int, seed: int = 23) -> list[bytes]:
    """Sample batches (a quarter damaged on purpose) with one more random damage each."""
    from pykbatch.samples import sample_batches
    from tests.test_cli_fuzz import damage
    rng = random.Random(seed)
    clean = b"".join(sample_batches(12))
    return [damage(rng, clean, clean) for _ in range(count)]


def _dropped(dropped) -> list[tuple]:
    return [(d.entry, d.record_index, sorted(c.rule for c in d.culprits)) for d in dropped]


def test_cli_python_and_arrow_repairs_agree(tmp_path):
    """The same bytes kept and the same records dropped, with the same culprits, by ``pykbatch
    repair``, ``drop_culprits`` and the Spark function's column function, with their defaults."""
    import pyarrow as pa

    from pykbatch.arrow import repair_array
    inputs = damaged_inputs(40)
    column = repair_array(pa.array(inputs, pa.binary()))
    for i, data in enumerate(inputs):
        (tmp_path / "in.bin").write_bytes(data)
        status, _, err = run(["repair", str(tmp_path / "in.bin"), "--out", str(tmp_path / "out.bin"),
                              "--dead-letter", str(tmp_path / "dead.jsonl")])
        if status == CANNOT_RUN:  # damaged past recognition: nothing reads as an entry
            assert "no Kafka record batch" in err and kb.drop_culprits(data).data == b""
            continue
        python = kb.drop_culprits(data)
        assert status == (OK if kb.validate(data).ok else DAMAGED)
        assert (tmp_path / "out.bin").read_bytes() == python.data == column[i]["data"].as_py(), i
        letters = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
        assert [(x["entry"], x.get("record_index"), sorted(c["rule"] for c in x["culprits"]))
                for x in letters if x["kind"] != "truncated_tail"] == _dropped(python.dropped), i
        arrow_dropped = column[i]["dropped"].as_py()
        assert [(d["entry"], d["record_index"], sorted(d["rules"])) for d in arrow_dropped] == _dropped(python.dropped)


def test_spark_repair_agrees_with_python(spark):
    from spark_udfs import kbatch_repair
    inputs = damaged_inputs(24, seed=29)
    df = spark.createDataFrame([(i, b) for i, b in enumerate(inputs)], "id int, value binary")
    rows = df.select("id", kbatch_repair("value").alias("r")).orderBy("id").collect()
    for row, data in zip(rows, inputs):
        python = kb.drop_culprits(data)
        assert bytes(row.r.data) == python.data, row.id
        assert [(d.entry, d.record_index, sorted(d.rules)) for d in row.r.dropped] == _dropped(python.dropped)
