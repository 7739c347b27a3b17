"""A partition's index and state files (Kafka's OffsetIndex, TimeIndex, TransactionIndex,
ProducerStateManager's snapshots, CheckpointFile): readers, Kafka's sanity checks, the checks of an
index against its log (what ``kafka-dump-log --verify-index-only`` reports, as data) and lookups.
Each reader takes the file's bytes (``from_file`` reads a path); index files are small
(``segment.index.bytes``, 10 MiB by default), so they are read whole.

- ``OffsetIndex`` (``.index``): 8-byte entries {int32 relativeOffset, int32 position}.
- ``TimeIndex`` (``.timeindex``): 12-byte entries {int64 timestamp, int32 relativeOffset}.
- ``TxnIndex`` (``.txnindex``): 34-byte aborted transactions.
- ``ProducerSnapshot`` (``.snapshot``): producer state, CRC-32C checked.
- ``Checkpoint`` (``leader-epoch-checkpoint`` and the broker's other checkpoint files).

A preallocated index (the active segment's) is zero-filled past its entries: like Kafka, the
entries end at the first one after the start whose offset is the base offset.
"""
from __future__ import annotations

import bisect
import struct
from typing import NamedTuple

from pykbatch._native import crc32c
from pykbatch.errors import KafkaDataError
from pykbatch.kafka.isolation import AbortedTxn
from pykbatch.kafka.producer_state import SnapshotEntry
from pykbatch.log.files import base_offset_of


class CorruptIndexError(ValueError):
    """An index or state file Kafka would refuse (its ``CorruptIndexException`` /
    ``CorruptSnapshotException``), with Kafka's message."""


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


class IndexEntry(NamedTuple):
    offset: int
    position: int


class TimeIndexEntry(NamedTuple):
    timestamp: int
    offset: int


class _SparseIndex:
    """What the offset and time indexes share: fixed-size entries after a base offset.  A
    subclass names its entry layout (``FORMAT``), which field holds the offset relative to the
    base (``RELATIVE``) and the tuple an entry becomes (``TYPE``)."""
    FORMAT = ""
    RELATIVE = 0
    TYPE: type = tuple
    SUFFIX = ""
    NAME = ""

    def __init__(self, data: bytes, base_offset: int, path: str | None = None):
        self.data = bytes(data)
        self.base_offset = base_offset
        self.path = path
        self.entries = self._entries()

    @classmethod
    def from_file(cls, path: str):
        return cls(_read(path), base_offset_of(path), path)

    @property
    def slots(self) -> int:
        """Kafka's ``entries`` of a pre-existing file: length / entry size."""
        return len(self.data) // struct.calcsize(self.FORMAT)

    def _entries(self) -> list:
        out = []
        for i in range(self.slots):
            e = self._entry(i)
            if i > 0 and e.offset == self.base_offset:
                break  # zero-filled preallocated space
            out.append(e)
        return out

    def _entry(self, i: int):
        fields = list(struct.unpack_from(self.FORMAT, self.data, i * struct.calcsize(self.FORMAT)))
        fields[self.RELATIVE] += self.base_offset
        return self.TYPE(*fields)

    def _name(self) -> str:
        return self.path or f"{self.NAME} with base offset {self.base_offset}"


