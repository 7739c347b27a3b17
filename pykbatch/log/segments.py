"""Log segments and partition directories on disk or in object storage (Kafka's LogSegment and
UnifiedLog's directory).

    with pykbatch.read_segment("t-0/00000000000000001000.log") as seg:
        for batch in seg.batches(): ...
        seg.invalid_tail_bytes          # Kafka's "Found N invalid bytes at the end of ..."
    part = pykbatch.open_partition("t-0")
    part.find_offset(1234), part.find_timestamp(1_700_000_000_000)

A segment is read through ``mmap``, so memory stays bounded whatever its size; a file-like
object without a file descriptor (fsspec / S3) is first spooled to a temporary file.
"""
from __future__ import annotations

import bisect
import mmap
import os
import shutil
import stat
import tempfile
import weakref
from typing import Callable, Iterator

from pykbatch import _native
from pykbatch.config import ValidationConfig
from pykbatch.errors import KafkaDataError, error_for
from pykbatch.result import Culprit, LostSpan
from pykbatch.rules import BY_ID
from pykbatch.log.files import LEADER_EPOCH_CHECKPOINT, LOG, STDIN, base_offset_of, is_segment_file, sibling
from pykbatch.log.indexes import Checkpoint, IndexEntry, OffsetIndex, ProducerSnapshot, TimeIndex

SPOOL_CHUNK = 8 * 1024 * 1024
RELEASE_BYTES = 64 * 1024 * 1024  # read pages handed back to the kernel every so often


