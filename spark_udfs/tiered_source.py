"""``kafka-segment`` over a tiered-storage remote store (KIP-405): the partitions as the broker
serves them, planned on the driver from ``__remote_log_metadata`` (pykbatch.tiered), read on
the executors piece by piece.

    spark.read.format("kafka-segment")
        .option("remoteLogMetadata", "/kafka/logs/__remote_log_metadata-0")   # comma-separated paths
        .option("localDirs", "/kafka/logs")            # optional: the broker's log dirs continue the log
        .option("isolationLevel", "read_committed")    # default read_uncommitted
        .option("fs.client_kwargs.endpoint_url", "http://127.0.0.1:9000")   # fsspec options, "fs." prefix
        .load("s3://bucket/tiered")                    # layout detected, or .option("layout", ...)

The columns are kafka-segment's plus ``leader_epoch`` (the lineage's epoch for the record's
offset).  Ranges, pushdown, ``validate`` and ``splitBytes`` work as on broker directories; over
an object store each split fetches only the byte range its offsets need (the copy's offset
index gives the positions).  What the plan cannot serve (holes, missing or unfinished uploads...)
is logged by the driver as warnings and listed by ``tiered_reports``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa

from pykbatch.columns import READ, fields
from pykbatch.kafka.isolation import READ_UNCOMMITTED, Isolation, check_level
from pykbatch.kafka.isolation import AbortedTxn
from pykbatch.tiered import TieredPartition, TieredTopicStore, open_store
from pykbatch.tiered.layouts import INDEX, find_layout
from pykbatch.tiered.partition import Piece, owns
from pykbatch.tiered.tables import EPOCH as EPOCH_COLUMN  # last, as in the CLI export

from .segment_plan import Ranges

LOG = logging.getLogger("pykbatch.tiered")


def _opt(options, key: str, default=None):
    """An option by its documented name; Spark hands them over lower-cased."""
    value = options.get(key)
    if value is None:
        value = options.get(key.lower())
    return default if value is None else value


def is_tiered(options) -> bool:
    """Whether a read names a remote store: a ``layout`` or ``remoteLogMetadata`` option, or a
    path whose layout is detected."""
    if _opt(options, "layout") or _opt(options, "remoteLogMetadata"):
        return True
    path = options.get("path")
    if not path:
        return False
    try:
        import fsspec
        fs, root = fsspec.core.url_to_fs(path, **storage_options(options))
        return find_layout(fs, root) is not None
    except (ImportError, OSError, ValueError):
        return False


def storage_options(options) -> dict:
    """Options ``fs.<key>`` as fsspec storage options (dotted keys nest)."""
    from pykbatch.tiered.layouts import storage_options as nest
    return nest((k[3:], v) for k, v in options.items() if k.startswith("fs."))


def _paths(options, key: str) -> list[str]:
    return [p for p in str(_opt(options, key) or "").split(",") if p]


def open_topic_store(options) -> TieredTopicStore:
    store = open_store(options["path"], _opt(options, "layout"), **storage_options(options))
    return TieredTopicStore(store, _paths(options, "remoteLogMetadata"))


@dataclass
class TieredSplit:
    """One piece of one partition, offsets [lo, hi], and the isolation state at its start."""
    part: TieredPartition  # detached: this piece only
    piece: Piece
    lo: int
    hi: int | None
    level: str
    aborted: list
    last_stable_offset: int | None


def _newer_than(piece: Piece, ranges: Ranges) -> bool:
    """Whether a remote copy can hold records at or after ``startingTimestamp`` (its metadata's
    maximum timestamp says)."""
    return ranges.first_timestamp is None or piece.copy is None \
        or piece.copy.metadata.max_timestamp_ms >= ranges.first_timestamp


def _offset_splits(part: TieredPartition, piece: Piece, lo: int, hi: int | None, split_bytes: int) -> list:
    """[lo, hi] cut at offset-index entries about ``split_bytes`` apart (a remote copy's index)."""
    path = piece.obj.files.get(INDEX) if piece.obj else None
    if not path:
        return [(lo, hi)]
    from pykbatch.log.indexes import CorruptIndexError, OffsetIndex
    try:
        entries = OffsetIndex(part.store.read(path), piece.base_offset, path).entries
    except (CorruptIndexError, OSError):
        return [(lo, hi)]
    cuts, last_pos = [], 0
    for e in entries:
        if e.offset > lo and (hi is None or e.offset <= hi) and e.position - last_pos >= split_bytes:
            cuts.append(e.offset)
            last_pos = e.position
    bounds = [lo] + cuts
    return [(a, (b - 1) if b is not None else hi) for a, b in zip(bounds, cuts + [None])]


def plan(options, ranges: Ranges, split_bytes: int) -> list[TieredSplit]:
    level = check_level(_opt(options, "isolationLevel", READ_UNCOMMITTED))
    topic_store = open_topic_store(options)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parts = topic_store.partitions(_paths(options, "localDirs"))
    for w in caught:
        LOG.warning("%s", w.message)
    splits = []
    for part in parts:
        tip = part.partition
        if (ranges.topics is not None and tip.topic not in ranges.topics) \
                or (ranges.partitions is not None and tip.partition not in ranges.partitions):
            continue
        committed = level != READ_UNCOMMITTED
        aborted = [tuple(t) for t in part.aborted_transactions()] if committed else []
        last_stable = part.last_stable_offset() if committed else None
        for r in part.reports:
            LOG.warning("kafka-segment (tiered): %s", r.line())
        for piece in part.pieces:
            span = piece.clip(ranges.first_offset, None if ranges.end_offset is None else ranges.end_offset - 1)
            if span is None or not _newer_than(piece, ranges):
                continue
            lo, hi = span
            detached = part.detached([piece])
            for a, b in _offset_splits(part, piece, lo, hi, split_bytes):
                splits.append(TieredSplit(detached, piece, a, b, level, aborted, last_stable))
    return splits


def tiered_reports(path: str, **options) -> list:
    """What the plan of a tiered read would report (holes, missing objects, unfinished uploads...),
    with the same options as the read; no Spark needed."""
    options = {"path": path, **{k: str(v) for k, v in options.items()}}
    parts = open_topic_store(options).partitions(_paths(options, "localDirs"))
    return [r for part in parts for r in part.reports]


def read_split(split: TieredSplit, mode: str, validate: bool, ranges: Ranges, window_bytes: int,
               include_path: bool):
    """Arrow record batches of one split: kafka-segment's columns, then ``leader_epoch``."""
    from pykbatch.tiered.tables import edge_mask, epoch_column, lineage_arrays, piece_windows

    from .segment_columns import arrow_schema, entries_batch, lost_rows
    part, piece = split.part, split.piece
    iso = Isolation(split.level, [AbortedTxn(*t) for t in split.aborted], split.last_stable_offset,
                    fetch_offset=split.lo)
    base_schema = arrow_schema(mode, validate)
    out_schema = pa.schema((fields(READ, "path") if include_path else []) + list(base_schema)
                           + [EPOCH_COLUMN])
    starts, epochs = lineage_arrays(part, piece)
    known = len(part.reports)
    # a batch whose CRC fails is read: validated, its rows carry the verdict; without validate its
    # records are read as their bytes say, as the segment reader's (docs/spark.md)
    verdicts: dict = {}  # each entry's verdict from one walk of the piece (the window sees only itself)
    windowed: set = set()  # positions of the entries given rows of their own
    for data, run in piece_windows(part, piece, iso, split.lo, split.hi, window_bytes,
                                   lambda b: ranges.keeps_batch(b, mode), verify_crc=False, verdicts=verdicts):
        windowed.update(pos for pos, _ in run)
        *lost, rb = entries_batch(data, run, piece.base_offset, part.partition.topic, part.partition.partition,
                                  mode, validate, base_schema, ranges, verdicts_at=verdicts)
        for named in lost:  # entries whose records do not read: rows of their own, no epoch
            named = named.filter(pa.array([owns(split.lo, split.hi, first, last) for first, last in zip(
                named.column("lost_first_offset").to_pylist(), named.column("lost_last_offset").to_pylist())]))
            yield _placed(named, pa.nulls(named.num_rows, EPOCH_COLUMN.type), piece.path if include_path else None,
                          out_schema)
        offsets = rb.column(rb.schema.get_field_index("offset" if mode == "records" else "base_offset"))
        inside = edge_mask(offsets, split.lo, split.hi, iso.last_stable_offset)
        if inside is not None:
            rb = rb.filter(inside)
            offsets = rb.column(rb.schema.get_field_index("offset" if mode == "records" else "base_offset"))
        yield _placed(rb, epoch_column(offsets, starts, epochs), piece.path if include_path else None, out_schema)
    if validate:  # what the walk could not read at all, each range a row (an entry's verdict is its own row's)
        named = _unreadable(part.reports[known:], windowed)
        if named:
            rb = lost_rows(named, piece.base_offset, part.partition.topic, part.partition.partition, base_schema, ranges)
            yield _placed(rb, pa.nulls(rb.num_rows, EPOCH_COLUMN.type), piece.path if include_path else None,
                          out_schema)
    for r in part.reports:
        LOG.warning("kafka-segment (tiered): %s", r.line())


def _placed(rb: pa.RecordBatch, epoch, path: str | None, schema: pa.Schema) -> pa.RecordBatch:
    """kafka-segment's columns of ``rb`` with the tiered read's: ``path`` first (when asked for),
    ``leader_epoch`` last."""
    columns = list(rb.columns) + [epoch]
    if path is not None:
        columns = [pa.repeat(pa.scalar(path, pa.string()), rb.num_rows)] + columns
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _unreadable(reports, windowed: set) -> list:
    """The ``Unreadable`` ranges of a piece's reports: lost framing, offsets in no batch, an object
    cut short, an entry that is in no window (one in ``windowed`` has rows of its own, with its
    verdict)."""
    from pykbatch.log.split_truth import Unreadable
    from pykbatch.rules import BY_ID
    out = []
    for r in reports:
        rule = BY_ID.get(r.rule) if r.rule else None
        if rule is not None and (rule.stage == "framing" or r.rule in ("log.offset_gap", "log.segment_truncated")
                                 or r.position not in windowed):
            out.append(Unreadable(r.position if r.position is not None else 0, r.size or 0, r.start, r.end,
                                  r.rule, rule.code, r.detail))
    return out
