"""Each segment's ``.txnindex`` against the transactions its log shows were aborted.

A read_committed fetch takes the aborted transactions from these indexes, never from the log:
a missing entry (or a missing file) hands an aborted transaction's records to every
read_committed consumer, an entry the log does not support hides a producer's records from them,
and a last stable offset set too far stops the broker collecting entries before a later
segment's.  Kafka rebuilds the files only for the segments it recovers after an unclean shutdown,
so a wrong one is served as it is.

What the log shows comes from the producer state replayed over it (``ProducerStateTracker``'s
completed transactions).  What Kafka writes (``UnifiedLog.append`` → ``updateTxnIndex``): one entry
per ABORT marker, in the marker's segment, ``(producer, first offset of the transaction, marker
offset, last stable offset)``.  Kafka's cleaner copies an entry into the cleaned segment only while
the transaction still has a batch there, so the checks below hold on compacted topics too: every
aborted batch covered, every entry backed by its ABORT marker, and no last stable offset past the
first offset of another transaction open at the marker (the log can only show such a transaction
later than it began: the bound is never too strict)."""
from __future__ import annotations

import heapq
import os
from bisect import bisect_right

from pykbatch.kafka.producer_state import CompletedTxn
from pykbatch.log.files import base_offset_of, sibling
from pykbatch.log.indexes import CorruptIndexError, TxnIndex


def last_stable_offsets(completed: list[CompletedTxn], still_open: dict[int, int]) -> dict[int, int]:
    """marker offset -> the highest last stable offset Kafka could record for each aborted
    transaction: the first offset of the earliest other transaction open at its marker, else the
    marker's offset + 1 (``ProducerStateManager.lastStableOffset``)."""
    ends = sorted(completed, key=lambda t: t.last_offset)
    spans = sorted([(t.first_offset, t.last_offset) for t in completed if t.first_offset < t.last_offset]
                   + [(first, float("inf")) for first in still_open.values()])
    found, open_now, i = {}, [], 0
    for txn in ends:
        m = txn.last_offset
        while i < len(spans) and spans[i][0] < m:
            heapq.heappush(open_now, (spans[i][0], spans[i][1]))
            i += 1
        while open_now and open_now[0][1] <= m:  # ended by now (the transaction itself ends at m)
            heapq.heappop(open_now)
        if txn.is_aborted:
            found[m] = open_now[0][0] if open_now else m + 1
    return found


def txn_index_problems(log_paths: list[str], completed: list[CompletedTxn], still_open: dict[int, int],
                       torn_after: int | None = None) -> list[str]:
    """Each problem a line ``<.txnindex path>: <problem>`` (the path of the file that should hold
    an entry, when it is missing).  ``log_paths``: the partition's segments in offset order;
    ``torn_after``: the last offset read in the last segment when it ends inside an entry (the
    active segment's torn write: Kafka's recovery rebuilds its index, so an entry for a marker lost
    with the tail is no fault)."""
    bases = [base_offset_of(os.path.basename(p)) for p in log_paths]
    lso = last_stable_offsets(completed, still_open)
    aborted_at = {t.last_offset: t for t in completed if t.is_aborted}
    committed_at = {t.last_offset: t for t in completed if not t.is_aborted}
    by_segment: dict[int, list[CompletedTxn]] = {}
    for t in aborted_at.values():
        by_segment.setdefault(max(0, bisect_right(bases, t.last_offset) - 1), []).append(t)
    problems = []
    for s, log in enumerate(log_paths):
        path = sibling(log, TxnIndex.SUFFIX)
        try:
            entries = TxnIndex.from_file(path).entries if os.path.exists(path) else []
        except (CorruptIndexError, OSError):
            continue  # named by the file's own check
        end = bases[s + 1] if s + 1 < len(bases) else None
        for i, e in enumerate(entries):
            where = f"{path}: entry {i} (producer {e.producer_id}, offsets {e.first_offset}-{e.last_offset})"
            txn = aborted_at.get(e.last_offset)
            if s == len(log_paths) - 1 and torn_after is not None and e.last_offset > torn_after:
                continue
            inside = e.last_offset >= bases[s] and (end is None or e.last_offset < end)
            if txn is None or txn.producer_id != e.producer_id or not inside:
                other = committed_at.get(e.last_offset)
                problems.append(f"{where}: no ABORT marker of producer {e.producer_id} at offset {e.last_offset} in "
                                f"this segment" + (" (that producer's marker there commits: read_committed "
                                                   "consumers lose its committed records)"
                                                   if other is not None and other.producer_id == e.producer_id
                                                   else " (read_committed consumers skip that producer's "
                                                        "records the entry covers)"))
            elif e.last_stable_offset > lso[e.last_offset]:
                bound = lso[e.last_offset]
                why = ("the offset after its marker (no other transaction was open)" if bound == e.last_offset + 1
                       else "where a transaction open at the marker began")
                problems.append(f"{where}: last stable offset {e.last_stable_offset} is past {bound}, {why}: a fetch "
                                f"may stop collecting aborted transactions before a later segment's")
        have = {(e.producer_id, e.last_offset): e.first_offset for e in entries}
        for t in by_segment.get(s, []):
            if t.first_offset == t.last_offset:
                continue  # an aborted transaction without records: nothing for a consumer to skip
            first = have.get((t.producer_id, t.last_offset))
            if first is None:
                problems.append(f"{path}: no entry for the transaction of producer {t.producer_id} aborted at offset "
                                f"{t.last_offset} (records from offset {t.first_offset}): read_committed consumers "
                                f"receive its records" + ("" if os.path.exists(path) else " (the file is missing)"))
            elif first > t.first_offset:
                problems.append(f"{path}: the entry for the transaction of producer {t.producer_id} aborted at offset "
                                f"{t.last_offset} starts at offset {first}, after its first record at "
                                f"{t.first_offset}: read_committed consumers receive the records before it")
    return problems
