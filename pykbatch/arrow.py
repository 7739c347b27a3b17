"""Column functions over Arrow binary arrays (one buffer of batches per row).

Each function reads the array's buffers in place (no copy of the input, no Python object
per valid row) and returns an Arrow array of the same length; null in gives null out.
These are what the Spark UDFs run; they work as well in any Arrow pipeline.
"""
from __future__ import annotations

from functools import lru_cache
from operator import attrgetter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pykbatch import _native, errors
from pykbatch.config import ValidationConfig
from pykbatch.columns import (  # noqa: F401 (the result types, named here too)
    BATCH, CULPRIT, DROPPED, ERROR_RECORD, RECORD as _RECORD_TYPES, REPAIR, SPARK_KAFKA, TIMESTAMP_TYPE_IDS,
    TIMESTAMP_TYPES, VALIDATION, fields,
)
from pykbatch.columns import RECORDS as RECORDS_SCHEMA, RECORDS_SPARK_TIME

RECORD = pa.struct(fields(_RECORD_TYPES, "offset timestamp key value headers sequence batch_index "
                                          "partition_leader_epoch producer_id producer_epoch is_transactional "
                                          "is_control timestamp_type"))


def _rows(arr):
    """(view of the data buffer, row starts, row ends, validity or None) of a binary array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_binary(arr.type):
        width = np.int64
    elif pa.types.is_binary(arr.type):
        width = np.int32
    else:
        raise TypeError(f"expected a binary column, got {arr.type}")
    _, offsets_buf, data_buf = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(offsets_buf, width, count=n + 1, offset=arr.offset * np.dtype(width).itemsize) \
        if n else np.zeros(1, width)
    starts = offsets[:-1].astype(np.int64)
    ends = offsets[1:].astype(np.int64)
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
    view = _native._View(data_buf if data_buf is not None else b"")
    return view, starts, ends, valid


def _lists(counts, values, null=None) -> pa.ListArray:
    """One list per row, ``counts[i]`` items each, over the concatenated ``values``; ``null``: a
    boolean numpy array of the rows that are null."""
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=None if null is None else pa.array(null))


def _record_columns(table: pa.Table) -> list:
    """``RECORD``'s columns of a decoded table, one chunk each, as ``RECORD`` types them (the
    dictionary-encoded timestamp_type as plain strings)."""
    return [table.column(f.name).combine_chunks().cast(f.type) for f in RECORD]


def validate_array(arr, config: ValidationConfig | None = None) -> pa.StructArray:
    """``pykbatch.validate`` of every row, as a struct array of type ``VALIDATION``."""
    view, starts, ends, valid = _rows(arr)
    n = len(starts)
    records, tails, bad = _native._validate_rows(view, starts, ends, valid, config)
    ok = np.ones(n, np.bool_)
    codes = np.zeros(n, np.int32)
    counts = np.zeros(n, np.int64)
    messages = [None] * n
    record_index, record_message, culprits = [], [], []
    rec_counts = np.zeros(n, np.int32)
    cul_counts = np.zeros(n, np.int32)
    for row in sorted(bad):
        result = bad[row]
        ok[row] = False
        codes[row], errs, messages[row] = result.kip467()
        counts[row] = result.culprit_count
        rec_counts[row] = len(errs)
        record_index.extend(i for i, _ in errs)
        record_message.extend(m for _, m in errs)
        cul_counts[row] = len(result.culprits)
        culprits.extend(result.culprits)
    mask = None if valid is None else pa.array(~valid)

    tail = pa.array(tails, mask=tails < 0)
    error_records = pa.StructArray.from_arrays(
        [pa.array(record_index, pa.int32()), pa.array(record_message, pa.string())], fields=list(ERROR_RECORD)) \
        if record_index else _empty(ERROR_RECORD)
    return pa.StructArray.from_arrays(
        [pa.array(ok), pa.array(codes), _error_names(codes),
         pa.array(messages, pa.string()) if bad else pa.nulls(n, pa.string()),
         _lists(rec_counts, error_records), _lists(cul_counts, _culprit_structs(culprits)),
         pa.array(counts), pa.array(records), tail],
        fields=list(VALIDATION), mask=mask)


@lru_cache(maxsize=None)
def _empty(struct: pa.StructType) -> pa.StructArray:
    """A zero-length array of ``struct`` (made once: building one costs ~10 us per field)."""
    return pa.StructArray.from_arrays([pa.array([], f.type) for f in struct], fields=list(struct))


def _error_names(codes: np.ndarray) -> pa.Array:
    """Kafka's name of every error code, looked up once per distinct code."""
    if not codes.any():  # every row clean: one name
        return pa.repeat(pa.scalar(errors.error_name(0), pa.string()), len(codes))
    encoded = pa.array(codes).dictionary_encode()
    names = pa.array([errors.error_name(c) for c in encoded.dictionary.to_pylist()], pa.string())
    return names.take(encoded.indices)