class OffsetIndex(_SparseIndex):
    """``.index``: the byte position of a batch ending at an offset, every ~4 KiB of log."""
    FORMAT = ">ii"  # relative offset, position
    RELATIVE = 0
    TYPE = IndexEntry
    SUFFIX = ".index"
    NAME = "offset index"

    def sanity_check(self) -> None:
        """OffsetIndex.sanityCheck, as the broker runs it at start-up."""
        if len(self.data) % 8:
            raise CorruptIndexError(f"Index file {self._name()} is corrupt, found {len(self.data)} bytes which is "
                                    f"neither positive nor a multiple of 8.")
        if self.slots and self._entry(self.slots - 1).offset < self.base_offset:
            last = self._entry(self.slots - 1).offset
            raise CorruptIndexError(f"Corrupt index found, index file ({self._name()}) has non-zero size but the "
                                    f"last offset is {last} which is less than the base offset {self.base_offset}.")

    def lookup(self, offset: int) -> IndexEntry:
        """The greatest entry at or below ``offset`` (the base offset at position 0 if none)."""
        i = bisect.bisect_right([e.offset for e in self.entries], offset)
        return self.entries[i - 1] if i else IndexEntry(self.base_offset, 0)

    def check(self, segment, max_message_size: int = 5 * 1024 * 1024, headers: dict | None = None):
        """DumpLogSegments.dumpIndex's check against the log, entry by entry: yields (entry,
        problems), problems a list of ("mismatch", (index offset, log offset)) when the entry's
        position does not start a batch ending at its offset (log offset -1: no batch starts
        there).  ``headers``: the segment's header table (``_native._v2_header_table``) when the
        caller has one: an entry pointing at a batch start is answered from it."""
        known = _last_offsets_from(headers, [e.position for e in self.entries], segment.size, max_message_size)
        for entry, log_offset in zip(self.entries, known):
            if log_offset is None:
                log_offset = _last_offset_at(segment, entry.position, max_message_size)
            yield entry, [] if log_offset == entry.offset else [("mismatch", (entry.offset, log_offset))]


class TimeIndex(_SparseIndex):
    """``.timeindex``: the largest timestamp seen up to a batch's last offset."""
    FORMAT = ">qi"  # timestamp, relative offset
    RELATIVE = 1
    TYPE = TimeIndexEntry
    SUFFIX = ".timeindex"
    NAME = "time index"

    def sanity_check(self) -> None:
        """TimeIndex.sanityCheck."""
        if len(self.data) % 12:
            raise CorruptIndexError(f"Time index file {self._name()} is corrupt, found {len(self.data)} bytes which "
                                    f"is neither positive nor a multiple of 12.")
        if not self.slots:
            return
        first, last = self._entry(0), self._entry(self.slots - 1)
        if last.timestamp < first.timestamp:
            raise CorruptIndexError(f"Corrupt time index found, time index file ({self._name()}) has non-zero size "
                                    f"but the last timestamp is {last.timestamp} which is less than the first "
                                    f"timestamp {first.timestamp}")
        if last.offset < self.base_offset:
            raise CorruptIndexError(f"Corrupt time index found, time index file ({self._name()}) has non-zero size "
                                    f"but the last offset is {last.offset} which is less than the base offset "
                                    f"{self.base_offset}")

    def lookup(self, timestamp: int) -> TimeIndexEntry:
        """The last entry whose timestamp is at or below ``timestamp`` (where a search for the
        first record at or after it starts; the base offset if none)."""
        i = bisect.bisect_right([e.timestamp for e in self.entries], timestamp)
        return self.entries[i - 1] if i else TimeIndexEntry(-1, self.base_offset)

    def check(self, segment):
        """DumpLogSegments.dumpTimeIndex's check against the log, entry by entry: yields (entry,
        problems), each problem ("not_found", (indexed offset, the last offset of the batch found,
        or -1)), ("mismatch", (index timestamp, the batch's largest record timestamp)) or
        ("out_of_order", (index timestamp, the previous entry's)).  Each search starts where the
        segment's offset index says, when its entry is trusted."""
        index = segment.offset_index
        prev = -1
        for entry in self.entries:
            start = segment.trusted_start(index.lookup(entry.offset)) if index else 0
            batch = next((b for b in segment.batches(start=start) if b.last_offset >= entry.offset), None)
            problems = []
            if batch is None or batch.last_offset != entry.offset:
                problems.append(("not_found", (entry.offset, -1 if batch is None else batch.last_offset)))
            else:
                max_ts = max((r.timestamp for r in batch), default=-1)
                if max_ts != entry.timestamp:
                    problems.append(("mismatch", (entry.timestamp, max_ts)))
                if prev >= entry.timestamp:
                    problems.append(("out_of_order", (entry.timestamp, prev)))
            del batch
            yield entry, problems
            prev = entry.timestamp


