"""Export a segment's records to Parquet or Arrow IPC: one row per record with its batch's
columns (``pykbatch.to_arrow``'s schema), written window by window so memory stays bounded
whatever the segment's size.  A batch whose records cannot be read is left out, counted and
reported; the batches around it are exported."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ._native import to_arrow
from .arrow import decode_entries
from .errors import KafkaDataError
from .log import Segment, entry_windows

WINDOW_BYTES = 32 * 1024 * 1024
FORMATS = ("parquet", "arrow")


@dataclass
class ExportReport:
    """What ``export_segment`` wrote: ``rows``; ``damaged``: (batch position, entry index, error)
    of every batch left out because its records could not be read; ``stopped``: the framing
    error that ended the walk of the file early, if any (nothing after it can be placed)."""
    rows: int = 0
    damaged: list[tuple[int, int, KafkaDataError]] = field(default_factory=list)
    stopped: KafkaDataError | None = None

    @property
    def ok(self) -> bool:
        return not self.damaged and self.stopped is None


def _readable(seg: Segment, report: ExportReport):
    """The segment's batches up to a framing error, which ends the walk (kept in the report)."""
    try:
        yield from seg.batches()
    except KafkaDataError as exc:
        report.stopped = exc


def export_segment(source, dest: str, format: str = "parquet", *,
                   window_bytes: int = WINDOW_BYTES) -> ExportReport:
    """Writes every readable record of the segment at ``source`` (a path or file-like) to
    ``dest``.  ``batch_position`` and ``batch_index`` are the batch's place in the whole file."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}")
    report = ExportReport()
    writer = None
    entries = 0
    with Segment(source) as seg:
        view = seg.view()
        try:
            for run in entry_windows(_readable(seg, report), window_bytes):
                table, damaged = decode_entries(view, run, first_entry=entries)
                report.damaged += damaged
                entries += len(run)
                if not table.num_rows:
                    continue
                if writer is None:
                    writer = _writer(dest, format, table.schema)
                writer.write_table(table)
                report.rows += table.num_rows
                del table
            if writer is None:  # no records: an empty file with the schema
                writer = _writer(dest, format, to_arrow(b"").schema)
        finally:
            if writer is not None:
                writer.close()
            del view
    return report


def _writer(dest: str, format: str, schema: pa.Schema):
    if format == "parquet":
        import pyarrow.parquet as pq
        return pq.ParquetWriter(dest, schema)
    return pa.ipc.new_file(dest, schema)