class Segment:
    """One ``.log`` file.  Iterate ``batches()`` (Batch / LegacyBatch objects whose ``position``
    is the byte position in the file); afterwards ``valid_bytes`` and ``invalid_tail_bytes`` say
    where the complete entries ended.  Sibling index files are opened on demand."""

    def __init__(self, source, base_offset: int | None = None):
        self.path = source if isinstance(source, (str, os.PathLike)) else getattr(source, "name", None)
        self.path = os.fspath(self.path) if self.path is not None else None
        self._file, self._spool = self._open(source)
        self.size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self._guard = _ShrinkGuard(self._map)
        if base_offset is None and self.path:
            try:
                base_offset = base_offset_of(self.path)
            except ValueError:
                base_offset = None
        self.base_offset = base_offset
        self.valid_bytes = 0
        self.lost: list[LostSpan] = []
        self.error: Exception | None = None
        self.cut: Culprit | None = None
        """The ``log.file_shrank`` culprit of the last walk, when the file was cut while it read it."""

    @classmethod
    def in_memory(cls, data, base_offset: int | None = None, path: str | None = None) -> "Segment":
        """A segment over bytes already in memory (a byte range fetched from object storage)."""
        self = object.__new__(cls)
        self.path, self._file, self._spool = path, None, None
        self._guard = _ShrinkGuard(None)
        self.size = len(data)
        self._map = data if self.size else None
        self.base_offset = base_offset
        self.valid_bytes = 0
        self.lost = []
        self.error = None
        self.cut = None
        return self

    @staticmethod
    def _open(source):
        if isinstance(source, (str, os.PathLike)):
            return open(source, "rb"), None
        try:
            if stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                return source, None
        except (AttributeError, OSError, ValueError):
            pass
        # no descriptor (fsspec / S3), or a pipe (stdin): spooled to a temporary file that mmap
        # reads, so memory stays bounded
        spool = tempfile.TemporaryFile()
        shutil.copyfileobj(source, spool, SPOOL_CHUNK)
        spool.flush()
        return spool, spool

    # -- reading ----------------------------------------------------------------------------
    def view(self, max_bytes: int | None = None) -> memoryview:
        """The file's bytes (the first ``max_bytes``), zero-copy."""
        if self._map is None:
            return memoryview(b"")
        view = memoryview(self._map)
        return view if max_bytes is None else view[:max_bytes]

    def batches(self, *, verify_crc: bool = False, start: int = 0, max_bytes: int | None = None,
                on_lost: Callable[[LostSpan], object] | None = None, resync: bool = True) -> Iterator:
        """Every complete entry from byte ``start`` on, in file order.  Where the entry framing is
        lost (a size below the minimum, an invalid magic, an interior size running past the end
        while sound entries follow), the bytes up to the next sound entry are skipped and kept in
        ``lost`` as a ``LostSpan`` (and handed to ``on_lost`` in their place in the walk): the
        walk goes on, so no sound batch is lost because a neighbour lied.  Zero bytes after the
        last entry (a preallocated segment) end it quietly, as a truncated entry does: both count
        in ``invalid_tail_bytes``.  ``error`` keeps the first lost span's fault.  ``resync=False``:
        read as Kafka's reader does, which stops where the framing is lost (raising) -- what a
        check of the entry at one position (an index entry's) needs."""
        data = self.view(max_bytes)
        self.lost = []

        def lost(span: LostSpan) -> None:
            span = self._shrank_span(span)
            self.valid_bytes = span.position + span.size
            self.lost.append(span)
            if self.error is None:
                self.error = span.error
            if on_lost is not None:
                on_lost(span)

        reader = _native.BatchReader(data, verify_crc, start=start, on_lost=lost if resync else None)
        self.valid_bytes = start
        released = start - start % mmap.PAGESIZE
        entries = 0
        hit, guard = _native._shrink_guard_hit, self._guard.handle  # one C read per batch
        for b in reader:
            if guard >= 0 and hit(guard) and b.position + b.size > self._size_now():
                break  # what the cut took reads as zeros: not a batch (named below)
            entries += 1
            self.valid_bytes = b.position + b.size
            if b.position - released >= RELEASE_BYTES:
                released = self._release(released, b.position)
            yield b
        if self.shrunk and self.valid_bytes < len(data):  # the walk ended on the zeros of a cut
            lost(self._cut_span(entries + len(self.lost), self.valid_bytes))

    @property
    def shrunk(self) -> bool:
        """Whether a read of this mapped file met its end moved back: the file was cut while it
        was read (a broker truncates and deletes segments), and what it lost read as zeros
        (csrc/kb_shrink_guard.h) -- reported as ``log.file_shrank``, never as the log's end.  A
        cut inside a page does not fault: the walk reads zeros to that page's end, which fail the
        CRC of a batch they end (``verify_crc``) and end the walk as a zero tail would; its end
        then asks the file's size.  Checked when the walk ends or loses its framing, not per batch
        (a syscall per batch would triple the cost of a header walk)."""
        return self._guard.hit() or (isinstance(self._map, mmap.mmap) and self._size_now() < self.size)

    def _size_now(self) -> int:
        try:
            return os.fstat(self._file.fileno()).st_size
        except (OSError, ValueError, AttributeError):
            return 0

    def cut_culprit(self, position: int, size: int, entry: int = 0) -> Culprit | None:
        """``log.file_shrank`` for the ``size`` bytes at ``position`` when the file no longer holds
        them whole (cut while it was read: what it lost read as zeros), else None."""
        if not self.shrunk:
            return None
        now = self._size_now()
        return file_shrank(entry, position, self.size, now) if position + size > now else None

    def _shrank_span(self, span: LostSpan) -> LostSpan:
        """A lost span the walk met past the file's new end is what the cut took: from the span's
        start to the end as mapped, ``log.file_shrank``."""
        if self.cut_culprit(span.position, span.size) is None:
            return span
        return self._cut_span(span.entry, span.position)

    def _cut_span(self, entry: int, position: int) -> LostSpan:
        culprit = self.cut = file_shrank(entry, position, self.size, self._size_now())
        return LostSpan(entry, position, self.size - position,
                        error_for(culprit.code, culprit.message, position, culprit.rule))

    @property
    def lost_bytes(self) -> int:
        """Bytes the last walk skipped where the framing was lost (``lost``)."""
        return sum(span.size for span in self.lost)

    def validate(self, config=None, max_bytes: int | None = None,
                 progress: Callable[[int], object] | None = None):
        """``pykbatch.validate`` of the segment's bytes (the first ``max_bytes``) in bounded
        memory: the pages of a mapped file are handed back as the walk passes them.
        ``progress``: called with the byte position reached, now and then."""
        view = self.view(max_bytes)
        if isinstance(self._map, mmap.mmap):
            result = _native._validate_mapped(view, config, progress=progress)
            if self.shrunk:  # cut while read: what is left, validated, and what the cut took
                result = self._validated_after_cut(config, len(view))
        else:
            result = _native.validate(view, config)
        bound_unsound(result.culprits, base_offset=self.base_offset)
        return result

    def _validated_after_cut(self, config, end: int):
        """The validation of the bytes the file still holds (those of the mapping before its new
        end are the file's), with a ``log.file_shrank`` culprit for the rest up to ``end``."""
        now = min(self._size_now(), end)
        result = _native.validate(self.view(now), config)
        position = result.truncated_tail.position if result.truncated_tail else now
        entry = result.truncated_tail.entry if result.truncated_tail else result.entries
        result.truncated_tail = None
        result.culprits.append(file_shrank(entry, position, self.size, now))
        result.culprit_count += 1
        result.counters[result.culprits[-1].rule] = result.counters.get(result.culprits[-1].rule, 0) + 1
        return result

    def order_faults(self, max_bytes: int | None = None, compacted: bool = False) -> dict:
        """The validator's culprits of the entries' order (offsets that go backwards; offsets
        missing between entries unless ``compacted``), by the position of the entry each is
        reported against: what dump and export name, as validate and repair do."""
        config = _ORDER_CHECKS_COMPACTED if compacted else _ORDER_CHECKS
        result = self.validate(config, max_bytes=max_bytes)  # pages handed back as it goes
        return {c.entry_position: c for c in result.culprits if BY_ID[c.rule].between}

    def _release(self, start: int, end: int) -> int:
        """Drops the pages of [start, end) from this process's resident set (the file stays in the
        page cache; a later access faults them back in), so reading a large segment keeps the
        RSS bounded.  Returns where the next release starts."""
        end -= end % mmap.PAGESIZE
        if self._map is not None and hasattr(self._map, "madvise") and end > start:
            self._map.madvise(mmap.MADV_DONTNEED, start, end - start)
        return end

    @property
    def invalid_tail_bytes(self) -> int:
        """Bytes after the last complete entry (a truncated write, or a preallocated zero tail)."""
        return self.size - self.valid_bytes

    # -- the segment's index files -----------------------------------------------------------
    def _sibling(self, kind):
        """The segment's file read by ``kind`` (an index or state reader), None if absent."""
        if not self.path or self.base_offset is None:
            return None
        path = sibling(self.path, kind.SUFFIX)
        return kind.from_file(path) if os.path.exists(path) else None

    @property
    def offset_index(self) -> OffsetIndex | None:
        return self._sibling(OffsetIndex)

    @property
    def time_index(self) -> TimeIndex | None:
        return self._sibling(TimeIndex)

    def trusted_start(self, entry: IndexEntry) -> int:
        """Where to start reading for the offsets up to ``entry.offset``: the offset index entry's
        position when a sound entry starts there (``pykbatch.entry_is_sound``) with offsets from
        the segment's base to the entry's; 0 otherwise (indexes can be stale or damaged)."""
        return entry.position if index_entry_trusted(
            self.view(), entry, self.base_offset if self.base_offset is not None else 0) else 0

    # -- lookups -----------------------------------------------------------------------------
    def find_offset(self, offset: int):
        """The batch holding ``offset`` (the first batch ending at or after it, as Kafka's fetch
        answers), starting from the offset index's position; None past the end."""
        index = self.offset_index
        start = self.trusted_start(index.lookup(offset)) if index else 0
        return next((b for b in self.batches(start=start) if b.last_offset >= offset), None)

    def find_timestamp(self, timestamp: int):
        """The first batch with a timestamp at or after ``timestamp`` (ListOffsets' answer),
        starting from the time index's entry; None if every batch is older."""
        start = 0
        tindex, index = self.time_index, self.offset_index
        if tindex and index:
            start = self.trusted_start(index.lookup(tindex.lookup(timestamp).offset))
        return next((b for b in self.batches(start=start) if b.max_timestamp >= timestamp), None)

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._guard.end()  # before the mapping goes: its addresses may be mapped again
            try:
                self._map.close()
            except BufferError:  # batches still alive hold views; the map goes with them, guarded
                self._guard = _ShrinkGuard(self._map)
            self._map = None
        if self._file is not None and (isinstance(self.path, str) or self._spool is not None):
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<Segment {self.path or '(stream)'} base offset {self.base_offset}, {self.size} bytes>"


