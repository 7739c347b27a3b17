"""The records of Kafka's ``__remote_log_metadata`` topic (KIP-405's topic-based metadata manager).

A record's value is a framed message (Kafka's ``AbstractApiMessageSerde``): unsigned varints
frame version (1), api key and version, then the message of that key, decoded from Kafka's own
definitions (``pykbatch/kafka/definitions.py``).  Keys are null.

    for event in metadata.events_of_segments(["__remote_log_metadata-0/00000000000000000000.log"]):
        event.partition, event.state ...
    metadata.decode_value(record.value)          # one value
    event.java_str()                             # as kafka-dump-log --remote-log-metadata-decoder prints it
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator, Union

from pykbatch.kafka import definitions, framing
from pykbatch.kafka.definitions import MessageFormatError, kafka_uuid, parse_kafka_uuid  # noqa: F401  (re-exported)

TOPIC = "__remote_log_metadata"
DEFINITIONS = definitions.topic_definitions(TOPIC)


class SegmentState(enum.IntEnum):
    """``RemoteLogSegmentState``: a remote copy's life."""
    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class PartitionDeleteState(enum.IntEnum):
    """``RemotePartitionDeleteState``."""
    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


@dataclass(frozen=True, order=True)
class TopicIdPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID

    def __str__(self) -> str:  # Kafka's TopicIdPartition.toString
        return f"{kafka_uuid(self.topic_id)}:{self.topic}-{self.partition}"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class SegmentId:
    """``RemoteLogSegmentId``: a partition and the copy's own Uuid (one per upload)."""
    partition: TopicIdPartition
    id: uuid.UUID

    def __str__(self) -> str:
        return f"RemoteLogSegmentId{{topicIdPartition={self.partition}, id={kafka_uuid(self.id)}}}"


def _state_str(enum_type, value: int) -> str:
    return enum_type(value).name  # decode_value refuses unknown ids, as Kafka's constructors do


def _custom_str(custom: bytes | None) -> str:
    return "Optional.empty" if custom is None else f"Optional[CustomMetadata{{{len(custom)} bytes}}]"


def _epochs_str(epochs: dict[int, int]) -> str:  # a Java TreeMap
    return "{" + ", ".join(f"{e}={o}" for e, o in sorted(epochs.items())) + "}"


@dataclass(frozen=True)
class SegmentMetadata:
    """A remote copy announced (``RemoteLogSegmentMetadataRecord``; its state is normally
    COPY_SEGMENT_STARTED)."""
    segment_id: SegmentId
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    leader_epochs: dict[int, int]  # leader epoch -> its first offset in the segment
    size_in_bytes: int
    custom_metadata: bytes | None
    state: int
    txn_index_empty: bool

    @property
    def partition(self) -> TopicIdPartition:
        return self.segment_id.partition

    def java_str(self) -> str:
        return (f"RemoteLogSegmentMetadata{{remoteLogSegmentId={self.segment_id}, startOffset={self.start_offset}, "
                f"endOffset={self.end_offset}, brokerId={self.broker_id}, maxTimestampMs={self.max_timestamp_ms}, "
                f"eventTimestampMs={self.event_timestamp_ms}, segmentLeaderEpochs={_epochs_str(self.leader_epochs)}, "
                f"segmentSizeInBytes={self.size_in_bytes}, customMetadata={_custom_str(self.custom_metadata)}, "
                f"state={_state_str(SegmentState, self.state)}, txnIdxEmpty={str(self.txn_index_empty).lower()}}}")


@dataclass(frozen=True)
class SegmentUpdate:
    """A copy's state moved on (``RemoteLogSegmentMetadataUpdateRecord``)."""
    segment_id: SegmentId
    broker_id: int
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: int

    @property
    def partition(self) -> TopicIdPartition:
        return self.segment_id.partition

    def java_str(self) -> str:
        return (f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={self.segment_id}, "
                f"customMetadata={_custom_str(self.custom_metadata)}, state={_state_str(SegmentState, self.state)}, "
                f"eventTimestampMs={self.event_timestamp_ms}, brokerId={self.broker_id}}}")


@dataclass(frozen=True)
class PartitionDelete:
    """A partition's remote data is being deleted (``RemotePartitionDeleteMetadataRecord``)."""
    partition: TopicIdPartition
    broker_id: int
    event_timestamp_ms: int
    state: int

    def java_str(self) -> str:
        return (f"RemotePartitionDeleteMetadata{{topicPartition={self.partition}, "
                f"state={_state_str(PartitionDeleteState, self.state)}, eventTimestampMs={self.event_timestamp_ms}, "
                f"brokerId={self.broker_id}}}")


