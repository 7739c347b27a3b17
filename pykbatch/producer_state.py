"""Moved to ``pykbatch.kafka.producer_state`` (Kafka's formats and rules); this import path keeps
working."""
from pykbatch.kafka.producer_state import (  # noqa: F401
    BatchMetadata, CompletedTxn, OpenTransaction, ProducerAudit, ProducerEntry, ProducerStateTracker, audit_producers,
)
