"""Kafka's versioned message definitions, interpreted (``pykbatch/schemas/messages/*.json``).

The one place Kafka's JSON definitions are read.  Internal topics' records, KRaft control
record values and (next) the network protocol's requests and responses are Kafka's generated
messages; rather than hand-write a reader per message and version, this module reads the very
JSON definitions Kafka's code generator reads and decodes (and encodes) any version of them:

    schema = definitions.load("RemoteLogSegmentMetadataRecord")
    fields, end = schema.decode(value, pos, version)   # {"RemoteLogSegmentId": {...}, ...}

Encoding rules (Kafka's generator): in a *flexible* version strings, bytes and arrays carry an
unsigned-varint length plus one (0 = null), and each struct ends with tagged fields; otherwise
lengths are int16 (strings) or int32 (bytes, arrays), -1 = null.  A field absent from a version
takes its default.  Every failure names the byte where it happened.
"""
from __future__ import annotations

import base64
import functools
import json
import struct
import uuid
from dataclasses import dataclass, field
from importlib import resources

from pykbatch.errors import CorruptRecordError
from pykbatch.kafka.jackson import JsonBytes, JsonDouble
from pykbatch.kafka.javautf8 import java_utf8

_FIXED = {"bool": (1, "?"), "int8": (1, "b"), "int16": (2, ">h"), "uint16": (2, ">H"), "int32": (4, ">i"),
          "uint32": (4, ">I"), "int64": (8, ">q"), "float64": (8, ">d")}
_NUMBER_DEFAULT = {"bool": False, "float64": 0.0}
_UNPACK = {t: struct.Struct(fmt).unpack_from for t, (_, fmt) in _FIXED.items()}


class MessageFormatError(CorruptRecordError):
    """Bytes that are not the message they claim to be; ``offset`` is the byte where it failed.
    ``kafka_message``: what Kafka's own deserializer says of the same bytes, when known (the
    dump prints that, as kafka-dump-log does)."""

    def __init__(self, message: str, offset: int | None = None, kafka_message: str | None = None):
        super().__init__(message, offset)
        self.kafka_message = kafka_message


@dataclass(frozen=True)
class Versions:
    """A version range as Kafka writes it: ``"0+"``, ``"1-3"``, ``"2"``, ``"none"``."""
    low: int
    high: int  # inclusive; a huge number for "N+"

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


@dataclass
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object
    fields: list["Field"] = field(default_factory=list)  # an inline struct's, or the common struct's

    @property
    def element(self) -> str:
        return self.type[2:] if self.type.startswith("[]") else self.type


@dataclass
class MessageSchema:
    name: str
    kind: str  # Kafka's "type": metadata, coordinator-key, coordinator-value, data ...
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[Field]

    def decode(self, data, pos: int, version: int, end: int | None = None) -> tuple[dict, int]:
        """The message at ``data[pos:end]`` as a dict of field name -> value (structs as dicts,
        arrays as lists, uuids as ``uuid.UUID``, bytes as ``bytes``), and where it ended."""
        if version not in self.valid:
            raise MessageFormatError(f"{self.name} has no version {version} (valid: {self.valid.low}-"
                                     f"{min(self.valid.high, 32767)})", pos)
        reader = Reader(memoryview(data), pos, len(data) if end is None else end, version in self.flexible)
        return reader.struct(self.fields, version, self.name), reader.pos


    def to_json(self, fields: dict, version: int) -> dict:
        """The message as Kafka's generated ``JsonConverter.write`` builds it: camelCase names,
        fields of this version in definition order, tagged ones only when not at their default,
        uuids in Kafka's text form, bytes as base64 (``jackson`` writes it as Kafka's tools print)."""
        return _json_struct(self.fields, fields, version)

    def encode(self, fields: dict, version: int) -> bytes:
        """The bytes of a message with these field values (as ``decode`` returns them; a field
        left out takes its default): for tests and tools that write internal-topic records."""
        out = bytearray()
        _Writer(out, version in self.flexible).struct(self.fields, fields, version)
        return bytes(out)


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of its 16 bytes, unpadded (22 characters)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID:
    if len(text) != 22:
        raise ValueError(f"a Kafka Uuid has 22 characters: {text!r}")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