@dataclass(frozen=True)
class SegmentSnapshot:
    """A segment's metadata as a snapshot holds it (``RemoteLogSegmentMetadataSnapshotRecord``:
    the copy's Uuid without its partition)."""
    segment_uuid: uuid.UUID
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    leader_epochs: dict[int, int]
    size_in_bytes: int
    custom_metadata: bytes | None
    state: int
    txn_index_empty: bool

    partition = None

    def java_str(self) -> str:
        return (f"RemoteLogSegmentMetadataSnapshot{{segmentId={kafka_uuid(self.segment_uuid)}, "
                f"startOffset={self.start_offset}, endOffset={self.end_offset}, "
                f"maxTimestampMs={self.max_timestamp_ms}, segmentLeaderEpochs={_epochs_str(self.leader_epochs)}, "
                f"segmentSizeInBytes={self.size_in_bytes}, customMetadata={_custom_str(self.custom_metadata)}, "
                f"state={_state_str(SegmentState, self.state)}, txnIdxEmpty={str(self.txn_index_empty).lower()}}}")


Event = Union[SegmentMetadata, SegmentUpdate, PartitionDelete, SegmentSnapshot]  # (3.9: no | between classes)


def _tip(d: dict) -> TopicIdPartition:
    return TopicIdPartition(d["Name"], d["Partition"], d["Id"])


def _sid(d: dict) -> SegmentId:
    return SegmentId(_tip(d["TopicIdPartition"]), d["Id"])


def _epochs(entries) -> dict[int, int]:
    return {e["LeaderEpoch"]: e["Offset"] for e in entries or ()}


def _segment(m: dict):
    return dict(start_offset=m["StartOffset"], end_offset=m["EndOffset"], broker_id=m["BrokerId"],
                max_timestamp_ms=m["MaxTimestampMs"], event_timestamp_ms=m["EventTimestampMs"],
                leader_epochs=_epochs(m["SegmentLeaderEpochs"]), size_in_bytes=m["SegmentSizeInBytes"],
                custom_metadata=m["CustomMetadata"], state=m["RemoteLogSegmentState"],
                txn_index_empty=m["TxnIndexEmpty"])


_BUILD = {
    "RemoteLogSegmentMetadataRecord": lambda m: SegmentMetadata(segment_id=_sid(m["RemoteLogSegmentId"]), **_segment(m)),
    "RemoteLogSegmentMetadataUpdateRecord": lambda m: SegmentUpdate(
        _sid(m["RemoteLogSegmentId"]), m["BrokerId"], m["EventTimestampMs"], m["CustomMetadata"],
        m["RemoteLogSegmentState"]),
    "RemotePartitionDeleteMetadataRecord": lambda m: PartitionDelete(
        _tip(m["TopicIdPartition"]), m["BrokerId"], m["EventTimestampMs"], m["RemotePartitionDeleteState"]),
    "RemoteLogSegmentMetadataSnapshotRecord": lambda m: SegmentSnapshot(segment_uuid=m["SegmentId"], **_segment(m)),
}


def decode_value(value: bytes) -> Event:
    """One record value of ``__remote_log_metadata``; ``MessageFormatError`` names the byte and
    what was wrong (frame version, unknown type, a field, trailing bytes)."""
    schema, _, fields = framing.decode_framed(value, TOPIC)
    state = fields.get("RemoteLogSegmentState", fields.get("RemotePartitionDeleteState"))
    states = PartitionDeleteState if "RemotePartitionDeleteState" in fields else SegmentState
    if state not in set(states):  # Kafka's constructors refuse a null state
        raise MessageFormatError(f"unknown {states.__name__} id {state}", None, "state can not be null")
    return _BUILD[schema.name](fields)


def encode_value(definition: str, fields: dict, version: int = 0) -> bytes:
    """A record value of ``__remote_log_metadata``: the frame, then the message ``definition``
    (one of ``DEFINITIONS``) with ``fields`` (for tests and tools that write metadata)."""
    return framing.encode_framed(definitions.load(definition), fields, version)


def dump_payload(value: bytes | None) -> str:
    """A value as ``kafka-dump-log --remote-log-metadata-decoder`` prints it."""
    return decode_value(value).java_str()


@dataclass(frozen=True)
class MetadataRecord:
    """An event with where it was read: the metadata topic's partition and offset."""
    offset: int
    event: Event | None
    error: MessageFormatError | None = None
    path: str | None = None


def records_of_segments(paths: Iterable[str]) -> Iterator[MetadataRecord]:
    """Every record of the given ``__remote_log_metadata`` segment files, in log order; a
    record that does not decode is yielded with its error (never skipped silently)."""
    from pykbatch.log import read_segment
    for path in paths:
        with read_segment(path) as seg:
            for batch in seg.batches():
                if batch.is_control:
                    continue
                for rec in batch:
                    try:
                        yield MetadataRecord(rec.offset, decode_value(rec.value or b""), None, path)
                    except MessageFormatError as exc:
                        yield MetadataRecord(rec.offset, None, exc, path)
