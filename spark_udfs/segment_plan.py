"""Planning a kafka-segment read: which segment files a path holds (local or through fsspec),
which of them and which byte ranges of them can hold records in the requested ranges, and the
splits Spark reads in parallel.  Nothing here decodes records."""
from __future__ import annotations

import bisect
import datetime
import os
from typing import NamedTuple

from pykbatch import _native
from pykbatch.log import (
    LOG, CorruptIndexError, OffsetIndex, Segment, TimeIndex, base_offset_of, is_segment_file, sibling, topic_partition_of,
)

def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _fsspec(path: str):
    try:
        import fsspec
    except ImportError:
        raise ImportError(f"kafka-segment: reading {path} needs fsspec (pip install 'pykbatch[remote]', plus "
                          f"the filesystem's package, e.g. s3fs for s3://)") from None
    return fsspec


def path_not_found(path: str) -> str:
    """The message of a missing path, worded as Spark's own file sources word it."""
    return f"[PATH_NOT_FOUND] Path does not exist: {path}."


def find_segments(path: str) -> list[tuple[str, str, int]]:
    """(file, topic, partition) of every ``.log`` segment under ``path``."""
    out = []
    if _is_local(path):
        root = _local(path)
        if not os.path.exists(root):
            raise FileNotFoundError(path_not_found(path))
        files = [root] if os.path.isfile(root) else [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
    else:
        fs, root = _fsspec(path).core.url_to_fs(path)
        if not fs.exists(root):
            raise FileNotFoundError(path_not_found(path))
        scheme = path.split("://", 1)[0]  # the user's (s3a://, not the file system's first name, s3://)
        files = [f"{scheme}://{fs.unstrip_protocol(f).split('://', 1)[1]}"
                 for f in (fs.find(root) if fs.isdir(root) else [root])]
    for f in sorted(files):
        name = f.rstrip("/").rsplit("/", 1)[-1]
        if is_segment_file(name, LOG):
            parent = f.rstrip("/").rsplit("/", 2)[-2] if "/" in f else ""
            topic, partition = topic_partition_of(parent) or (parent, -1)
            out.append((f, topic, partition))
    return out


class Ranges(NamedTuple):
    """The record ranges a read keeps: offsets [first_offset, end_offset), timestamps
    [first_timestamp, end_timestamp), topics and partitions; None leaves a side open."""
    first_offset: int | None = None
    end_offset: int | None = None
    first_timestamp: int | None = None
    end_timestamp: int | None = None
    topics: frozenset | None = None
    partitions: frozenset | None = None

    @classmethod
    def from_options(cls, options) -> "Ranges":
        def number(key):
            value = options.get(key)
            return int(value) if value not in (None, "") else None
        return cls(number("startingOffset"), number("endingOffset"), number("startingTimestamp"),
                   number("endingTimestamp"))

    def bounds(self) -> tuple | None:
        """(first_offset, end_offset, first_timestamp, end_timestamp) as the core takes them
        (kb_ranges.h), or None when no side is set."""
        bounds = (self.first_offset, self.end_offset, self.first_timestamp, self.end_timestamp)
        return None if bounds == (None, None, None, None) else bounds

    def keeps_batch(self, b, mode: str = "records") -> bool:
        """Whether batch ``b`` (of a walk) is read: the core's rule (kb_ranges_keeps_entry, which
        the JVM reader applies too) -- in records mode, when any of its records can be in range (a
        batch stores its maximum timestamp, not its minimum: records are filtered exactly
        afterwards); in batches mode also only when its first timestamp (v2's baseTimestamp; a
        v0/v1 entry's own) is before ``end_timestamp``."""
        bounds = self.bounds()
        return bounds is None or _native.batch_in_ranges(b, bounds, mode == "records")

    def keeps_segment(self, base: int, next_base: int | None, topic: str, partition: int) -> bool:
        """Whether a segment of ``topic``-``partition`` named ``base`` can hold records in range:
        it holds offsets in [base, next_base) (Kafka's log invariant).  An empty offset range (a
        WHERE clause's contradictory bounds) keeps none."""
        return not ((self.first_offset is not None and self.end_offset is not None
                     and self.first_offset >= self.end_offset)
                    or (self.first_offset is not None and next_base is not None and next_base <= self.first_offset)
                    or (self.end_offset is not None and base >= self.end_offset)
                    or (self.topics is not None and topic not in self.topics)
                    or (self.partitions is not None and partition not in self.partitions))


def next_base_offsets(segments: list) -> dict:
    """segment file -> the base offset of the next segment in its directory (None for the last)."""
    by_dir = {}
    for path, _, _ in segments:
        by_dir.setdefault(path.rstrip("/").rsplit("/", 1)[0], []).append((base_offset_of(path), path))
    following = {}
    for entries in by_dir.values():
        entries.sort()
        for (_, path), nxt in zip(entries, entries[1:] + [(None, None)]):
            following[path] = nxt[0]
    return following


def load_index(path: str, kind):
    """A local segment's ``OffsetIndex`` or ``TimeIndex`` (``kind``), or None when it is missing,
    unreadable or corrupt: then nothing is split or pruned by it."""
    index_path = sibling(_local(path), kind.SUFFIX)
    if not _is_local(path) or not os.path.exists(index_path):
        return None
    try:
        return kind.from_file(index_path)
    except (CorruptIndexError, OSError):
        return None


def start_position(path: str, ranges: Ranges, index: OffsetIndex | None = None) -> int:
    """Where the first in-range batch of a local segment can start, from its ``.index`` (``index``
    when already loaded) and ``.timeindex`` (0 without them).  An index entry is trusted only if
    a whole, CRC-checked entry starts at its position: indexes can be stale."""
    base = base_offset_of(path)
    targets = []  # offsets: every batch that ends at or below one of these is out of range
    if ranges.first_offset is not None:
        targets.append(ranges.first_offset)
    time_index = load_index(path, TimeIndex) if ranges.first_timestamp is not None else None
    if time_index is not None:
        entries = time_index.entries
        # an entry (T, o) says every record up to offset o has a timestamp <= T
        i = bisect.bisect_left([e.timestamp for e in entries], ranges.first_timestamp)
        if i:
            targets.append(entries[i - 1].offset)
    if not targets:
        return 0
    if index is None:
        index = load_index(path, OffsetIndex)
    if index is None:
        return 0
    with Segment(_local(path)) as seg:
        return max(seg.trusted_start(index.lookup(max(target, base))) for target in targets)


def split_points(path: str, index: OffsetIndex | None, size: int, split_bytes: int) -> list[int]:
    """Batch boundaries about ``split_bytes`` apart, from the segment's ``.index`` (which holds
    batch positions); without one the segment is a single split.  A position becomes a boundary
    only where the log confirms it (``Segment.trusted_start``: a whole, CRC-checked entry starts
    there, or the walk is resumed from the sound entry before it): a stale index must not cut a
    read where no entry starts, nor make what is read depend on ``split_bytes``."""
    starts = [0]
    candidates = [e for e in (index.entries if index is not None else ()) if 0 < e.position < size]
    if not candidates or candidates[-1].position < split_bytes:
        return starts
    with Segment(_local(path)) as seg:
        for entry in candidates:
            if entry.position - starts[-1] >= split_bytes and seg.trusted_start(entry) == entry.position:
                starts.append(entry.position)
    return starts


def validates(options, mode: str) -> bool:
    """Whether a read is validated (``validate``): by default in records mode, whose decoding reads
    every byte anyway -- a batch whose records do not pass is marked (``batch_ok`` false) and what
    cannot be read is a row of its own, never left out unsaid; not by default in batches mode, a
    scan of headers that does not read the records' bytes.  ``validate=false`` reads records as
    their bytes say, a batch whose CRC fails included, unmarked: for logs known sound."""
    value = options.get("validate")
    if value is None or str(value).strip() == "":
        return mode == "records"
    value = str(value).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"kafka-segment: validate is true or false, not {options.get('validate')!r}")
    return value == "true"