_SHRANK = BY_ID["log.file_shrank"]


def file_shrank(entry: int, position: int, was: int, now: int) -> Culprit:
    """``log.file_shrank``: the file was cut from ``was`` to ``now`` bytes while it was read; its
    bytes from ``position`` (the first entry not read whole) were not read."""
    message = _SHRANK.message(a0=was, a1=now, a2=position)
    return Culprit(entry, None, None, _SHRANK.code, _SHRANK.id, position, None, position, message, _SHRANK.detail,
                   _SHRANK.kafka)


class _ShrinkGuard:
    """A mapping's registration with csrc/kb_shrink_guard.h (a read past the file's new end sees
    zeros instead of ending the process), ended with the mapping: by ``end()`` before it is closed,
    or when the map object goes."""
    __slots__ = ("handle", "was_hit", "__weakref__")

    def __init__(self, mapped):
        self.handle = _native._shrink_guard_add(mapped) if isinstance(mapped, mmap.mmap) else -1
        self.was_hit = False
        if self.handle >= 0:
            weakref.finalize(mapped, self.end)

    def hit(self) -> bool:
        return self.was_hit or (self.handle >= 0 and _native._shrink_guard_hit(self.handle))

    def end(self) -> None:
        if self.handle >= 0:
            self.was_hit = _native._shrink_guard_remove(self.handle) or self.was_hit
            self.handle = -1


