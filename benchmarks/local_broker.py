"""The broker a benchmark talks to: the one given (``--bootstrap``), or the test harness's
(Kafka from Maven Central) started in a temporary directory and stopped afterwards."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LOG_DIRS: dict[str, Path] = {}  # bootstrap -> the local broker's log.dirs


def log_dir(bootstrap: str) -> Path | None:
    """Where the local broker at ``bootstrap`` keeps its partitions' files (None: not one of ours)."""
    return _LOG_DIRS.get(bootstrap)


def keep_off(pid: int, core: int) -> None:
    """Every thread of process ``pid`` (the broker's JVM) onto the cores other than ``core`` (the
    one the measured client runs on), so the two never take turns on one core; threads it starts
    later inherit it."""
    cores = os.sched_getaffinity(0) - {core}
    if not cores or not hasattr(os, "sched_setaffinity"):
        return
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:  # a thread that ended meanwhile
            pass


@contextlib.contextmanager
def broker(bootstrap: str | None, client_core: int | None = None):
    """``client_core``: the core the measured client is pinned to; the local broker keeps off it."""
    if bootstrap is not None:
        yield bootstrap
        return
    sys.path.insert(0, str(ROOT))
    from tests import kafka_tools
    local = kafka_tools.Broker(Path(tempfile.mkdtemp(prefix="pykbatch-bench-")))
    local.start()
    if client_core is not None and os.path.isdir("/proc"):
        keep_off(local.process.pid, client_core)
    _LOG_DIRS[local.bootstrap] = Path(local.data)
    try:
        yield local.bootstrap
    finally:
        local.stop()
