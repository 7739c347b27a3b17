"""Raw Kafka requests over a socket, for the wire-level differential test: the request and
response classes are kafka-python's (generated from Kafka's own message definitions), the records
field carries whatever bytes a test puts there — no client library in between checks or rebuilds
them.
"""
from __future__ import annotations

import socket
import struct
import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionAnswer:
    """One partition of a ProduceResponse: what KIP-467 puts there."""
    error_code: int
    record_errors: list[tuple[int, str | None]]
    error_message: str | None


class Connection:
    """One connection to a broker; ``call`` sends a request and reads its response."""

    def __init__(self, bootstrap: str, timeout: float = 30):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def call(self, request_cls, response_cls, version: int, **fields):
        self.correlation_id += 1
        request = request_cls[version](**fields)
        request.with_header(correlation_id=self.correlation_id, client_id="pykbatch-wire-test")
        self.sock.sendall(request.encode(header=True, framed=True))
        (size,) = struct.unpack(">i", self._read(4))
        response = response_cls[version].decode(self._read(size), header=True)
        return response

    # -- the requests the differential test needs ----------------------------------------------
    def topic_ids(self, names: list[str]) -> dict[str, uuid.UUID]:
        from kafka.protocol.metadata import MetadataRequest, MetadataResponse
        topic = MetadataRequest[12].MetadataRequestTopic
        md = self.call(MetadataRequest, MetadataResponse, 12, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False,
                       topics=[topic(name=n, topic_id=uuid.UUID(int=0)) for n in names])
        return {t.name: t.topic_id for t in md.topics if t.error_code == 0}

    def init_producer_id(self, transactional_id: str | None = None, timeout_ms: int = 60_000) -> tuple[int, int]:
        """(producer id, epoch) for an idempotent (or transactional) producer."""
        import time

        from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
        from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
        deadline = time.monotonic() + 60
        if transactional_id is not None:  # the broker creates its transaction log when first asked this
            while True:
                r = self.call(FindCoordinatorRequest, FindCoordinatorResponse, 4, key_type=1,
                              coordinator_keys=[transactional_id])
                if r.coordinators[0].error_code == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        while True:
            r = self.call(InitProducerIdRequest, InitProducerIdResponse, 4, transactional_id=transactional_id,
                          transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1)
            # COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR: a broker
            # just started is still loading its coordinators
            if r.error_code not in (14, 15, 16) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if r.error_code:
            raise RuntimeError(f"InitProducerId failed with error {r.error_code}")
        return r.producer_id, r.producer_epoch

    def produce(self, topic: str, topic_id: uuid.UUID, records: bytes, version: int,
                transactional_id: str | None = None) -> PartitionAnswer:
        """``records`` as partition 0's records field of a ProduceRequest (acks=-1); the answer."""
        from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
        data = ProduceRequest[version].TopicProduceData
        partition = data.PartitionProduceData(index=0, records=records)
        topic_data = data(name=topic, partition_data=[partition]) if version < 13 else \
            data(topic_id=topic_id, partition_data=[partition])
        r = self.call(ProduceRequest, ProduceResponse, version, transactional_id=transactional_id, acks=-1,
                      timeout_ms=30_000, topic_data=[topic_data])
        (p,) = r.responses[0].partition_responses
        errors = [(e.batch_index, e.batch_index_error_message) for e in (getattr(p, "record_errors", None) or [])]
        return PartitionAnswer(p.error_code, errors, getattr(p, "error_message", None))
