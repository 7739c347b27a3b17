"""What pykbatch asks of a broker, built in one place: every request from kafka-python's classes
(generated from Kafka's JSON message definitions) at the versions of ``VERSIONS``, the one table
of the Kafka APIs pykbatch speaks -- the lowest version it needs, the highest it knows.  The
connection layer negotiates within that range with each broker (ApiVersions).

Callers pass plain values and read the responses' fields; with ``pykbatch.live.cluster`` (the
connections) and ``pykbatch.live.frames`` (where response bytes land) this is the wire seam: no
other module imports kafka-python (``tests/test_layers.py``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pykbatch import _native

VERSIONS: dict[str, tuple[int, int]] = {
    "ApiVersions": (3, 4),       # v3: the cluster's finalized features (transaction.version)
    "Produce": (3, 12),          # v3: record batches; v12: transactions v2 (below)
    "Fetch": (4, 12),            # v4: read_committed's aborted transactions; 13+ name topics by id
    "FetchInSession": (7, 12),   # v7: incremental fetch sessions (KIP-227)
    "ListOffsets": (1, 8),
    "OffsetForLeaderEpoch": (2, 4),     # v2: the current leader epoch (fencing); 0-1 gone in Kafka 4.0
    "Metadata": (0, 12),
    "CreateTopics": (1, 7),
    "DescribeConfigs": (1, 4),
    "FindCoordinator": (1, 4),
    "OffsetFetch": (1, 7),
    "OffsetCommit": (2, 8),
    "OffsetCommitInGroup": (9, 9),      # a member's commit (KIP-848: v9 checks its epoch; 10+ name topics by id)
    "ConsumerGroupHeartbeat": (1, 1),   # KIP-848; v1: the member makes its own id (KIP-1082)
    "ConsumerGroupDescribe": (0, 1),
    "JoinGroup": (5, 9),                # the classic protocol; v5: static members (group.instance.id)
    "SyncGroup": (3, 5),
    "Heartbeat": (3, 4),
    "LeaveGroup": (3, 5),
    "DescribeGroups": (4, 5),
    "InitProducerId": (0, 5),
    "AddPartitionsToTxn": (0, 3),
    "AddOffsetsToTxn": (0, 3),
    "TxnOffsetCommit": (0, 5),
    "EndTxn": (0, 5),
}

# Transactions v2 (KIP-890 part 2): a transactional producer that sends these APIs at these
# versions asks for it -- the broker enlists a partition on its first Produce and a group on
# TxnOffsetCommit (no AddPartitionsToTxn / AddOffsetsToTxn), and every EndTxn bumps the
# producer's epoch -- so one under transactions v1 stays below them.
TXN_V2_FROM: dict[str, int] = {"Produce": 12, "TxnOffsetCommit": 5, "EndTxn": 5}
TXN_V2_FEATURE = "transaction.version"


def _versions(api: str, txn_version: int | None = None) -> dict:
    """The version range of ``api``; for a transactional producer under transactions v1
    (``txn_version`` < 2), below the versions that mean v2."""
    low, high = VERSIONS[api]
    if txn_version is not None and txn_version < 2 and api in TXN_V2_FROM:
        high = min(high, TXN_V2_FROM[api] - 1)
    return {"min_version": low, "max_version": high}


# -- the cluster's features -----------------------------------------------------------------------
def api_versions():
    import re

    from kafka.protocol.metadata.api_versions import ApiVersionsRequest
    try:
        from pykbatch._version import __version__
    except ImportError:  # a source tree never built
        __version__ = "unknown"
    # a broker refuses (INVALID_REQUEST) a software version outside [a-zA-Z0-9.-], as a local
    # version's "+g1234" is
    version = re.sub(r"[^a-zA-Z0-9.\-]", "-", __version__).strip(".-") or "unknown"
    return ApiVersionsRequest(client_software_name="pykbatch", client_software_version=version,
                              **_versions("ApiVersions"))


def transaction_version(response) -> int:
    """The transactions version a producer uses with the broker that sent ``response`` (an
    ApiVersions answer): the cluster's finalized ``transaction.version`` (0 when none is
    finalized: v1's protocol), and 1 at most when this broker or this module lacks the v2
    versions of the APIs (Produce v12, TxnOffsetCommit v5, EndTxn v5)."""
    from kafka.protocol.api_key import ApiKey
    level = max((f.max_version_level for f in (response.finalized_features or ()) if f.name == TXN_V2_FEATURE),
                default=0)
    highest = {k.api_key: k.max_version for k in response.api_keys}
    for api, v2 in TXN_V2_FROM.items():
        if highest.get(int(ApiKey[api]), -1) < v2 or VERSIONS[api][1] < v2:
            return min(level, 1)
    return level


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
def metadata(topics: Iterable[str] | None):
    """Metadata of ``topics`` (None: every topic)."""
    from kafka.protocol.metadata import MetadataRequest
    return MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=False, **_versions("Metadata"))


def create_topic(name: str, partitions: int, replication_factor: int, configs: Mapping[str, str], timeout_ms: int):
    from kafka.protocol.admin import CreateTopicsRequest
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=replication_factor,
                                         assignments=[], configs=[T.CreatableTopicConfig(name=k, value=str(v))
                                                                  for k, v in configs.items()])],
                               timeout_ms=timeout_ms, validate_only=False, **_versions("CreateTopics"))


def describe_topic_configs(topics: Iterable[str], keys: Iterable[str] | None, resource_type: int):
    """``keys`` None: every configuration."""
    from kafka.protocol.admin import DescribeConfigsRequest
    R = DescribeConfigsRequest.DescribeConfigsResource
    return DescribeConfigsRequest(resources=[R(resource_type=resource_type, resource_name=t,
                                               configuration_keys=None if keys is None else list(keys))
                                             for t in topics],
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


def offset_for_leader_epoch(topic: str, partition: int, current_leader_epoch: int, leader_epoch: int):
    """Where ``leader_epoch`` ends in the leader's log, asked as a consumer (KIP-320: replica -1)."""
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=topic, partitions=[
        P(partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])],
        **_versions("OffsetForLeaderEpoch"))


