"""Avro schemas as the specification defines them: parsed once into a tree of ``AvroType``
(named types resolved, namespaces applied, logical types checked), with the Parsing Canonical
Form and its fingerprint.  A recursive schema is refused here: no Arrow type can hold it (Spark's
``from_avro`` refuses it too)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import weakref
from dataclasses import dataclass, field

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")

# Logical types and the physical types they annotate (the specification's table); an annotation
# that does not fit is ignored, as the specification says.
LOGICAL_TYPES = {
    "decimal": ("bytes", "fixed"),
    "uuid": ("string", "fixed"),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
    "duration": ("fixed",),
}
MAX_DEPTH = 64
"""Nesting deeper than this is refused (a schema is data too, and may be hostile)."""

NO_DEFAULT = object()


class SchemaError(ValueError):
    """A schema that is not valid Avro, or that no Arrow type can hold."""


@dataclass(eq=False)
class AvroField:
    name: str
    type: AvroType
    default: object = NO_DEFAULT
    aliases: tuple[str, ...] = ()


@dataclass(eq=False)
class AvroType:
    type: str                     # a primitive, record, enum, array, map, fixed or union
    name: str | None = None       # named types: the full name
    aliases: tuple[str, ...] = () # full names
    fields: list[AvroField] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    items: AvroType | None = None  # array items, map values
    branches: list[AvroType] = field(default_factory=list)
    size: int = 0
    logical: str | None = None
    precision: int = 0
    scale: int = 0

    @property
    def short_name(self) -> str | None:
        return self.name.rsplit(".", 1)[-1] if self.name else None

    def names(self) -> set[str]:
        """The names a writer's type may carry to match this one (full and short, with aliases)."""
        out = set()
        for n in (self.name, *self.aliases):
            if n:
                out |= {n, n.rsplit(".", 1)[-1]}
        return out

    def branch_name(self) -> str:
        """How a union's member is named: its full name, or its type."""
        return self.short_name or self.logical or self.type


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


class _Parser:
    def __init__(self, named: dict[str, AvroType]):
        self.named = dict(named)
        self.defining: set[str] = set()

    def parse(self, s, namespace: str | None, depth: int) -> AvroType:
        if depth > MAX_DEPTH:
            raise SchemaError(f"the schema nests deeper than {MAX_DEPTH} levels")
        if isinstance(s, str):
            if s in PRIMITIVES:
                return AvroType(s)
            full = _fullname(s, namespace)
            for candidate in (full, s):
                if candidate in self.defining:
                    raise SchemaError(f"{candidate} refers to itself: a recursive schema has no Arrow type")
                if candidate in self.named:
                    return self.named[candidate]
            raise SchemaError(f"unknown type {s!r}")
        if isinstance(s, list):
            branches = [self.parse(b, namespace, depth + 1) for b in s]
            kinds = [b.name or b.type for b in branches]
            if any(b.type == "union" for b in branches) or len(set(kinds)) != len(kinds):
                raise SchemaError(f"a union may not hold another union or the same type twice: {kinds}")
            return AvroType("union", branches=branches)
        if not isinstance(s, dict) or "type" not in s:
            raise SchemaError(f"not an Avro schema: {json.dumps(s)[:200]}")
        t = s["type"]
        if t in NAMED:
            return self._named(s, t, namespace, depth)
        if t == "array":
            return self._logical(AvroType("array", items=self.parse(s.get("items"), namespace, depth + 1)), s)
        if t == "map":
            return self._logical(AvroType("map", items=self.parse(s.get("values"), namespace, depth + 1)), s)
        if isinstance(t, str) and t in PRIMITIVES:
            return self._logical(AvroType(t), s)
        return self.parse(t, namespace, depth + 1)  # {"type": "SomeName"} or {"type": {...}}

    def _named(self, s: dict, t: str, namespace: str | None, depth: int) -> AvroType:
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"a {t} needs a name")
        ns = s.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
        full = _fullname(name, ns)
        if full in self.named and full not in self.defining:
            raise SchemaError(f"{full} is defined twice")
        aliases = tuple(_fullname(a, ns) for a in s.get("aliases", ()) or ())
        if t == "enum":
            symbols = tuple(s.get("symbols", ()))
            if not symbols or len(set(symbols)) != len(symbols):
                raise SchemaError(f"enum {full}: symbols must be unique and not empty")
            out = AvroType("enum", name=full, aliases=aliases, symbols=symbols, enum_default=s.get("default"))
            if out.enum_default is not None and out.enum_default not in symbols:
                raise SchemaError(f"enum {full}: default {out.enum_default!r} is not a symbol")
        elif t == "fixed":
            size = s.get("size")
            if not isinstance(size, int) or size < 0:
                raise SchemaError(f"fixed {full}: size must be a non-negative integer")
            out = self._logical(AvroType("fixed", name=full, aliases=aliases, size=size), s)
        else:
            out = AvroType("record", name=full, aliases=aliases)
            self.defining.add(full)
            seen = set()
            for f in s.get("fields", ()):
                fname = f.get("name") if isinstance(f, dict) else None
                if not isinstance(fname, str) or fname in seen:
                    raise SchemaError(f"record {full}: a field without a name, or named twice ({fname!r})")
                seen.add(fname)
                out.fields.append(AvroField(fname, self.parse(f.get("type"), ns, depth + 1),
                                            f.get("default", NO_DEFAULT), tuple(f.get("aliases", ()) or ())))
            self.defining.discard(full)
        self.named[full] = out
        return out

    @staticmethod
    def _logical(t: AvroType, s: dict) -> AvroType:
        logical = s.get("logicalType")
        if logical not in LOGICAL_TYPES or t.type not in LOGICAL_TYPES[logical]:
            return t
        if logical == "decimal":
            precision, scale = s.get("precision"), s.get("scale", 0)
            max_digits = 76 if t.type == "bytes" else int((8 * t.size - 1) * 0.30103)
            if not (isinstance(precision, int) and isinstance(scale, int) and 0 < precision <= min(76, max_digits)
                    and 0 <= scale <= precision):
                return t
            t.precision, t.scale = precision, scale
        if logical == "uuid" and t.type == "fixed" and t.size != 16:
            return t
        if logical == "duration" and t.size != 12:
            return t
        t.logical = logical
        return t