@functools.lru_cache(maxsize=None)
def camel(name: str) -> str:
    """Kafka's camelCaseName: the field name with its first letter lower-cased."""
    return name[:1].lower() + name[1:]


def _json_value(f: Field, v, version: int):
    if v is None:
        return None
    if f.type.startswith("[]"):
        element = _element(f)
        return [_json_value(element, x, version) for x in v]
    if f.fields:
        return _json_struct(f.fields, v, version)
    if f.type == "uuid":
        return kafka_uuid(v)
    if f.type in ("bytes", "records"):
        return JsonBytes(v)
    if f.type == "float64":
        return JsonDouble(v)
    return v


_SCALAR = frozenset(("bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "string"))
_JSON_PLANS: dict = {}


def _json_struct(fields: list[Field], values: dict, version: int) -> dict:
    key = (id(fields), version)
    plan = _JSON_PLANS.get(key)
    if plan is None:  # (json name, field, default when tagged else a marker, scalar?) made once
        plan = _JSON_PLANS[key] = ([(camel(f.name), f, default_of(f) if version in f.tagged else _ALWAYS,
                                     f.type in _SCALAR) for f in fields if version in f.versions], fields)
    out = {}
    for name, f, tagged_default, scalar in plan[0]:
        v = values.get(f.name, tagged_default if tagged_default is not _ALWAYS else default_of(f))
        if tagged_default is not _ALWAYS and v == tagged_default:
            continue
        out[name] = v if scalar else _json_value(f, v, version)
    return out


_ALWAYS = object()  # a field written whatever its value (not tagged)


def uvarint_bytes(n: int) -> bytes:
    """An unsigned varint's bytes."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _Writer:
    def __init__(self, out: bytearray, flexible: bool):
        self.out, self.flexible = out, flexible

    def length(self, n: int, wide: bool) -> None:
        if self.flexible:
            self.out += uvarint_bytes(n + 1)
        else:
            self.out += struct.pack(">i" if wide else ">h", n)

    def value(self, f: Field, v, version: int, tagged: bool = False) -> None:
        if f.type.startswith("[]"):
            if v is None:
                self.length(-1, True)
                return
            self.length(len(v), True)
            element = Field(f.name, f.element, f.versions, Versions(1, 0), Versions(1, 0), None, None, f.fields)
            for item in v:
                self.value(element, item, version)
        elif f.fields:
            if version in f.nullable:
                self.out += (uvarint_bytes(0 if v is None else 1) if tagged else struct.pack("b", -1 if v is None else 1))
                if v is None:
                    return
            self.struct(f.fields, v or {}, version)
        elif f.type in _FIXED:
            self.out += struct.pack(_FIXED[f.type][1], v)
        elif f.type == "uuid":
            self.out += v.bytes
        else:
            if v is None:
                self.length(-1, f.type != "string")
                return
            raw = v.encode("utf-8") if f.type == "string" else bytes(v)
            self.length(len(raw), f.type != "string")
            self.out += raw

    def struct(self, fields: list[Field], values: dict, version: int) -> None:
        tagged = []
        for f in fields:
            if version not in f.versions:
                continue
            v = values.get(f.name, default_of(f))
            if self.flexible and version in f.tagged:
                if v != default_of(f):
                    tagged.append((f.tag, f, v))
                continue
            self.value(f, v, version)
        if self.flexible:
            self.out += uvarint_bytes(len(tagged))
            for tag, f, v in sorted(tagged, key=lambda t: t[0]):
                inner = bytearray()
                _Writer(inner, True).value(f, v, version, tagged=True)
                self.out += uvarint_bytes(tag) + uvarint_bytes(len(inner)) + inner


def _load_fields(raw: list, structs: dict) -> list[Field]:
    out = []
    for f in raw:
        sub = f.get("fields")
        typ = f["type"]
        element = typ[2:] if typ.startswith("[]") else typ
        if sub is None and element in structs:
            sub = structs[element]
        out.append(Field(
            name=f["name"], type=typ, versions=Versions.parse(f.get("versions") or f.get("taggedVersions")),
            nullable=Versions.parse(f.get("nullableVersions")), tagged=Versions.parse(f.get("taggedVersions")),
            tag=f.get("tag"), default=f.get("default"), fields=_load_fields(sub, structs) if sub else []))
    return out


def parse_definition(text: str) -> MessageSchema:
    """A definition file's text (Kafka's JSON with ``//`` comment lines) as a schema."""
    doc = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
    structs = {s["name"]: s["fields"] for s in doc.get("commonStructs", [])}
    return MessageSchema(name=doc["name"], kind=doc.get("type", ""), api_key=doc.get("apiKey"), valid=Versions.parse(doc["validVersions"]),
                         flexible=Versions.parse(doc.get("flexibleVersions")),
                         fields=_load_fields(doc["fields"], structs))


@functools.cache
def load(name: str) -> MessageSchema:
    """Kafka's definition ``name`` (the file name without ``.json``) from pykbatch/schemas/messages."""
    text = resources.files("pykbatch").joinpath("schemas", "messages", f"{name}.json").read_text("utf-8")
    return parse_definition(text)


@functools.cache
def _index() -> dict:
    text = resources.files("pykbatch").joinpath("schemas", "messages", "index.json").read_text("utf-8")
    return json.loads(text)


def topic_definitions(topic: str) -> tuple[str, ...]:
    """The definitions an internal topic's records use (``schemas/messages/index.json``)."""
    return tuple(_index()["topics"][topic]["definitions"])


@functools.cache
def by_api_key(topic: str, kind: str | None = None) -> dict[int, MessageSchema]:
    """An internal topic's definitions of one kind (e.g. coordinator-key) by api key."""
    schemas = (load(n) for n in topic_definitions(topic))
    return {s.api_key: s for s in schemas if kind is None or s.kind == kind}


def default_of(f: Field):
    """The field's default (computed once per field; never mutated by the readers)."""
    try:
        return f.__dict__["_default"]
    except KeyError:
        value = f.__dict__["_default"] = _default_of(f)
        return value


def _default_of(f: Field):
    if f.type.startswith("[]"):
        return None if f.default == "null" else []
    if f.fields:  # Kafka's default for a struct is a default-built one, unless it says "null"
        return None if f.default == "null" else {sub.name: default_of(sub) for sub in f.fields}
    if f.default == "null":
        return None
    if f.type in _FIXED:
        if f.default is None:
            return _NUMBER_DEFAULT.get(f.type, 0)
        if f.type == "bool":
            return f.default in (True, "true")
        if isinstance(f.default, str) and f.default.lower().startswith("0x"):
            return int(f.default, 16)
        return type(_NUMBER_DEFAULT.get(f.type, 0))(f.default)
    if f.type == "string":
        return f.default or ""
    if f.type == "uuid":
        return uuid.UUID(int=0)
    return b""


def _w(what) -> str:
    """A field's path for a message: kept as a tuple until a message needs it (most reads succeed)."""
    return what if isinstance(what, str) else ".".join(_w(p) for p in what)


class Reader:
    def __init__(self, view: memoryview, pos: int, end: int, flexible: bool):
        self.view, self.pos, self.end, self.flexible = view, pos, end, flexible

    def fail(self, what, at: int | None = None):
        raise MessageFormatError(_w(what), self.pos if at is None else at)

    def take(self, n: int, what) -> memoryview:
        if n < 0 or self.pos + n > self.end:
            self.fail(f"{_w(what)} needs {n} bytes, {self.end - self.pos} remain")
        out = self.view[self.pos:self.pos + n]
        self.pos += n
        return out

    def uvarint(self, what: str) -> int:
        start, value, shift = self.pos, 0, 0
        while True:
            if self.pos >= self.end:
                self.fail(f"{_w(what)}: unsigned varint runs past the end", start)
            b = self.view[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 28:
                self.fail(f"{_w(what)}: unsigned varint longer than 5 bytes", start)

    def fixed(self, typ: str, what):
        size, fmt = _FIXED[typ]
        pos = self.pos
        if pos + size > self.end:
            self.take(size, what)  # fails, naming the field
        self.pos = pos + size
        return _UNPACK[typ](self.view, pos)[0]

    def length(self, wide: bool, what) -> int:
        """A length prefix: -1 for null."""
        if self.flexible:
            return self.uvarint(what) - 1
        return self.fixed("int32" if wide else "int16", what)

    def value(self, f: Field, version: int, where, tagged: bool = False):
        typ, what = f.type, (where, f.name)
        if typ in _FIXED:
            return self.fixed(typ, what)
        if typ in ("string", "bytes", "records"):
            start = self.pos
            n = self.length(typ != "string", what)
            if n < 0:
                if version not in f.nullable:
                    self.fail(f"{_w(what)}: null {typ} in a version where it is not nullable", start)
                return None
            raw = bytes(self.take(n, what))
            return raw if typ != "string" else java_utf8(raw)  # as Kafka's readString: malformed -> U+FFFD
        if typ == "uuid":
            return uuid.UUID(bytes=bytes(self.take(16, what)))
        if typ.startswith("[]"):
            start = self.pos
            n = self.length(True, what)
            if n < 0:
                if version not in f.nullable:
                    self.fail(f"{_w(what)}: null array in a version where it is not nullable", start)
                return None
            if n > self.end - self.pos:  # every element takes at least a byte: no huge allocation
                self.fail(f"{_w(what)}: array of {n} elements in {self.end - self.pos} bytes", start)
            element = _element(f)
            return [self.value(element, version, what) for _ in range(n)]
        if f.fields:
            # a nullable struct: int8 -1 null / 1 present; inside a tagged field, uvarint 0 null / 1 present
            if version in f.nullable and (self.uvarint(what) <= 0 if tagged else self.fixed("int8", what) < 0):
                return None
            return self.struct(f.fields, version, what)
        self.fail(f"{_w(what)}: type {typ!r} is not one this interpreter knows")

    def struct(self, fields: list[Field], version: int, where) -> dict:
        out = {}
        plan, tagged = _read_plan(fields, version, self.flexible)
        for f, inline in plan:
            out[f.name] = self.value(f, version, where) if inline else default_of(f)
        if self.flexible:
            unknown = {}
            for _ in range(self.uvarint((where, "tagged field count"))):
                tag = self.uvarint((where, "tag"))
                size = self.uvarint((where, "tag size"))
                start = self.pos
                if size > self.end - start:
                    self.fail(f"{_w(where)} tag {tag}: {size} bytes, {self.end - start} remain")
                if tag in tagged:
                    inner = Reader(self.view, start, start + size, True)
                    out[tagged[tag].name] = inner.value(tagged[tag], version, where, tagged=True)
                else:
                    unknown[tag] = bytes(self.view[start:start + size])
                self.pos = start + size
            if unknown:
                out["_unknown_tagged_fields"] = unknown
        return out


_PLANS: dict = {}


def _read_plan(fields: list[Field], version: int, flexible: bool):
    """(field, read inline?) in order, and tag -> field, for a struct at a version (made once)."""
    key = (id(fields), version, flexible)
    plan = _PLANS.get(key)
    if plan is None:
        order, tagged = [], {}
        for f in fields:
            if version not in f.versions:
                order.append((f, False))
            elif flexible and version in f.tagged:
                tagged[f.tag] = f
                order.append((f, False))
            else:
                order.append((f, True))
        plan = _PLANS[key] = (order, tagged, fields)  # fields kept alive: its id stays its own
    return plan[0], plan[1]


def _element(f: Field) -> Field:
    """An array field's element, as a field (made once per field)."""
    try:
        return f.__dict__["_element"]
    except KeyError:
        e = f.__dict__["_element"] = Field(f.name, f.element, f.versions, Versions(1, 0), Versions(1, 0), None,
                                           None, f.fields)
        return e