# the entries' order only (Rule.between culprits come from the validator's walk of a log)
_ORDER_CHECKS = ValidationConfig(origin="log", verify_crc=False, max_culprits=2**31 - 1)
_ORDER_CHECKS_COMPACTED = ValidationConfig(origin="log", verify_crc=False, max_culprits=2**31 - 1, compacted=True)


def first_offset(b, after: int | None = None, default: int | None = None) -> int | None:
    """A batch's first offset.  A compressed magic 0/1 wrapper's header gives only its last (its
    first is its records'): when they do not decompress, the one after ``after`` (the offset
    before it, as a log that was not compacted has it) where that lies inside it, else ``default``."""
    try:
        return b.base_offset
    except KafkaDataError:
        return after + 1 if after is not None and after < b.last_offset else default


def bound_unsound(culprits: list, base_offset: int | None = None, next_first: int | None = None) -> None:
    """Culprits of bytes whose framing was lost at a segment's start or end know only one side of
    the offsets they hide: the segment's base offset (its file name) is the first, the next
    segment's first offset less one the last."""
    for c in culprits:
        if c.first_offset is None and c.last_offset is not None and base_offset is not None \
                and base_offset <= c.last_offset:
            c.first_offset = base_offset
        elif c.last_offset is None and c.first_offset is not None and c.record_index is None \
                and next_first is not None and next_first > c.first_offset:
            c.last_offset = next_first - 1


def open_input(path: str, base_offset: int | None = None) -> Segment:
    """The segment a command is handed: a file's path, or "-" for standard input (spooled to a
    temporary file, so it is read as a file is)."""
    import sys
    return Segment(sys.stdin.buffer if path == STDIN else path, base_offset)


def read_segment(source, base_offset: int | None = None) -> Segment:
    """Opens a ``.log`` segment: a path, or a binary file-like object (one without a file
    descriptor, e.g. from fsspec/S3, is spooled to a temporary file first)."""
    return Segment(source, base_offset)


class Partition:
    """A partition directory: its segments in offset order, producer snapshots and the leader
    epoch checkpoint."""

    def __init__(self, directory: str):
        self.directory = os.fspath(directory)
        names = sorted(os.listdir(self.directory))
        self.segment_paths = sorted((os.path.join(self.directory, n) for n in names if is_segment_file(n, LOG)),
                                    key=base_offset_of)
        self.snapshot_paths = sorted((os.path.join(self.directory, n) for n in names
                                      if is_segment_file(n, ProducerSnapshot.SUFFIX)), key=base_offset_of)

    @property
    def leader_epochs(self) -> Checkpoint | None:
        """The leader-epoch checkpoint; None when absent or damaged (the audit reports why)."""
        path = os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT)
        try:
            return Checkpoint.from_file(path) if os.path.exists(path) else None
        except ValueError:
            return None

    @property
    def base_offsets(self) -> list[int]:
        return [base_offset_of(p) for p in self.segment_paths]

    def segments(self) -> Iterator[Segment]:
        for path in self.segment_paths:
            with Segment(path) as seg:
                yield seg

    def batches(self, *, verify_crc: bool = False) -> Iterator:
        """Every batch in offset order.  ``pykbatch.log.read_partition`` gives the same batches and
        names, in their place, every range whose records cannot be read (lost framing, missing
        offsets, a closed segment cut short)."""
        for seg in self.segments():
            yield from seg.batches(verify_crc=verify_crc)

    def _first(self, paths, find):
        """``find(segment)`` over the segments in order; the first batch found (its segment stays
        open: the batch reads from it)."""
        for path in paths:
            seg = Segment(path)
            found = find(seg)
            if found is not None:
                return found
            seg.close()
        return None

    def find_offset(self, offset: int):
        """The batch holding ``offset`` (or the first after it), searching from the segment whose
        base offset is at or below it."""
        start = max(0, bisect.bisect_right(self.base_offsets, offset) - 1)
        return self._first(self.segment_paths[start:], lambda seg: seg.find_offset(offset))

    def find_timestamp(self, timestamp: int):
        """The first batch with a timestamp at or after ``timestamp``, across segments."""
        return self._first(self.segment_paths, lambda seg: seg.find_timestamp(timestamp))

    def __repr__(self):
        return f"<Partition {self.directory}: {len(self.segment_paths)} segments>"


def open_partition(directory) -> Partition:
    return Partition(directory)


def index_entry_trusted(data, entry: IndexEntry, segment_base: int) -> bool:
    """Whether an offset index entry can be followed in ``data`` (the segment's bytes): position 0, or a sound entry at its position whose base offset lies
    between the segment's base and the entry's offset (the last offset of the batch it indexes): the core's rule
    (kb_index_entry_trusted), which the JVM reader's plan applies too."""
    return _native.index_entry_trusted(data, entry.position, segment_base, entry.offset)
