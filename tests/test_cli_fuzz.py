"""Damaged files through every CLI command, in-process: no uncaught exception, only the documented
exit codes (``pykbatch.commands.EXIT_CODES``).

Seeds are real files: the partitions a Kafka 4.3.1 broker wrote (tests/kafka/broker-files: every
codec, transactions with control batches and a .txnindex, a compacted partition, consumer offsets,
the metadata log, snapshots), a generated partition with broker-style .index/.timeindex files, and
the conformance corpus's real segments where ../shared is present.  Each run copies one partition,
damages one of its files (bit flips, overwritten fields, truncation, inserted or removed bytes,
spliced chunks; v2 batch damage usually gets its CRC fixed so the checks behind the CRC are
reached) and runs a few commands with their main flags over it.

CI runs a fixed seed for a few seconds; ``PYKBATCH_CLI_FUZZ_RUNS`` / ``PYKBATCH_CLI_FUZZ_SEED``
make it longer or different, e.g. ``PYKBATCH_CLI_FUZZ_RUNS=20000 pytest tests/test_cli_fuzz.py``.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import struct
import traceback
from pathlib import Path

import pytest

import pykbatch as kb
from pykbatch.commands import EXIT_CODES, main
from pykbatch.log import LOG
from pykbatch.log.checks import kind_of
from tests.conftest import CONFORMANCE, ROOT
from tests.samples import write_partition

RUNS = int(os.environ.get("PYKBATCH_CLI_FUZZ_RUNS", "120"))
SEED = int(os.environ.get("PYKBATCH_CLI_FUZZ_SEED", "20261122"))
BROKER_FILES = ROOT / "tests" / "kafka" / "broker-files"
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"


def partition_files(directory: Path) -> list[Path]:
    """Every file of a partition pykbatch checks: logs, indexes, snapshots, the leader-epoch
    checkpoint, partition.metadata (``pykbatch.log.checks.kind_of``)."""
    return sorted(p for p in directory.iterdir() if kind_of(p.name) is not None)


def partitions(tmp: Path) -> list[Path]:
    """Directories of seed files, one partition each."""
    dirs = sorted(p for p in BROKER_FILES.iterdir() if p.is_dir())
    dirs.append(write_partition(tmp / "generated-0", segments=2, batches=10, records=4, index_bytes=300, seed=3))
    corpus = CONFORMANCE / "segments"
    if corpus.exists():  # the larger real segments, where the shared corpus is beside the checkout
        dirs += sorted({p.parent for p in corpus.rglob("*.log") if p.stat().st_size < 2_000_000})
    return dirs


def recrc(data: bytearray, position: int) -> None:
    """Recomputes the CRC of the v2 batch at ``position`` if one seems to start there."""
    if position + 61 <= len(data) and data[position + 16] == 2:
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        if 61 <= size and position + size <= len(data):
            struct.pack_into(">I", data, position + 17, kb.crc32c(bytes(data[position + 21:position + size])))


def batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0]
        if size < 0:
            break
        starts.append(pos)
        pos += 12 + size
    return starts


def damage(rng: random.Random, data: bytes, donor: bytes) -> bytes:
    """One kind of damage to ``data`` (never empty: a file damaged to nothing is a different test)."""
    if not data:
        return rng.randbytes(rng.randint(1, 64))
    out = bytearray(data)
    starts = batch_starts(data) or [0]
    batch = rng.choice(starts)
    what = rng.choice(["flip", "flip", "field", "field", "payload", "truncate", "insert", "remove", "splice", "zeros"])
    if what == "flip":
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    elif what == "field":  # a 1/2/4/8-byte header field of one batch set to an edge value
        width = rng.choice([1, 2, 4, 8])
        pos = batch + rng.randrange(0, 61)
        if pos + width <= len(out):
            edge = rng.choice([0, 1, -1, 2**(8 * width - 1) - 1, -2**(8 * width - 1), rng.randrange(8)])
            out[pos:pos + width] = edge.to_bytes(width, "big", signed=True)
    elif what == "payload":  # bytes inside one batch's records or compressed stream
        end = batch + 12 + struct.unpack_from(">i", out, batch + 8)[0] if batch + 12 <= len(out) else len(out)
        lo, hi = batch + 61, min(end, len(out))
        if hi > lo:
            for _ in range(rng.randint(1, 8)):
                out[rng.randrange(lo, hi)] = rng.randrange(256)
    elif what == "truncate":
        del out[rng.randrange(len(out)):]
    elif what == "insert":
        pos = rng.randrange(len(out) + 1)
        out[pos:pos] = rng.randbytes(rng.randint(1, 16))
    elif what == "remove":
        pos = rng.randrange(len(out))
        del out[pos:pos + rng.randint(1, 16)]
    elif what == "splice" and donor:
        a = rng.randrange(len(donor))
        chunk = donor[a:a + rng.randint(1, 200)]
        pos = rng.randrange(len(out))
        out[pos:pos + len(chunk)] = chunk
    else:
        pos = rng.randrange(len(out))
        out[pos:pos + rng.randint(1, 64)] = bytes(min(64, len(out) - pos))
    if what in ("flip", "field", "payload") and rng.random() < 0.7:
        recrc(out, batch)
    return bytes(out) or b"\0"


def commands(rng: random.Random, directory: Path, target: Path, out: Path) -> list[list[str]]:
    files = sorted(str(p) for p in partition_files(directory) if kind_of(p.name).startswith("."))
    logs = [f for f in files if f.endswith(".log")]
    log = str(target) if target.suffix == ".log" else (logs[0] if logs else None)
    dump = [["dump", "--files", ",".join(files), "--no-progress", *flags] for flags in (
        [], ["--deep-iteration"], ["--print-data-log"], ["--print-data-log", "--skip-record-metadata"],
        ["--verify-index-only"], ["--index-sanity-check"], ["--max-bytes", str(rng.randint(0, 4000))],
        ["--format", "json", "--deep-iteration"], ["--format", "jsonl", "--print-data-log"],
        ["--deep-iteration", "--validate"], ["--style", "scala", "--deep-iteration"])]
    runs = dump + [["validate", "--segment", str(directory)], ["validate", "--segment", str(directory), "--json"],
                   ["validate", str(target)], ["validate", str(target), "--json"], ["dump", "--files", str(directory)],
                   ["validate", "--segment", str(directory), "--jobs", "1"],
                   ["dump", "--files", str(directory), "--to", "parquet", str(out / "partition")]]
    if log:
        runs += [["dump", "--files", log, "--to", fmt, str(out / f"x.{fmt}")] for fmt in ("parquet", "arrow")]
        runs += [["validate", log], ["validate", log, "--json", "--producers"], ["validate", log, "--no-crc"],
                 ["validate", log, "--origin", "client"],
                 ["repair", log, "--out", str(out / "fixed.log"), "--dead-letter", str(out / "dead.jsonl")]]
    return rng.sample(runs, 4)


def run_cli(argv: list[str]) -> tuple[int, str]:
    """main(argv) with its output captured: (exit status, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's own exits
            status = exc.code
    return status, stderr.getvalue()


def test_damaged_files_never_break_a_command(tmp_path):
    rng = random.Random(SEED)
    seeds = partitions(tmp_path)
    failures = []
    for run in range(RUNS):
        source = rng.choice(seeds)
        work = tmp_path / f"run{run % 4}"
        shutil.rmtree(work, ignore_errors=True)
        directory = work / source.name
        shutil.copytree(source, directory)
        (directory / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}\n")
        (work / "out").mkdir()
        candidates = partition_files(directory)
        target = rng.choice(candidates)
        donor = rng.choice(candidates).read_bytes()
        target.write_bytes(damage(rng, target.read_bytes(), donor))
        for argv in commands(rng, directory, target, work / "out"):
            try:
                status, err = run_cli(argv)
            except Exception:  # noqa: BLE001 - exactly what this test is looking for
                failures.append((run, source.name, target.name, argv, traceback.format_exc()))
                continue
            if status not in EXIT_CODES:
                failures.append((run, source.name, target.name, argv, f"exit status {status!r}"))
            elif "Traceback" in err:
                failures.append((run, source.name, target.name, argv, err[-2000:]))
    assert not failures, "\n\n".join(map(str, failures[:5])) + f"\n\n{len(failures)} failure(s) in {RUNS} runs"


@pytest.mark.parametrize("flags", [[], ["--deep-iteration"], ["--format", "jsonl", "--deep-iteration"]])
def test_an_undamaged_partition_exits_zero(flags, tmp_path):
    directory = write_partition(tmp_path / "p-0", segments=2, batches=6)
    files = sorted(str(p) for p in directory.iterdir())
    assert run_cli(["dump", "--files", ",".join(files), "--no-progress", *flags])[0] == 0
    assert run_cli(["validate", "--segment", str(directory)])[0] == 0


def test_every_job_count_gives_the_same_audit_and_export(tmp_path):
    """Segments validated, and exported, by several threads: the very same output as one thread's,
    on damaged partitions too."""
    import pyarrow.dataset as ds
    rng = random.Random(SEED + 1)
    seeds = partitions(tmp_path)
    for run in range(12):
        source = rng.choice(seeds)
        directory = tmp_path / f"jobs{run}" / source.name
        shutil.copytree(source, directory)
        logs = sorted(p for p in directory.iterdir() if p.suffix == LOG)
        if run % 3 and logs:
            target = rng.choice(logs)
            target.write_bytes(damage(rng, target.read_bytes(), rng.choice(logs).read_bytes()))
        outputs = {}
        for jobs in ("1", "3"):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                status = main(["validate", "--segment", str(directory), "--json", "--jobs", jobs])
                export = main(["dump", "--files", str(directory), "--to", "arrow", str(tmp_path / f"x{run}-{jobs}"),
                               "--jobs", jobs])
            table = ds.dataset(str(tmp_path / f"x{run}-{jobs}"), format="arrow").to_table() if logs else None
            outputs[jobs] = (status, out.getvalue().split("\n", 1)[0], export, table)
        (s1, a1, e1, t1), (s3, a3, e3, t3) = outputs["1"], outputs["3"]
        assert (s1, a1, e1) == (s3, a3, e3), source.name
        assert t1 is None or t1.equals(t3)


def test_the_header_table_walk_answers_as_the_batch_walk_does(tmp_path, monkeypatch):
    """The audit walks a segment of whole v2 batches from its header table (offsets checked at
    once, index entries looked up in it, producer state without batch objects): on damaged
    partitions (edge-value offsets, overlaps, gaps, control batches, broken indexes) its report,
    JSON and text, is the batch-by-batch walk's to the byte."""
    import pykbatch.log.audit as audit
    rng = random.Random(SEED + 2)
    seeds = partitions(tmp_path)
    tables_used = 0
    for run in range(40):
        source = rng.choice(seeds)
        directory = tmp_path / f"walk{run}" / source.name
        shutil.copytree(source, directory)
        candidates = sorted(p for p in directory.iterdir() if p.suffix in (LOG, ".index"))
        if run % 4 and candidates:
            target = rng.choice(candidates)
            target.write_bytes(damage(rng, target.read_bytes(), rng.choice(candidates).read_bytes()))
        reports = []
        for tables in (True, False):
            monkeypatch.setattr(audit, "_WALK_TABLES", tables)
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                status = (main(["validate", "--segment", str(directory), "--json", "--jobs", "2"]),
                          main(["validate", "--segment", str(directory)]))
            reports.append((status, out.getvalue()))
        assert reports[0] == reports[1], (run, source.name)
        tables_used += any(kb._native._v2_header_table((p).read_bytes()) is not None
                           for p in directory.iterdir() if p.suffix == LOG)
    assert tables_used >= 20  # the table walk really ran
