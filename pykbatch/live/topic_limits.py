"""Pre-flight: a topic's configuration as the cluster holds it, and the records its leader would
refuse, found before they are sent -- with the broker's own rule, code and message, because the
check is the validator's (``pykbatch.validate`` with the topic's ``ValidationConfig``).

Only Kafka's verdict counts here (``strict=False``): a producer must not drop a record the broker
would take.  The broker's answer stays the authority; the pre-flight only saves the round trip
and keeps a poison record from failing the records sent with it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from pykbatch import _native
from pykbatch import errors as kb_errors
from pykbatch._catalogue import CREATE_TIME, TIMESTAMP_TYPES
from pykbatch.config import LONG_MAX, ValidationConfig
from pykbatch.live import protocol
from pykbatch.live.cluster import AuthorizationError, Cluster, ClusterError, UnknownTopicError

# the topic settings that decide what the broker accepts (DescribeConfigs keys)
KEYS = ("max.message.bytes", "cleanup.policy", "message.timestamp.type", "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms", "compression.type", "segment.bytes")
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs' ConfigSource of a value set on the topic itself


@dataclass(frozen=True)
class TopicLimits:
    """What a topic's leader checks a producer's batch against."""
    topic: str
    max_message_bytes: int = 1048588
    compacted: bool = False
    timestamp_type: str = CREATE_TIME
    before_max_ms: int = LONG_MAX
    after_max_ms: int = 3_600_000
    compression: str = "producer"
    segment_bytes: int = 1 << 30

    @classmethod
    def from_configs(cls, topic: str, configs: dict[str, str]) -> TopicLimits:
        def number(name: str, default: int) -> int:
            value = configs.get(name)
            return int(value) if value not in (None, "") else default
        return cls(topic, max_message_bytes=number("max.message.bytes", 1048588),
                   compacted="compact" in configs.get("cleanup.policy", "delete").split(","),
                   timestamp_type=_timestamp_type(configs.get("message.timestamp.type")),
                   before_max_ms=number("message.timestamp.before.max.ms", LONG_MAX),
                   after_max_ms=number("message.timestamp.after.max.ms", 3_600_000),
                   compression=configs.get("compression.type") or "producer",
                   segment_bytes=number("segment.bytes", 1 << 30))

    def config(self, partition: int, now_ms: int | None = None, sizes: bool = True) -> ValidationConfig:
        """The validator's settings for a produce to ``partition`` now (``sizes=False``: without
        the size limits, for records checked before they are compressed)."""
        return ValidationConfig(origin="client", strict=False, compacted=self.compacted,
                                timestamp_type=self.timestamp_type, timestamp_before_max_ms=self.before_max_ms,
                                timestamp_after_max_ms=self.after_max_ms,
                                now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
                                max_message_bytes=self.max_message_bytes if sizes else None,
                                segment_bytes=self.segment_bytes if sizes else None,
                                target_compression=self.compression, topic_partition=f"{self.topic}-{partition}",
                                single_append=True, max_culprits=1 << 30)


def _timestamp_type(value: str | None) -> str:
    return value if value in TIMESTAMP_TYPES else CREATE_TIME


def describe(cluster: Cluster, topics: list[str]) -> dict[str, TopicLimits]:
    """Each topic's limits, read with DescribeConfigs (errors name the topic)."""
    return {r.resource_name: TopicLimits.from_configs(r.resource_name, {c.name: c.value for c in r.configs})
            for r in _described(cluster, topics, KEYS)}


def overrides(cluster: Cluster, topic: str) -> dict[str, str]:
    """The configurations set on ``topic`` itself (not the broker's defaults): what a copy of it
    is created with."""
    (r,) = _described(cluster, [topic], None)
    return {c.name: c.value for c in r.configs if getattr(c, "config_source", -1) == DYNAMIC_TOPIC_CONFIG
            and c.value is not None and not c.is_sensitive}


def _described(cluster: Cluster, topics: list[str], keys) -> list:
    request = protocol.describe_topic_configs(topics, keys, TOPIC_RESOURCE)
    node = cluster.any_node()
    response = cluster.request(node, request)
    out = []
    for r in response.results:
        if r.error_code:
            err = protocol.error_class(r.error_code)
            text = f"DescribeConfigs for topic {r.resource_name!r}: {err.__name__} {r.error_message or ''}".rstrip()
            if r.error_code == kb_errors.CODE["TOPIC_AUTHORIZATION_FAILED"]:
                raise AuthorizationError(f"not authorized to describe topic {r.resource_name!r} (pre-flight reads its "
                                         "configuration; give DescribeConfigs or set preflight off)", r.error_code)
            if r.error_code == kb_errors.CODE["UNKNOWN_TOPIC_OR_PARTITION"]:
                raise UnknownTopicError(text, r.error_code)
            raise ClusterError(text, r.error_code, retriable=getattr(err, "retriable", False))
        out.append(r)
    return out


def check(batch: bytes, config: ValidationConfig) -> list:
    """The culprits the topic's leader would name in ``batch`` (validator culprits: a
    ``record_index`` for record-level ones, None when the batch as a whole is refused)."""
    return list(_native.validate(batch, config).culprits)


def check_each(batches: list, config: ValidationConfig) -> set[int]:
    """Which of ``batches`` (each its own append) have a culprit: one core set-up for them all."""
    return set(_native.validate_each(batches, config))


def check_before_compression(raw: list, limits: TopicLimits, partition: int,
                             compression: str) -> tuple[list, set[int]]:
    """Batches built uncompressed (``raw``: one append each), checked, then compressed with
    ``compression``: ``(batches, bad)``, ``bad`` the indexes of those with a culprit or a
    compressed size the topic may refuse (the caller checks those whole, as it checks any batch,
    so their culprits come from the validator).  The records are checked before compression, so
    no check decompresses them; the size limits apply to the compressed batch, so they wait for
    it.  A topic that re-encodes what it is sent (its compression.type neither ``producer`` nor
    ours) limits the batch it writes, whose size only the validator knows: those batches are
    compressed first and checked whole, as they are sent."""
    if compression == "none" or limits.compression not in ("producer", compression):
        out = raw if compression == "none" else [_native.compress_v2(d, compression) for d in raw]
        return out, check_each(out, limits.config(partition))
    bad = check_each(raw, limits.config(partition, sizes=False))
    out = [d if i in bad else _native.compress_v2(d, compression) for i, d in enumerate(raw)]
    limit = min(limits.max_message_bytes, limits.segment_bytes)
    bad.update(i for i, d in enumerate(out) if len(d) > limit)
    return out, bad
