"""One verdict of a partition, for a reader that reads a segment split by split and window by
window (Spark's ``kafka-segment``): what it cannot deliver gets a row of its own, so nothing of a
partition vanishes without one.

A ``SplitTruth`` follows the walk of one split (``walk``) and the windows made of it (``window``):
each window is validated together with the bytes skipped before it and the previous window's last
entry (so the checks between two entries -- an offset gap, offsets going backwards -- see both
sides of a window's edge), which gives each entry its verdict and each span whose framing was lost
its rule and message.  The offsets such a span hides are those between the entries read around
it.  ``finish`` names what is left: spans after the last window, and -- where the split ends its
segment -- what ``truth`` decides from the partition: a closed segment cut short, offsets missing
before the next segment (unless compacted), or missing at the start of a segment that follows
another.  The same verdicts as ``read_partition`` and ``validate --segment``; the JVM reader
(``SegmentLosses.java``) follows the same steps.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from pykbatch import _native
from pykbatch.config import ValidationConfig
from pykbatch.log.segments import first_offset
from pykbatch.log.truth import SegmentSpan, segment_gap, truncated_segment
from pykbatch.rules import BY_ID, render

_GAP = "log.offset_gap"
_SHRANK = "log.file_shrank"
_UNSETTLED = object()  # a span's next entry not read yet


@dataclass
class Unreadable:
    """A range of a partition no row delivers: ``size`` bytes of the segment from ``position``
    (0 bytes: offsets missing with no bytes left of them, a gap), the offsets it hides where they
    can be known, and the rule that names it (Kafka's code, the validator's message)."""
    position: int
    size: int
    first_offset: int | None
    last_offset: int | None
    rule: str
    code: int
    message: str


class SplitTruth:
    """The verdicts of one split [``start``, ``end``) of a segment (``data``: its bytes, named
    ``path``, base offset ``base_offset``; ``next_base``: the base offset of the next segment of
    its partition, None for the last; ``follows``: a segment precedes it)."""

    def __init__(self, data, path: str, base_offset: int, start: int, end: int | None, next_base: int | None,
                 follows: bool, config: ValidationConfig, compacted: bool = False, previous: int | None = None):
        self.data, self.path, self.base, self.start, self.end = data, path, base_offset, start, end
        self.next_base, self.follows, self.config, self.compacted = next_base, follows, config, compacted
        self.tp = config.topic_partition or "t-0"
        self.last: int | None = None       # last offset of the last entry the walk read
        self.named = -1                    # the highest offset a range named so far hides
        self.first: int | None = None      # first offset of the first entry the walk read
        self.spans: list = []              # [LostSpan, highest offset before it, next entry's first offset]
        self.overlap: int | None = None    # the previous window's last entry (validated again)
        self.covered = start               # bytes up to here are in a window or named
        self.past_end: int | None = None   # the first offset of the entry after the split (None: none)
        self.reached_end = False           # the walk ran to the segment's end
        self.valid_bytes = 0
        self.size = len(data)
        self.top: int | None = None        # the highest offset of the entries walked (the validator's)
        self.edge: dict = {}               # entry position -> (highest offset, last offset) before it
        self.seg = None                    # the segment walked (is it cut while read?)
        if start > 0:
            # what one walk of the segment would know at the split's start: its highest offset, and
            # the entry before it, validated again with the first window so that the checks between
            # two entries see both sides of the split's edge
            self.top, self.overlap, self.last = _history(data, start)

    # -- the walk --------------------------------------------------------------------------
    def walk(self, seg):
        """``seg.batches`` from the split's start, the spans it skips kept with their neighbours'
        offsets, to the first entry starting at or past the split's end (not yielded)."""
        def lost(span):
            self.spans.append([span, self.top, _UNSETTLED])
            self.last = None

        self.seg = seg

        for b in seg.batches(start=self.start, on_lost=lost):
            first = first_offset(b)
            for s in self.spans:
                if s[2] is _UNSETTLED:
                    s[2] = first
            if self.end is not None and b.position >= self.end:
                self.past_end = first
                return
            if self.first is None:
                self.first = first
            self.edge[b.position] = (self.top, self.last)
            self.last = b.last_offset
            self.top = b.last_offset if self.top is None else max(self.top, b.last_offset)
            yield b
        self.reached_end = True
        self.valid_bytes = seg.valid_bytes

    # -- windows -----------------------------------------------------------------------------
    def window(self, run: list) -> tuple[list, list]:
        """The first culprit of each of a window's entries (``run``: [(position, size)],
        contiguous; None: it passed) and the ranges before it that no row delivers."""
        lo, hi = run[0][0], run[-1][0] + run[-1][1]
        culprits = self._culprits(hi)
        at = {pos: k for k, (pos, _) in enumerate(run)}
        verdicts: list = [None] * len(run)
        named = []
        for k, (pos, size) in enumerate(run):  # bytes a cut took after the walk read the entry
            verdicts[k] = self._cut(pos, size)
        for c in culprits:
            k = at.get(c.entry_position)
            if c.rule == _GAP and c.entry_position >= lo:
                gap = self._gap(c)
                named += [gap] if gap is not None else []
            elif k is not None and verdicts[k] is None:
                verdicts[k] = c
        named = self._spans_before(lo, culprits) + named
        self._saw(named)
        self.overlap, self.covered = run[-1][0], hi
        for pos in [p for p in self.edge if p <= self.overlap]:
            del self.edge[pos]
        return verdicts, named

    def undecoded(self, position: int, size: int, exc, culprit=None) -> Unreadable:
        """An entry whose header reads but whose records do not (``exc``; ``culprit``: its first
        culprit, which names it): every offset its header names."""
        u = undecoded(self.data, position, size, exc, self._cut(position, size) or culprit, self.tp)
        self._saw([u])
        return u

    def finish(self) -> list:
        """What the split leaves unnamed once it is read: spans after its last window, and where it
        ends its segment, what the partition shows there."""
        named: list = []
        if self.spans:
            resume = max(s[0].position + s[0].size for s in self.spans)
            named = self._spans_before(resume, self._culprits(resume))
            self._saw(named)
        if not self.reached_end:
            return named
        tail = self.valid_bytes if self.valid_bytes < self.size else None
        if tail is not None and self.next_base is not None:
            span = SegmentSpan(self.path, self.first, self.top, tail, self.size - tail, 0, self.base)
            named.append(_of(truncated_segment(span, self.next_base), self.size - tail))
        elif not self.compacted and self.next_base is not None and tail is None \
                and max(self.top if self.top is not None else self.base - 1, self.named) + 1 < self.next_base:
            # nothing read or named up to the next segment's base offset: a segment emptied, cut at
            # an entry's end, or the segment after it deleted
            last = max(self.top if self.top is not None else self.base - 1, self.named)
            before = SegmentSpan(self.path, self.first, last, None, 0, 0, self.base)
            after = SegmentSpan(_sibling(self.path, self.next_base), self.next_base, self.next_base, None, 0, 0,
                                self.next_base)
            named.append(_of(segment_gap(before, after, self.tp), 0, self.size))
        return named

    # -- helpers -------------------------------------------------------------------------------
    def _cut(self, position: int, size: int):
        """``log.file_shrank`` for an entry the file no longer holds whole (``Segment.cut_culprit``)."""
        return None if self.seg is None else self.seg.cut_culprit(position, size)

    def _saw(self, named: list) -> None:
        for u in named:
            if u.last_offset is not None:
                self.named = max(self.named, u.last_offset)

    def _culprits(self, hi: int) -> list:
        """The validator's culprits of the bytes from the previous window's last entry (or what is
        not yet covered) to ``hi``, placed in the segment; those of that entry left out (its
        window named them)."""
        frm = self.overlap if self.overlap is not None else self.covered
        culprits = _native.validate(self.data[frm:hi], self.config).culprits
        out = []
        for c in culprits:
            c.position += frm
            c.entry_position += frm
            if self.overlap is None or c.entry_position != self.overlap:
                out.append(c)
        if self.start == 0 and self.follows and not self.compacted and self.overlap is None \
                and self.first is not None and self.first > self.base and not self.spans:
            # the segment's first entry starts past its base offset: the offsets between are gone
            before = SegmentSpan(_sibling(self.path, None), None, self.base - 1, None, 0, 0, None)
            after = SegmentSpan(self.path, self.first, self.first, None, 0, 0, self.base)
            gap = segment_gap(before, after, self.tp, expected=self.base)
            gap.entry_position = gap.position = self.start
            out.insert(0, gap)
        return out

    def _gap(self, c) -> Unreadable | None:
        """A gap the window's validator found, from the highest offset the walk of the whole segment
        had seen before it (a window's validator knows only the entries it was given)."""
        top, last = self.edge.get(c.entry_position, (None, None))
        first, message = c.first_offset, c.message
        if top is not None and first is not None and top + 1 > first:
            first = top + 1
            if first > c.last_offset:
                return None  # offsets that went backwards before it already hold these
            message, _ = render(BY_ID[_GAP], [first, c.last_offset, c.last_offset + 1,
                                              last if last is not None else top, 0, 0, 0, 0], self.tp)
        return Unreadable(c.entry_position, 0, first, c.last_offset, c.rule, c.code, message)

    def _spans_before(self, lo: int, culprits: list) -> list:
        """The spans the walk skipped before ``lo``, each named by the validator's culprit at its
        first byte (else by the walk's own fault), its offsets those between its neighbours."""
        named = []
        first_at: dict = {}
        for c in culprits:
            first_at.setdefault(c.entry_position, c)
        while self.spans and self.spans[0][0].position < lo:
            span, before, after = self.spans.pop(0)
            if after is _UNSETTLED:  # nothing read after it in the split: where the walk ended
                after = self.past_end if not self.reached_end else self.next_base
            first = before + 1 if before is not None else (self.base if span.position == 0 else None)
            last = after - 1 if after is not None else None
            c = first_at.get(span.position)
            if getattr(span.error, "rule", None) == _SHRANK:
                c = None  # the file was cut while read: the window's zeros tell nothing of it
            if c is not None and c.rule != _GAP and BY_ID[c.rule].stage != "framing":
                # an entry the walk cannot read (a header's fault): the validator's culprit names it
                first = c.first_offset if c.first_offset is not None else first
                last = c.last_offset if c.last_offset is not None else last
                named.append(Unreadable(span.position, span.size, first, last, c.rule, c.code, c.message))
            else:  # lost framing, as the walk of the whole segment found it (a window's slice ends early)
                e = span.error
                named.append(Unreadable(span.position, span.size, first, last, e.rule, e.code, _worded(e, self.tp)))
        return named


