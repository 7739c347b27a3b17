"""What pykbatch asks of a broker, built in one place: every request from kafka-python's classes
(generated from Kafka's JSON message definitions) at the versions of ``VERSIONS``, the one table
of the Kafka APIs pykbatch speaks -- the lowest version it needs, the highest it knows.  The
connection layer negotiates within that range with each broker (ApiVersions).

Callers pass plain values and read the responses' fields; with ``pykbatch.live.cluster`` (the
connections) and ``pykbatch.live.frames`` (where response bytes land) this is the wire seam: no
other module imports kafka-python (``tests/test_layers.py``).
"""
from __future__ import annotations

import struct
from typing import Any, Iterable, Mapping

from pykbatch.kafka.definitions import uvarint_bytes

VERSIONS: dict[str, tuple[int, int]] = {
    "Produce": (3, 11),          # v3: record batches; v12 (KIP-890 part 2: the broker enlists partitions) not used
    "Fetch": (4, 12),            # v4: read_committed's aborted transactions; 13+ name topics by id
    "FetchInSession": (7, 12),   # v7: incremental fetch sessions (KIP-227)
    "ListOffsets": (1, 8),
    "Metadata": (0, 12),
    "CreateTopics": (1, 7),
    "DescribeConfigs": (1, 4),
    "FindCoordinator": (1, 4),
    "OffsetFetch": (1, 7),
    "OffsetCommit": (2, 8),
    "InitProducerId": (0, 5),
    "AddPartitionsToTxn": (0, 3),
    "AddOffsetsToTxn": (0, 3),
    "TxnOffsetCommit": (0, 4),
    "EndTxn": (0, 4),
}


def _versions(api: str) -> dict:
    low, high = VERSIONS[api]
    return {"min_version": low, "max_version": high}


def error_class(code: int):
    """The connection layer's exception class for Kafka error ``code`` (Kafka's name, and
    ``retriable`` / ``invalid_metadata`` as the Java client has them)."""
    from kafka.errors import for_code
    return for_code(code)


def errors():
    """kafka-python's error classes (``errors().AuthorizationError`` ...)."""
    import kafka.errors
    return kafka.errors


# -- metadata and topics ---------------------------------------------------------------------------
def metadata(topics: Iterable[str]):
    from kafka.protocol.metadata import MetadataRequest
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=False, **_versions("Metadata"))


def create_topic(name: str, partitions: int, replication_factor: int, configs: Mapping[str, str], timeout_ms: int):
    from kafka.protocol.admin import CreateTopicsRequest
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=replication_factor,
                                         assignments=[], configs=[T.CreatableTopicConfig(name=k, value=str(v))
                                                                  for k, v in configs.items()])],
                               timeout_ms=timeout_ms, validate_only=False, **_versions("CreateTopics"))


def describe_topic_configs(topics: Iterable[str], keys: Iterable[str], resource_type: int):
    from kafka.protocol.admin import DescribeConfigsRequest
    R = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(resources=[R(resource_type=resource_type, resource_name=t,
                                               configuration_keys=list(keys)) for t in topics],
                                  include_synonyms=False, include_documentation=False, **_versions("DescribeConfigs"))


# -- offsets and groups ------------------------------------------------------------------------------
def list_offsets(isolation_level: int, wanted: Mapping[str, list[tuple[int, int, int]]]):
    """``wanted``: topic -> [(partition, timestamp, current leader epoch)]."""
    from kafka.protocol.consumer import ListOffsetsRequest
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level,
                              topics=[T(name=name, partitions=[P(partition_index=p, timestamp=ts, current_leader_epoch=e)
                                                               for p, ts, e in ps]) for name, ps in wanted.items()],
                              **_versions("ListOffsets"))


def find_coordinator(key: str, key_type: int):
    from kafka.protocol.metadata import FindCoordinatorRequest
    return FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key], **_versions("FindCoordinator"))


def offset_fetch(group: str, topics: Mapping[str, list[int]]):
    from kafka.protocol.consumer.group import OffsetFetchRequest
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(group_id=group, topics=[T(name=n, partition_indexes=ps) for n, ps in topics.items()],
                              require_stable=True, **_versions("OffsetFetch"))


def offset_commit(group: str, offsets: Mapping[str, list[tuple[int, int]]], metadata: str):
    """``offsets``: topic -> [(partition, next offset)], as a standalone committer (generation -1)."""
    from kafka.protocol.consumer.group import OffsetCommitRequest
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                               retention_time_ms=-1,
                               topics=[T(name=n, partitions=[P(partition_index=p, committed_offset=o,
                                                               committed_leader_epoch=-1, committed_metadata=metadata)
                                                             for p, o in ps]) for n, ps in offsets.items()],
                               **_versions("OffsetCommit"))


