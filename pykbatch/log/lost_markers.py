"""Transactions a repair would leave open, and the markers that close them.

A producer's transaction ends with its marker.  Where the marker was lost -- in bytes that cannot
be read, a batch dropped whole, a closed segment's cut tail, a deleted segment -- and the producer
then writes outside a transaction, Kafka refuses the log: loading it raises
InvalidTxnStateException ("Expected transactional write from producer ..."), and a broker takes
the partition offline.  Kafka's own recovery never meets this, because it truncates the log at
the first damage and deletes every later segment; a repair keeps what follows, so it must close
the transaction itself.

``repair`` closes each such transaction with an ABORT marker at a free offset of the range where
its marker was lost -- the first such range after the transaction's last batch -- and says so.
Whether the lost marker committed or aborted is not known: an ABORT keeps read_committed
consumers from reading what may never have been committed (the records stay in the log for
read_uncommitted ones), and it is Kafka's own remedy for a transaction left hanging (KIP-664).

Only the segment being repaired gets markers, at its own losses; the segments around it are read
as they are (a damaged one gets its markers when it is repaired).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator, NamedTuple

from pykbatch._native import _v2_header_table, iter_batches
from pykbatch.errors import KafkaDataError
from pykbatch.kafka.control import ABORT, COMMIT
from pykbatch.log.files import LOG, base_offset_of, is_segment_file
from pykbatch.log.segments import first_offset


@dataclass(frozen=True)
class ClosingMarker:
    """An ABORT marker the repair writes into ``path`` at ``offset`` for producer
    ``producer_id``'s transaction from ``first_offset`` to ``last_offset``, whose marker was lost."""
    path: str
    offset: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    timestamp: int
    first_offset: int
    last_offset: int

    def describe(self) -> str:
        return (f"the transaction of producer {self.producer_id} (epoch {self.producer_epoch}) from offset "
                f"{self.first_offset} to {self.last_offset} lost its marker, and the producer writes outside a "
                f"transaction after it (Kafka refuses such a log): closed with an ABORT marker at offset "
                f"{self.offset}; whether it had committed is not known, read_committed consumers now skip it")


class _Batch(NamedTuple):
    """What producer state needs of a batch; ``marker``: None (data), ABORT/COMMIT, or -1 (a control
    batch that ends no transaction as far as is known: empty, another type)."""
    producer_id: int
    epoch: int
    transactional: bool
    marker: int | None
    coordinator_epoch: int
    base: int
    last: int
    max_timestamp: int


@dataclass
class _Loss:
    """Offsets ``first``..``last`` of the segment being repaired that hold nothing: a marker may go there."""
    first: int
    last: int
    taken: int = 0

    def claim(self) -> int | None:
        if self.first + self.taken > self.last:
            return None
        self.taken += 1
        return self.first + self.taken - 1


@dataclass
class _Producer:
    epoch: int = -1
    coordinator_epoch: int = -1
    txn_first: int | None = None
    txn_last: int = -1
    loss: _Loss | None = None
    """The first loss after the open transaction's last batch: where its marker may have been."""