def _culprit_structs(culprits: list) -> pa.StructArray:
    """``CULPRIT`` structs built a column at a time (no dict per culprit)."""
    if not culprits:
        return _empty(CULPRIT)
    names = [f.name for f in CULPRIT]
    fields = attrgetter(*[("code" if n == "name" else n) for n in names])
    columns = list(zip(*map(fields, culprits))) or [()] * len(names)
    arrays = []
    for f, values in zip(CULPRIT, columns):
        arrays.append(pa.array([errors.error_name(c) for c in values] if f.name == "name" else values, f.type))
    return pa.StructArray.from_arrays(arrays, fields=list(CULPRIT))


def decode_array(arr, *, verify_crc: bool = True) -> pa.ListArray:
    """The records of every row as a list of ``RECORD`` structs; null for a null row and for a
    row that does not decode cleanly (``validate_array`` says why)."""
    view, starts, ends, valid = _rows(arr)
    table, counts, failed = _native._decode_rows(view, starts, ends, valid, verify_crc, False)
    null = failed if valid is None else failed | ~valid
    return _lists(counts, pa.StructArray.from_arrays(_record_columns(table), fields=list(RECORD)), null)


def crc32c_array(arr) -> pa.Array:
    """CRC-32C of every row's bytes (int64, as Spark has no unsigned int)."""
    view, starts, ends, valid = _rows(arr)
    data = memoryview(view.obj)
    out = np.fromiter((_native.crc32c(data[s:e]) for s, e in zip(starts, ends)), np.int64, count=len(starts))
    return pa.array(out, mask=None if valid is None else ~valid)


BATCH_INFO = pa.struct(fields(BATCH, "position size magic base_offset last_offset record_count compression "
                                     "timestamp_type max_timestamp producer_id producer_epoch base_sequence "
                                     "partition_leader_epoch is_transactional is_control crc is_valid"))


def batch_info_array(arr) -> pa.ListArray:
    """The header of every entry of every row, as a list of ``BATCH_INFO`` structs (the entries
    before a framing fault, when there is one); null for a null row."""
    view, starts, ends, valid = _rows(arr)
    data = memoryview(view.obj)
    columns = {f.name: [] for f in BATCH_INFO}
    counts = np.zeros(len(starts), np.int32)
    for i, (s, e) in enumerate(zip(starts, ends)):
        if valid is None or valid[i]:
            counts[i] = append_headers(data[s:e], columns)
    values = pa.StructArray.from_arrays([pa.array(columns[f.name], f.type) for f in BATCH_INFO],
                                        fields=list(BATCH_INFO))
    return _lists(counts, values, None if valid is None else ~valid)


def append_headers(buf, columns: dict) -> int:
    """Append the ``columns`` attributes (``BATCH_INFO`` names) of each entry header of ``buf`` to
    their lists; returns how many entries.  Stops at a framing fault: ``validate`` says what
    broke, and the headers before it are still worth having."""
    count = 0
    try:
        for b in _native.iter_batches(buf, verify_crc=False, strict=False):  # Kafka's reading, as the JVM's
            row = [getattr(b, name) for name in columns]  # whole, or not at all: a field may raise
            del b
            for values, value in zip(columns.values(), row):
                values.append(value)
            count += 1
    except ValueError:
        pass
    return count


