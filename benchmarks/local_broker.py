"""The broker a benchmark talks to: the one given (``--bootstrap``), or the test harness's
(Kafka from Maven Central) started in a temporary directory and stopped afterwards."""
from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def broker(bootstrap: str | None):
    if bootstrap is not None:
        yield bootstrap
        return
    sys.path.insert(0, str(ROOT))
    from tests import kafka_tools
    local = kafka_tools.Broker(Path(tempfile.mkdtemp(prefix="pykbatch-bench-")))
    local.start()
    try:
        yield local.bootstrap
    finally:
        local.stop()
