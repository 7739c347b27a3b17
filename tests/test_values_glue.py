"""AWS Glue Schema Registry framing (header version 3, a compression byte, the schema version's
UUID) against moto's server on 127.0.0.1 (the session's ``s3_server``: moto serves Glue on the same
endpoint): schema versions fetched by UUID with boto3, zlib-compressed datums inflated, the
newest version the reader, every fault a culprit."""
from __future__ import annotations

import json
import uuid
import zlib

import pytest

from pykbatch.values import GlueSchemaRegistry, decode_values
from tests.test_values_avro import datum

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "qty", "type": "int", "default": 1}]}


@pytest.fixture(scope="module")
def glue(s3_server):
    import boto3
    from tests.s3_server import KEY, SECRET
    client = boto3.client("glue", endpoint_url=s3_server.endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    client.create_registry(RegistryName="pykbatch-values")
    first = client.create_schema(RegistryId={"RegistryName": "pykbatch-values"}, SchemaName="orders",
                                 DataFormat="AVRO", Compatibility="BACKWARD", SchemaDefinition=json.dumps(V1))
    second = client.register_schema_version(SchemaId={"RegistryName": "pykbatch-values", "SchemaName": "orders"},
                                            SchemaDefinition=json.dumps(V2))
    return client, uuid.UUID(first["SchemaVersionId"]), uuid.UUID(second["SchemaVersionId"])


def framed(version: uuid.UUID, body: bytes, compressed: bool = False) -> bytes:
    return b"\x03" + (b"\x05" + version.bytes + zlib.compress(body) if compressed else b"\x00" + version.bytes + body)


def test_glue_values_decode_as_the_newest_version_says(glue):
    client, v1, v2 = glue
    values = [framed(v1, datum(V1, {"id": 1, "item": "tea"})),
              framed(v2, datum(V2, {"id": 2, "item": "jam", "qty": 3})),
              framed(v1, datum(V1, {"id": 3, "item": "oats"}), compressed=True),
              framed(uuid.uuid4(), datum(V1, {"id": 4, "item": "?"})),
              b"\x03\x05" + v1.bytes + b"not zlib",
              b"\x03\x09" + v1.bytes + datum(V1, {"id": 5, "item": "x"}),
              b"\x00\x00\x00\x00\x01abc",
              b"\x03\x00" + v1.bytes[:4]]
    got = decode_values(values, GlueSchemaRegistry(client), framing="glue")
    rows = got.values.to_pylist()
    assert rows[:3] == [{"id": 1, "item": "tea", "qty": 1}, {"id": 2, "item": "jam", "qty": 3},
                        {"id": 3, "item": "oats", "qty": 1}]
    assert rows[3:] == [None] * 5
    assert [(c.row, c.rule) for c in got.culprits] == [
        (3, "value.schema_unknown"), (4, "value.compressed_invalid"), (5, "value.schema_framing"),
        (6, "value.schema_framing"), (7, "value.header_truncated")]
    assert got.culprits[0].schema_id == str(uuid.UUID(bytes=values[3][2:18]))
    assert got.schema_ids.to_pylist()[:3] == [str(v1), str(v2), str(v1)]
    assert got.culprits_table().column("schema_id").to_pylist()[0] == got.culprits[0].schema_id


def test_a_zlib_bomb_is_refused_not_inflated(glue):
    from pykbatch.values import glue as glue_format
    client, v1, _ = glue
    bomb = b"\x03\x05" + v1.bytes + zlib.compress(b"\0" * (glue_format.MAX_INFLATED + 1024), 9)
    got = decode_values([bomb], GlueSchemaRegistry(client), framing="glue")
    assert [c.rule for c in got.culprits] == ["value.compressed_invalid"] and "inflates past" in got.culprits[0].message