# -- fetching ----------------------------------------------------------------------------------------
def fetch_partition(partition: int, offset: int, max_bytes: int, leader_epoch: int):
    from kafka.protocol.consumer import FetchRequest
    return FetchRequest.FetchTopic.FetchPartition(partition=partition, fetch_offset=offset,
                                                   partition_max_bytes=max_bytes, current_leader_epoch=leader_epoch,
                                                   last_fetched_epoch=-1, log_start_offset=-1)


def fetch(partitions: Mapping[str, list], *, max_wait_ms: int, max_bytes: int, isolation_level: int):
    """A sessionless fetch of ``partitions`` (topic -> ``fetch_partition``s)."""
    from kafka.protocol.consumer import FetchRequest
    T = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                        isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
                        topics=[T(topic=name, partitions=ps) for name, ps in partitions.items()],
                        forgotten_topics_data=[], **_versions("Fetch"))


class FetchSession:
    """A node's incremental fetch session (KIP-227, kafka-python's FetchSessionHandler): which
    partitions a request need not send again, and the session's answers kept in step."""

    def __init__(self, node: int):
        from kafka.consumer.fetcher import FetchSessionHandler
        self.handler = FetchSessionHandler(node)

    def request(self, wanted: Iterable[tuple[str, int, object]], *, max_wait_ms: int, max_bytes: int,
                isolation_level: int):
        """The session's next fetch of ``wanted`` ((topic, partition, ``fetch_partition``), in order)."""
        from collections import OrderedDict

        from kafka.protocol.consumer import FetchRequest
        from kafka.structs import TopicPartition as Key
        session = self.handler.build_next(OrderedDict((Key(t, p), fp) for t, p, fp in wanted))
        return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                            isolation_level=isolation_level, session_id=session.id, session_epoch=session.epoch,
                            rack_id="", topics=session.to_send, forgotten_topics_data=session.to_forget,
                            **_versions("FetchInSession"))

    @property
    def session_id(self) -> int:
        """The broker's id of the session (0 before its first answer)."""
        return self.handler.next_metadata.session_id

    @property
    def epoch(self) -> int:
        """The next request's epoch in the session (it grows by one per answered fetch)."""
        return self.handler.next_metadata.epoch

    def handle_response(self, response) -> bool:
        return self.handler.handle_response(response)

    def handle_error(self, exc) -> None:
        self.handler.handle_error(exc)


# -- producing -----------------------------------------------------------------------------------------
def produce(batches: Mapping[str, list[tuple[int, bytes]]], *, acks: int, timeout_ms: int,
            transactional_id: str | None = None):
    """``batches``: topic -> [(partition, records)]."""
    from kafka.protocol.producer import ProduceRequest
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[T(name=n, partition_data=[T.PartitionProduceData(index=p, records=bytes(r)) for p, r in ps])
                                      for n, ps in batches.items()], **_versions("Produce"))


# Produce written here, not by the library's generic encoder: a producer at Kafka's default
# batch.size (16 KiB) sends a request per three batches or so, and the library's request objects,
# encoding, futures and timers cost more than building the batches (~50 us a request against ~9
# here).  The answer is read by the library's generated decoder (6 us).
# Versions 3-11 (VERSIONS["Produce"]); 9+ are "flexible" (compact lengths, tagged fields).
FLEXIBLE_PRODUCE = 9


_SMALL_VARINTS = [bytes((n,)) for n in range(128)]


def _uvarint(n: int) -> bytes:
    return _SMALL_VARINTS[n] if 0 <= n < 128 else uvarint_bytes(n)


def _string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = text.encode()
    return (_uvarint(len(raw) + 1) if flexible else len(raw).to_bytes(2, "big")) + raw


