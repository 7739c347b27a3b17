"""kafka-segment's tiered plan for its JVM reader: the Python source's plan (``tiered_source.plan``,
whose rules stay in pykbatch.tiered), each split said as what the core needs to read it on the JVM
-- the local file and the byte to start at, the consumer's view (offsets, isolation) and the
lineage behind ``leader_epoch`` -- as JSON.

The JVM runs it on the driver (TieredPlan.java), as Spark runs a Python data source's planner:
``python -m spark_udfs.tiered_plan`` reads ``{"options": {...}, "splitBytes": n, "ranges": [first
offset, end offset, first timestamp, end timestamp]}`` on stdin and writes ``{"splits": [...],
"warnings": [...]}`` on stdout, or ``{"error": ...}`` and exit status 1.  Only stores whose files
are local (a broker's log dirs, LocalTieredStorage on a local or shared file system) are the
JVM's; a split that is an object of a remote store is an error (the JVM hands such reads to the
Python source before planning).
"""
from __future__ import annotations

import json
import logging
import sys

from pykbatch.kafka.isolation import AbortedTxn, Isolation
from pykbatch.tiered.tables import lineage_arrays

from . import tiered_source
from .segment_plan import Ranges


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def split_json(split: tiered_source.TieredSplit) -> dict:
    """One split as the JVM reads it (SegmentSplit's tiered fields)."""
    part, piece = split.part, split.piece
    seg = part.local_segment(piece, split.lo)
    if seg is None:
        raise ValueError(f"{piece.path} is an object of a remote store: the Python source reads it")
    try:
        path, start = seg.path, seg.start_position
    finally:
        seg.close()
    iso = Isolation(split.level, [AbortedTxn(*t) for t in split.aborted], split.last_stable_offset,
                    fetch_offset=split.lo)
    starts, epochs = lineage_arrays(part, piece)
    return {"topic": part.partition.topic, "partition": part.partition.partition, "segment": piece.base_offset,
            "path": path, "start": start, "lo": split.lo, "hi": split.hi, "committed": iso.committed,
            "lastStableOffset": iso.last_stable_offset, "aborted": [list(p) for p in iso.pending],
            "epochStarts": [int(o) for o in starts], "epochs": [int(e) for e in epochs]}


def plan_json(request: dict) -> dict:
    options = {str(k): str(v) for k, v in request["options"].items()}
    ranges = Ranges(*request.get("ranges", [None] * 4))
    caught = _Warnings()
    tiered_source.LOG.addHandler(caught)
    try:
        splits = tiered_source.plan(options, ranges, int(request["splitBytes"]))
    finally:
        tiered_source.LOG.removeHandler(caught)
    return {"splits": [split_json(s) for s in splits], "warnings": caught.lines}


def main() -> int:
    try:
        out = plan_json(json.load(sys.stdin))
    except Exception as exc:  # said to the JVM, which fails the query with it
        json.dump({"error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
