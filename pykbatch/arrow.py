"""Column functions over Arrow binary arrays (one buffer of batches per row).

Each function reads the array's buffers in place (no copy of the input, no Python object
per valid row) and returns an Arrow array of the same length; null in gives null out.
These are what the Spark UDFs run; they work as well in any Arrow pipeline.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import _native
from ._result import ValidationConfig

ERROR_RECORD = pa.struct([("batch_index", pa.int32()), ("message", pa.string())])
CULPRIT = pa.struct([
    ("entry", pa.int32()), ("record_index", pa.int32()), ("relative_offset", pa.int64()),
    ("code", pa.int32()), ("name", pa.string()), ("rule", pa.string()), ("position", pa.int64()),
    ("entry_position", pa.int64()), ("message", pa.string()), ("detail", pa.string()), ("kafka", pa.bool_()),
])
VALIDATION = pa.struct([
    ("ok", pa.bool_()), ("error_code", pa.int32()), ("error_name", pa.string()),
    ("error_message", pa.string()), ("error_records", pa.list_(ERROR_RECORD)),
    ("culprits", pa.list_(CULPRIT)), ("culprit_count", pa.int64()), ("records", pa.int64()),
    ("truncated_tail_position", pa.int64()),
])
HEADER = pa.struct(_native.header_fields())
RECORD = pa.struct([
    ("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
    ("headers", pa.list_(HEADER)), ("sequence", pa.int32()), ("batch_index", pa.int32()),
    ("partition_leader_epoch", pa.int32()), ("producer_id", pa.int64()), ("producer_epoch", pa.int16()),
    ("is_transactional", pa.bool_()), ("is_control", pa.bool_()), ("timestamp_type", pa.string()),
])


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


def validate_array(arr, config: ValidationConfig | None = None) -> pa.StructArray:
    """``pykbatch.validate`` of every row, as a struct array of type ``VALIDATION``."""
    view, starts, ends, valid = _rows(arr)
    n = len(starts)
    records, tails, bad = _native._validate_rows(view, starts, ends, valid, config)
    ok = np.ones(n, np.bool_)
    codes = np.zeros(n, np.int32)
    counts = np.zeros(n, np.int64)
    names = np.full(n, "NONE", object)
    messages = [None] * n
    record_errors, culprits = [], []
    rec_counts = np.zeros(n, np.int32)
    cul_counts = np.zeros(n, np.int32)
    for row in sorted(bad):
        result = bad[row]
        ok[row] = False
        codes[row] = result.error_code
        names[row] = result.error_name
        messages[row] = result.error_message
        counts[row] = result.culprit_count
        errs = result.error_records
        rec_counts[row] = len(errs)
        record_errors.extend({"batch_index": i, "message": m} for i, m in errs)
        cul_counts[row] = len(result.culprits)
        culprits.extend(c.as_dict() for c in result.culprits)
    mask = None if valid is None else pa.array(~valid)

    def lists(count, items, typ):
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(count, out=offsets[1:])
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(items, typ))

    tail = pa.array(tails, mask=tails < 0)
    return pa.StructArray.from_arrays(
        [pa.array(ok), pa.array(codes), pa.array(names, pa.string()), pa.array(messages, pa.string()),
         lists(rec_counts, record_errors, ERROR_RECORD), lists(cul_counts, culprits, CULPRIT),
         pa.array(counts), pa.array(records), tail],
        fields=list(VALIDATION), mask=mask)


def decode_array(arr, *, verify_crc: bool = True) -> pa.ListArray:
    """The records of every row as a list of ``RECORD`` structs; null for a null row and for a
    row that does not decode cleanly (``validate_array`` says why)."""
    view, starts, ends, valid = _rows(arr)
    table, counts, failed = _native._decode_rows(view, starts, ends, valid, verify_crc, False)
    n = len(starts)
    null = failed if valid is None else failed | ~valid
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    columns = [table.column(f.name).combine_chunks() for f in RECORD if f.name != "timestamp_type"]
    ts_type = table.column("timestamp_type").combine_chunks().cast(pa.string())
    children = pa.StructArray.from_arrays(columns + [ts_type], fields=list(RECORD))
    return pa.ListArray.from_arrays(pa.array(offsets), children, mask=pa.array(null))


def crc32c_array(arr) -> pa.Array:
    """CRC-32C of every row's bytes (int64, as Spark has no unsigned int)."""
    view, starts, ends, valid = _rows(arr)
    data = memoryview(view.obj)
    out = np.fromiter((_native.crc32c(data[s:e]) for s, e in zip(starts, ends)), np.int64, count=len(starts))
    return pa.array(out, mask=None if valid is None else ~valid)