def produce_frame(version: int, correlation_id: int, client_id: str | None,
                  batches: Mapping[str, list[tuple[int, bytes]]], *, acks: int, timeout_ms: int,
                  transactional_id: str | None = None) -> bytes:
    """A whole Produce request, its size first (``batches``: topic -> [(partition, records)])."""
    if not 3 <= version <= VERSIONS["Produce"][1]:
        raise ValueError(f"Produce v{version} is not written here")
    flexible = version >= FLEXIBLE_PRODUCE
    tags = b"\x00" if flexible else b""
    head = [struct.pack(">hhi", 0, version, correlation_id),
            len(client_id.encode()).to_bytes(2, "big") + client_id.encode() if client_id is not None else b"\xff\xff",
            tags, _string(transactional_id, flexible), struct.pack(">hi", acks, timeout_ms),
            _uvarint(len(batches) + 1) if flexible else struct.pack(">i", len(batches))]
    pieces: list = [b"".join(head)]
    for topic, parts in batches.items():
        pieces.append(_string(topic, flexible) + (_uvarint(len(parts) + 1) if flexible else struct.pack(">i", len(parts))))
        for partition, records in parts:
            n = len(records)
            pieces.append(struct.pack(">i", partition) + (_uvarint(n + 1) if flexible else struct.pack(">i", n)))
            pieces.append(records)
            if flexible:
                pieces.append(tags)
        if flexible:
            pieces.append(tags)
    if flexible:
        pieces.append(tags)
    size = sum(len(p) for p in pieces)
    pieces[0] = struct.pack(">i", size) + pieces[0]
    return b"".join(pieces)


_PRODUCE_ANSWERS: dict[int, Any] = {}  # version -> the library's generated ProduceResponse class


def read_produce_answer(frame, version: int) -> tuple[int, Any]:
    """A Produce response frame (without its size): its correlation id and the response, decoded
    by the library's generated decoder.  A frame that ends early or does not decode raises
    ValueError (the request then counts as failed)."""
    view = memoryview(frame)
    if len(view) < 4:
        raise ValueError(f"a Produce response of {len(view)} bytes has no correlation id")
    correlation_id = int.from_bytes(view[:4], "big", signed=True)
    pos = 4
    if version >= FLEXIBLE_PRODUCE:  # the response header's tagged fields: none are defined
        if len(view) < 5 or view[4] != 0:
            raise ValueError("a Produce response header with tagged fields pykbatch does not know")
        pos = 5
    decoder = _PRODUCE_ANSWERS.get(version)
    if decoder is None:
        from kafka.protocol.producer import ProduceResponse
        decoder = _PRODUCE_ANSWERS[version] = ProduceResponse[version]
    try:
        return correlation_id, decoder.decode(view[pos:])
    except Exception as exc:  # noqa: BLE001 (IndexError, struct.error, UnicodeDecodeError: all a bad frame)
        raise ValueError(f"the Produce v{version} response does not decode: {exc!r}") from exc


def produce_version(conn) -> int:
    """The Produce version a connection's broker and this module agree on (the library's choice)."""
    return conn.broker_version_data.api_version(produce({}, acks=1, timeout_ms=0))


def init_producer_id(transactional_id: str | None, transaction_timeout_ms: int, producer_id: int, producer_epoch: int):
    from kafka.protocol.producer import InitProducerIdRequest
    return InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                                 producer_id=producer_id, producer_epoch=producer_epoch, **_versions("InitProducerId"))


def add_partitions_to_txn(transactional_id: str, producer_id: int, producer_epoch: int,
                          topics: Mapping[str, list[int]]):
    from kafka.protocol.producer import AddPartitionsToTxnRequest as R
    return R(v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
             v3_and_below_producer_epoch=producer_epoch,
             v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=n, partitions=ps) for n, ps in topics.items()],
             **_versions("AddPartitionsToTxn"))


def add_offsets_to_txn(transactional_id: str, producer_id: int, producer_epoch: int, group: str):
    from kafka.protocol.producer import AddOffsetsToTxnRequest
    return AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                  producer_epoch=producer_epoch, group_id=group, **_versions("AddOffsetsToTxn"))


def txn_offset_commit(transactional_id: str, group: str, producer_id: int, producer_epoch: int,
                      offsets: Mapping[str, list[tuple[int, int]]], generation_id: int, member_id: str,
                      group_instance_id: str | None):
    from kafka.protocol.producer import TxnOffsetCommitRequest as R
    T = R.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    return R(transactional_id=transactional_id, group_id=group, producer_id=producer_id,
             producer_epoch=producer_epoch, generation_id=generation_id, member_id=member_id,
             group_instance_id=group_instance_id,
             topics=[T(name=n, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                             committed_metadata="") for p, o in ps]) for n, ps in offsets.items()],
             **_versions("TxnOffsetCommit"))


def end_txn(transactional_id: str, producer_id: int, producer_epoch: int, commit: bool):
    from kafka.protocol.producer import EndTxnRequest
    return EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                         committed=commit, **_versions("EndTxn"))


# -- security ------------------------------------------------------------------------------------------
def is_oauth_token_provider(value) -> bool:
    """Whether ``value`` gives OAUTHBEARER tokens as the connection layer takes them."""
    from kafka.net.sasl.oauth import AbstractTokenProvider
    return isinstance(value, AbstractTokenProvider)
