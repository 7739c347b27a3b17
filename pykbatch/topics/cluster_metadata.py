"""The KRaft metadata log (``__cluster_metadata``, and its ``.checkpoint`` snapshots): framed
records of Kafka's ``metadata`` definitions.  ``dump_payload`` prints one as
``kafka-dump-log --cluster-metadata-decoder`` does: ``{"type":"TOPIC_RECORD","version":0,"data":{...}}``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from pykbatch.kafka import definitions, framing, jackson

TOPIC = "__cluster_metadata"


@dataclass(frozen=True)
class MetadataRecord:
    type_name: str  # Kafka's MetadataRecordType name, e.g. TOPIC_RECORD
    version: int
    fields: dict
    schema: definitions.MessageSchema  # its file can be named otherwise (ZkMigrationRecord.json)


def type_name(definition: str) -> str:
    """``FeatureLevelRecord`` -> ``FEATURE_LEVEL_RECORD`` (MetadataRecordType's names)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", definition).upper()


def decode_metadata(value: bytes) -> MetadataRecord:
    schema, version, fields = framing.decode_framed(value, TOPIC)
    return MetadataRecord(type_name(schema.name), version, fields, schema)


def dump_payload(value: bytes | None) -> str:
    record = decode_metadata(value)
    data = record.schema.to_json(record.fields, record.version)
    return jackson.jackson({"type": record.type_name, "version": record.version, "data": data})