def find_coordinator(key: str, key_type: int):
    from kafka.protocol.metadata import FindCoordinatorRequest
    return FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key], **_versions("FindCoordinator"))


def offset_fetch(group: str, topics: Mapping[str, list[int]] | None):
    """``topics`` None: every partition the group committed."""
    from kafka.protocol.consumer.group import OffsetFetchRequest
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(group_id=group, topics=None if topics is None else
                              [T(name=n, partition_indexes=ps) for n, ps in topics.items()],
                              require_stable=True, **_versions("OffsetFetch"))


def offset_commit(group: str, offsets: Mapping[str, list[tuple[int, int, str]]], *,
                  member: tuple[str, int, str | None] | None = None):
    """``offsets``: topic -> [(partition, next offset, metadata)], as a standalone committer
    (generation -1) or, with ``member`` (member id, member epoch, instance id), as a KIP-848
    group's member (OffsetCommit v9: the coordinator checks the epoch)."""
    from kafka.protocol.consumer.group import OffsetCommitRequest
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    member_id, epoch, instance = member or ("", -1, None)
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                               group_instance_id=instance, retention_time_ms=-1,
                               topics=[T(name=n, partitions=[P(partition_index=p, committed_offset=o,
                                                               committed_leader_epoch=-1, committed_metadata=m)
                                                             for p, o, m in ps]) for n, ps in offsets.items()],
                               **_versions("OffsetCommitInGroup" if member else "OffsetCommit"))


# -- KIP-848's group protocol: classes from Kafka's own definitions (pykbatch.schemas.messages),
# built by kafka-python's loader as its own are, since the library defines none for it
_KIP848: dict[str, Any] = {}  # name -> class (held here: the library's response registry keeps a weak proxy)


def _kip848(name: str):
    if not _KIP848:
        from kafka.protocol.api_message import ApiMessage

        import pykbatch.schemas.messages as definitions

        class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=definitions):
            pass

        class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=definitions):
            pass

        class ConsumerGroupDescribeRequest(ApiMessage, load_json=definitions):
            pass

        class ConsumerGroupDescribeResponse(ApiMessage, load_json=definitions):
            pass
        _KIP848.update((c.__name__, c) for c in (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
                                                 ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse))
    return _KIP848[name]


def consumer_group_heartbeat(group: str, member_id: str, epoch: int, *, instance_id: str | None = None,
                             rack_id: str | None = None, rebalance_timeout_ms: int = -1,
                             topics: list[str] | None = None, regex: str | None = None,
                             assignor: str | None = None, owned: Mapping[bytes, list[int]] | None = None):
    """A member's heartbeat (epoch 0 joins, -1 leaves, -2 leaves a static member's place open);
    ``owned``: topic id (16 bytes) -> partitions, what the member holds now (None: unchanged)."""
    R = _kip848("ConsumerGroupHeartbeatRequest")
    import uuid
    return R(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id, rack_id=rack_id,
             rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=topics, subscribed_topic_regex=regex,
             server_assignor=assignor,
             topic_partitions=None if owned is None else [
                 R.TopicPartitions(topic_id=uuid.UUID(bytes=t), partitions=sorted(ps)) for t, ps in owned.items()],
             **_versions("ConsumerGroupHeartbeat"))


def join_group(group: str, member_id: str, instance_id: str | None, session_timeout_ms: int,
               rebalance_timeout_ms: int, protocols: list[tuple[str, bytes]]):
    """The classic protocol's JoinGroup (protocol type ``consumer``; ``protocols``: assignor
    name -> the member's subscription bytes, in order of preference)."""
    from kafka.protocol.consumer.group import JoinGroupRequest
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_timeout_ms,
                            rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                            group_instance_id=instance_id, protocol_type="consumer",
                            protocols=[P(name=n, metadata=m) for n, m in protocols], reason=None,
                            **_versions("JoinGroup"))