def undecoded(data, position: int, size: int, exc, culprit=None, tp: str = "t-0") -> Unreadable:
    """An entry of ``data`` whose header reads but whose records do not (``exc``; ``culprit``: its
    first culprit, which names it) as an unreadable range: every offset its header names."""
    first = last = None
    try:
        b = next(iter(_native.iter_batches(data[position:position + size], verify_crc=False)))
        first, last = first_offset(b), b.last_offset  # a v0/v1 wrapper's first: its records'
    except Exception:  # noqa: BLE001 -- a header that does not read leaves its offsets unknown
        pass
    if culprit is not None:
        if first is None:  # a v0/v1 wrapper whose records do not read: the validator bounds its first
            first = culprit.first_offset
        return Unreadable(position, size, first, last, culprit.rule, culprit.code, culprit.message)
    return Unreadable(position, size, first, last, exc.rule, exc.code, _worded(exc, tp))


def _worded(exc, tp: str) -> str:
    """A walk's fault in the validator's words (the reader's carry Kafka's client text)."""
    if getattr(exc, "fault_args", None) is None:
        return exc.message
    return render(BY_ID[exc.rule], list(exc.fault_args) + [0] * 5, tp)[0]


def _of(c, size: int, position: int | None = None) -> Unreadable:
    return Unreadable(c.entry_position if position is None else position, size, c.first_offset, c.last_offset,
                      c.rule, c.code, c.message)


def _sibling(path: str, base: int | None) -> str:
    """The file name of the segment of ``path``'s partition at ``base`` (for messages)."""
    from pykbatch.log.files import segment_file_name
    return os.path.join(os.path.dirname(path), segment_file_name(base, ".log") if base is not None else "(previous)")


def _history(data, start: int) -> tuple[int | None, int | None, int | None]:
    """What a walk of a segment's bytes before ``start`` knows: the highest offset of its entries,
    and the position and last offset of the entry that ends at ``start`` (None: lost bytes, or
    none, end there)."""
    top = None
    last: list = [None]

    def lost(span) -> None:  # bytes lost just before the split: no entry to compare with
        last[0] = None

    for b in _native.BatchReader(data[:start], False, on_lost=lost):
        last[0] = (b.position, b.position + b.size, b.last_offset)
        top = b.last_offset if top is None else max(top, b.last_offset)
    if last[0] is None or last[0][1] != start:
        return top, None, None
    return top, last[0][0], last[0][2]

