"""Where a live reader's skipped ranges go: each as one dead letter carrying the skipped bytes
and KIP-298's error context.

A sink is any callable ``sink(skip, context)``.  Three come with pykbatch: ``JsonLinesDeadLetters``
(a local file, one JSON document per skip, the bytes base64-encoded), ``DeadLetterTopic`` (a
Kafka topic, the bytes as the record's value and Connect's ``__connect.errors.*`` headers, so the
tools that read Connect's dead-letter queues read these) and ``ProducerDeadLetters`` (the same
records through a producer: in its transaction, for a copy that must dead-letter exactly once).  A dead letter keeps the bytes: that is
its purpose.  Logs never do unless ``include_messages`` asks (``pykbatch.policy``).
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time

from pykbatch import _native
from pykbatch.live import protocol
from pykbatch.live.cluster import Cluster, ClusterError, TopicPartition
from pykbatch.live.fetched import Skip
from pykbatch.policy import context_headers

# what a skip adds to Connect's headers: the range's end and the rule (Connect's offset is its start)
SKIP_HEADERS = ("__pykbatch.errors.last.offset", "__pykbatch.errors.rule", "__pykbatch.errors.held")


def skip_context(skip: Skip, *, include_bytes: bool) -> dict:
    """KIP-298's error-context document for one skip (the bytes only with ``include_bytes``)."""
    from pykbatch.errors import exception_class
    doc = {"record": {"topic": skip.topic, "partition": skip.partition, "offset": skip.first_offset,
                      "last_offset": skip.last_offset},
           "stage": {"type": "VALIDATE", "class": "pykbatch.live"},
           "exception": {"class": exception_class(skip.code), "message": skip.message},
           "error_code": skip.code, "error_name": skip.name, "rule": skip.rule, "position": skip.position,
           "held": skip.held, "culprits": skip.as_dict()["culprits"], "time": int(time.time() * 1000)}
    if include_bytes and skip.data is not None:
        doc["record"]["value"] = base64.b64encode(skip.data).decode()
    return doc


def skip_key(skip: Skip) -> bytes:
    """A skip's dead letter's key: ``topic-partition@first offset``."""
    return f"{skip.topic}-{skip.partition}@{skip.first_offset}".encode()


def skip_headers(skip: Skip) -> list[tuple[str, bytes]]:
    """A skip's dead letter's headers: Connect's error context, then the range's end and the rule."""
    return context_headers(skip.topic, skip.partition, skip.first_offset, skip.code, skip.message,
                           stage="VALIDATE") + list(zip(SKIP_HEADERS, (str(skip.last_offset).encode(),
                                                                      skip.rule.encode(), str(skip.held).encode())))


class JsonLinesDeadLetters:
    """Appends one JSON line per skip to ``path`` (bytes base64-encoded under record.value)."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._lock = threading.Lock()

    def __call__(self, skip: Skip, context: dict) -> None:
        doc = skip_context(skip, include_bytes=True)
        with self._lock, open(self.path, "a") as f:
            f.write(json.dumps(doc, default=str) + "\n")

    def __repr__(self) -> str:
        return f"JsonLinesDeadLetters({self.path!r})"


class DeadLetterTopic:
    """Produces one record per skip to ``topic`` (partition 0 unless ``partition``), acks=all:
    value = the skipped bytes, headers = Connect's error context."""

    def __init__(self, cluster: Cluster, topic: str, partition: int = 0, timeout_ms: int = 30_000):
        self.cluster = cluster
        self.tp = TopicPartition(topic, partition)
        self.timeout_ms = timeout_ms

    def __call__(self, skip: Skip, context: dict) -> None:
        batch = _native.build_batch([{"key": skip_key(skip), "value": skip.data, "headers": skip_headers(skip)}])
        request = protocol.produce({self.tp.topic: [(self.tp.partition, batch)]}, acks=-1, timeout_ms=self.timeout_ms)
        response = self.cluster.request(self.cluster.leader(self.tp).node, request)
        for t in response.responses:
            for p in t.partition_responses:
                if p.error_code:
                    raise ClusterError(f"dead-letter topic {self.tp}: {protocol.error_class(p.error_code).__name__}"
                                       f"({p.error_code}) {p.error_message or ''}".rstrip(), p.error_code)

    def __repr__(self) -> str:
        return f"DeadLetterTopic({self.tp})"


class ProducerDeadLetters:
    """Sends one record per skip to ``topic`` through ``producer`` (a ``pykbatch.live.Producer``):
    inside its transaction when one is open, so a skip's dead letter is committed -- or aborted --
    with the records read beside it.  Key, value and headers as ``DeadLetterTopic``'s."""

    def __init__(self, producer, topic: str, partition: int = 0):
        self.producer = producer
        self.tp = TopicPartition(topic, partition)

    def __call__(self, skip: Skip, context: dict) -> None:
        self.producer.send(self.tp.topic, value=skip.data, key=skip_key(skip), headers=skip_headers(skip),
                           partition=self.tp.partition)

    def __repr__(self) -> str:
        return f"ProducerDeadLetters({self.tp})"
