"""One verdict of a partition: every offset from the log's start to its end is a record read,
inside a named unreadable range, or explained by Kafka's semantics (compaction only where the
topic is said to be compacted; control records and aborted data are offsets of their own).

Inside a segment the validator names what it cannot read (``csrc/kb_validate.c``: each culprit
with the offsets it concerns, ``log.offset_gap`` for offsets missing between two entries of a
topic not compacted).  What only the partition shows is decided here, for every tool that reads
segments (the audit behind ``validate --segment``, ``validate``, ``dump`` and ``repair`` of a file
given alone):

* an incomplete tail is normal only at the end of the partition's last (active) segment, where
  the broker was writing; in a closed segment it is lost data (``log.segment_truncated``), and in a
  file given alone it cannot be told (``log.tail_incomplete``: damage under ``strict``);
* offsets missing between two segments (a segment deleted, or cut) are ``log.offset_gap`` unless
  the topic is compacted;
* ``read_partition`` gives Python's readers the same findings in their place in the walk.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from pykbatch.errors import KafkaDataError
from pykbatch.result import Culprit
from pykbatch.rules import BY_ID, render

_GAP = BY_ID["log.offset_gap"]
_TRUNCATED = BY_ID["log.segment_truncated"]
_INCOMPLETE = BY_ID["log.tail_incomplete"]
_SHRANK = BY_ID["log.file_shrank"]


@dataclass(frozen=True)
class SegmentSpan:
    """What the walk of one segment found: where it is in the partition, its offsets, and its
    incomplete tail (``tail_position`` None: it ends on an entry's end)."""
    path: str
    first_offset: int | None
    last_offset: int | None
    tail_position: int | None
    tail_size: int
    tail_entry: int = 0
    base_offset: int | None = None
    """The segment's base offset, from its file name."""


def lost_after(span: SegmentSpan, next_first: int | None) -> str:
    """The offsets a segment's cut tail took, as words: between its last offset read and the next
    segment's first."""
    if span.last_offset is not None and next_first is not None:
        if next_first > span.last_offset + 1:
            return f"offsets {span.last_offset + 1} to {next_first - 1} are lost"
        return "no offset is missing after it (the next segment goes on from its last)"
    if next_first is not None:
        return f"the offsets before {next_first} are lost"
    return "the offsets after its last entry are lost"


def truncated_segment(span: SegmentSpan, next_first: int | None) -> Culprit:
    """``log.segment_truncated``: the incomplete tail of a segment that is not the last (nothing
    read of it: its offsets from its base offset on)."""
    if span.last_offset is None and span.base_offset is not None:
        span = dataclasses.replace(span, last_offset=span.base_offset - 1)
    first = span.last_offset + 1 if span.last_offset is not None else None
    last = next_first - 1 if next_first is not None else None
    if first is not None and last is not None and last < first:
        first = last = None
    message = _TRUNCATED.message(segment=os.path.basename(span.path), position=span.tail_position,
                                 size=span.tail_size, lost=lost_after(span, next_first))
    return Culprit(span.tail_entry, None, None, _TRUNCATED.code, _TRUNCATED.id, span.tail_position, None,
                   span.tail_position, message, _TRUNCATED.detail, _TRUNCATED.kafka, first, last)


def incomplete_tail(entry: int, position: int, size: int) -> Culprit:
    """``log.tail_incomplete``: a file given alone ends inside an entry."""
    message = _INCOMPLETE.message(position=position, size=size)
    return Culprit(entry, None, None, _INCOMPLETE.code, _INCOMPLETE.id, position, None, position, message,
                   _INCOMPLETE.detail, _INCOMPLETE.kafka)


def later_segment(path: str) -> int | None:
    """The base offset of the next segment beside ``path`` in its partition directory (None: it is
    the last, or not a segment file)."""
    from pykbatch.log.files import LOG, STDIN, base_offset_of, is_segment_file
    name = os.path.basename(path)
    if path == STDIN or not is_segment_file(name, LOG):
        return None
    directory = os.path.dirname(os.path.abspath(path))
    mine = base_offset_of(name)
    later = [base_offset_of(n) for n in os.listdir(directory) if is_segment_file(n, LOG) and base_offset_of(n) > mine]
    return min(later, default=None)


def walk_span(path: str) -> SegmentSpan:
    """A segment's ``SegmentSpan`` from a walk of its entries' headers (no CRC, no records)."""
    from pykbatch.log.segments import first_offset, open_input
    entries, first, last = 0, None, None
    with open_input(path) as seg:
        for b in seg.batches():
            entries += 1
            if first is None:
                first = first_offset(b, seg.base_offset - 1 if seg.base_offset is not None else None, b.last_offset)
            last = b.last_offset
        entries += len(seg.lost)
        tail, size, base = seg.valid_bytes, seg.size, seg.base_offset
    return SegmentSpan(path, first, last, tail if tail < size else None, size - tail, entries, base)


def segment_tail(path: str, strict: bool = False) -> Culprit | None:
    """How a ``.log`` file read on its own ends, as the partition's verdict has it: None when it
    ends on an entry's end, or inside one where that may be normal (no later segment beside it:
    it may be the active one) without ``strict``; else the culprit naming the cut
    (``log.segment_truncated`` when a later segment shows it closed, ``log.tail_incomplete``)."""
    return _tail_of(walk_span(path), strict)


def _tail_of(span: SegmentSpan, strict: bool) -> Culprit | None:
    """``segment_tail`` of a segment already walked."""
    if span.tail_position is None:
        return None
    following = later_segment(span.path)
    if following is not None:
        return truncated_segment(span, following)
    return incomplete_tail(span.tail_entry, span.tail_position, span.tail_size) if strict else None


def partition_findings(logs: list[str], compacted: bool, tp: str, strict: bool = False) -> list[tuple[str, Culprit]]:
    """What the partition shows of ``logs`` (segment files; those of one directory are taken as a
    partition in offset order): closed segments cut short and offsets missing between segments
    (``between_segments``), and how each last segment ends (``segment_tail``)."""
    from pykbatch.log.files import base_offset_of, is_segment_file, LOG
    found: list[tuple[str, Culprit]] = []
    by_dir: dict[str, list[str]] = {}
    for path in logs:
        if is_segment_file(os.path.basename(path), LOG):
            by_dir.setdefault(os.path.dirname(os.path.abspath(path)), []).append(path)
        else:
            culprit = segment_tail(path, strict)
            found += [(path, culprit)] if culprit is not None else []
    for paths in by_dir.values():
        paths = sorted(paths, key=lambda p: base_offset_of(os.path.basename(p)))
        spans = [walk_span(p) for p in paths]
        found += between_segments(spans, compacted, tp)
        culprit = _tail_of(spans[-1], strict)  # a later segment beside it not given, or the active one
        found += [(paths[-1], culprit)] if culprit is not None else []
    return found


def segment_gap(before: SegmentSpan, after: SegmentSpan, tp: str, expected: int | None = None) -> Culprit:
    """``log.offset_gap`` between two segments: ``after`` starts past the offset that follows
    ``before``'s last, or past ``expected`` (an empty segment's base offset), the culprit placed
    at ``after``'s first byte."""
    assert after.first_offset is not None and (expected is not None or before.last_offset is not None)
    first = before.last_offset + 1 if expected is None and before.last_offset is not None else expected
    assert first is not None
    args = [first, after.first_offset - 1, after.first_offset, first - 1, 0, 0, 0, 0]
    message, detail = render(_GAP, args, tp)
    detail = f"between {os.path.basename(before.path)} and {os.path.basename(after.path)}: {detail}"
    return Culprit(0, None, None, _GAP.code, _GAP.id, 0, None, 0, message, detail, _GAP.kafka,
                   first, after.first_offset - 1)


def between_segments(spans: list[SegmentSpan], compacted: bool, tp: str) -> list[tuple[str, Culprit]]:
    """The partition's own findings, each with the segment it is reported against: a closed
    segment's incomplete tail, and offsets missing between segments (unless compacted, or named
    by the tail before them).  ``spans``: the segments in offset order."""
    found: list[tuple[str, Culprit]] = []
    read = [s for s in spans if s.first_offset is not None and s.last_offset is not None]
    for i, span in enumerate(spans):
        following = next((s.first_offset for s in spans[i + 1:] if s.first_offset is not None), None)
        if span.tail_position is not None and i < len(spans) - 1:
            found.append((span.path, truncated_segment(span, following)))
    for before, after in zip(read, read[1:]):
        assert after.first_offset is not None and before.last_offset is not None  # read: both known
        if compacted or after.first_offset <= before.last_offset + 1:
            continue
        if before.tail_position is not None:  # the cut tail names these offsets
            continue
        found.append((after.path, segment_gap(before, after, tp)))
    # segments after the last that holds an entry hold none that reads (a lying size, bytes
    # zeroed): the first one's name says where its offsets start, so those up to it are missing
    if read and read[-1] is not spans[-1] and not compacted and read[-1].tail_position is None:
        after = spans[spans.index(read[-1]) + 1]
        last = read[-1].last_offset
        if after.base_offset is not None and last is not None and after.base_offset > last + 1:
            found.append((after.path, segment_gap(read[-1], dataclasses.replace(after, first_offset=after.base_offset),
                                                  tp)))
    # segments before the first that holds an entry hold none (emptied): from the first one's base
    # offset (its name), the offsets up to that entry are gone
    base, start = spans[0].base_offset if spans else None, read[0].first_offset if read else None
    if read and read[0] is not spans[0] and not compacted and base is not None and start is not None \
            and spans[0].tail_position is None and start > base:
        found.append((read[0].path, segment_gap(spans[0], read[0], tp, expected=spans[0].base_offset)))
    return found


def _payload_unreadable(b) -> bool:
    """Whether a batch's records payload does not load (its codec rejects it, a v0/v1 wrapper's
    inner set does not read): it is yielded for its header, but holds no record to read."""
    try:
        iter(b)  # loads the payload (a v2 batch's records, a wrapper's inner set), reads no record
    except KafkaDataError:
        return True
    return False


def segment_batches(seg, on_lost, config, *, verify_crc: bool = False, next_first: int | None = None,
                    start: int = 0, on_first=None, seen: list | None = None, culprits: list | None = None):
    """The batches of one segment from byte ``start`` (``Segment.batches``, past lost framing), and
    -- to ``on_lost``, in their place in the walk -- the validator's culprit for every range whose
    records cannot be read, with the offsets it hides: bytes whose framing was lost, offsets missing
    between batches, a batch left out for its CRC (``verify_crc``), a batch yielded whose payload
    does not load.  ``next_first``: the next segment's first offset (bounds what a cut end hides);
    ``on_first(first offset)``: called before anything of the first batch is told; ``seen``: a list
    of two, set to the first and highest offsets yielded or named; ``culprits``: a list given every
    culprit of the segment from ``start`` (each entry's verdict).  ``read_partition`` walks each
    segment of a directory with it, the tiered reader each piece of a remote log."""
    from pykbatch.log.segments import bound_unsound, first_offset
    seen = seen if seen is not None else [None, None]
    found: list = []
    at_entry: dict = {}
    if on_lost is not None:
        result = seg.validate(config)
        bound_unsound(result.culprits, base_offset=seg.base_offset, next_first=next_first)
        mine = [c for c in result.culprits if c.entry_position >= start]
        if culprits is not None:
            culprits.extend(mine)
        found = sorted((c for c in mine if BY_ID[c.rule].stage == "framing" or c.rule == _GAP.id),
                       key=lambda c: c.entry_position)
        for c in mine:  # a batch the reader leaves out (its CRC, with verify_crc)
            if c.record_index is None and BY_ID[c.rule].stage != "framing" and c.rule != _GAP.id:
                at_entry.setdefault(c.entry_position, c)

    def saw(first, last) -> None:
        if first is not None and seen[0] is None:
            seen[0] = first
        if last is not None and (seen[1] is None or last > seen[1]):
            seen[1] = last

    def skipped(span) -> None:
        while found and found[0].entry_position < span.position:  # in their place in the walk
            on_lost(found.pop(0))
        if seg.cut is not None and span.error is not None and getattr(span.error, "rule", None) == _SHRANK.id:
            found[:] = [c for c in found if c.rule != _SHRANK.id]  # named once, as the walk met it
            on_lost(seg.cut)
            return
        culprit = at_entry.get(span.position)
        if culprit is not None:
            saw(culprit.first_offset, culprit.last_offset)
            on_lost(culprit)

    started = False
    for b in seg.batches(verify_crc=verify_crc, start=start, on_lost=skipped if on_lost is not None else None):
        while found and found[0].entry_position <= b.position:
            on_lost(found.pop(0))
        b_first = first_offset(b, seen[1] if seen[1] is not None else  # records unreadable: the validator's
                               (seg.base_offset - 1 if seg.base_offset is not None else None), b.last_offset)
        if not started:
            started = True
            if on_first is not None:
                on_first(b_first)
        saw(b_first, b.last_offset)
        unread = at_entry.get(b.position)
        if unread is not None and _payload_unreadable(b):  # yielded, but none of its records reads
            saw(unread.first_offset, unread.last_offset)
            on_lost(unread)
        yield b
    for culprit in found:
        on_lost(culprit)


def read_partition(directory: str, *, on_lost=None, compacted: bool = False, verify_crc: bool = False,
                   topic_partition: str = "t-0"):
    """Every batch of a partition directory in offset order (``Segment.batches``, past lost
    framing), and -- to ``on_lost``, in their place in the walk -- a ``Culprit`` for every range
    whose records cannot be read, with the offsets it hides (``first_offset`` / ``last_offset``):
    bytes whose framing was lost, offsets missing between batches or segments (unless
    ``compacted``), a closed segment's cut tail.  Nothing of the partition goes unmentioned: what
    is neither yielded nor named is not in the log.  The validator decides inside each segment (the
    same culprits ``validate`` prints), ``between_segments`` across them."""
    from pykbatch.config import ValidationConfig
    from pykbatch.log.segments import Partition, Segment
    config = ValidationConfig(origin="log", verify_crc=verify_crc, compacted=compacted, max_culprits=2**31 - 1,
                              topic_partition=topic_partition)
    paths = Partition(directory).segment_paths
    spans: list[SegmentSpan] = []
    cut = None
    for i, path in enumerate(paths):
        with Segment(path) as seg:
            seen: list = [None, None]  # the segment's first and highest offsets, of batches yielded or named
            started = False

            def first(b_first, path=path, seg=seg) -> None:  # what lies before this segment is known now
                nonlocal cut, started
                started = True
                if cut is not None:  # an earlier segment cut short lost what lies up to here
                    on_lost(truncated_segment(cut, b_first))
                    cut = None
                if on_lost is not None and spans:
                    here = SegmentSpan(path, b_first, b_first, None, 0, 0, seg.base_offset)
                    for where, culprit in between_segments(spans + [here], compacted, topic_partition):
                        if where == path and culprit.rule == _GAP.id:
                            on_lost(culprit)

            following = None if i + 1 == len(paths) else later_segment(path)
            yield from segment_batches(seg, on_lost, config, verify_crc=verify_crc, next_first=following,
                                       on_first=first, seen=seen)
            if not started and on_lost is not None and spans and cut is None and seg.base_offset is not None:
                # nothing of it reads: its name says where its offsets start (between_segments)
                here = SegmentSpan(path, None, None, None, 0, 0, seg.base_offset)
                for where, culprit in between_segments(spans + [here], compacted, topic_partition):
                    if where == path and culprit.rule == _GAP.id:
                        on_lost(culprit)
            tail = seg.valid_bytes if seg.valid_bytes < seg.size else None
            spans.append(SegmentSpan(path, seen[0], seen[1], tail, seg.size - seg.valid_bytes, 0, seg.base_offset))
        if on_lost is not None and tail is not None and i + 1 < len(paths):
            cut = spans[-1]  # named once the next segment that holds an entry shows where it goes on
    if cut is not None:
        on_lost(truncated_segment(cut, later_segment(cut.path)))
