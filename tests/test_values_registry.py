"""pykbatch.values against a real schema registry (tests/schema_registry.py: Apicurio Registry
from Maven Central, basic auth required, HTTP and HTTPS): values written by confluent-kafka's
serializers, decoded equal to what its deserializers return, field by field; the registry client's
caching, authentication and TLS."""
from __future__ import annotations

import json
import struct

import pyarrow as pa
import pytest

from pykbatch.values import RegistryAuthError, SchemaRegistry, decode_values
from tests.avro_zoo import ZOO_V1, ZOO_V2, ZOO_V3, zoo_records
from tests.test_values_avro import assert_rows_equal, datum, fastavro_read

pytest.importorskip("confluent_kafka.schema_registry.avro")


def client(registry):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    return SchemaRegistryClient(registry.config)


def context(topic: str, field: str = "VALUE"):
    from confluent_kafka.serialization import MessageField, SerializationContext
    return SerializationContext(topic, getattr(MessageField, field))


def avro_serializer(registry, schema, **conf):
    from confluent_kafka.schema_registry.avro import AvroSerializer
    return AvroSerializer(client(registry), json.dumps(schema), conf=conf or None)


def ours(registry) -> SchemaRegistry:
    return SchemaRegistry.from_config({"schema.registry.url": registry.url,
                                       "basic.auth.user.info": registry.config["basic.auth.user.info"]})


