"""Every file of a partition directory checked as what it is, each problem one line naming the
file and where in it: the offset and time indexes against their log (Kafka's
``--verify-index-only`` and its start-up sanity checks), aborted-transaction indexes, producer
snapshots, the leader-epoch checkpoint and ``partition.metadata``.  The audit checks a
partition's files with these; ``pykbatch validate`` a single file handed to it.  Logs themselves
are the validator's (``pykbatch.validate``)."""
from __future__ import annotations

import os

from pykbatch.log.files import LEADER_EPOCH_CHECKPOINT, LOG, PARTITION_METADATA, is_segment_file, sibling, suffix_of
from pykbatch.log.indexes import Checkpoint, OffsetIndex, PartitionMetadata, ProducerSnapshot, TimeIndex, TxnIndex
from pykbatch.log.reports import IndexReport
from pykbatch.log.segments import Segment

# What each checked file is called in messages, by suffix or whole name.
KINDS = {
    LOG: "log segment",
    OffsetIndex.SUFFIX: "offset index",
    TimeIndex.SUFFIX: "time index",
    TxnIndex.SUFFIX: "transaction index",
    ProducerSnapshot.SUFFIX: "producer snapshot",
    LEADER_EPOCH_CHECKPOINT: "leader-epoch checkpoint",
    PARTITION_METADATA: "partition metadata file",
}


def kind_of(path: str) -> str | None:
    """The partition file ``path`` names (a ``KINDS`` key: its suffix, or its whole name for the
    files that have no base offset), or None for a name Kafka does not write."""
    name = os.path.basename(os.fspath(path).rstrip("/"))
    if name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA):
        return name
    suffix = suffix_of(name)
    return suffix if suffix in KINDS and is_segment_file(name, suffix) else None


def check_index(path: str, headers: dict | None = None) -> list[str]:
    """An offset or time index: the broker's sanity check, then every entry against the log
    beside it (when there is one); ``headers``: that log's header table, if already built."""
    kind = OffsetIndex if path.endswith(OffsetIndex.SUFFIX) else TimeIndex
    index = kind.from_file(path)
    index.sanity_check()
    log = sibling(path, LOG)
    if not os.path.exists(log):
        return []
    errors = IndexReport()
    with Segment(log, base_offset=index.base_offset) as seg:
        found = index.check(seg, headers=headers) if kind is OffsetIndex else index.check(seg)
        for _, entry_problems in found:
            errors.add(path, entry_problems)
    return errors.lines()


def check_txn_index(path: str) -> list[str]:
    return TxnIndex.from_file(path).problems()


def check_snapshot(path: str) -> list[str]:
    """A producer snapshot: version, CRC-32C and structure (what Kafka's loader refuses)."""
    ProducerSnapshot.from_file(path)
    return []


def check_leader_epochs(path: str) -> list[str]:
    return Checkpoint.from_file(path).leader_epoch_problems()


def check_partition_metadata(path: str) -> list[str]:
    PartitionMetadata.from_file(path)
    return []


_CHECKS = {
    OffsetIndex.SUFFIX: check_index,
    TimeIndex.SUFFIX: check_index,
    TxnIndex.SUFFIX: check_txn_index,
    ProducerSnapshot.SUFFIX: check_snapshot,
    LEADER_EPOCH_CHECKPOINT: check_leader_epochs,
    PARTITION_METADATA: check_partition_metadata,
}


def check_file(path: str, headers: dict | None = None) -> list[str]:
    """The problems of one partition file that is not a log (``kind_of`` says which), each a line
    ``<path>: <problem>``; a file that cannot be read at all is one problem, never an exception."""
    kind = kind_of(path)
    if kind is None or kind == LOG:
        raise ValueError(f"{path}: not a partition index or state file")
    try:
        check = _CHECKS[kind]
        problems = check(path, headers) if check is check_index else check(path)
    except (ValueError, OSError) as exc:  # CorruptIndexError is a ValueError
        problems = [str(exc)]
    return [f"{path}: {p}" for p in problems]


def missing_indexes(log_paths: list[str]) -> list[str]:
    """A segment without the offset or time index its partition's other segments have: Kafka
    finds it at start-up, logs an ERROR and recovers the segment to rebuild it (and lookups by
    offset or time read it whole until then).  A partition whose segments have none at all (logs
    copied out alone) is not blamed."""
    problems = []
    for kind in (OffsetIndex, TimeIndex):
        present = [os.path.exists(sibling(log, kind.SUFFIX)) for log in log_paths]
        if any(present):
            problems += [f"{sibling(log, kind.SUFFIX)}: missing: Could not find {KINDS[kind.SUFFIX]} file corresponding "
                         f"to log file {log}, recovering segment and rebuilding index files..."
                         for log, there in zip(log_paths, present) if not there]
    return problems


def check_partition_files(directory: str, log_paths: list[str]) -> list[str]:
    """The partition-wide state files (snapshots, leader-epoch checkpoint, partition.metadata)
    and each segment's transaction index; the offset and time indexes are the audit's, checked
    beside their logs."""
    problems = []
    for log in log_paths:
        txn = sibling(log, TxnIndex.SUFFIX)
        if os.path.exists(txn):
            problems += check_file(txn)
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if kind_of(name) in (ProducerSnapshot.SUFFIX, LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA):
            problems += check_file(path)
    return problems