def repair_array(arr, config: ValidationConfig | None = None) -> pa.StructArray:
    """``drop_culprits`` of every row (``unrepairable="drop"``) as ``REPAIR`` structs: the bytes
    without the culprits and without an incomplete trailing entry (clean rows are the input's own
    values: no work, no copy in Python),
    what was dropped with its error, and how many batches went whole."""
    import pyarrow.compute as pc
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    view, starts, ends, valid = _rows(arr)
    data = memoryview(view.obj)
    _, tails, bad = _native._validate_rows(view, starts, ends, valid, config)
    n = len(starts)
    counts = np.zeros(n, np.int32)
    unrepairable = np.zeros(n, np.int32)
    repaired, fixed, dropped = np.zeros(n, np.bool_), [None] * n, []
    # rows with culprits, and rows ending in an incomplete entry (left out, as every repair does)
    for i in sorted(set(bad) | set(np.flatnonzero(tails >= 0).tolist())):
        result = _native.drop_culprits(data[starts[i]:ends[i]], bad.get(i), config=config, unrepairable="drop")
        repaired[i], fixed[i] = True, result.data
        counts[i], unrepairable[i] = len(result.dropped), len(result.unrepairable)
        for d in result.dropped:
            first = d.culprits[0]
            dropped.append({"entry": d.entry, "record_index": d.record_index, "offset": d.offset, "key": d.key,
                            "value": d.value, "code": first.code, "rules": [c.rule for c in d.culprits],
                            "message": first.message})
    out = arr.cast(pa.binary())
    if repaired.any():
        out = pc.if_else(pa.array(repaired), pa.array(fixed, pa.binary()), out)
    mask = None if valid is None else pa.array(~valid)
    return pa.StructArray.from_arrays(
        [out, _lists(counts, pa.array(dropped, DROPPED)),
         pa.array(unrepairable, mask=None if valid is None else ~valid)], fields=list(REPAIR), mask=mask)


def explode_batch(batch: pa.RecordBatch, column: str, keep=()) -> pa.RecordBatch:
    """One row per record of the batches in ``column``, with the ``keep`` columns repeated beside
    ``RECORD``'s fields (rows that are null or do not decode give no records)."""
    arr = batch.column(column)
    view, starts, ends, valid = _rows(arr)
    table, counts, _ = _native._decode_rows(view, starts, ends, valid, True, False)
    rows = np.repeat(np.arange(len(starts)), counts)
    columns = [batch.column(k).take(pa.array(rows)) for k in keep]
    return pa.RecordBatch.from_arrays(columns + _record_columns(table), names=list(keep) + [f.name for f in RECORD])


def exploded_schema(input_schema: pa.Schema, keep=()) -> pa.Schema:
    return pa.schema([input_schema.field(k) for k in keep] + list(RECORD))


def shift_batches(table: pa.Table, position: int, entry: int) -> pa.Table:
    """A ``to_arrow`` table of a slice seen from the whole buffer: ``batch_position`` moved by
    ``position`` bytes and ``batch_index`` by ``entry`` entries (numpy: pyarrow.compute costs a
    quarter second to import, more than a segment's decode)."""
    for name, by in (("batch_position", position), ("batch_index", entry)):
        if by:
            column = table[name].combine_chunks()
            shifted = column.to_numpy(zero_copy_only=True) + column.type.to_pandas_dtype()(by)
            table = table.set_column(table.schema.get_field_index(name), name, pa.array(shifted, column.type))
    return table


