"""A partition as the broker serves it: its remote copies (the ones the metadata makes
authoritative) and, when given, the broker's local segments, stitched by offset.

    store = tiered.open_store("s3://bucket/tiered")             # or a local path
    topic = tiered.TieredTopicStore(store, metadata_dir="/kafka/logs/__remote_log_metadata-0")
    for part in topic.partitions(local_dirs=["/kafka/logs"]):
        for batch, record in part.records(isolation="read_committed"):
            ...
        part.reports            # holes, missing or truncated objects, unfinished uploads ...

Nothing is skipped silently: what the plan leaves out or cannot read becomes a ``Report`` with
its offsets, and reading goes on with the rest.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from pykbatch.config import ValidationConfig
from pykbatch.errors import KafkaDataError
from pykbatch.kafka.isolation import READ_UNCOMMITTED, Isolation, open_transactions
from pykbatch.log import Partition, Segment, base_offset_of, sibling
from pykbatch.log.segments import first_offset
from pykbatch.rules import BY_ID
from pykbatch.log.indexes import AbortedTxn, Checkpoint, CorruptIndexError, OffsetIndex, ProducerSnapshot, TxnIndex
from pykbatch.kafka.definitions import kafka_uuid

from pykbatch.tiered import layouts
from pykbatch.tiered.layouts import Layout, RemoteObject
from pykbatch.tiered.metadata import TopicIdPartition
from pykbatch.tiered.remote_log import Copy, Lineage, RemotePartition, replay

RANGE_BLOCK = 16 << 20  # bytes per ranged request of a remote object: few requests, bounded memory


IN_MEMORY_BYTES = 64 << 20  # a fetched range up to this size stays in memory; larger ones spool to disk


def _batch_range(read, path: str, position: int, end: int, next_position: int | None) -> tuple[int, int] | None:
    """The bytes of the batch at ``position`` when it can hold offsets up to ``end``: a v2 header's
    base offset says where it starts (a v0/v1 entry's offset is its last, so that one is always
    taken); None when it cannot."""
    head = read(path, position, position + 17)
    if len(head) < 17:
        return (position, position + len(head)) if head else None
    base, length, magic = int.from_bytes(head[:8], "big", signed=True), int.from_bytes(head[8:12], "big"), head[16]
    if magic >= 2 and base > end:
        return None
    stop = position + 12 + length
    return position, max(position + 17, stop if next_position is None else min(stop, next_position))


class NoMetadataWarning(UserWarning):
    """A remote store read without ``__remote_log_metadata``: the listing is trusted."""


@dataclass(frozen=True)
class Report:
    """Something the reader met and did not hand out as records: ``kind`` is one of
    ``hole`` (no copy serves the offsets: the broker would not serve them either),
    ``missing_object`` (the metadata says the copy is finished; the store has no such object),
    ``truncated_object`` (the object ends before the copy's last offset), ``damaged`` (bytes that
    do not parse), ``copy_unfinished`` / ``copy_deleting`` (an upload not finished, or being deleted:
    not served), ``superseded`` (a duplicate upload the metadata replaced), ``outside_lineage``,
    ``unknown_object`` (an upload the metadata does not know), ``deleted_object_present``,
    ``txn_index_missing``."""
    kind: str
    partition: str
    start: int | None = None
    end: int | None = None
    detail: str = ""
    path: str | None = None
    position: int | None = None
    """The byte of the object (of the bytes read of it) where a ``damaged`` entry starts."""
    rule: str | None = None
    """The validator's rule of a ``damaged`` or ``truncated_object`` report (``pykbatch.rules``)."""
    size: int | None = None
    """The bytes it covers from ``position``, where known (0: offsets with no bytes left of them)."""

    def line(self) -> str:
        where = "" if self.start is None else f" offsets {self.start}-{'' if self.end is None else self.end}"
        return f"{self.partition}{where}: {self.kind}: {self.detail}" + (f" ({self.path})" if self.path else "")