def _last_offsets_from(headers, positions: list, size: int, max_message_size: int) -> list:
    """For each position, the last offset of the table's batch starting there (when it is no
    larger than ``max_message_size``, as a read bounded by it would find), else None."""
    if headers is None or not positions or not len(headers["position"]):
        return [None] * len(positions)
    import numpy as np
    starts = headers["position"]
    ends = np.append(starts[1:], size)
    at = np.asarray(positions, np.int64)
    i = np.minimum(np.searchsorted(starts, at), len(starts) - 1)
    found = (starts[i] == at) & (ends[i] - starts[i] <= max_message_size)
    return [int(o) if ok else None for o, ok in zip(headers["last_offset"][i].tolist(), found.tolist())]


def _last_offset_at(segment, position: int, max_message_size: int) -> int:
    """The last offset of the batch at ``position``, or -1 when no batch starts there (Kafka's
    tool dies on such an entry; reporting it as a mismatch lets the check go on)."""
    if not 0 <= position < segment.size:
        return -1
    try:
        first = next(segment.batches(start=position, max_bytes=position + max_message_size, resync=False), None)
    except KafkaDataError:
        return -1
    return first.last_offset if first is not None else -1


class TxnIndex:
    """``.txnindex``: the transactions aborted in a segment."""
    ENTRY = 34
    SUFFIX = ".txnindex"

    def __init__(self, data: bytes, path: str | None = None):
        self.path = path
        self.entries: list[AbortedTxn] = []
        for at in range(0, len(data) - len(data) % self.ENTRY, self.ENTRY):
            txn = AbortedTxn(*struct.unpack_from(">hqqqq", data, at))
            if txn.version > 0:
                raise CorruptIndexError(f"Unexpected aborted transaction version {txn.version} in transaction index "
                                        f"{path or ''}, current version is 0")
            self.entries.append(txn)
        self.trailing_bytes = len(data) % self.ENTRY

    @classmethod
    def from_file(cls, path: str) -> "TxnIndex":
        return cls(_read(path), path)

    def problems(self) -> list[str]:
        """What a reader of aborted transactions cannot trust: a partial entry at the end, an
        entry whose offsets run backwards, entries out of order."""
        found = []
        previous_last = None
        for i, txn in enumerate(self.entries):
            at = i * self.ENTRY
            if txn.producer_id < 0 or txn.first_offset < 0 or txn.first_offset > txn.last_offset:
                found.append(f"entry {i} at byte {at}: producer {txn.producer_id}, first offset {txn.first_offset}, "
                             f"last offset {txn.last_offset} (a producer id and first <= last offsets expected)")
            elif txn.last_stable_offset < 0:
                found.append(f"entry {i} at byte {at}: last stable offset {txn.last_stable_offset}")
            elif previous_last is not None and txn.last_offset < previous_last:
                found.append(f"entry {i} at byte {at}: last offset {txn.last_offset} before the previous entry's "
                             f"{previous_last} (entries are appended as transactions end)")
            previous_last = txn.last_offset
        if self.trailing_bytes:
            found.append(f"{self.trailing_bytes} bytes at byte {len(self.entries) * self.ENTRY} do not make a whole "
                         f"{self.ENTRY}-byte entry")
        return found


class ProducerSnapshot:
    """``.snapshot`` (ProducerSnapshot.json v1): version, CRC-32C over the rest, entries."""
    ENTRY = 46
    SUFFIX = ".snapshot"

    def __init__(self, data: bytes, path: str | None = None):
        self.path = path
        if len(data) < 10:
            raise CorruptIndexError(f"Snapshot failed schema validation: {len(data)} bytes is too short")
        version, crc, count = struct.unpack_from(">hIi", data, 0)
        if version != 1:
            raise CorruptIndexError(f"Snapshot contained an unknown file version {version}")
        computed = crc32c(data[6:])
        if computed != crc:
            raise CorruptIndexError(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                                    f"Computed crc: {computed}")
        if count < 0 or 10 + count * self.ENTRY > len(data):
            raise CorruptIndexError(f"Snapshot failed schema validation: {count} entries do not fit in "
                                    f"{len(data)} bytes")
        self.version = version
        self.crc = crc
        self.entries = [SnapshotEntry(*struct.unpack_from(">qhiqiqiq", data, 10 + i * self.ENTRY))
                        for i in range(count)]

    @classmethod
    def from_file(cls, path: str) -> "ProducerSnapshot":
        return cls(_read(path), path)