def read_mode(options) -> str:
    """``records`` (decode every record) or ``batches`` (headers only), from ``mode`` or from
    ``deep`` (true / false, as kafka-dump-log's --deep-iteration)."""
    mode, deep = options.get("mode"), options.get("deep")
    if deep is not None:
        implied = "records" if str(deep).lower() == "true" else "batches"
        if mode is not None and mode != implied:
            raise ValueError(f"kafka-segment: deep={deep} contradicts mode={mode}")
        mode = implied
    mode = mode or "records"
    if mode not in ("records", "batches"):
        raise ValueError(f"kafka-segment: mode is 'records' or 'batches', not {mode!r}")
    return mode


class Split(NamedTuple):
    """One split to read: the entries of segment ``path`` starting in [start, end) (end None: to
    its end); ``next_base``: the base offset of the next segment of its partition (None: it is the
    last), ``follows``: a segment precedes it -- what the split that ends (starts) the segment
    needs to name a segment cut short or offsets missing between segments."""
    path: str
    topic: str
    partition: int
    start: int
    end: int | None
    next_base: int | None = None
    follows: bool = False
    previous: int | None = None
    """The start of the split before it in the same segment (its last entry ends where this starts)."""


def plan_splits(path: str, split_bytes: int, ranges: Ranges = Ranges()) -> list[Split]:
    """Every split to read: segments out of the offset range left out, each local segment cut at
    batch boundaries about ``split_bytes`` apart from the first position where in-range records
    can be."""
    splits = []
    segments = find_segments(path)
    next_base = next_base_offsets(segments)
    folders = {seg.rstrip("/").rsplit("/", 1)[0] for seg, _, _ in segments}
    earliest = {d: min(base_offset_of(seg) for seg, _, _ in segments if seg.rstrip("/").rsplit("/", 1)[0] == d)
                for d in folders}
    for seg, topic, partition in segments:
        base = base_offset_of(seg)
        if not ranges.keeps_segment(base, next_base[seg], topic, partition):
            continue
        follows = base > earliest[seg.rstrip("/").rsplit("/", 1)[0]]
        size = os.path.getsize(_local(seg)) if _is_local(seg) else None
        if not size:
            splits.append(Split(seg, topic, partition, 0, None, next_base[seg], follows))
            continue
        index = load_index(seg, OffsetIndex)
        first = start_position(seg, ranges, index)
        points = [p for p in split_points(seg, index, size, split_bytes) if p > first]
        starts = [first] + points
        for k, (start, end) in enumerate(zip(starts, points + [None])):
            splits.append(Split(seg, topic, partition, start, end, next_base[seg], follows,
                                starts[k - 1] if k else None))
    return splits