def sync_group(group: str, generation: int, member_id: str, instance_id: str | None, protocol_name: str,
               assignments: Mapping[str, bytes]):
    from kafka.protocol.consumer.group import SyncGroupRequest
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=instance_id, protocol_type="consumer", protocol_name=protocol_name,
                            assignments=[A(member_id=m, assignment=a) for m, a in assignments.items()],
                            **_versions("SyncGroup"))


def classic_heartbeat(group: str, generation: int, member_id: str, instance_id: str | None):
    from kafka.protocol.consumer.group import HeartbeatRequest
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=instance_id, **_versions("Heartbeat"))


def leave_group(group: str, member_id: str, instance_id: str | None):
    from kafka.protocol.consumer.group import LeaveGroupRequest
    M = LeaveGroupRequest.MemberIdentity
    return LeaveGroupRequest(group_id=group, members=[M(member_id=member_id, group_instance_id=instance_id,
                                                        reason="the consumer is closing")],
                             **_versions("LeaveGroup"))


def describe_groups(groups: list[str]):
    from kafka.protocol.admin import DescribeGroupsRequest
    return DescribeGroupsRequest(groups=groups, include_authorized_operations=False, **_versions("DescribeGroups"))


def consumer_group_describe(groups: list[str]):
    R = _kip848("ConsumerGroupDescribeRequest")
    return R(group_ids=groups, include_authorized_operations=False, **_versions("ConsumerGroupDescribe"))


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
            transactional_id: str | None = None, txn_version: int | None = None):
    """``batches``: topic -> [(partition, records)]."""
    from kafka.protocol.producer import ProduceRequest
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[T(name=n, partition_data=[T.PartitionProduceData(index=p, records=bytes(r)) for p, r in ps])
                                      for n, ps in batches.items()], **_versions("Produce", txn_version))


# Produce written and its answer read by the core bindings (_produce_wire.pxi), not by the
# library's generic code: a producer at Kafka's default batch.size (16 KiB) sends a request per
# three batches or so, and the library's request objects, encoding, futures and timers cost more
# than building the batches.  Versions 3-11 (VERSIONS["Produce"]).


def produce_frame(version: int, correlation_id: int, client_id: str | None,
                  batches: Mapping[str, list[tuple[int, bytes]]], *, acks: int, timeout_ms: int,
                  transactional_id: str | None = None) -> bytearray:
    """A whole Produce request, its size first (``batches``: topic -> [(partition, records)])."""
    if not 3 <= version <= VERSIONS["Produce"][1]:
        raise ValueError(f"Produce v{version} is not written here")
    return _native.produce_request(version, correlation_id, client_id, transactional_id, acks, timeout_ms, batches)


def read_produce_answer(frame, version: int) -> tuple[int, int, list[tuple]]:
    """A Produce response frame (without its size): ``(correlation_id, throttle_time_ms,
    partitions)``, each partition ``(topic, partition, error_code, base_offset,
    log_append_time_ms, record_errors, error_message)``.  A frame that ends early or does not
    decode raises ValueError (the request then counts as failed)."""
    return _native.produce_answer(frame, version)


def produce_answer_of(response) -> tuple[int, int, list[tuple]]:
    """The same shape from the library's decoded ProduceResponse (a request the library sent)."""
    return (-1, getattr(response, "throttle_time_ms", 0) or 0,
            [(t.name, p.index, p.error_code, p.base_offset, p.log_append_time_ms,
              [(e.batch_index, e.batch_index_error_message) for e in (getattr(p, "record_errors", None) or ())],
              getattr(p, "error_message", None)) for t in response.responses for p in t.partition_responses])


def produce_range(txn_version: int | None = None) -> tuple[int, int]:
    """The Produce versions a producer may send (a transactional one under v1: below v12)."""
    v = _versions("Produce", txn_version)
    return v["min_version"], v["max_version"]


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
                      offsets: Mapping[str, list[tuple[int, int, str]]], generation_id: int, member_id: str,
                      group_instance_id: str | None, txn_version: int):
    """``offsets``: topic -> [(partition, next offset, metadata)]."""
    from kafka.protocol.producer import TxnOffsetCommitRequest as R
    T = R.TxnOffsetCommitRequestTopic
    P = T.TxnOffsetCommitRequestPartition
    return R(transactional_id=transactional_id, group_id=group, producer_id=producer_id,
             producer_epoch=producer_epoch, generation_id=generation_id, member_id=member_id,
             group_instance_id=group_instance_id,
             topics=[T(name=n, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                             committed_metadata=m) for p, o, m in ps]) for n, ps in offsets.items()],
             **_versions("TxnOffsetCommit", txn_version))


def end_txn(transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, txn_version: int):
    from kafka.protocol.producer import EndTxnRequest
    return EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
                         committed=commit, **_versions("EndTxn", txn_version))


# -- security ------------------------------------------------------------------------------------------
def is_oauth_token_provider(value) -> bool:
    """Whether ``value`` gives OAUTHBEARER tokens as the connection layer takes them."""
    from kafka.net.sasl.oauth import AbstractTokenProvider
    return isinstance(value, AbstractTokenProvider)
