"""A closed pipe silences the report, never the damage: every command whose reader leaves right
after the line that shows the damage (``| head -N``) exits 1.

Two ways.  In-process, deterministically: each command is run once to learn its lines, then again
with a standard output that breaks after N lines for every N from the first line showing damage
to the last -- every point at which a reader can leave.  Out of process, as a user meets it: the
real command under a real pipe that its reader closes after that line, 50 times each (the status
was 0 in 1 of 8 such runs when the verdict waited for the end of the report).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import pykbatch as kb
from pykbatch.commands import DAMAGED, main
from tests.conftest import ROOT

RUNS = 50


class BreakingPipe(io.TextIOBase):
    """A standard output whose reader leaves after ``lines`` complete lines: any write after
    them raises BrokenPipeError, as a pipe does once ``head -N`` has exited."""

    def __init__(self, lines: int):
        self.left = lines
        self._devnull: list[int] = []

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if self.left <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        newlines = s.count("\n")
        if newlines < self.left:
            self.left -= newlines
            return len(s)
        end = -1
        for _ in range(self.left):  # the reader takes up to its last line, then leaves
            end = s.index("\n", end + 1)
        self.left = 0
        if end + 1 < len(s):
            raise BrokenPipeError(32, "Broken pipe")
        return len(s)

    def flush(self) -> None:
        if self.left <= 0:
            raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:  # main points the descriptor at /dev/null after a closed pipe
        fd = os.open(os.devnull, os.O_WRONLY)
        self._devnull.append(fd)
        return fd

    def close_all(self) -> None:
        for fd in self._devnull:
            with contextlib.suppress(OSError):
                os.close(fd)


def lines_of(argv: list[str]) -> tuple[int, list[str]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = main(argv)
    return status, out.getvalue().splitlines()


def statuses_when_the_reader_leaves(argv: list[str], shows_damage) -> dict[int, int]:
    """{N: exit status} with the reader leaving after line N, for every N from the first line
    that ``shows_damage`` to the last.  The full run must itself say damage (1)."""
    status, lines = lines_of(argv)
    assert status == DAMAGED, (argv, lines[:20])
    first = next(i for i, line in enumerate(lines) if shows_damage(line)) + 1
    got = {}
    for n in range(first, len(lines) + 1):
        pipe = BreakingPipe(n)
        try:
            with contextlib.redirect_stdout(pipe), contextlib.redirect_stderr(io.StringIO()):
                got[n] = main(argv)
        finally:
            pipe.close_all()
    return got


def log_with_damage(path: Path, batches: int = 60) -> Path:
    """A log segment (offsets increasing) with a CRC mismatch in batch 1, a record whose fields
    run past its batch in batch 3, and a batch whose offsets go backwards at batch 5."""
    out = []
    for i in range(batches):
        recs = [{"key": b"k%d" % j, "value": b"value-%d-%d" % (i, j), "timestamp": 1000 + j} for j in range(4)]
        b = bytearray(kb.build_batch(recs, base_offset=4 * i if i != 5 else 0))
        if i == 1:
            b[-1] ^= 1
        out.append(bytes(b))
    path.write_bytes(b"".join(out))
    return path


DAMAGE_WORDS = ("culprit", "isvalid: false", "damaged", "backwards", "not readable", '"ok": false',
                "problem", "left out", "dropped", "not fixed")


def shows_damage(line: str) -> bool:
    if line.startswith("{"):
        doc = json.loads(line)
        return doc.get("ok") is False or doc.get("is_valid") is False or "order" in doc or "error" in doc
    return any(word in line for word in DAMAGE_WORDS) and " 0 culprit" not in line


@pytest.fixture()
def damaged(tmp_path) -> Path:
    return log_with_damage(tmp_path / "00000000000000000000.log")


EVERY_LINE = ("dump --to parquet",)  # the damage is told on standard error: every line of the report counts

COMMANDS = {
    "validate": lambda log, tmp: ["validate", str(log), str(log)],
    "validate --json": lambda log, tmp: ["validate", "--json", str(log), str(log)],
    "validate --segment": lambda log, tmp: ["validate", "--segment", str(log.parent)],
    "validate --segment --json": lambda log, tmp: ["validate", "--segment", str(log.parent), "--json"],
    "dump": lambda log, tmp: ["dump", "--files", str(log)],
    "dump --deep-iteration": lambda log, tmp: ["dump", "--files", str(log), "--deep-iteration"],
    "dump --print-data-log": lambda log, tmp: ["dump", "--files", str(log), "--print-data-log"],
    "dump --format jsonl": lambda log, tmp: ["dump", "--files", str(log), "--format", "jsonl", "--deep-iteration"],
    "dump --validate": lambda log, tmp: ["dump", "--files", str(log), "--validate"],
    "dump --to parquet": lambda log, tmp: ["dump", "--files", str(log), "--to", "parquet", str(tmp / "x.parquet")],
    "repair": lambda log, tmp: ["repair", str(log), "--out", str(tmp / "fixed.log")],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_keeps_its_verdict_wherever_the_reader_leaves(name, damaged, tmp_path):
    got = statuses_when_the_reader_leaves(COMMANDS[name](damaged, tmp_path),
                                          (lambda line: True) if name in EVERY_LINE else shows_damage)
    assert got and set(got.values()) == {DAMAGED}, {n: s for n, s in got.items() if s != DAMAGED}


def test_an_index_problem_keeps_its_verdict(tmp_path):
    """An offset index pointing past its log: validate names it, and keeps saying so."""
    from tests.samples import write_partition
    directory = write_partition(tmp_path / "t-0", segments=1, batches=50, records=3)
    index = directory / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[4:8] = (10**6).to_bytes(4, "big")  # the first entry's position: far past the log
    index.write_bytes(bytes(data))
    got = statuses_when_the_reader_leaves(["validate", str(index)], shows_damage)
    assert set(got.values()) == {DAMAGED}


def test_redpanda_keeps_its_verdict(tmp_path):
    from tests.samples import batch
    from tests.test_redpanda import native, sample_segment
    data, _ = sample_segment()
    damaged = bytearray(data)
    damaged[len(native(batch(3, base_offset=0))) + 70] ^= 1  # the second batch's records: Kafka's CRC fails
    path = tmp_path / "0-1-v1.log"
    path.write_bytes(bytes(damaged))
    got = statuses_when_the_reader_leaves(["redpanda", str(path)], lambda line: "MISMATCH" in line)
    assert set(got.values()) == {DAMAGED}


def _through_head(argv: list[str], lines: int) -> int:
    """The real command under a real pipe whose reader takes ``lines`` lines and leaves."""
    proc = subprocess.Popen([sys.executable, "-m", "pykbatch", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    for _ in range(lines):
        proc.stdout.readline()
    proc.stdout.close()
    return proc.wait(timeout=120)


@pytest.mark.parametrize("argv, lines", [
    (["validate", "{log}"], 1),                       # "...: 60 batches, 240 records, 2 culprit(s)"
    (["dump", "--deep-iteration", "--files", "{log}"], 8),  # batch 1's line: isvalid: false
])
def test_under_a_real_pipe_the_status_is_1_in_every_run(argv, lines, damaged):
    argv = [a.format(log=damaged) for a in argv]
    status, out = lines_of(argv)
    assert status == DAMAGED and shows_damage(out[lines - 1]), out[:lines]
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda _: _through_head(argv, lines), range(RUNS)))
    assert statuses.count(DAMAGED) == RUNS, statuses
