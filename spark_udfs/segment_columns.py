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

# a batch's position is its record's batch_position
BATCH_COLUMNS = fields({**LOCATION, **BATCH, "batch_position": RECORD["batch_position"]},
                       "topic partition segment batch_position base_offset last_offset record_count magic "
                       "compression timestamp_type max_timestamp producer_id producer_epoch base_sequence "
                       "partition_leader_epoch is_transactional is_control size")
# Spark's Kafka source's columns first (names, types, order), then what a log adds
RECORD_COLUMNS = fields(SPARK_KAFKA, "key value topic partition offset timestamp timestampType headers") + fields(
    {**LOCATION, **RECORD}, "segment sequence batch_index batch_position base_offset partition_leader_epoch "
    "producer_id producer_epoch is_transactional is_control")
VALIDATION_COLUMNS = fields(READ, "batch_ok batch_error")
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
def _log_checks(topic: str, partition: int) -> ValidationConfig:
    """The log's checks, Kafka's messages naming the partition the folder is for."""
    return dataclasses.replace(LOG, topic_partition=f"{topic}-{partition}") if partition >= 0 else LOG


def _verdicts(chunk, topic: str, partition: int) -> dict:
    """entry index -> the validator's first message, for the failing entries of a window (one
    validation pass over the whole window)."""
    bad = {}
    for c in kb_validate(chunk, _log_checks(topic, partition)).culprits:
        bad.setdefault(c.entry, c.message)
    return bad


def entries_batch(data, entries, segment, topic, partition, mode, validate, schema, ranges):
    lo, hi = entries[0][0], entries[-1][0] + entries[-1][1]
    chunk = data[lo:hi]
    bad = _verdicts(chunk, topic, partition) if validate else {}
    verdicts = pa.array([bad.get(e) for e in range(len(entries))], pa.string())  # per entry; null: it passed
    if mode == "records":
        # CRCs: validate's business; Spark's timestamps filled so by the core
        # records out of range are not rows (the core's rule, kb_ranges_keeps_record)
        table, _ = decode_entries(data, entries, verify_crc=False, spark_time=True, ranges=ranges.bounds())
        cols = {name: table[name].combine_chunks() for name in table.column_names}
        errors = verdicts.take(cols["batch_index"]) if validate else None  # each record gets its batch's
    else:  # a row an entry whose header reads (one that does not gives none, its neighbours theirs)
        headers = {f.name: [] for f in BATCH_COLUMNS[4:]}
        headers["position"] = []
        read = [k for k, (pos, size, *_) in enumerate(entries) if append_headers(data[pos:pos + size], headers)]
        cols = {f.name: pa.array(headers[f.name], f.type) for f in BATCH_COLUMNS[4:]}
        cols["batch_position"] = pa.array([entries[k][0] for k in read], pa.int64())
        errors = verdicts.take(pa.array(read, pa.int32()))
    n = len(cols["base_offset"])
    cols["topic"] = pa.repeat(pa.scalar(topic, pa.string()), n)
    cols["partition"] = pa.repeat(pa.scalar(partition, pa.int32()), n)
    cols["segment"] = pa.repeat(pa.scalar(segment, pa.int64()), n)
    if validate:
        cols["batch_ok"] = errors.is_null()
        cols["batch_error"] = errors
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in schema], schema=schema)
