"""Export a segment's records to Parquet or Arrow IPC (a partition's: a file per segment): one row
per record with its batch's columns (``pykbatch.to_arrow``'s schema), written window by window
so memory stays bounded whatever the segment's size, on every core (windows decoded ahead of the
writer; a partition's segments side by side).  A batch whose records cannot be read is left out, counted and
reported; the batches around it are exported."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from pykbatch.arrow import decode_entries
from pykbatch.columns import LOCATION, RECORDS, fields
from pykbatch.errors import KafkaDataError
from pykbatch.log import Segment, entry_windows
from pykbatch.log.files import STDIN, named_as_log
from pykbatch.parallel import ordered_map

SEGMENT = fields(LOCATION, "segment")[0]  # a partition export's rows: the segment they came from

WINDOW_BYTES = 32 * 1024 * 1024
FORMATS = ("parquet", "arrow")


@dataclass
class ExportReport:
    """What ``export_segment`` wrote: ``rows``; ``damaged``: (batch position, entry index, errors,
    rows exported) of every batch with records that could not be read (``Batch.readable``: the
    others are exported, as the dump prints them) or whose CRC does not match (its records are
    exported as read); rows 0: the batch was left out; ``lost``: the ``LostSpan``s
    skipped where the entry framing was lost (the walk resumed at the next sound entry);
    ``stopped``: an error that ended the walk of the file early, if any; ``backwards``: culprits
    of batches whose offsets go back (exported: which of two batches is wrong is not known)."""
    rows: int = 0
    damaged: list[tuple[int, int, list[KafkaDataError], int]] = field(default_factory=list)
    lost: list = field(default_factory=list)
    stopped: KafkaDataError | None = None
    backwards: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.lost and self.stopped is None and not self.backwards


def _readable(seg: Segment, report: ExportReport):
    """The segment's batches; spans whose framing was lost are skipped (kept in the report)."""
    try:
        yield from seg.batches(on_lost=report.lost.append)
    except KafkaDataError as exc:
        report.stopped = exc


def export_segment(source, dest: str, format: str = "parquet", *,
                   window_bytes: int = WINDOW_BYTES, jobs: int | None = None,
                   progress: Callable[[int], object] | None = None) -> ExportReport:
    """Writes every readable record of the segment at ``source`` (a path or file-like) to
    ``dest``.  ``batch_position`` and ``batch_index`` are the batch's place in the whole file.
    ``jobs``: threads decoding windows ahead of the writer (default: every core this process may
    use); the file is the same whatever their number.  ``progress``: called with the byte
    position written up to, after each window."""
    return _export([source], dest, format, window_bytes, jobs, segment_column=False, progress=progress)[0]


def export_partition(paths, dest_dir: str, format: str = "parquet", *,
                     window_bytes: int = WINDOW_BYTES, jobs: int | None = None,
                     progress: Callable[[int], object] | None = None) -> list[tuple[str, ExportReport]]:
    """``export_segment`` of each segment of a partition into ``dest_dir``, one file per segment named
    by its base offset (``00000000000000000000.parquet``: a dataset Spark and pyarrow read as one),
    each with a ``segment`` column (that base offset, as ``batch_position`` is within it).  ``jobs``
    segments are exported side by side.  (output path, report) per segment, in offset order.
    ``progress``: called with the number of segments written after each."""
    from pykbatch.log import base_offset_of
    os.makedirs(dest_dir, exist_ok=True)
    paths = list(paths)
    outputs = [os.path.join(dest_dir, f"{base_offset_of(p):020d}.{format}") for p in paths]

    def one(job):
        path, out = job
        return out, _export([path], out, format, window_bytes, 1, segment_column=True)[0]

    with ordered_map(one, zip(paths, outputs), jobs) as done:
        out = []
        for item in done:
            out.append(item)
            if progress is not None:
                progress(len(out))
        return out


def _export(sources: list, dest: str, format: str, window_bytes: int, jobs, segment_column: bool,
            progress: Callable[[int], object] | None = None):
    """The records of ``sources`` in order into one file; windows decoded by ``jobs`` threads ahead
    of the writer."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}")
    reports = [ExportReport() for _ in sources]
    segments: dict[int, Segment] = {}

    def windows():
        for i, source in enumerate(sources):
            seg = segments[i] = Segment(source)
            if named_as_log(seg.path or STDIN):  # a producer's batches have no order to keep
                reports[i].backwards = list(seg.order_faults().values())
            view = seg.view()
            entries = 0
            for run in entry_windows(_readable(seg, reports[i]), window_bytes):
                yield i, view, run, entries, seg.base_offset
                entries += len(run)
            del view

    def decode(window):
        i, view, run, first_entry, base_offset = window
        table, damaged = decode_entries(view, run, first_entry=first_entry, readable=True)
        if segment_column:
            table = table.append_column(SEGMENT, _repeated(base_offset, table.num_rows))
        return i, table, damaged, run[-1][0] + run[-1][1]

    writer = None
    try:
        with ordered_map(decode, windows(), jobs) as decoded:
            for i, table, damaged, reached in decoded:
                if progress is not None:
                    progress(reached)
                for done in [k for k in segments if k < i]:  # every window of these was written
                    segments.pop(done).close()
                reports[i].damaged += damaged
                if not table.num_rows:
                    continue
                if writer is None:
                    writer = _writer(dest, format, table.schema)
                writer.write_table(table)
                reports[i].rows += table.num_rows
                del table
        if writer is None:  # no records: an empty file with the schema
            schema = RECORDS
            writer = _writer(dest, format, schema.append(SEGMENT) if segment_column else schema)
    finally:
        if writer is not None:
            writer.close()
        for seg in segments.values():
            seg.close()
    return reports


def _repeated(value: int, n: int) -> pa.Array:
    """``value`` n times: a run-end encoded column would be cheaper, but Parquet and Spark take plain ones."""
    import numpy as np
    return pa.array(np.full(n, value, np.int64), SEGMENT.type)


def _writer(dest: str, format: str, schema: pa.Schema):
    if format == "parquet":
        import pyarrow.parquet as pq
        return pq.ParquetWriter(dest, schema)
    return pa.ipc.new_file(dest, schema)