def test_the_zoo_written_by_the_avro_serializer_reads_as_the_avro_deserializer_reads_it(schema_registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    ser = avro_serializer(schema_registry, ZOO_V1)
    ctx = context("zoo-plain")
    values = [ser(r, ctx) for r in zoo_records(16)]
    got = decode_values(values, ours(schema_registry))
    assert got.ok, got.culprits[:2]
    want = [AvroDeserializer(client(schema_registry))(v, ctx) for v in values]
    assert_rows_equal(got.values.to_pylist(maps_as_pydicts="strict"), want)
    assert set(got.schema_ids.to_pylist()) == {struct.unpack(">I", values[0][1:5])[0]}


def test_three_versions_of_a_subject_in_one_column_read_as_the_latest(schema_registry):
    """Evolution through the registry: v1, v2, v3 registered under one subject, values of each in
    one column; read as the subject's latest (v3) they equal the deserializer's resolution into v3."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    topic = "zoo-evolving"
    ctx = context(topic)
    records = zoo_records(9)
    values = []
    for k, schema in enumerate((ZOO_V1, ZOO_V2, ZOO_V3)):
        ser = avro_serializer(schema_registry, schema, **{"auto.register.schemas": True})
        for r in records[k * 3:(k + 1) * 3]:
            if schema is not ZOO_V1:  # a record of that version: v1's resolved into it
                r = fastavro_read(datum(ZOO_V1, r), ZOO_V1, ZOO_V2)
                if schema is ZOO_V3:
                    r = fastavro_read(datum(ZOO_V2, r), ZOO_V2, ZOO_V3)
            values.append(ser(r, ctx))
    registry = ours(schema_registry)
    got = decode_values(values, registry, subject=f"{topic}-value")
    assert got.ok, got.culprits[:2]
    assert len(set(got.schema_ids.to_pylist())) == 3
    reader = AvroDeserializer(client(schema_registry), json.dumps(ZOO_V3))
    assert_rows_equal(got.values.to_pylist(maps_as_pydicts="strict"), [reader(v, ctx) for v in values])


def test_keys_and_values_of_a_table_with_faults_among_them(schema_registry):
    key_ser = avro_serializer(schema_registry, "string")
    ser = avro_serializer(schema_registry, ZOO_V1)
    good = ser(zoo_records(1)[0], context("zoo-faults"))
    table = pa.table({
        "key": pa.array([key_ser("k0", context("zoo-faults", "KEY")), b"plain text key", None, None], pa.binary()),
        "value": pa.array([good, good[:-3], b"\0\x7f\xff\xff\xff" + good[5:], good], pa.binary()),
    })
    registry = ours(schema_registry)
    keys = decode_values(table, registry, column="key")
    assert keys.values.to_pylist() == ["k0", None, None, None]
    assert [(c.row, c.rule, c.column) for c in keys.culprits] == [(1, "value.schema_framing", "key")]
    values = decode_values(table, registry)
    assert [(c.row, c.rule) for c in values.culprits] == [(1, "value.datum_truncated"), (2, "value.schema_unknown")]
    assert "2147483647" in values.culprits[1].message and schema_registry.url in values.culprits[1].message
    rows = values.values.to_pylist()
    assert rows[0] == rows[3] and rows[1] is None and rows[2] is None


def test_each_schema_id_is_fetched_once_a_process(schema_registry):
    ser = avro_serializer(schema_registry, ZOO_V1)
    values = [ser(r, context("zoo-cache")) for r in zoo_records(4)]
    registry = ours(schema_registry)
    before = registry.requests_made
    for _ in range(5):
        assert decode_values(values, registry).ok
    assert registry.requests_made - before <= 1  # shared by every client of the URL: maybe 0
    again = ours(schema_registry)  # a new client object, as a new Spark task makes: same cache
    assert decode_values(values, again).ok and again.requests_made == registry.requests_made
    unknown = [b"\0\x7f\xff\xff\xf0" + values[0][5:]] * 50
    n = registry.requests_made
    for _ in range(3):
        assert {c.rule for c in decode_values(unknown, registry).culprits} == {"value.schema_unknown"}
    assert registry.requests_made - n == 1  # a missing id is remembered too


def test_tls_and_basic_auth_are_the_registrys_gate(schema_registry):
    certs = schema_registry.certificates
    user_info = schema_registry.config["basic.auth.user.info"]
    over_tls = SchemaRegistry(schema_registry.tls_url, basic_auth=user_info, ca=str(certs.ca))
    assert isinstance(over_tls.subjects(), list)
    with pytest.raises(RegistryAuthError, match="401"):
        SchemaRegistry(schema_registry.url, basic_auth="pykbatch:wrong").subjects()
    with pytest.raises(RegistryAuthError, match="401"):
        SchemaRegistry(schema_registry.url).subjects()
    with pytest.raises(RegistryAuthError, match="CERTIFICATE_VERIFY_FAILED"):
        SchemaRegistry(schema_registry.tls_url, basic_auth=user_info, ca=str(certs.untrusted_ca)).subjects()
    # credentials in the URL (basic.auth.credentials.source=URL) work and never show in a repr
    user, password = user_info.split(":")
    in_url = SchemaRegistry.from_config({"url": schema_registry.url.replace("http://", f"http://{user}:{password}@"),
                                         "basic.auth.credentials.source": "URL"})
    assert isinstance(in_url.subjects(), list) and password not in repr(in_url)


def test_a_refused_credential_is_an_error_not_a_culprit(schema_registry):
    """A registry that refuses us says nothing about the data: decode_values raises (a Spark task
    fails and is retried) instead of marking every value a culprit."""
    ser = avro_serializer(schema_registry, ZOO_V1)
    values = [ser(zoo_records(1)[0], context("zoo-auth"))]
    assert decode_values(values, ours(schema_registry)).ok  # cached for the right credentials...
    with pytest.raises(RegistryAuthError):  # ...not for others: they ask the registry, which refuses
        decode_values(values, SchemaRegistry(schema_registry.url, basic_auth="pykbatch:wrong"))


def test_unknown_registry_settings_are_refused_by_name():
    with pytest.raises(ValueError, match="basic.auth.user.inf"):
        SchemaRegistry.from_config({"url": "http://127.0.0.1:1", "basic.auth.user.inf": "x:y"})


# ---- Protobuf and JSON Schema, through their serializers ----

def _protobuf_classes():
    """A file of two messages (the second with a nested one), every scalar type, an enum, a map,
    a repeated message, a oneof -- built as a descriptor, as generated code would carry it."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="zoo.proto", package="pykbatch.zoo", syntax="proto3")
    fdp.enum_type.add(name="Kind").value.extend([descriptor_pb2.EnumValueDescriptorProto(name=n, number=i)
                                                 for i, n in enumerate(("A", "B", "C"))])
    first = fdp.message_type.add(name="Ping")
    first.field.add(name="n", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    zoo = fdp.message_type.add(name="Zoo")
    inner = zoo.nested_type.add(name="Point")
    inner.field.add(name="x", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    inner.field.add(name="label", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = zoo.nested_type.add(name="ScoresEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    scalars = [("d", F.TYPE_DOUBLE), ("f", F.TYPE_FLOAT), ("i64", F.TYPE_INT64), ("u64", F.TYPE_UINT64),
               ("i32", F.TYPE_INT32), ("fx64", F.TYPE_FIXED64), ("fx32", F.TYPE_FIXED32), ("flag", F.TYPE_BOOL),
               ("s", F.TYPE_STRING), ("raw", F.TYPE_BYTES), ("u32", F.TYPE_UINT32), ("sf32", F.TYPE_SFIXED32),
               ("sf64", F.TYPE_SFIXED64), ("s32", F.TYPE_SINT32), ("s64", F.TYPE_SINT64)]
    for k, (name, t) in enumerate(scalars, 1):
        zoo.field.add(name=name, number=k, type=t, label=F.LABEL_OPTIONAL)
    k = len(scalars)
    zoo.field.add(name="kind", number=k + 1, type=F.TYPE_ENUM, type_name=".pykbatch.zoo.Kind", label=F.LABEL_OPTIONAL)
    zoo.field.add(name="at", number=k + 2, type=F.TYPE_MESSAGE, type_name=".pykbatch.zoo.Zoo.Point", label=F.LABEL_OPTIONAL)
    zoo.field.add(name="path", number=k + 3, type=F.TYPE_MESSAGE, type_name=".pykbatch.zoo.Zoo.Point", label=F.LABEL_REPEATED)
    zoo.field.add(name="tags", number=k + 4, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    zoo.field.add(name="scores", number=k + 5, type=F.TYPE_MESSAGE, type_name=".pykbatch.zoo.Zoo.ScoresEntry",
                  label=F.LABEL_REPEATED)
    zoo.oneof_decl.add(name="either")
    zoo.field.add(name="left", number=k + 6, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    zoo.field.add(name="right", number=k + 7, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL, oneof_index=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return (message_factory.GetMessageClass(pool.FindMessageTypeByName("pykbatch.zoo.Zoo")),
            message_factory.GetMessageClass(pool.FindMessageTypeByName("pykbatch.zoo.Ping")))


def _zoo_messages(Zoo, n: int):
    out = []
    for k in range(n):
        m = Zoo(d=k / 3, f=1.5 * k, i64=-(2 ** 62) + k, u64=2 ** 63 + k, i32=-k, fx64=k * 7, fx32=k, flag=k % 2 == 0,
                s="é" * k, raw=bytes(range(k)), u32=2 ** 31 + k, sf32=-k * 3, sf64=k * -(2 ** 40), s32=-(2 ** 30), s64=k,
                kind=k % 3, tags=[f"t{j}" for j in range(k % 3)])
        if k % 2:
            m.at.x, m.at.label = float(k), f"p{k}"
        for j in range(k % 3):
            m.path.add(x=j, label=str(j))
            m.scores[f"k{j}"] = j * 10 ** 12
        if k % 3 == 1:
            m.left = "l"
        elif k % 3 == 2:
            m.right = k
        out.append(m)
    return out


def _reference_row(msg):
    """A deserialized message in Arrow's Python form, read field by field from the message."""
    row = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            row[f.name] = dict(v)
        elif f.type == f.TYPE_MESSAGE and f.is_repeated:
            row[f.name] = [_reference_row(x) for x in v]
        elif f.is_repeated:
            row[f.name] = list(v)
        elif f.type == f.TYPE_MESSAGE:
            row[f.name] = _reference_row(v) if msg.HasField(f.name) else None
        elif f.containing_oneof is not None:
            row[f.name] = v if msg.WhichOneof(f.containing_oneof.name) == f.name else None
        elif f.type == f.TYPE_ENUM:
            row[f.name] = f.enum_type.values_by_number[v].name
        else:
            row[f.name] = v
    return row


def test_protobuf_values_read_as_the_protobuf_deserializer_reads_them(schema_registry):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    Zoo, Ping = _protobuf_classes()
    ctx = context("pb-zoo")
    ser = ProtobufSerializer(Zoo, client(schema_registry), {"use.deprecated.format": False})
    values = [ser(m, ctx) for m in _zoo_messages(Zoo, 9)]
    assert values[0][5:6] != b"\0"  # Zoo is the file's second message: a real index path, not [0]
    got = decode_values(values + [values[0][:5] + b"\x02\x02\xff\xff"], ours(schema_registry))
    de = ProtobufDeserializer(Zoo, {"use.deprecated.format": False})
    want = [_reference_row(de(v, ctx)) for v in values]
    rows = got.values.to_pylist(maps_as_pydicts="strict")
    for k, w in enumerate(want):
        assert rows[k] == w, k
    [c] = got.culprits
    assert (c.row, c.rule) == (9, "value.protobuf_invalid") and "pykbatch.zoo.Zoo" in c.message and rows[9] is None


def test_json_schema_values_checked_and_laid_out_by_their_schema(schema_registry):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "price": {"type": "number"}, "who": {"type": ["string", "null"]},
                             "paid": {"type": "boolean"}, "lines": {"type": "array", "items": {
                                 "type": "object", "properties": {"sku": {"type": "string"}, "n": {"type": "integer"}}}},
                             "extra": {}},
              "required": ["id"]}
    ctx = context("js-orders")
    ser = JSONSerializer(json.dumps(schema), client(schema_registry))
    docs = [{"id": k, "price": k * 1.25, "who": None if k % 2 else f"u{k}", "paid": k % 3 == 0,
             "lines": [{"sku": f"s{j}", "n": j} for j in range(k % 3)], "extra": {"any": [k]}} for k in range(6)]
    values = [ser(d, ctx) for d in docs]
    head = values[0][:5]
    bad = [head + b'{"id": "seven"}', head + b"{not json", head + b'{"price": 1}']
    got = decode_values(values + bad, ours(schema_registry))
    de = JSONDeserializer(json.dumps(schema))
    rows = got.values.to_pylist()
    for k, v in enumerate(values):
        want = de(v, ctx)
        assert {**rows[k], "extra": json.loads(rows[k]["extra"])} == want
    assert [(c.row, c.rule) for c in got.culprits] == [(6, "value.json_schema"), (7, "value.json_invalid"),
                                                      (8, "value.json_schema")]
    assert "$.id" in got.culprits[0].message and "'id' is a required property" in got.culprits[2].message
    assert rows[6:] == [None, None, None]


def test_dump_prints_values_as_their_schemas_say(schema_registry, tmp_path, capsys):
    """pykbatch dump --value-decoder confluent: each value as JSON, a value that cannot be read as
    its culprit (and exit 1); the registry's credentials from a properties file; a refused
    credential or an unreachable registry exits 2 with one line, no traceback."""
    from pykbatch import build_batch
    from pykbatch.commands.main import main
    ser = avro_serializer(schema_registry, ZOO_V1)
    good = [ser(r, context("dump-zoo")) for r in zoo_records(3)]
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(build_batch([{"value": v} for v in good]) + build_batch([{"value": good[0][:9]}], base_offset=3))
    props = tmp_path / "registry.properties"
    props.write_text(f"url={schema_registry.url}\nbasic.auth.user.info={schema_registry.config['basic.auth.user.info']}\n")
    status = main(["dump", "--files", str(log), "--value-decoder", "confluent", "--schema-registry-config", str(props),
                   "--no-progress"])
    out, err = capsys.readouterr()
    payloads = [line.split(" payload: ", 1)[1] for line in out.splitlines() if " payload: " in line]
    assert len(payloads) == 4 and json.loads(payloads[0])["home"] == {"street": "street 0", "zip": 10000}
    assert payloads[3].startswith("<value.datum_truncated (87) at byte")
    assert status == 1 and "offset 3" in err and "registry-secret" not in out + err
    status = main(["dump", "--files", str(log), "--value-decoder", "confluent", "--schema-registry-config", str(props),
                   "--format", "jsonl", "--no-progress"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    decoded = [x["decoded"]["payload"] for x in lines if "decoded" in x]
    assert status == 1 and json.loads(decoded[1])["kind"] == "B"
    props.write_text(f"url={schema_registry.url}\nbasic.auth.user.info=pykbatch:wrong\n")
    status = main(["dump", "--files", str(log), "--value-decoder", "confluent", "--schema-registry-config", str(props),
                   "--no-progress"])
    err = capsys.readouterr().err
    assert status == 2 and "401" in err and "Traceback" not in err
    status = main(["dump", "--files", str(log), "--value-decoder", "confluent", "--schema-registry", "http://127.0.0.1:9",
                   "--no-progress"])
    assert status == 2 and "Traceback" not in capsys.readouterr().err
    assert main(["dump", "--files", str(log), "--value-decoder", "confluent"]) == 2
    assert "--schema-registry" in capsys.readouterr().err


def test_dump_keeps_its_verdict_when_the_reader_goes_away(schema_registry, tmp_path):
    """A culprit found before the reader stopped reading (| head) is still exit 1, not 0: the
    batch's values are decoded before its records print."""
    import subprocess
    import sys

    from pykbatch import build_batch
    ser = avro_serializer(schema_registry, ZOO_V1)
    values = [ser(r, context("dump-pipe")) for r in zoo_records(400)] + [b"not framed"]
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(build_batch([{"value": v} for v in values]))
    props = tmp_path / "registry.properties"
    props.write_text(f"url={schema_registry.url}\nbasic.auth.user.info={schema_registry.config['basic.auth.user.info']}\n")
    proc = subprocess.Popen([sys.executable, "-m", "pykbatch", "dump", "--files", str(log), "--value-decoder", "confluent",
                             "--schema-registry-config", str(props), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(5):  # past the batch line: its values were decoded
        proc.stdout.readline()
    proc.stdout.close()  # as `| head -5` does
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1 and b"Traceback" not in err
