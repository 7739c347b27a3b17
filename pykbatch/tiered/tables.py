"""A tiered partition's records as Arrow tables, window by window (bounded memory): what the CLI
exports, the backfill job writes and the Spark source hands to Spark.

Columns: ``topic``, ``partition``, then ``pykbatch.to_arrow``'s record columns, then
``leader_epoch`` (the epoch the partition's leader-epoch lineage gives the record's offset: the
remote copy's segment leader epochs, or the local checkpoint), last as in the Spark source.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pykbatch._native import iter_batches
from pykbatch.arrow import decode_entries
from pykbatch.columns import LOCATION, READ, RECORDS, fields
from pykbatch.kafka.isolation import READ_UNCOMMITTED, Isolation
from pykbatch.log import entry_windows

from pykbatch.tiered.partition import Piece, TieredPartition

WINDOW_BYTES = 8 << 20
AHEAD = 3  # pieces fetched ahead of the one decoding (object stores: requests overlap decoding)
LEADING = fields(LOCATION, "topic partition")
(EPOCH,) = fields(READ, "leader_epoch")
"""What a tiered read adds after the records' columns, here and in the Spark source."""


def schema() -> pa.Schema:
    return pa.schema(LEADING + list(RECORDS) + [EPOCH])


def lineage_arrays(part: TieredPartition, piece: Piece) -> tuple[np.ndarray, np.ndarray]:
    """(start offsets, epochs) ascending: the piece's own segment leader epochs, else the
    partition's lineage."""
    entries = list(piece.leader_epochs)
    if not entries:
        lineage = part.lineage()
        entries = list(lineage.entries) if lineage else []
    entries.sort(key=lambda e: e[1])
    return (np.array([o for _, o in entries], dtype=np.int64), np.array([e for e, _ in entries], dtype=np.int32))


def edge_mask(offsets, lo: int, hi: int | None, last_stable_offset: int | None):
    """The rows of a window (ascending offsets) inside [lo, hi] and below the last stable offset,
    or None when all are: only the windows at a range's edges pay for a filter."""
    if not len(offsets):
        return None
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    top = hi if hi is not None else last
    if last_stable_offset is not None:
        top = min(top, last_stable_offset - 1)
    if first >= lo and last <= top:
        return None
    return pc.and_(pc.greater_equal(offsets, lo), pc.less_equal(offsets, top))


def epoch_column(offsets, starts: np.ndarray, epochs: np.ndarray) -> pa.Array:
    """The lineage's leader epoch of each offset (ascending): one value repeated when a window
    lies in one epoch, as it almost always does; -1 before the lineage's first entry."""
    n = len(offsets)
    if not len(starts) or not n:  # a window whose rows the ranges all left out has none
        return pa.repeat(pa.scalar(-1, pa.int32()), n)
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    at_first = np.searchsorted(starts, first, "right") - 1
    if at_first == np.searchsorted(starts, last, "right") - 1:
        return pa.repeat(pa.scalar(int(epochs[at_first]) if at_first >= 0 else -1, pa.int32()), n)
    at = np.searchsorted(starts, offsets.to_numpy(), side="right") - 1
    return pa.array(np.where(at >= 0, epochs[np.clip(at, 0, None)], -1).astype(np.int32), pa.int32())


def partition_tables(part: TieredPartition, isolation: str | Isolation = READ_UNCOMMITTED, start: int | None = None,
                     end: int | None = None, window_bytes: int = WINDOW_BYTES) -> Iterator[pa.Table]:
    """The records a consumer at ``isolation`` would receive, offsets in [start, end].  The next
    piece's bytes are fetched while this one decodes (decoding runs without the GIL)."""
    from concurrent.futures import ThreadPoolExecutor
    iso = part.isolation(isolation, start) if isinstance(isolation, str) else isolation
    todo = [(piece, *span) for piece in part.pieces if (span := piece.clip(start, end)) is not None]
    with ThreadPoolExecutor(max_workers=AHEAD, thread_name_prefix="pykbatch-fetch") as fetcher:
        opened = [fetcher.submit(part.open_piece, *todo[i]) for i in range(min(AHEAD, len(todo)))]
        for i, (piece, lo, hi) in enumerate(todo):
            seg = opened[i].result()
            if i + AHEAD < len(todo):
                opened.append(fetcher.submit(part.open_piece, *todo[i + AHEAD]))
            opened[i] = None
            yield from piece_tables(part, piece, iso, lo, hi, window_bytes, seg)


def piece_windows(part: TieredPartition, piece: Piece, iso: Isolation, lo: int, hi: int | None,
                  window_bytes: int = WINDOW_BYTES, also=None, seg=None, verify_crc: bool = True,
                  verdicts: dict | None = None):
    """(the piece's bytes, a run of its entries) for the batches holding [lo, hi] that a consumer
    under ``iso`` receives (and ``also`` keeps); ``iso`` sees every batch, in order.  ``seg``:
    the piece already opened; ``verify_crc``: a batch whose CRC fails is reported, not read;
    ``verdicts``: filled with each entry's first culprit (``TieredPartition.piece_batches``)."""
    seg = seg or part.open_piece(piece, lo, hi)
    if seg is None:
        return

    def received(b):
        consumer_gets = not iso.past_end(b) and iso.keeps(b)
        return consumer_gets and (also is None or also(b))
    with seg:
        view = seg.view()
        for run in entry_windows(part.piece_batches(piece, seg, lo, hi, verify_crc, verdicts), window_bytes, received):
            yield view, run
        del view


def piece_tables(part: TieredPartition, piece: Piece, iso: Isolation, lo: int, hi: int | None,
                 window_bytes: int = WINDOW_BYTES, seg=None) -> Iterator[pa.Table]:
    """One piece's records in [lo, hi] under ``iso``; ``seg``: the piece already opened."""
    starts, epochs = lineage_arrays(part, piece)
    for view, run in piece_windows(part, piece, iso, lo, hi, window_bytes, seg=seg):
        table, damaged = decode_entries(view, run, verify_crc=False)
        for position, _, exc in damaged:  # an entry whose records do not read gives no row
            size = next(n for p, n in run if p == position)
            (b,) = iter_batches(view[position:position + size], verify_crc=False, strict=False)
            part.unread_records(piece, b, exc, position=position)
        if not table.num_rows:
            continue
        keep = edge_mask(table["offset"], lo, hi, iso.last_stable_offset)
        if keep is not None:
            table = table.filter(keep)
        n = table.num_rows
        if not n:
            continue
        epoch = epoch_column(table["offset"], starts, epochs)
        yield pa.Table.from_arrays(
            [pa.repeat(pa.scalar(part.partition.topic, pa.string()), n),
             pa.repeat(pa.scalar(part.partition.partition, pa.int32()), n)] + table.columns + [epoch],
            schema=pa.schema(LEADING + list(table.schema) + [EPOCH]))