@dataclass(frozen=True)
class Piece:
    """Offsets [start, end] (end None: to the end of the data) read from one segment file."""
    start: int
    end: int | None
    source: str  # "remote" or "local"
    path: str
    base_offset: int
    obj: RemoteObject | None = None
    copy: Copy | None = None
    leader_epochs: tuple = ()

    def clip(self, start: int | None, end: int | None) -> tuple[int, int | None] | None:
        """This piece's part of offsets [start, end] (None: open), or None when they miss it."""
        lo = self.start if start is None else max(start, self.start)
        hi = self.end if end is None else (end if self.end is None else min(end, self.end))
        return None if hi is not None and lo > hi else (lo, hi)


def _checkpoint_epochs(entries) -> list[tuple[int, int]]:
    """A leader-epoch checkpoint's (epoch, start offset) entries."""
    return [(int(e), int(o)) for e, o in entries]


class TieredPartition:
    """One partition: a plan of pieces (remote copies, then local segments) and its reports."""

    def __init__(self, partition: TopicIdPartition, store: Layout | None, remote: RemotePartition | None,
                 local_dir: str | None = None, log_start_offset: int | None = None):
        self.partition = partition
        self.store = store
        self.remote = remote
        self.local = Partition(local_dir) if local_dir else None
        self.log_start_offset = log_start_offset
        self.reports: list[Report] = []
        self.pieces: list[Piece] = []
        self._objects = {o.segment_uuid: o for o in store.objects(partition)} if store else {}
        self._lineage = self._find_lineage()
        self._plan()

    @property
    def name(self) -> str:
        return self.partition.name

    def _report(self, kind, start=None, end=None, detail="", path=None, position=None, rule=None, size=None):
        self.reports.append(Report(kind, self.name, start, end, detail, path, position, rule, size))

    # -- planning -----------------------------------------------------------------------------
    def lineage(self) -> Lineage | None:
        return self._lineage

    def detached(self, pieces: list[Piece]) -> "TieredPartition":
        """A copy that reads ``pieces`` only, without the metadata and listings it was planned
        from: small to ship to a Spark executor (the store's filesystem travels with it)."""
        other = object.__new__(TieredPartition)
        other.__dict__.update(partition=self.partition, store=self.store, remote=None, local=None,
                              log_start_offset=self.log_start_offset, reports=[], pieces=list(pieces),
                              _objects={}, _lineage=self._lineage)
        return other

    def _find_lineage(self) -> Lineage | None:
        """The leader-epoch lineage: the local ``leader-epoch-checkpoint`` when a local directory
        is given, else the checkpoint uploaded with the newest finished copy, else None (the
        metadata's own, see ``RemotePartition.default_lineage``)."""
        if self.local and self.local.leader_epochs:
            return Lineage(_checkpoint_epochs(self.local.leader_epochs.entries))
        if self.remote:
            for copy in sorted(self.remote.referenced(), key=lambda c: c.end, reverse=True):
                obj = self._objects.get(copy.id.id)
                if obj and layouts.EPOCHS in obj.files:
                    try:
                        return Lineage(self._uploaded_epochs(obj))
                    except (CorruptIndexError, UnicodeDecodeError, OSError):
                        continue
        return None

    def _plan(self) -> None:
        local_start = None
        if self.local and self.local.segment_paths:
            local_start = self.local.base_offsets[0]
        remote_pieces = self._remote_pieces() if self.store else []
        pieces = [p for p in remote_pieces if local_start is None or p.start < local_start]
        if local_start is not None:
            # an upload whose end is not known yet (the newest, from the listing) ends where the local log starts
            pieces = [p if p.end is not None and p.end < local_start else replace(p, end=local_start - 1)
                      for p in pieces]
            reached = max((p.end for p in pieces), default=None)
            if reached is not None and reached + 1 < local_start:
                self._report("hole", reached + 1, local_start - 1, "between the remote log's end and the first local segment")
            first = local_start if reached is None else max(local_start, reached + 1)
            bases = self.local.base_offsets
            for i, path in enumerate(self.local.segment_paths):
                end = bases[i + 1] - 1 if i + 1 < len(bases) else None
                if end is not None and end < first:
                    continue
                pieces.append(Piece(max(first, bases[i]), end, "local", path, bases[i]))
        if self.log_start_offset is not None:
            pieces = [p if p.start >= self.log_start_offset else replace(p, start=self.log_start_offset)
                      for p in pieces if p.end is None or p.end >= self.log_start_offset]
        self.pieces = pieces

    def _remote_pieces(self) -> list[Piece]:
        if self.remote is None:
            return self._listing_pieces()
        spans, rejected = self.remote.plan(self.lineage())
        pieces = []
        for span in spans:
            if span.copy is None:
                self._report("hole", span.start, span.end, "no remote copy in the leader-epoch lineage serves these offsets")
                continue
            obj = self._objects.get(span.copy.id.id)
            if obj is None or obj.log is None:
                self._report("missing_object", span.start, span.end,
                             f"the metadata says copy {kafka_uuid(span.copy.id.id)} is finished; the store has no "
                             f"{'object' if obj is None else '.log'} for it")
                continue
            size = obj.sizes.get(layouts.LOG)
            if size is not None and size < span.copy.metadata.size_in_bytes:
                self._report("truncated_object", span.start, span.end,
                             f"the object holds {size} bytes; the metadata says the copy has "
                             f"{span.copy.metadata.size_in_bytes} (what is whole is read)", obj.log)
            pieces.append(Piece(span.start, span.end, "remote", obj.log, obj.start_offset, obj, span.copy,
                                tuple(sorted(span.copy.metadata.leader_epochs.items()))))
        kinds = {"COPY_SEGMENT_STARTED": "copy_unfinished", "DELETE_SEGMENT_STARTED": "copy_deleting",
                 "outside the leader-epoch lineage": "outside_lineage"}
        for r in rejected:
            self._report(kinds.get(r.reason, "superseded"), r.copy.start, r.copy.end,
                         f"copy {kafka_uuid(r.copy.id.id)}: {r.reason}; not read",
                         self._objects[r.copy.id.id].log if r.copy.id.id in self._objects else None)
        known = {c.id.id for c in self.remote.copies.values()}
        deleted = {d.id for d in self.remote.deleted}
        for u, obj in self._objects.items():
            if u in deleted:
                self._report("deleted_object_present", obj.start_offset, None,
                             f"copy {kafka_uuid(u)} was deleted per the metadata; its objects remain", obj.log)
            elif u not in known:
                self._report("unknown_object", obj.start_offset, None,
                             f"upload {kafka_uuid(u)} is not in the remote log metadata; not read", obj.log)
        return pieces

    def _listing_pieces(self) -> list[Piece]:
        """Without metadata: every upload with a .log, ordered by start offset; of uploads that
        start at the same offset, the one with the highest leader epoch (then the largest) wins."""
        best: dict[int, RemoteObject] = {}
        rank: dict = {}  # each upload's checkpoint is read once
        for obj in self._objects.values():
            if obj.log is None:
                self._report("missing_object", obj.start_offset, None, f"upload {kafka_uuid(obj.segment_uuid)} has no .log")
                continue
            rank[obj.segment_uuid] = self._rank(obj)
            cur = best.get(obj.start_offset)
            if cur is None or rank[obj.segment_uuid] > rank[cur.segment_uuid]:
                if cur is not None:
                    self._report("superseded", cur.start_offset, None, "another upload of the same offsets", cur.log)
                best[obj.start_offset] = obj
            else:
                self._report("superseded", obj.start_offset, None, "another upload of the same offsets", obj.log)
        starts = sorted(best)
        return [Piece(s, starts[i + 1] - 1 if i + 1 < len(starts) else None, "remote", best[s].log, s, best[s])
                for i, s in enumerate(starts)]

    def _uploaded_epochs(self, obj: RemoteObject) -> list[tuple[int, int]]:
        """The leader-epoch checkpoint uploaded with a copy (raises if unreadable)."""
        return _checkpoint_epochs(Checkpoint.parse(self.store.read(obj.files[layouts.EPOCHS]).decode()).entries)

    def _rank(self, obj: RemoteObject):
        epoch = -1
        if layouts.EPOCHS in obj.files:
            try:
                epoch = max((e for e, _ in self._uploaded_epochs(obj)), default=-1)
            except (CorruptIndexError, UnicodeDecodeError, OSError):
                pass
        return epoch, obj.sizes.get(layouts.LOG, 0)

    # -- reading ------------------------------------------------------------------------------
    def local_segment(self, piece: Piece, start: int) -> Segment | None:
        """The piece's segment when its bytes are a local file (the broker's log dir, or a store on
        a local file system), from the index position of ``start``; None for a remote object."""
        if piece.source == "local":
            seg = Segment(piece.path, base_offset=piece.base_offset)
            seg.start_position = _index_start(seg.offset_index, seg, start)
            return seg
        local = self.store.local_path(piece.path)
        if local is None:
            return None
        seg = Segment(local, base_offset=piece.base_offset)
        seg.start_position = _index_start(self._remote_index(piece), seg, start)
        return seg

    def _open_piece(self, piece: Piece, start: int, end: int | None) -> Segment:
        """The piece's segment, from the index position of ``start`` (a remote object: only the
        byte ranges holding [start, end] are fetched)."""
        seg = self.local_segment(piece, start)
        if seg is not None:
            return seg
        spans = self.remote_ranges(piece, start, end)
        if spans[-1][1] is not None:
            data = b"".join(self.store.read(piece.path, a, b) for a, b in spans)
            seg = Segment.in_memory(data, piece.base_offset, piece.path)
        else:
            spool = tempfile.NamedTemporaryFile(suffix=".spool")  # bounded memory; deleted on close
            with self.store.open(piece.path, block_size=RANGE_BLOCK, exact=True) as f:
                f.seek(spans[0][0])
                for chunk in iter(lambda: f.read(RANGE_BLOCK), b""):
                    spool.write(chunk)
            spool.flush()
            seg = Segment(spool, base_offset=piece.base_offset)
        seg.start_position = 0
        return seg

    def remote_ranges(self, piece: Piece, start: int, end: int | None) -> list[tuple[int, int | None]]:
        """The byte ranges [a, b) of a remote piece's object that a read of offsets [start, end]
        fetches, in order (their bytes, joined, are the segment it reads; b None: to the object's
        end, spooled to disk).  The Python reader and the JVM's (spark_udfs.tiered_plan) fetch these."""
        whole = start <= piece.base_offset and (end is None or (piece.copy is not None and end >= piece.copy.end))
        index = None if whole else self._remote_index(piece)  # a whole object needs no index
        entries = index._entries() if index is not None else []
        before = [e for e in entries if e.offset <= start]
        after = [e for e in entries if end is not None and e.offset > end]
        size = piece.obj.sizes.get(layouts.LOG) if piece.obj else None
        # an index entry names the last offset of the batch at its position: the range up to the
        # first entry past ``end`` holds every batch before that one, which may still hold ``end``;
        # and the batch at the last entry before ``start`` is skipped when it ends before ``start``
        hi = after[0].position if after else size
        lo = before[-1].position if before else 0
        if before and before[-1].offset < start:
            head = self.store.read(piece.path, lo, lo + 12)
            if len(head) == 12:
                lo += 12 + int.from_bytes(head[8:12], "big")
        if hi is None or hi - lo > IN_MEMORY_BYTES:
            return [(lo, None)]
        spans: list[tuple[int, int | None]] = [(lo, hi)]
        if after:
            tail = _batch_range(self.store.read, piece.path, after[0].position, end,
                                after[1].position if len(after) > 1 else size)
            if tail is not None:
                spans.append(tail)
        return spans

    def _remote_index(self, piece: Piece) -> OffsetIndex | None:
        path = piece.obj.files.get(layouts.INDEX) if piece.obj else None
        if not path:
            return None
        try:
            return OffsetIndex(self.store.read(path), piece.base_offset, path)
        except (CorruptIndexError, OSError):
            return None

    def batches(self, start: int | None = None, end: int | None = None) -> Iterator[tuple[Piece, object]]:
        """(piece, batch) for every batch holding offsets in [start, end] (inclusive; None: open),
        in offset order.  A piece that ends early or does not parse is reported and skipped over."""
        for piece in self.pieces:
            span = piece.clip(start, end)
            if span is not None:
                yield from self._piece_batches(piece, *span)

    def _piece_batches(self, piece: Piece, lo: int, hi: int | None):
        seg = self.open_piece(piece, lo, hi)
        if seg is None:
            return
        with seg:
            for b in self.piece_batches(piece, seg, lo, hi):
                yield piece, b

    def open_piece(self, piece: Piece, lo: int, hi: int | None) -> Segment | None:
        """The piece's segment positioned for offsets [lo, hi], or None (reported) when its
        object cannot be read."""
        try:
            return self._open_piece(piece, lo, hi)
        except OSError as exc:
            self._unreadable(piece, exc)
            return None

    def fetch_ranges(self, piece: Piece, lo: int, hi: int | None) -> list[tuple[int, int | None]]:
        """remote_ranges for offsets [lo, hi], or none (reported as open_piece reports) when the
        object cannot be read."""
        try:
            return self.remote_ranges(piece, lo, hi)
        except OSError as exc:
            self._unreadable(piece, exc)
            return []

    def _unreadable(self, piece: Piece, exc: OSError) -> None:
        self._report("missing_object", piece.start, piece.end, f"cannot be read: {exc}", piece.path)

    def piece_batches(self, piece: Piece, seg: Segment, lo: int, hi: int | None, verify_crc: bool = True,
                      verdicts: dict | None = None):
        """The batches of ``seg`` holding offsets in [lo, hi], as the partition's one verdict reads
        a segment (``log.truth.segment_batches``): what cannot be read -- lost framing, a batch whose
        CRC fails (``verify_crc``) or whose records do not load, offsets missing between batches --
        is reported as ``damaged`` with the offsets it hides, and the walk goes on past it; an
        object that ends before its offsets do is ``truncated_object``.  ``verdicts``: a dict
        given, before the first batch, each entry's first culprit by its byte position (one walk
        of the piece sees across the windows a reader cuts it into)."""
        from pykbatch.log.truth import SegmentSpan, segment_batches, segment_gap
        config = ValidationConfig(origin="log", verify_crc=True, max_culprits=2**31 - 1, topic_partition=self.name)
        culprits: list | None = [] if verdicts is not None else None
        seen: list = [None, None]  # the first and highest offsets the walk read or named
        sizes: dict = {}  # position -> bytes of each span the walk skipped (seg.lost, as it grows)

        def size_of(c) -> int | None:
            if c.rule == "log.offset_gap":
                return 0
            for sp in seg.lost[len(sizes):]:  # the spans added since the last culprit, once each
                sizes[sp.position] = sp.size
            return sizes.get(c.entry_position)

        def lost(c) -> None:
            first, last = c.first_offset, c.last_offset
            if last is not None and (seen[1] is None or last > seen[1]):
                seen[1] = last
            if owns(lo, hi, first, last):  # else another piece's, a split's beside this, or not asked for
                self._damaged(piece, c, first, last, size_of(c))

        next_first = piece.end + 1 if piece.end is not None else None
        walk = segment_batches(seg, lost, config, verify_crc=verify_crc, next_first=next_first,
                               start=getattr(seg, "start_position", 0), seen=seen, culprits=culprits)
        for b in walk:
            if culprits:  # the walk validated the piece before its first batch
                for c in culprits:
                    if c.rule != "log.offset_gap" and BY_ID[c.rule].stage != "framing":
                        verdicts.setdefault(c.entry_position, c)
                culprits = None
            if b.last_offset < lo:
                continue
            if hi is not None and first_offset(b, default=b.last_offset) > hi:
                continue  # an entry moved back into [lo, hi] may follow: the walk goes through the piece
            yield b
        # what the piece lacks at its end is told once, by the read that reaches it (a Spark split
        # of its last offsets), from the highest offset its walk read
        if not (hi is None or piece.end is None or hi >= piece.end):
            return
        if seen[1] is not None:
            reached = seen[1]
        else:  # nothing read: from the piece's start when the walk began at its first byte
            reached = (piece.start if getattr(seg, "start_position", 0) == 0 else lo) - 1
        active = piece.source == "local" and piece.end is None  # the broker may be writing its end
        if seg.invalid_tail_bytes and not active:
            self._truncated(piece, reached + 1, f"{seg.invalid_tail_bytes} bytes at the end do not hold a whole batch",
                            seg.valid_bytes, seg.invalid_tail_bytes)
        elif piece.end is not None and reached < piece.end:
            if piece.copy is not None:
                if reached < piece.copy.end:
                    self._truncated(piece, reached + 1, f"the object ends at offset {reached}; the metadata says "
                                                        f"the copy ends at {piece.copy.end}")
            else:  # the next upload or local segment starts past this one's last offset: the log's gap
                gap = segment_gap(SegmentSpan(piece.path, None, reached, None, 0),
                                  SegmentSpan(piece.path, piece.end + 1, None, None, 0), self.name)
                gap.entry_position = seg.valid_bytes
                self._damaged(piece, gap, gap.first_offset, gap.last_offset, 0)

    def _damaged(self, piece: Piece, c, start: int | None, end: int | None, size: int | None = None) -> None:
        """A validator's culprit of a piece (its rule, Kafka's code, where) as a ``damaged`` report."""
        self._report("damaged", start, end, f"{c.rule} ({c.name}) at byte {c.entry_position}: {c.message}",
                     piece.path, c.entry_position, c.rule, size)

    def unread_records(self, piece: Piece, b, exc: KafkaDataError, after: int | None = None,
                       position: int | None = None) -> None:
        """A batch the walk yielded (at byte ``position`` of the piece; default its own) whose records
        stop reading at ``exc``: its offsets after ``after`` (the last record read of it; None: from
        its first) reported ``damaged``, unless the walk named that batch already."""
        position = b.position if position is None else position
        if any(r.kind == "damaged" and r.path == piece.path and r.position == position for r in self.reports):
            return
        first = after + 1 if after is not None else first_offset(b, default=b.last_offset)
        self._report("damaged", first, b.last_offset, f"{exc.rule} ({exc.name}) at byte {exc.offset}: {exc.message}",
                     piece.path, position, exc.rule)

    def _truncated(self, piece: Piece, first_missing: int, detail: str, position: int | None = None,
                   size: int | None = None) -> None:
        """The read's precise report replaces the plan's (made from the object's size)."""
        self.reports = [r for r in self.reports if not (r.kind == "truncated_object" and r.path == piece.path)]
        self._report("truncated_object", first_missing, piece.end, detail, piece.path, position,
                     "log.segment_truncated", size)

    def isolation(self, level: str = READ_UNCOMMITTED, start: int | None = None) -> Isolation:
        """What a consumer at ``level`` fetching from ``start`` receives: aborted transactions from
        every piece's ``.txnindex``, the last stable offset from the newest producer snapshot and
        the batches after it."""
        if level == READ_UNCOMMITTED:
            return Isolation(level)
        return Isolation(level, self.aborted_transactions(), self.last_stable_offset(), fetch_offset=start)

    def aborted_transactions(self) -> list[AbortedTxn]:
        """Every piece's ``.txnindex`` entries (a missing one the metadata promises is reported)."""
        return [t for piece in self.pieces for t in self._txn_entries(piece)]

    def _txn_entries(self, piece: Piece):
        if piece.source == "local":
            path = sibling(piece.path, TxnIndex.SUFFIX)
            return TxnIndex.from_file(path).entries if os.path.exists(path) else []
        path = piece.obj.files.get(layouts.TXN_INDEX) if piece.obj else None
        if path:
            return TxnIndex(self.store.read(path), path).entries
        if piece.copy is not None and not piece.copy.metadata.txn_index_empty:
            self._report("txn_index_missing", piece.start, piece.end,
                         "the metadata says this copy has aborted transactions; its .txnindex is missing", piece.path)
        return []

    def last_stable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open at the end, or None."""
        if self.local and self.local.snapshot_paths:
            snap_path = self.local.snapshot_paths[-1]
            snap_offset = base_offset_of(snap_path)
            entries = ProducerSnapshot.from_file(snap_path).entries
            after = (b for _, b in self.batches(start=snap_offset) if b.base_offset >= snap_offset)
            ongoing = open_transactions(entries, after)
        else:
            remote = [p for p in self.pieces if p.source == "remote" and p.obj and layouts.SNAPSHOT in p.obj.files]
            if not remote:
                return None
            last = remote[-1]
            entries = ProducerSnapshot(self.store.read(last.obj.files[layouts.SNAPSHOT])).entries
            ongoing = open_transactions(entries, ())
        return min(ongoing.values()) if ongoing else None

    def records(self, isolation: str = READ_UNCOMMITTED, start: int | None = None,
                end: int | None = None) -> Iterator[tuple[object, object]]:
        """(batch, record) for the records a consumer at ``isolation`` would receive, offsets in
        [start, end]."""
        iso = self.isolation(isolation, start)
        for piece, b in self.batches(start, end):
            if iso.past_end(b):
                return
            if not iso.keeps(b):
                continue
            read = None
            try:
                for r in b:
                    read = r.offset
                    if (start is None or r.offset >= start) and (end is None or r.offset <= end) \
                            and iso.keeps_offset(r.offset):
                        yield b, r
            except KafkaDataError as exc:  # the records from here on do not read
                self.unread_records(piece, b, exc, read)


def owns(lo: int, hi: int | None, first: int | None, last: int | None) -> bool:
    """Whether a read of offsets [lo, hi] (hi None: open) is the one that names a range it cannot
    read, offsets [first, last] (None: not known): the read holding its last offset (its first
    where the last is not known; every read where neither is), so that reads that cut a piece
    into splits name each range once, as one read of the whole would."""
    key = last if last is not None else first
    return key is None or (key >= lo and (hi is None or key <= hi))


def _index_start(index: OffsetIndex | None, seg: Segment, offset: int) -> int:
    """The byte position to start reading for ``offset``: the index entry at or below it when it
    points at a whole batch (``Segment.trusted_start``: a stale index is not trusted), else 0."""
    return seg.trusted_start(index.lookup(offset)) if index is not None else 0


class TieredTopicStore:
    """A remote store plus its metadata: the partitions it holds, each planned as the broker
    would serve it.  ``metadata``: paths of ``__remote_log_metadata`` segment files or partition
    directories; without it the listing is trusted (``NoMetadataWarning``)."""

    def __init__(self, store: Layout, metadata: Iterable[str] = ()):
        from pykbatch.tiered.metadata import records_of_segments
        self.store = store
        self.metadata_errors: list = []
        paths = _segment_files(metadata)
        self.has_metadata = bool(paths)
        events = []
        for rec in records_of_segments(paths):
            if rec.error is not None:
                self.metadata_errors.append(rec)
            else:
                events.append(rec.event)
        self.remote = replay(events)

    @classmethod
    def from_events(cls, store: Layout, events: Iterable) -> "TieredTopicStore":
        """A store with metadata given as decoded events (in the metadata topic's order)."""
        self = cls(store)
        self.has_metadata = True
        self.remote = replay(events)
        return self

    def partitions(self, local_dirs: Iterable[str] = (), topics: Iterable[str] | None = None) -> list[TieredPartition]:
        """Every partition the store or the metadata knows (of ``topics`` when given), with its
        local directory from ``local_dirs`` (broker log directories) when there is one."""
        if not self.has_metadata:
            warnings.warn(f"{self.store.describe()}: no __remote_log_metadata given: the store's listing is trusted "
                          "(duplicate uploads resolved by leader epoch; unfinished or deleted uploads cannot be told "
                          "apart)", NoMetadataWarning, stacklevel=2)
        known = set(self.store.partitions()) | set(self.remote)
        wanted = set(topics) if topics is not None else None
        locals_ = _local_partition_dirs(local_dirs)
        starts = _log_start_offsets(local_dirs)
        out = []
        for tip in sorted(known):
            if wanted is not None and tip.topic not in wanted:
                continue
            remote = self.remote.get(tip) if self.has_metadata else None
            if self.has_metadata and remote is None:
                remote = RemotePartition(tip)
            out.append(TieredPartition(tip, self.store, remote, locals_.get(tip.name), starts.get(tip.name)))
        return out


def _segment_files(paths: Iterable[str]) -> list[str]:
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".log"))
        else:
            out.append(p)
    return out


def _local_partition_dirs(log_dirs: Iterable[str]) -> dict[str, str]:
    out = {}
    for d in log_dirs:
        for name in os.listdir(d):
            if os.path.isdir(os.path.join(d, name)) and "-" in name:
                out[name] = os.path.join(d, name)
    return out


def _log_start_offsets(log_dirs: Iterable[str]) -> dict[str, int]:
    """The broker's ``log-start-offset-checkpoint`` (deleteRecords and retention move it)."""
    out = {}
    for d in log_dirs:
        path = os.path.join(d, "log-start-offset-checkpoint")
        if os.path.exists(path):
            for topic, partition, offset in Checkpoint.from_file(path).entries:
                out[f"{topic}-{partition}"] = int(offset)
    return out