# (column, filter kind) -> how a constant bounds the [low, high) range: Spark's pushed filters
_BOUNDS = {
    "GreaterThan": lambda v: (v + 1, None), "GreaterThanOrEqual": lambda v: (v, None),
    "LessThan": lambda v: (None, v), "LessThanOrEqual": lambda v: (None, v + 1),
    "EqualTo": lambda v: (v, v + 1), "In": lambda vs: (min(vs), max(vs) + 1),
}
_RANGE_FIELDS = {"offset": ("first_offset", "end_offset"), "timestamp": ("first_timestamp", "end_timestamp")}


def _millis(value: datetime.datetime, up: bool) -> int:
    """A Spark timestamp (as PySpark hands it: naive local time, or aware) in epoch milliseconds,
    rounded down, or up with ``up``."""
    if value.tzinfo is None:
        value = value.astimezone()  # naive: the local time PySpark made it from
    micros = (value - _EPOCH) // datetime.timedelta(microseconds=1)
    return -((-micros) // 1000) if up else micros // 1000


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _datetime_bounds(kind: str, values: tuple) -> tuple:
    """_BOUNDS for timestamps given as datetimes: a lower bound rounded down, an upper one up, so
    that a record a sub-millisecond bound would keep is never pruned."""
    low = min(_millis(v, False) for v in values)
    high = max(_millis(v, True) for v in values)
    return {"GreaterThan": (low, None), "GreaterThanOrEqual": (low, None), "LessThan": (None, high),
            "LessThanOrEqual": (None, high + 1), "EqualTo": (low, high + 1), "In": (low, high + 1)}[kind]


def narrow(ranges: Ranges, filters, mode: str = "records") -> Ranges:
    """``ranges`` tightened by the filters Spark pushes to a reader (pyspark.sql.datasource's
    ``EqualTo``, ``GreaterThan``, ``In``...) on ``offset`` / ``timestamp`` (records mode) and
    ``topic`` / ``partition``; any other filter is ignored.  Spark still evaluates every filter
    after the read, so narrowing only has to be conservative, never exact."""
    fields = ranges._asdict()
    for f in filters:
        kind = type(f).__name__
        column = f.attribute[0] if len(f.attribute) == 1 else None
        if column in _RANGE_FIELDS and mode == "records" and kind in _BOUNDS:
            values = tuple(f.value) if kind == "In" else (f.value,)
            if values and all(isinstance(v, datetime.datetime) for v in values):
                low, high = _datetime_bounds(kind, values)
            elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                low, high = _BOUNDS[kind](f.value)
            else:
                continue
            lo_field, hi_field = _RANGE_FIELDS[column]
            if low is not None:
                fields[lo_field] = low if fields[lo_field] is None else max(fields[lo_field], low)
            if high is not None:
                fields[hi_field] = high if fields[hi_field] is None else min(fields[hi_field], high)
        elif column in ("topic", "partition") and kind in ("EqualTo", "In"):
            allowed = frozenset(f.value if kind == "In" else (f.value,))
            key = column + "s"
            fields[key] = allowed if fields[key] is None else fields[key] & allowed
    return Ranges(**fields)
