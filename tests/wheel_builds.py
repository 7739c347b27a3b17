"""The manylinux wheels the session's tests install, built in the background from its start.

Each wheel takes .ci/build_wheels.py most of a minute of compiling, and the tests that install
them run last (tests/test_spark_shipping.py, tests/test_wheels.py); the suite before them waits
on brokers and JVMs more than on the CPU.  So, when the collected tests ask for wheels, one
low-priority thread builds them, one after another, while the rest of the suite runs; a test
waits only for what is not built yet.  A build that fails is said by the test that needs it."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class WheelBuilds:
    def __init__(self, combos: list[tuple[str, str]]):
        self.out = Path(tempfile.mkdtemp(prefix="pykbatch-wheels-"))
        self.done: dict[tuple[str, str], threading.Event] = {c: threading.Event() for c in combos}
        self.results: dict[tuple[str, str], tuple[Path | None, str]] = {}
        self.closed = False
        self.thread = threading.Thread(target=self._build_all, args=(list(combos),), name="wheel-builds",
                                       daemon=True)
        self.thread.start()

    def _build_all(self, combos: list[tuple[str, str]]) -> None:
        for combo in combos:
            if self.closed:
                return
            self.results[combo] = build(*combo, self.out / "-".join(combo), nice=True)
            self.done[combo].set()

    def get(self, arch: str, python: str, timeout: float = 1800) -> tuple[Path | None, str]:
        """(the wheel, "") or (None, what the build said); built here and now if not asked for
        at the start."""
        if (arch, python) not in self.done:
            self.results[arch, python] = build(arch, python, self.out / f"{arch}-{python}")
            self.done[arch, python] = threading.Event()
            self.done[arch, python].set()
        if not self.done[arch, python].wait(timeout):
            return None, f"the background build of the {arch} wheel for CPython {python} took over {timeout} s"
        return self.results[arch, python]

    def close(self) -> None:
        self.closed = True  # no build starts after this; one still running ends in a folder that is gone
        shutil.rmtree(self.out, ignore_errors=True)


def build(arch: str, python: str, out: Path, nice: bool = False) -> tuple[Path | None, str]:
    out.mkdir(parents=True, exist_ok=True)  # (build_wheels.py writes there only at its end)
    try:
        # nice(1), not preexec_fn: a fork from a thread beside Spark's gateway must exec at once
        done = subprocess.run([*(["nice", "-n", "19"] if nice and shutil.which("nice") else []), sys.executable,
                               str(ROOT / ".ci" / "build_wheels.py"), "--arch", arch, "--python", python,
                               "--out", str(out)], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return None, f"building the {arch} wheel for CPython {python} took over 900 s"
    wheels = sorted(out.glob("pykbatch-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        return None, done.stdout[-2000:] + done.stderr[-4000:]
    return wheels[0], ""
