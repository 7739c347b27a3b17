"""A tiered partition's records as Arrow tables, window by window (bounded memory): what the CLI
exports, the backfill job writes and the Spark source hands to Spark.

Columns: ``topic``, ``partition``, ``leader_epoch`` (the epoch the partition's leader-epoch
lineage gives the record's offset: the remote copy's segment leader epochs, or the local
checkpoint), then ``pykbatch.to_arrow``'s record columns.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pykbatch.arrow import decode_entries
from pykbatch.isolation import READ_UNCOMMITTED, Isolation
from pykbatch.log import entry_windows

from .partition import Piece, TieredPartition

WINDOW_BYTES = 8 << 20
LEADING = [pa.field("topic", pa.string()), pa.field("partition", pa.int32()), pa.field("leader_epoch", pa.int32())]


def schema() -> pa.Schema:
    from pykbatch import to_arrow
    return pa.schema(LEADING + list(to_arrow(b"").schema))


def _epochs(part: TieredPartition, piece: Piece) -> tuple[np.ndarray, np.ndarray]:
    entries = list(piece.leader_epochs)
    if not entries:
        lineage = part.lineage()
        entries = list(lineage.entries) if lineage else []
    entries.sort(key=lambda e: e[1])
    return (np.array([o for _, o in entries], dtype=np.int64), np.array([e for e, _ in entries], dtype=np.int32))


def partition_tables(part: TieredPartition, isolation: str | Isolation = READ_UNCOMMITTED, start: int | None = None,
                     end: int | None = None, window_bytes: int = WINDOW_BYTES) -> Iterator[pa.Table]:
    """The records a consumer at ``isolation`` would receive, offsets in [start, end]."""
    iso = part.isolation(isolation) if isinstance(isolation, str) else isolation
    for piece in part.pieces:
        lo = piece.start if start is None else max(start, piece.start)
        hi = piece.end if end is None else (end if piece.end is None else min(end, piece.end))
        if hi is not None and lo > hi:
            continue
        yield from piece_tables(part, piece, iso, lo, hi, window_bytes)


def piece_tables(part: TieredPartition, piece: Piece, iso: Isolation, lo: int, hi: int | None,
                 window_bytes: int = WINDOW_BYTES) -> Iterator[pa.Table]:
    """One piece's records in [lo, hi] under ``iso`` (which sees every batch, in order)."""
    seg = part.open_piece(piece, lo, hi)
    if seg is None:
        return
    starts, epochs = _epochs(part, piece)
    with seg:
        view = seg.view()
        batches = part.piece_batches(piece, seg, lo, hi)
        for run in entry_windows(batches, window_bytes, lambda b: not iso.past_end(b) and iso.keeps(b)):
            table, damaged = decode_entries(view, run, verify_crc=False)
            for position, _, exc in damaged:
                part._report("damaged", None, None, f"batch at byte {position}: {exc.message}", piece.path)
            offsets = table["offset"]
            keep = pc.greater_equal(offsets, lo)
            if hi is not None:
                keep = pc.and_(keep, pc.less_equal(offsets, hi))
            if iso.last_stable_offset is not None:
                keep = pc.and_(keep, pc.less(offsets, iso.last_stable_offset))
            table = table.filter(keep)
            n = table.num_rows
            if not n:
                continue
            at = np.searchsorted(starts, table["offset"].to_numpy(), side="right") - 1
            epoch = np.where(at >= 0, epochs[np.clip(at, 0, None)], -1) if len(starts) else np.full(n, -1, np.int32)
            yield pa.Table.from_arrays(
                [pa.repeat(pa.scalar(part.partition.topic, pa.string()), n),
                 pa.repeat(pa.scalar(part.partition.partition, pa.int32()), n),
                 pa.array(epoch, pa.int32())] + table.columns,
                schema=pa.schema(LEADING + list(table.schema)))
        del view
