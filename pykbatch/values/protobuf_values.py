"""Confluent-framed Protobuf values into Arrow, through Google's ``protobuf`` library (its upb
parser does the decoding; one Python object a message is the cost, see docs/performance.md).

The registry holds a schema as ``.proto`` text or, as confluent-kafka's serializer registers it,
a base64 ``FileDescriptorProto``; the descriptor comes from the latter directly and from the
former through ``grpcio-tools``' protoc when it is installed.  Each value's message is the one its
message-index path names in its writer's file (the ``[0]`` shortcut for the first); every value
is parsed with the reader's message type (the newest schema's, or the one named), which is
Protobuf's own compatibility: unknown fields skipped, missing ones their defaults.
"""
from __future__ import annotations

import base64
import binascii

import pyarrow as pa

from pykbatch import columns
from pykbatch.values.registry import RegisteredSchema

_POOLS: dict[tuple, object] = {}


def _proto_text_to_descriptor(name: str, text: str, deps: list[tuple[str, bytes]]) -> bytes:
    """A .proto file's FileDescriptorProto, compiled by grpcio-tools' protoc."""
    import os
    import tempfile
    try:
        from grpc_tools import protoc
    except ImportError:
        raise ValueError("the registry holds this Protobuf schema as .proto text: install grpcio-tools "
                         "(pip install 'pykbatch[protobuf]') to compile it") from None
    from google.protobuf import descriptor_pb2
    with tempfile.TemporaryDirectory() as d:
        for dep_name, dep_text in deps:
            os.makedirs(os.path.dirname(os.path.join(d, dep_name)) or d, exist_ok=True)
            with open(os.path.join(d, dep_name), "wb") as f:
                f.write(dep_text)
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
        out = os.path.join(d, "set.pb")
        if protoc.main(["protoc", f"-I{d}", f"--descriptor_set_out={out}", name]) != 0:
            raise ValueError(f"protoc could not compile the registry's schema {name}")
        files = descriptor_pb2.FileDescriptorSet.FromString(open(out, "rb").read())
        return files.file[-1].SerializeToString()


def _descriptor_bytes(rs: RegisteredSchema, name: str, deps: list[tuple[str, bytes]]) -> bytes:
    from google.protobuf import descriptor_pb2
    try:
        raw = base64.b64decode(rs.schema, validate=True)
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        return raw
    except (binascii.Error, ValueError, Exception):  # DecodeError is not a ValueError: .proto text
        return _proto_text_to_descriptor(name, rs.schema, deps)


def file_descriptor(rs: RegisteredSchema, registry):
    """The ``FileDescriptor`` of a registered Protobuf schema, its references added first."""
    key = (getattr(registry, "url", None), rs.id, rs.schema)
    found = _POOLS.get(key)
    if found is not None:
        return found
    from google.protobuf import descriptor_pb2, descriptor_pool
    pool = descriptor_pool.DescriptorPool()
    deps = []
    for ref_name, ref in (registry.referenced(rs) if rs.references else []):
        raw = _descriptor_bytes(ref, ref_name, deps)
        fdp = descriptor_pb2.FileDescriptorProto.FromString(raw)
        fdp.name = ref_name
        pool.Add(fdp)
        deps.append((ref_name, ref.schema.encode()))
    fdp = descriptor_pb2.FileDescriptorProto.FromString(_descriptor_bytes(rs, f"schema_{rs.id}.proto", deps))
    if not fdp.name:
        fdp.name = f"schema_{rs.id}.proto"
    found = pool.Add(fdp)
    _POOLS[key] = found
    return found


def message_at(fd, indexes: list[int]):
    """The message type a message-index path names in a file."""
    if not indexes:
        indexes = [0]
    types = list(fd.message_types_by_name.values())
    desc = None
    for depth, i in enumerate(indexes):
        if i >= len(types):
            raise ValueError(f"message index {indexes} names no message of {fd.name} (level {depth} has {len(types)})")
        desc = types[i]
        types = list(desc.nested_types)
    return desc


def arrow_type(desc, _depth: int = 0) -> pa.DataType:
    """A message type as an Arrow struct (maps as maps, repeated fields as lists, enums by name)."""
    if _depth > 64:
        raise ValueError(f"{desc.full_name} nests deeper than 64 levels (a recursive message has no Arrow type)")
    return pa.struct([pa.field(f.name, _field_type(f, _depth)) for f in desc.fields])


def _field_type(f, depth: int) -> pa.DataType:
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return pa.map_(_scalar_type(k, depth), _scalar_type(v, depth))
    t = _scalar_type(f, depth)
    return pa.list_(t) if _repeated(f) else t


def _repeated(f) -> bool:
    return f.is_repeated if hasattr(f, "is_repeated") else f.label == f.LABEL_REPEATED  # protobuf < 5: label


def _scalar_type(f, depth: int) -> pa.DataType:
    if f.type == f.TYPE_MESSAGE or f.type == f.TYPE_GROUP:
        return arrow_type(f.message_type, depth + 1)
    return columns.PROTOBUF_SCALAR[f.type]


def to_row(msg) -> dict:
    """A parsed message as Arrow's Python form of ``arrow_type``: unset message fields null."""
    out = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = [(k, _value(vf, x)) for k, x in v.items()]
        elif _repeated(f):
            out[f.name] = [_value(f, x) for x in v]
        elif f.type == f.TYPE_MESSAGE and not msg.HasField(f.name):
            out[f.name] = None
        elif f.has_presence and f.containing_oneof is not None and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _value(f, v)
    return out


def _value(f, v):
    if f.type == f.TYPE_MESSAGE or f.type == f.TYPE_GROUP:
        return to_row(v)
    if f.type == f.TYPE_ENUM:
        named = f.enum_type.values_by_number.get(v)
        return named.name if named is not None else str(v)
    return v