def closing_markers(path: str, repaired: bytes, lost_inside: list[tuple[int, int]]) -> list[ClosingMarker]:
    """The markers ``repaired`` (the repair of segment ``path``) needs: ``lost_inside`` are the
    (first, last) offsets of the empty batches the repair put where it dropped whole entries; the
    offsets between the segment's end and the next segment's base offset are lost too.  Empty
    when nothing of the segment was lost or the partition has no transaction to close."""
    folder, name = os.path.split(os.path.abspath(path))
    if not is_segment_file(name, LOG):  # a file alone: what comes after it is not known
        paths, here = [], 0
    else:
        paths = sorted((os.path.join(folder, n) for n in os.listdir(folder) if is_segment_file(n, LOG)),
                       key=base_offset_of)
        here = [os.path.abspath(p) for p in paths].index(os.path.join(folder, name))
    following = paths[here + 1:]
    end = _last_offset(repaired, base_offset_of(name) - 1 if paths else -1)
    next_base = base_offset_of(following[0]) if following else None
    end_loss = _Loss(end + 1, next_base - 1) if next_base is not None and next_base > end + 1 else None
    losses = [_Loss(first, last) for first, last in lost_inside]
    if not losses and end_loss is None:
        return []
    producers: dict[int, _Producer] = {}
    for p in paths[:here]:
        for b in _original_batches(p):
            _append(producers, b, None, path)
    found: list[ClosingMarker] = []
    by_first = {loss.first: loss for loss in losses}
    last_ts = -1
    for b in _own_batches(repaired):
        loss = by_first.get(b.base) if b.producer_id < 0 and b.marker is None else None
        if loss is not None:
            _lose(producers, loss)
        else:
            _append(producers, b, found, path, last_ts)
        last_ts = max(last_ts, b.max_timestamp)
    if end_loss is not None:
        _lose(producers, end_loss)
    for p in following:
        if not any(s.loss for s in producers.values()):
            break
        for b in _original_batches(p):
            _append(producers, b, found, path, last_ts)
    return found


def _lose(producers: dict, loss: _Loss) -> None:
    for state in producers.values():
        if state.txn_first is not None and state.loss is None:
            state.loss = loss


def _append(producers: dict, b: _Batch, found: list | None, path: str, last_ts: int = -1) -> None:
    """A batch's effect on its producer's transaction (ProducerAppendInfo's, as far as markers go);
    where a write outside a transaction meets one whose marker was lost in this segment, the
    marker that closes it joins ``found``."""
    if b.producer_id < 0:
        return
    state = producers.setdefault(b.producer_id, _Producer())
    if b.marker is not None:
        if b.marker in (ABORT, COMMIT):
            state.txn_first, state.loss = None, None
            state.coordinator_epoch = b.coordinator_epoch
        state.epoch = b.epoch
        return
    if b.transactional:
        if state.txn_first is None:
            state.txn_first = b.base
        state.txn_last, state.loss = b.last, None  # a transaction goes on after a loss: nothing to close
    elif state.txn_first is not None and state.loss is not None and found is not None:
        offset = state.loss.claim()
        if offset is not None:
            found.append(ClosingMarker(path, offset, b.producer_id, state.epoch, max(state.coordinator_epoch, 0),
                                       last_ts, state.txn_first, state.txn_last))
            state.txn_first, state.loss = None, None
    state.epoch = b.epoch


def _last_offset(data: bytes, default: int) -> int:
    """The highest offset of ``data``'s batches (``default``: none), from the header table where
    the bytes are whole v2 batches."""
    table = _v2_header_table(data)
    if table is not None:
        return max(default, int(table["last_offset"].max())) if len(table["last_offset"]) else default
    return max((b.last_offset for b in iter_batches(data, verify_crc=False)), default=default)


def _own_batches(data: bytes) -> list[_Batch]:
    return [_batch_of(b) for b in iter_batches(data, verify_crc=False)]


def _original_batches(path: str) -> Iterator[_Batch]:
    """A segment's batches as they are, past what cannot be read."""
    from pykbatch.log.segments import Segment
    with Segment(path) as seg:
        for b in seg.batches(on_lost=lambda span: None):
            yield _batch_of(b)


def _batch_of(b) -> _Batch:
    pid = getattr(b, "producer_id", -1)
    marker, coordinator_epoch = None, -1
    if pid >= 0 and getattr(b, "is_control", False):
        try:
            control = b.control
        except KafkaDataError:  # unreadable: taken as closing (its own segment's repair drops it)
            control = None
            marker = ABORT
        else:
            marker = -1 if control is None else control.type
            coordinator_epoch = -1 if control is None or control.coordinator_epoch is None \
                else control.coordinator_epoch
    return _Batch(pid, getattr(b, "producer_epoch", -1), bool(getattr(b, "is_transactional", False)), marker,
                  coordinator_epoch, first_offset(b, default=b.last_offset), b.last_offset, b.max_timestamp)