def decode_entries(data, entries, *, verify_crc: bool = True, first_entry: int = 0, readable: bool = False,
                   spark_time: bool = False, ranges: tuple | None = None):
    """The records of whole entries ``[(position, size), ...]`` of ``data`` as one ``to_arrow``
    table (``batch_position`` in ``data``, ``batch_index`` from ``first_entry``), and the entries
    whose records cannot be read, ``[(position, entry index, error)]``: those contribute no rows,
    their neighbours all of theirs.  Decoded at once; entry by entry only when that fails.

    ``spark_time``: ``timestamp`` / ``timestampType`` as Spark's Kafka source has them (to_arrow's;
    not with ``readable``).

    ``ranges``: only records in (first_offset, end_offset, first_timestamp, end_timestamp) are
    rows (to_arrow's; not with ``readable``).

    ``readable``: such an entry contributes the records ``Batch.readable`` reads of it (a batch
    whose CRC does not match, all of them: the dump prints them too), and is listed as
    ``(position, entry index, [errors], rows)``: what could not be read, and how many rows it gave."""
    start, end = entries[0][0], entries[-1][0] + entries[-1][1]
    try:
        return shift_batches(_native.to_arrow(data[start:end], verify_crc=verify_crc, spark_time=spark_time,
                                              ranges=ranges), start, first_entry), []
    except errors.KafkaDataError:
        pass
    tables, failed = [], []
    for i, (position, size) in enumerate(entries):
        try:
            table = _native.to_arrow(data[position:position + size], verify_crc=verify_crc, spark_time=spark_time,
                                     ranges=ranges)
            tables.append(shift_batches(table, position, first_entry + i))
        except errors.KafkaDataError as exc:
            if exc.offset is not None:  # where in ``data``, not in the entry's slice
                exc.offset += position
            if not readable:
                failed.append((position, first_entry + i, exc))
                continue
            table, unreadable = readable_table(data, position, size, first_entry + i, exc)
            if table is not None:
                tables.append(table)
            failed.append((position, first_entry + i, unreadable or [exc], 0 if table is None else table.num_rows))
    empty = (RECORDS_SPARK_TIME if spark_time else RECORDS_SCHEMA).empty_table()
    return (pa.concat_tables(tables) if tables else empty), failed


def readable_table(data, position: int, size: int, entry: int, failure: errors.KafkaDataError):
    """``(table, errors)``: the records ``Batch.readable`` reads of the entry at ``position`` of
    ``data`` as ``to_arrow``'s rows (None when its header cannot be read), and the errors in place
    of the others, their positions in ``data``.  ``failure``: what ``to_arrow`` met in the entry
    (its CRC's mismatch, when the CRC fails: checked first); such a batch gives its records as
    read, that error first."""
    schema = RECORDS_SCHEMA
    chunk = bytes(memoryview(data)[position:position + size])
    try:
        batch = next(iter(_native.iter_batches(chunk, verify_crc=False)))
    except (errors.KafkaDataError, StopIteration):
        return None, []
    unreadable, rows = [], []
    for r in batch.readable():
        if isinstance(r, errors.KafkaDataError):
            unreadable.append(r)
            continue
        rows.append({"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
                     "headers": [{"key": k, "value": v} for k, v in r.headers], "sequence": r.sequence,
                     "batch_index": entry, "batch_position": position, "base_offset": batch.base_offset,
                     "partition_leader_epoch": batch.partition_leader_epoch, "producer_id": batch.producer_id,
                     "producer_epoch": batch.producer_epoch, "is_transactional": batch.is_transactional,
                     "is_control": batch.is_control})
    for exc in unreadable:
        if exc.offset is not None:
            exc.offset += position
    if not batch.is_valid:  # to_arrow's failure was the CRC's (already placed in ``data``)
        unreadable.insert(0, failure)
    table = pa.Table.from_pylist(rows, schema=schema.remove(schema.get_field_index("timestamp_type")))
    types = pa.array([TIMESTAMP_TYPES.index(batch.timestamp_type)] * len(rows), pa.int8())
    # to_arrow's dictionary, whole: an IPC file takes one dictionary per field
    return table.append_column(schema.field("timestamp_type"),
                               pa.DictionaryArray.from_arrays(types, pa.array(TIMESTAMP_TYPES))), unreadable


def spark_timestamps(millis: pa.Array, types: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Record timestamps (epoch milliseconds) and their type names as Spark's Kafka source has
    them: a TimestampType (microseconds, UTC; a hostile value wraps rather than fails the task)
    and Kafka's timestamp type id."""
    micros = pc.multiply(millis, pa.scalar(1000, pa.int64())).cast(SPARK_KAFKA["timestamp"], safe=False)
    names = list(TIMESTAMP_TYPE_IDS)
    ids = pc.take(pa.array([TIMESTAMP_TYPE_IDS[n] for n in names], pa.int32()),
                  pc.index_in(types.cast(pa.string()), pa.array(names)))
    return micros, ids
