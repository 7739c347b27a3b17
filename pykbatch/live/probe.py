"""The extent of damage a fetch response does not show, found with the broker.

A damaged entry that ends a response (a response never spans segments), or a broker that answers
CORRUPT_MESSAGE with no records because its own offset search fails in the damage: nothing in the
bytes says where the damage ends.  The broker finds a batch by its header's last offset, as every
client must, so the smallest offset whose fetch starts with a sound entry past the position is
the extent the log itself gives the damage; doubling then bisecting finds it in about
2 log2(extent) one-batch fetches.

Offsets a fetch passed over (``Fetched.lead_gap``: a fetch at ``first`` answered from a batch
after ``last``) may still hold sound batches the broker reaches from another fetch offset (its
offset index points past the damage its scan from ``first`` could not cross): ``island`` asks at
doubling distances and at evenly spaced offsets inside the range, and returns the first such
batch, so a range is skipped only as far as the broker cannot serve it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pykbatch import _native, errors
from pykbatch.live.cluster import LATEST
from pykbatch.live.fetched import Damage

OUT_OF_RANGE = errors.CODE["OFFSET_OUT_OF_RANGE"]
BACK_LIMIT = 4096  # how far before a passed-over offset a batch holding it is looked for


@dataclass
class ProbeResult:
    next_offset: int
    """The first offset after the damage the broker serves sound (or the log's end)."""
    data: Any = None
    """The partition data of the fetch at ``next_offset`` (None: the damage runs to the end)."""


class Probe:
    """Doubling then bisection over fetch offsets: the smallest offset after the partition's
    position whose fetch answers with a sound first entry starting after it."""

    def __init__(self, reader, p):
        self.reader, self.p = reader, p

    def _sound_at(self, offset: int):
        """The partition data and its first entry's (base, last) offsets if a fetch at
        ``offset`` starts with a sound entry; None if it does not; "end" past the log's end."""
        data = self.reader._fetch_one(self.p, offset)
        self.reader._note_limit(self.p, data)
        if data.error_code == OUT_OF_RANGE:
            return "end"
        records = data.records
        if data.error_code or not records or not _native.entry_is_sound(records, 0):
            return None
        first = next(iter(_native.iter_batches(records, verify_crc=False)), None)
        return None if first is None else (data, first.base_offset, first.last_offset)

    def _sound_after(self, offset: int):
        """The partition data if a fetch at ``offset`` starts with a sound entry past the
        position; None if it does not; "end" past the log's end."""
        answer = self._sound_at(offset)
        if answer is None or answer == "end":
            return answer
        data, base, _ = answer
        return data if base > self.p.position else None

    def _covering(self, first: int, limit: int, bytes_: int):
        """A fetch from before ``first`` whose answer holds a sound batch with ``first`` in it:
        the partition data, or None.  A broker whose search from ``first`` lands past a sound
        batch, or fails (CORRUPT_MESSAGE, nothing), misled by damage after it, may still serve that
        batch to a fetch that starts before it; a reader resuming inside it (a committed offset)
        needs exactly that."""
        step = 1
        while step <= limit and first - step >= 0:
            data = self.reader._fetch_one(self.p, first - step, bytes_)
            step *= 2
            if data.error_code or not data.records:
                continue
            for batch in _native.BatchReader(data.records, verify_crc=False, on_lost=_ignore):
                if batch.last_offset >= first:
                    if batch.base_offset <= first and _native.entry_is_sound(data.records, batch.position):
                        return data
                    break
        return None

    def crossing(self, first: int, last: int) -> ProbeResult | None:
        """The first sound batch inside ``[first, last]`` (offsets the broker would not serve) that
        a fetch from before ``first`` reaches by carrying on past damage.  The broker finds where a
        fetch starts by scanning batch headers from its offset index, and the scan reads the header
        after the batch it wants, so damage makes it refuse every offset from its index entry on --
        the sound batches just before and after the damage included -- while a fetch that starts
        before all that (a segment's base offset, an offset whose index entry lies past the
        damage) is answered with the file's bytes as they are, past the damage when large enough.
        Tries just before ``first``, where the partition was last served, offsets further back
        doubling (and 0), and a segment's base offset when an answer ends at its segment's end;
        from each, sizes double from the fetch size up to ``max_batch_bytes``.  The answer is the
        fetch's records from that batch on."""
        candidates = [first - 1] + ([self.p.served] if 0 <= self.p.served < first - 1 else [])
        step = 2
        while step <= BACK_LIMIT and first - step >= 0:
            candidates.append(first - step)
            step *= 2
        if first <= BACK_LIMIT:
            candidates.append(0)
        tried: set[int] = set()
        while candidates:
            start = candidates.pop(0)
            if start < 0 or start in tried:
                continue
            tried.add(start)
            size = max(self.p.fetch_bytes, 1)
            while size <= max(self.reader.max_batch_bytes, 1):
                data = self.reader._fetch_one(self.p, start, size)
                if data.error_code or not data.records:
                    break  # not served from here: the next candidate
                records, before, past = data.records, None, False
                for batch in _native.BatchReader(records, verify_crc=False, on_lost=_ignore):
                    if not _native.entry_is_sound(records, batch.position):
                        continue  # damage whose framing holds: its offsets mean nothing
                    if batch.last_offset < first:
                        before = batch.last_offset
                        continue
                    if batch.base_offset > last:
                        past = True
                        break
                    return ProbeResult(max(batch.base_offset, first), _sliced(data, batch.position))
                if past:
                    if before is not None:
                        return None  # the bytes ran from before the range to past it: nothing sound inside
                    break  # the broker's search jumped the range (damage misled it): the next candidate
                if len(records) < size:  # the answer ran to its segment's end
                    if before is not None and before + 1 < first:
                        candidates.insert(0, before + 1)  # the next segment starts there
                    break
                size *= 2
        return None

    def island(self, first: int, last: int) -> ProbeResult | None:
        """The first sound batch the broker serves inside ``[first, last]`` (offsets a fetch at
        ``first`` passed over), or None: ``next_offset`` is where it starts being delivered."""
        covering = self._covering(first, BACK_LIMIT, max(self.p.fetch_bytes, 1))
        if covering is not None:
            return ProbeResult(first, covering)
        span = last - first + 1
        step = 1
        candidates = []
        while step < span:
            candidates.append(first + step)
            step *= 2
        candidates += [first + span * k // 16 for k in range(1, 16)]
        for offset in sorted(set(candidates)):
            if offset <= first or offset > last:
                continue
            answer = self._sound_at(offset)
            if answer == "end":
                return None
            if answer is not None:
                data, base, end = answer
                if base <= last and end >= first:
                    return ProbeResult(max(base, first), data)
        return None

    def run(self, damage: Damage | None) -> ProbeResult:
        position = self.p.position
        if damage is None:  # the broker's own search failed at the position: a fetch from before it may not
            covering = self._covering(position, BACK_LIMIT, max(self.p.fetch_bytes, 1))
            if covering is not None:
                return ProbeResult(position, covering)
        if self.p.limit <= position:  # an error answer carries none: ask for the log's end
            self.p.limit = self.reader.cluster.list_offsets({self.p.tp: LATEST}, self.reader._iso_code)[self.p.tp]
        limit = max(self.p.limit, position + 1)
        if self.p.end is not None:
            limit = min(limit, self.p.end)
        bad, good, found, step = position, None, None, 1
        while position + step < limit:  # doubling
            answer = self._sound_after(position + step)
            if answer == "end":
                break
            if answer is not None:
                good, found = position + step, answer
                break
            bad = position + step
            step *= 2
        if good is None:  # nothing sound before the limit yet: look between the last miss and it
            good = limit
        while good - bad > 1:  # bisection: bad never answers sound, good does (or is the limit)
            mid = (bad + good) // 2
            answer = self._sound_after(mid)
            if answer is not None and answer != "end":
                good, found = mid, answer
            else:
                bad = mid
        if found is None:
            return ProbeResult(limit)
        base = int.from_bytes(bytes(found.records[:8]), "big", signed=True)
        return ProbeResult(base, found)


class _Sliced:
    """A partition's fetch answer whose records start at a later batch of its own."""

    def __init__(self, data, records, aborted_transactions):
        self._data, self.records, self.aborted_transactions = data, records, aborted_transactions

    def __getattr__(self, name):
        return getattr(self._data, name)


def _sliced(data, position: int) -> _Sliced:
    """``data`` from byte ``position`` on.  The aborted transactions the broker listed for the
    whole answer lose those whose producer's marker lies in the bytes left out (read_committed
    would otherwise hold that producer's later, committed records as aborted)."""
    records = data.records
    ended: dict[int, int] = {}  # producer id -> the offset of its last marker before ``position``
    for batch in _native.BatchReader(memoryview(records)[:position], verify_crc=False, on_lost=_ignore):
        if batch.is_control and _native.entry_is_sound(records, batch.position):
            ended[batch.producer_id] = max(ended.get(batch.producer_id, -1), batch.last_offset)
    aborted = [t for t in (data.aborted_transactions or ())
               if not (t.producer_id in ended and t.first_offset <= ended[t.producer_id])]
    return _Sliced(data, memoryview(records)[position:], aborted)


def _ignore(span) -> None:
    """Unreadable spans of a probe's answer: the walk goes on to the next sound entry."""
