"""Apache Kafka's own partition log as the reference for pykbatch's verdicts.

tests/kafka_harness is a small Java driver around ``UnifiedLog.appendAsLeader`` from Maven
Central's kafka-storage / kafka-server-common / kafka-clients jars: the path a partition leader
runs for a produce request (analyzeAndValidateRecords, LogValidator, producer state).  It is
built once per test session with Maven and fed cases on stdin.
"""
from __future__ import annotations

import functools
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HARNESS = Path(__file__).parent / "kafka_harness"
NOW_MS = 1_700_000_000_000


@dataclass
class Case:
    """One fresh partition ``t-0``: topic configs (Kafka's names) and harness settings
    (``harness.now``, ``harness.origin``, ``harness.produce.version``), then appends in order."""
    id: str
    appends: list[bytes]
    settings: dict[str, object] = field(default_factory=dict)


def unavailable() -> str | None:
    """Why the harness cannot run here, or None."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} not found: Kafka's broker log (tests/kafka_harness) needs Java 17+ and Maven"
    return None


@functools.cache
def classpath() -> str:
    """Compiles the harness (Maven fetches Kafka's jars on first use) and returns its classpath."""
    out = HARNESS / "target" / "classpath.txt"
    proc = subprocess.run(
        ["mvn", "-q", "-B", "compile", "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
        cwd=HARNESS, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"building tests/kafka_harness failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return f"{HARNESS / 'target' / 'classes'}:{out.read_text().strip()}"


def run(cases: list[Case]) -> dict[str, list[dict]]:
    """Kafka's answer to every append of every case: ``{case id: [response per append]}``, each
    with ``errorCode`` and, on errors, ``errorName``, ``exceptionClass``, ``exceptionMessage``
    (batch-level errors), ``errorMessage`` and ``recordErrors`` (KIP-467's fields)."""
    lines = []
    for case in cases:
        lines.append(f"CASE {case.id}")
        settings = {"harness.now": NOW_MS, **case.settings}
        lines += [f"SET {k} {v}" for k, v in settings.items()]
        lines += [f"APPEND {data.hex()}" for data in case.appends]
        lines.append("END")
    proc = subprocess.run(["java", "-cp", classpath(), "pykbatch.harness.BrokerHarness"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the Kafka harness failed:\n{proc.stderr[-4000:]}")
    answers: dict[str, list[dict]] = {case.id: [] for case in cases}
    for line in proc.stdout.splitlines():
        obj = json.loads(line)
        if "case" in obj:
            answers[obj["case"]].append(obj)
    return answers
