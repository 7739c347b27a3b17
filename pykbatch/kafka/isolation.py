"""``isolation.level`` for offline readers: what a Kafka consumer would be handed.

``read_uncommitted``: every record of every non-control batch.  ``read_committed`` follows the
consumer (``CompletedFetch``): the broker hands it the aborted transactions of the range (from
the ``.txnindex`` files: producer id and first offset); before each batch of a producer the
consumer moves the aborted transactions that began at or before the batch's last offset into a
set of aborted producers; a transactional batch of an aborted producer is dropped; that
producer's ABORT marker takes it out of the set again.  And the broker hands it nothing at or
after the last stable offset: the first offset of the earliest transaction still open.

A consumer that cannot read an entry (``unreadable``) cannot tell whether it was the ABORT marker
of a producer in the aborted set: that producer's next transactional batches are then neither
kept nor dropped but held (``decide`` answers ``HOLD``) until the broker's list shows a new
aborted transaction of it or one of its markers is read.  Nothing is guessed.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

from pykbatch._catalogue import CONTROL_TYPE_IDS
from pykbatch._native import IsolationState, control_type
from pykbatch.errors import KafkaDataError
from pykbatch.kafka.producer_state import SnapshotEntry

KEEP, DROP, HOLD = "keep", "drop", "hold"
ABORT = CONTROL_TYPE_IDS["ABORT"]
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


class AbortedTxn(NamedTuple):
    """An aborted transaction: a ``.txnindex`` entry, or one a fetch response lists (its last
    offset then unknown)."""
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def dump_line(self) -> str:
        return (f"version: {self.version} producerId: {self.producer_id} firstOffset: {self.first_offset} "
                f"lastOffset: {self.last_offset} lastStableOffset: {self.last_stable_offset}")


def check_level(level: str) -> str:
    if level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation level is one of {', '.join(ISOLATION_LEVELS)}, not {level!r}")
    return level


def _is_abort_marker(batch) -> bool:
    if not batch.is_control:
        return False
    for record in batch:
        return control_type(record.key) == ABORT
    return False


class Isolation:
    """Decides, batch by batch in offset order, what a consumer at ``level`` receives: the core's
    rule (kb_isolation), which the core's own walks share; the marker of a control batch is read
    here (Python's batches, compressed or not)."""

    def __init__(self, level: str = READ_UNCOMMITTED, aborted: Iterable[AbortedTxn] = (),
                 last_stable_offset: int | None = None, fetch_offset: int | None = None,
                 undecided: Iterable[int] = ()):
        """``fetch_offset``: where the read starts.  A broker hands a fetch only the aborted
        transactions whose last offset is at or after it (an abort that ended before is no
        business of the fetch's, and its marker would never be seen to end it).  ``undecided``:
        producers an earlier fetch's unreadable entry left undecided (``unreadable``)."""
        self.level = check_level(level)
        self.committed = level == READ_COMMITTED
        pending = [(t.first_offset, t.producer_id) for t in aborted
                   if fetch_offset is None or t.last_offset >= fetch_offset] if self.committed else []
        self._state = IsolationState(self.committed, last_stable_offset, pending, undecided)
        self.last_stable_offset = self._state.last_stable_offset

    def past_end(self, batch) -> bool:
        """Whether ``batch`` and everything after it lie at or beyond the last stable offset."""
        try:
            first = batch.base_offset
        except KafkaDataError:  # a v0/v1 wrapper whose records do not load: its header gives its last,
            first = batch.last_offset  # and what follows lies past that too
        return self._state.past_end(first)

    def decide(self, batch) -> str:
        """``KEEP``, ``DROP`` or ``HOLD`` for ``batch``'s records (call for every batch, in order)."""
        control = batch.is_control
        marker = False
        if self._state.reads_marker(batch.producer_id, control):
            try:
                marker = _is_abort_marker(batch)
            except KafkaDataError:  # a marker that does not read: an unreadable entry (kb_log_windows too)
                self._state.unreadable(batch.last_offset)
                return DROP
        return self._state.decide(batch.producer_id, batch.last_offset, control, batch.is_transactional, marker)

    def keeps(self, batch) -> bool:
        """Whether the consumer receives ``batch``'s records (call for every batch, in order)."""
        return self.decide(batch) == KEEP

    @property
    def aborted(self) -> frozenset[int]:
        """Producers whose transactional records are being dropped (an ABORT marker ends it)."""
        return self._state.aborted

    @property
    def undecided(self) -> frozenset[int]:
        """Producers whose transactional records are held until one of their markers is read."""
        return self._state.undecided

    def unreadable(self, last_offset: int) -> list[int]:
        """An entry that cannot be read ends at ``last_offset``: it may have been the ABORT marker
        of any producer then in the aborted set, whose later batches become undecided.  Returns
        those producers."""
        if not self.committed:
            return []
        self._state.unreadable(last_offset)
        return sorted(self._state.aborted)

    @property
    def pending(self) -> list[tuple[int, int]]:
        """The aborted transactions not begun yet: ``(first offset, producer id)``, by first offset."""
        return self._state.pending

    def settled(self, aborted: Iterable[int], next_offset: int) -> None:
        """Takes the state a walk elsewhere (the core's ``consume``) left after deciding every batch
        before ``next_offset``: ``aborted`` the producers being dropped then."""
        self._state.settle(aborted, next_offset)

    def keeps_offset(self, offset: int) -> bool:
        return self.last_stable_offset is None or offset < self.last_stable_offset


def open_transactions(snapshot: Iterable[SnapshotEntry], batches_after: Iterable) -> dict[int, int]:
    """Producer id -> first offset of its transaction still open at the end of ``batches_after``
    (the batches after a producer snapshot, in order), starting from the snapshot's entries."""
    ongoing = {e.producer_id: e.current_txn_first_offset for e in snapshot if e.current_txn_first_offset >= 0}
    for b in batches_after:
        if b.magic < 2 or not b.is_transactional:
            continue
        if b.is_control:
            ongoing.pop(b.producer_id, None)
        else:
            ongoing.setdefault(b.producer_id, b.base_offset)
    return ongoing
