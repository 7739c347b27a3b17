"""Export a segment's records to Parquet or Arrow IPC: one row per record with its batch's
columns (``pykbatch.to_arrow``'s schema), written window by window so memory stays bounded
whatever the segment's size."""
from __future__ import annotations

import pyarrow as pa

from ._native import to_arrow
from .arrow import shift_batches
from .segments import Segment

WINDOW_BYTES = 32 * 1024 * 1024
FORMATS = ("parquet", "arrow")


def _windows(seg: Segment, window_bytes: int):
    """(start, end, first entry index) of runs of whole entries about ``window_bytes`` long."""
    start, entries, first_entry = None, 0, 0
    end = 0
    for b in seg.batches():
        if start is None:
            start, first_entry = b.position, entries
        end = b.position + b.size
        entries += 1
        if end - start >= window_bytes:
            yield start, end, first_entry
            start = None
    if start is not None:
        yield start, end, first_entry


def export_segment(source, dest: str, format: str = "parquet", *, window_bytes: int = WINDOW_BYTES) -> int:
    """Writes every record of the segment at ``source`` (a path or file-like) to ``dest``;
    returns the number of rows.  ``batch_position`` and ``batch_index`` are the batch's place in
    the whole file."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}")
    rows = 0
    writer = None
    with Segment(source) as seg:
        view = seg.view()
        try:
            for start, end, first_entry in _windows(seg, window_bytes):
                table = shift_batches(to_arrow(view[start:end]), start, first_entry)
                if writer is None:
                    writer = _writer(dest, format, table.schema)
                writer.write_table(table)
                rows += table.num_rows
                del table
            if writer is None:  # no records: an empty file with the schema
                writer = _writer(dest, format, to_arrow(b"").schema)
        finally:
            if writer is not None:
                writer.close()
            del view
    return rows


def _writer(dest: str, format: str, schema: pa.Schema):
    if format == "parquet":
        import pyarrow.parquet as pq
        return pq.ParquetWriter(dest, schema)
    return pa.ipc.new_file(dest, schema)
