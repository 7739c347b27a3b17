"""kafka-segment's names and output, one home for the plain and the tiered reader (and the JVM's): its columns (Spark's Kafka
source's first, then what a log adds; from ``pykbatch.columns``) and the Arrow batch of one window
of entries."""
from __future__ import annotations

import dataclasses
import functools

import pyarrow as pa

from pykbatch import validate as kb_validate
from pykbatch.arrow import append_headers, decode_entries
from pykbatch.columns import BATCH, LOCATION, READ, RECORD, SPARK_KAFKA, fields
from pykbatch.config import ValidationConfig
from pykbatch.log.split_truth import undecoded

# a batch's position is its record's batch_position
BATCH_COLUMNS = fields({**LOCATION, **BATCH, "batch_position": RECORD["batch_position"]},
                       "topic partition segment batch_position base_offset last_offset record_count magic "
                       "compression timestamp_type max_timestamp producer_id producer_epoch base_sequence "
                       "partition_leader_epoch is_transactional is_control size")
# Spark's Kafka source's columns first (names, types, order), then what a log adds
RECORD_COLUMNS = fields(SPARK_KAFKA, "key value topic partition offset timestamp timestampType headers") + fields(
    {**LOCATION, **RECORD}, "segment sequence batch_index batch_position base_offset partition_leader_epoch "
    "producer_id producer_epoch is_transactional is_control")
VALIDATION_COLUMNS = fields(READ, "batch_ok batch_error error_rule error_code lost_bytes lost_first_offset "
                                  "lost_last_offset")
LOG = ValidationConfig(origin="log", max_culprits=2**31 - 1)
NAME = "kafka-segment"
# with pykbatch's jar on the classpath, NAME is the JVM reader's (io.pykbatch.spark.SegmentSource), which
# hands the reads it does not serve to the Python source, registered under this name
PYTHON_NAME = "kafka-segment-python"  # every failing entry is named
PATH_COLUMN = fields(READ, "path")


def arrow_schema(mode: str, validate: bool, include_path: bool = False) -> pa.Schema:
    cols = RECORD_COLUMNS if mode == "records" else BATCH_COLUMNS
    return pa.schema((PATH_COLUMN if include_path else []) + cols + (VALIDATION_COLUMNS if validate else []))


@functools.lru_cache(maxsize=1024)
def _log_checks(topic: str, partition: int, compacted: bool = False) -> ValidationConfig:
    """The log's checks, Kafka's messages naming the partition the folder is for."""
    checks = dataclasses.replace(LOG, compacted=True) if compacted else LOG
    return dataclasses.replace(checks, topic_partition=f"{topic}-{partition}") if partition >= 0 else checks


def _verdicts(chunk, topic: str, partition: int) -> list:
    """entry index -> the validator's first culprit, for the failing entries of a window (one
    validation pass over the whole window): a reader without a ``SplitTruth`` (the tiered one)."""
    bad: dict = {}
    for c in kb_validate(chunk, _log_checks(topic, partition)).culprits:
        bad.setdefault(c.entry, c)
    return bad


def split_truth(data, path, base_offset, topic, partition, start, end, next_base, follows, compacted=False,
                previous=None):
    """The ``SplitTruth`` of a validated split: the log's checks, named for the partition."""
    from pykbatch.log.split_truth import SplitTruth
    return SplitTruth(data, path, base_offset, start, end, next_base, follows,
                      _log_checks(topic, partition, compacted), compacted, previous)