def parse(schema, named: dict[str, AvroType] | None = None) -> AvroType:
    """An Avro schema (JSON text or its parsed form) as a tree; ``named``: types defined by other
    schemas it refers to (the registry's references)."""
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except ValueError:
            if isinstance(schema, str) and schema in PRIMITIVES:
                return AvroType(schema)
            raise SchemaError(f"not JSON: {str(schema)[:200]!r}") from None
    return _Parser(named or {}).parse(schema, None, 0)


def parse_with_names(schema, named: dict[str, AvroType] | None = None) -> tuple[AvroType, dict[str, AvroType]]:
    """Like ``parse``, also handing back every named type known afterwards (for the schemas that
    refer to this one)."""
    p = _Parser(named or {})
    if isinstance(schema, (str, bytes)):
        schema = json.loads(schema)
    return p.parse(schema, None, 0), p.named


def canonical_form(t: AvroType, _seen: set | None = None) -> str:
    """The specification's Parsing Canonical Form."""
    seen = set() if _seen is None else _seen
    if t.type in PRIMITIVES:
        return json.dumps(t.type)
    if t.type == "union":
        return "[" + ",".join(canonical_form(b, seen) for b in t.branches) + "]"
    if t.type == "array":
        return '{"type":"array","items":' + canonical_form(t.items, seen) + "}"
    if t.type == "map":
        return '{"type":"map","values":' + canonical_form(t.items, seen) + "}"
    if t.name in seen:
        return json.dumps(t.name)
    seen.add(t.name)
    head = '{"name":' + json.dumps(t.name) + ',"type":' + json.dumps(t.type)
    if t.type == "enum":
        return head + ',"symbols":' + json.dumps(list(t.symbols), separators=(",", ":")) + "}"
    if t.type == "fixed":
        return head + ',"size":' + str(t.size) + "}"
    fields = ",".join('{"name":' + json.dumps(f.name) + ',"type":' + canonical_form(f.type, seen) + "}"
                      for f in t.fields)
    return head + ',"fields":[' + fields + "]}"


_FINGERPRINTS: "weakref.WeakKeyDictionary[AvroType, str]" = weakref.WeakKeyDictionary()


def fingerprint(t: AvroType) -> str:
    """SHA-256 of ``resolution_form``: equal for two schemas only when resolution and the Arrow
    layout cannot tell them apart (the key of every compiled-program and layout cache); computed
    once a parsed schema (the decoder asks for it every call)."""
    found = _FINGERPRINTS.get(t)
    if found is None:
        found = _FINGERPRINTS[t] = hashlib.sha256(resolution_form(t).encode()).hexdigest()
    return found


def resolution_form(t: AvroType, _seen: set | None = None) -> str:
    """Every attribute of the parsed schema, as JSON text: the canonical form drops aliases,
    defaults and logical types, yet resolution reads them (a field found by its alias, a default
    filled in, a decimal's scale), so a cache keyed on less would hand one reader's program to
    another.  Walked over the dataclasses' own fields, so an attribute added later is covered; a
    named type is spelled out once, then named (as in the canonical form)."""
    seen = set() if _seen is None else _seen
    if t.name is not None:
        if t.name in seen:
            return json.dumps(t.name)
        seen.add(t.name)
    doc = {}
    for f in dataclasses.fields(t):
        value = getattr(t, f.name)
        if isinstance(value, AvroType):
            value = resolution_form(value, seen)
        elif f.name == "branches":
            value = [resolution_form(b, seen) for b in value]
        elif f.name == "fields":
            value = [{"name": x.name, "aliases": list(x.aliases), "type": resolution_form(x.type, seen),
                      "default": None if x.default is NO_DEFAULT else ["default", x.default]} for x in value]
        doc[f.name] = value
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=repr)
