"""kafka-segment's tiered plan for its JVM reader: the Python source's plan (``tiered_source.plan``,
whose rules stay in pykbatch.tiered), each split said as what the core needs to read it on the JVM
-- the local file and the byte to start at, the consumer's view (offsets, isolation) and the
lineage behind ``leader_epoch`` -- as JSON.

The JVM runs it on the driver (TieredPlan.java), as Spark runs a Python data source's planner:
``python -m spark_udfs.tiered_plan`` reads ``{"options": {...}, "splitBytes": n, "ranges": [first
offset, end offset, first timestamp, end timestamp]}`` on stdin and writes ``{"splits": [...],
"warnings": [...]}`` on stdout, or ``{"error": ...}`` and exit status 1.  A split whose piece is a
local file (a broker's log dirs, LocalTieredStorage on a local or shared file system) names the
file and the byte to start at; one whose piece is an object of a remote store names the object
(its URL in the read's scheme, which the JVM reads through Spark's Hadoop file systems) and the
byte ranges pykbatch's reader fetches of it (TieredPartition.remote_ranges), joined into the
segment the core reads.  The store is reached with the read's ``fs.*`` options, or, for
``s3a://`` without them, with the session's ``fs.s3a.*`` settings the JVM passes as ``hadoop``
(spark_udfs.s3a_options).
"""
from __future__ import annotations

import json
import logging
import sys

from pykbatch.kafka.isolation import AbortedTxn, Isolation
from pykbatch.tiered.tables import lineage_arrays

from . import s3a_options, tiered_source
from .segment_plan import Ranges


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def split_json(split: tiered_source.TieredSplit, scheme: str) -> dict:
    """One split as the JVM reads it (SegmentSplit's tiered fields)."""
    part, piece = split.part, split.piece
    seg = part.local_segment(piece, split.lo)
    if seg is not None:
        try:
            where = {"path": seg.path, "start": seg.start_position}
        finally:
            seg.close()
    else:  # an object: its URL in the read's own scheme (s3a://, not s3fs's first name, s3://)
        url = part.store.fs.unstrip_protocol(piece.path).split("://", 1)[1]
        known = len(part.reports)
        spans = part.fetch_ranges(piece, split.lo, split.hi)
        for r in part.reports[known:]:  # an object that cannot be read: no rows, said as the Python source says it
            tiered_source.LOG.warning("kafka-segment (tiered): %s", r.line())
        where = {"path": piece.path, "start": 0, "url": f"{scheme}://{url}",
                 "byteRanges": [[a, -1 if b is None else b] for a, b in spans]}
    iso = Isolation(split.level, [AbortedTxn(*t) for t in split.aborted], split.last_stable_offset,
                    fetch_offset=split.lo)
    starts, epochs = lineage_arrays(part, piece)
    return {"topic": part.partition.topic, "partition": part.partition.partition, "segment": piece.base_offset,
            **where, "lo": split.lo, "hi": split.hi, "committed": iso.committed,
            "lastStableOffset": iso.last_stable_offset, "aborted": [list(p) for p in iso.pending],
            "epochStarts": [int(o) for o in starts], "epochs": [int(e) for e in epochs]}


def read_options(request: dict) -> dict:
    """The read's options; an s3a:// store without ``fs.*`` options reached with the session's
    ``fs.s3a.*`` settings."""
    options = {str(k): str(v) for k, v in request["options"].items()}
    path = options.get("path", "")
    if path.startswith("s3a://") and not any(k.startswith("fs.") for k in options):
        options.update({f"fs.{k}": v for k, v in s3a_options.storage_options(request.get("hadoop", {}), path).items()})
    return options


def plan_json(request: dict) -> dict:
    options = read_options(request)
    ranges = Ranges(*request.get("ranges", [None] * 4))
    caught = _Warnings()
    tiered_source.LOG.addHandler(caught)
    try:
        splits = tiered_source.plan(options, ranges, int(request["splitBytes"]))
        scheme = options["path"].split("://", 1)[0] if "://" in options["path"] else "file"
        return {"splits": [split_json(s, scheme) for s in splits], "warnings": caught.lines}
    finally:
        tiered_source.LOG.removeHandler(caught)


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