def entries_batch(data, entries, segment, topic, partition, mode, validate, schema, ranges, truth=None,
                  verdicts_at: dict | None = None) -> list:
    """The Arrow batches of one window of entries: its rows, and -- validated through ``truth`` --
    a row for each range before or inside it whose records cannot be read (first).  Without a
    ``truth``, ``verdicts_at`` (entry position -> its first culprit, from one walk of the whole
    segment) gives the entries their verdicts, else a validation of the window alone."""
    lo, hi = entries[0][0], entries[-1][0] + entries[-1][1]
    named: list = []
    if not validate:
        verdicts: list = [None] * len(entries)
    elif truth is not None:
        verdicts, named = truth.window(entries)
    elif verdicts_at is not None:
        verdicts = [verdicts_at.get(pos) for pos, *_ in entries]
    else:
        bad = _verdicts(data[lo:hi], topic, partition)
        verdicts = [bad.get(e) for e in range(len(entries))]
    if mode == "records":
        # CRCs: validate's business; Spark's timestamps filled so by the core
        # records out of range are not rows (the core's rule, kb_ranges_keeps_record)
        table, failed = decode_entries(data, entries, verify_crc=False, spark_time=True, ranges=ranges.bounds())
        if truth is not None:
            named += [truth.undecoded(pos, entries[k][1], exc, verdicts[k]) for pos, k, exc in failed]
        elif validate:  # a reader without a SplitTruth (the tiered one) names such an entry too
            named += [undecoded(data, pos, entries[k][1], exc, verdicts[k], f"{topic}-{partition}")
                      for pos, k, exc in failed]
        cols = {name: table[name].combine_chunks() for name in table.column_names}
        rows = cols["batch_index"].to_pylist()
    else:  # a row an entry whose header reads (one that does not gives none, its neighbours theirs)
        headers = {f.name: [] for f in BATCH_COLUMNS[4:]}
        headers["position"] = []
        rows = [k for k, (pos, size, *_) in enumerate(entries) if append_headers(data[pos:pos + size], headers)]
        cols = {f.name: pa.array(headers[f.name], f.type) for f in BATCH_COLUMNS[4:]}
        cols["batch_position"] = pa.array([entries[k][0] for k in rows], pa.int64())
    n = len(cols["base_offset"])
    _location(cols, n, topic, partition, segment)
    if validate:
        first = [verdicts[k] for k in rows]
        cols["batch_ok"] = pa.array([c is None for c in first], pa.bool_())
        cols["batch_error"] = pa.array([c and c.message for c in first], pa.string())
        cols["error_rule"] = pa.array([c and c.rule for c in first], pa.string())
        cols["error_code"] = pa.array([c and c.code for c in first], pa.int16())
        for name in ("lost_bytes", "lost_first_offset", "lost_last_offset"):
            cols[name] = pa.nulls(n, pa.int64())
    out = [lost_rows(named, segment, topic, partition, schema, ranges)] if named else []
    return out + [pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in schema], schema=schema)]


def _location(cols: dict, n: int, topic, partition, segment) -> None:
    cols["topic"] = pa.repeat(pa.scalar(topic, pa.string()), n)
    cols["partition"] = pa.repeat(pa.scalar(partition, pa.int32()), n)
    cols["segment"] = pa.repeat(pa.scalar(segment, pa.int64()), n)


def lost_rows(named: list, segment, topic, partition, schema, ranges) -> pa.RecordBatch:
    """A row for each ``Unreadable`` range in ``ranges`` (one whose offsets are not known is in
    every range): no record's columns, ``batch_ok`` false, the rule, code, message, byte span and
    offsets of what cannot be read."""
    named = [u for u in named if _in_range(u, ranges)]
    n = len(named)
    cols = {"batch_position": pa.array([u.position for u in named], pa.int64()),
            "batch_ok": pa.repeat(pa.scalar(False), n),
            "batch_error": pa.array([u.message for u in named], pa.string()),
            "error_rule": pa.array([u.rule for u in named], pa.string()),
            "error_code": pa.array([u.code for u in named], pa.int16()),
            "lost_bytes": pa.array([u.size for u in named], pa.int64()),
            "lost_first_offset": pa.array([u.first_offset for u in named], pa.int64()),
            "lost_last_offset": pa.array([u.last_offset for u in named], pa.int64())}
    if "base_offset" in schema.names and "offset" not in schema.names:  # batches mode: the offsets it hides
        cols["base_offset"] = cols["lost_first_offset"]
        cols["last_offset"] = cols["lost_last_offset"]
        cols["size"] = cols["lost_bytes"]
    _location(cols, n, topic, partition, segment)
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type)
                                       for f in schema], schema=schema)


def _in_range(u, ranges) -> bool:
    """Whether the offsets an unreadable range hides can hold records the read asks for (its
    offsets not known: yes; timestamps are not known of it)."""
    if ranges.first_offset is not None and u.last_offset is not None and u.last_offset < ranges.first_offset:
        return False
    return not (ranges.end_offset is not None and u.first_offset is not None and u.first_offset >= ranges.end_offset)