class Checkpoint(NamedTuple):
    """A broker checkpoint file: a version, then entries (``leader-epoch-checkpoint``: (epoch,
    start offset); the others: (topic, partition, offset))."""
    version: int
    entries: list

    @classmethod
    def parse(cls, text: str, path: str = "") -> "Checkpoint":
        lines = text.splitlines()
        try:
            version, count = int(lines[0]), int(lines[1])
            entries = [tuple(int(x) if x.lstrip("-").isdigit() else x for x in line.split())
                       for line in lines[2:2 + count]]
        except (IndexError, ValueError) as exc:
            raise CorruptIndexError(f"Malformed checkpoint file {path}: {exc}") from None
        if len(entries) != count:
            raise CorruptIndexError(f"Expected {count} entries in checkpoint file {path}, but found only "
                                    f"{len(entries)}")
        return cls(version, entries)

    @classmethod
    def from_file(cls, path: str) -> "Checkpoint":
        data = _read(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptIndexError(f"Malformed checkpoint file {path}: byte {exc.start} is not UTF-8 text") from None
        return cls.parse(text, path)

    def leader_epoch_problems(self) -> list[str]:
        """What LeaderEpochCheckpointFile and LeaderEpochFileCache refuse in a
        ``leader-epoch-checkpoint``: a version other than 0, entries that are not two numbers,
        epochs that do not increase, start offsets that go back."""
        problems = [] if self.version == 0 else [f"version {self.version}, expected 0"]
        previous = None
        for i, entry in enumerate(self.entries):
            if len(entry) != 2 or not all(isinstance(x, int) for x in entry):
                problems.append(f"entry {i} ({' '.join(map(str, entry))}): expected an epoch and a start offset")
                continue
            epoch, start = entry
            if epoch < 0 or start < 0:
                problems.append(f"entry {i}: negative epoch {epoch} or start offset {start}")
            if previous is not None and (epoch <= previous[0] or start < previous[1]):
                problems.append(f"entry {i}: epoch {epoch} at offset {start} after epoch {previous[0]} at offset "
                                f"{previous[1]} (epochs must increase, start offsets must not go back)")
            previous = (epoch, start)
        return problems


class PartitionMetadata(NamedTuple):
    """``partition.metadata``: the partition's topic id (``version: 0`` then ``topic_id: <id>``,
    Kafka's PartitionMetadataFile; the id is a Uuid in URL-safe base64 without padding)."""
    version: int
    topic_id: str

    @classmethod
    def parse(cls, data: bytes, path: str = "") -> "PartitionMetadata":
        import base64
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise CorruptIndexError(f"Malformed partition metadata file {path}: byte {exc.start} is not UTF-8 "
                                    "text") from None
        fields = [line.split(": ", 1) for line in lines if line]
        if len(fields) != 2 or [f[0] for f in fields] != ["version", "topic_id"] or any(len(f) != 2 for f in fields):
            raise CorruptIndexError(f"Malformed partition metadata file {path}: expected the lines 'version: 0' and "
                                    "'topic_id: <id>'")
        version, topic_id = fields[0][1].strip(), fields[1][1].strip()
        if version != "0":
            raise CorruptIndexError(f"Unrecognized version of partition metadata file {path}: {version}")
        try:
            raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
        except ValueError:
            raw = b""
        if len(raw) != 16 or len(topic_id) != 22:
            raise CorruptIndexError(f"Malformed partition metadata file {path}: topic id {topic_id!r} is not a "
                                    "22-character base64 Uuid")
        return cls(0, topic_id)

    @classmethod
    def from_file(cls, path: str) -> "PartitionMetadata":
        return cls.parse(_read(path), path)


INDEX_TYPES = (OffsetIndex, TimeIndex, TxnIndex, ProducerSnapshot)
"""The readers of a segment's other files, each declaring its ``SUFFIX``; those with a ``check``
method are checked against their segment's log (the dump's --verify-index-only, the audit)."""
