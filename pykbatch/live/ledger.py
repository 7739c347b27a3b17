"""The reader's promise as an invariant it checks: every offset of a partition from where reading
started is delivered, inside a named skip, or explained by Kafka's own semantics (a control
record, an aborted transaction's record under read_committed, a record compaction removed).

A ``Ledger`` takes each step the reader's position makes, as the spans of offsets that step
covered (``pykbatch.live.fetched``: read, skipped, compacted) and the offsets it delivered.  The
spans must meet the accounted range end to end, and every delivered offset must lie, once and in
order, inside a span that was read.  Anything else is a fault of pykbatch, not of the data, and
raises ``AccountingError`` rather than hand on an answer that lost or repeated an offset.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pykbatch.live.fetched import COMPACTED, READ, SKIPPED


class AccountingError(RuntimeError):
    """The reader's position moved over offsets it cannot account for (a bug: please report it)."""


@dataclass
class Ledger:
    """One partition's accounting from ``start`` to ``next`` (the position)."""
    topic: str
    partition: int
    start: int
    next: int = -1
    delivered: int = 0
    skipped: int = 0
    skips: int = 0
    compacted: int = 0
    left_out: int = 0
    """Offsets of batches read but not delivered: control records, aborted transactions, and
    records compaction removed from inside a batch."""

    def __post_init__(self) -> None:
        if self.next < 0:
            self.next = self.start

    def _fault(self, why: str) -> AccountingError:
        return AccountingError(f"{self.topic}-{self.partition}: {why} (accounted up to offset {self.next})")

    def take(self, spans, offsets, upto: int) -> None:
        """A step to position ``upto``: ``spans`` ``(first, last, kind)`` in order (cut at
        ``upto``), ``offsets`` the delivered ones (any integer sequence, numpy welcome)."""
        offsets = np.asarray(offsets, dtype=np.int64)
        read_first, read_last = [], []
        for first, last, kind in spans:
            if first >= upto:
                break
            last = min(last, upto - 1)
            if first != self.next:
                raise self._fault(f"offsets {self.next} to {first - 1} neither delivered, skipped nor explained"
                                  if first > self.next else f"offsets {first} to {self.next - 1} accounted twice")
            n = last - first + 1
            if kind == READ:
                read_first.append(first)
                read_last.append(last)
            elif kind == SKIPPED:
                self.skipped += n
            elif kind == COMPACTED:
                self.compacted += n
            else:
                raise ValueError(kind)
            self.next = last + 1
        if upto > self.next:
            raise self._fault(f"the position moved to {upto} over offsets no span covers")
        if len(offsets):
            if (np.diff(offsets) <= 0).any():
                raise self._fault("delivered offsets repeat or go backwards")
            firsts, lasts = np.asarray(read_first, np.int64), np.asarray(read_last, np.int64)
            at = np.searchsorted(firsts, offsets, side="right") - 1
            if (at < 0).any() or (offsets > lasts[np.maximum(at, 0)]).any():
                raise self._fault("an offset was delivered that no batch read in this step holds")
        read = int(sum(last - first + 1 for first, last in zip(read_first, read_last)))
        self.delivered += len(offsets)
        self.left_out += read - len(offsets)

    def skip(self, first: int, last: int) -> None:
        """A named skip the reader made itself (a probe's range, data loss, offsets passed over)."""
        if last >= first:
            self.take([(first, last, SKIPPED)], (), last + 1)

    def snapshot(self) -> Ledger:
        """A copy to go back to when a step fails half-way (``Reader`` hands nothing of it out)."""
        from dataclasses import replace
        return replace(self)

    def restore(self, snapshot: Ledger) -> None:
        self.__dict__.update(snapshot.__dict__)

    def restart(self, offset: int) -> None:
        """The position was set (a seek, a log truncated below it): accounting goes on from there."""
        self.next = offset

    def as_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "start": self.start, "position": self.next,
                "delivered": self.delivered, "skipped": self.skipped, "skips": self.skips,
                "compacted": self.compacted, "left_out": self.left_out}

    def line(self) -> str:
        """One line of ``pykbatch consume``'s accounting."""
        return (f"{self.topic}-{self.partition}: offsets [{self.start}, {self.next}): {self.delivered} delivered, "
                f"{self.skipped} skipped in {self.skips} range(s), {self.left_out} left out by Kafka's semantics "
                f"(control records, aborted transactions), {self.compacted} compacted away")
