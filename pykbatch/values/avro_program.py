"""Avro's schema resolution, compiled: a writer's schema and the reader's become the tables the
native decoder runs (csrc/kb_avro.h), and the reader's schema becomes the Arrow columns.

``Layout(reader)`` lays out the columns once per reader schema (a struct per record, a list per
array, a map as Arrow's list of key/value structs, a nullable union as its one other type with
nulls, any other union as a dense union).  ``compile_program(writer, layout)`` walks the writer's
schema beside the reader's by the specification's rules -- fields matched by name or alias,
int->long->float->double and string<->bytes promotions, a reader field the writer lacks filled
from its default, enum symbols and union branches mapped -- into nodes that say what the writer
wrote and which column it goes to.  What cannot be resolved becomes a node that fails the datum
that meets it with the reason (``value.schema_mismatch``): a writer union's branch the reader
lacks fails only the data that took that branch, as Avro's own resolving decoder does.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pykbatch import _native, columns
from pykbatch.values.avro_schema import NO_DEFAULT, AvroType, SchemaError

OP = _native.AVRO_OPS
KIND = _native.AVRO_COLUMN_KINDS
_PHYSICAL_KIND = {"null": "NULL", "boolean": "BOOL", "int": "INT32", "long": "INT64", "float": "FLOAT32",
                  "double": "FLOAT64", "bytes": "BINARY", "string": "BINARY"}
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
               ("float", "double"), ("string", "bytes"), ("bytes", "string")}
_MIN_BYTES = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8, "bytes": 1, "string": 1}


@dataclass(eq=False)
class Column:
    """One Arrow array of the reader's layout."""
    index: int
    kind: str
    arrow: pa.DataType
    reader: AvroType
    members: list[Column] = field(default_factory=list)  # struct fields, union members, a list's item
    width: int = 0


# unions of two numeric types read as the wider (Spark's SchemaConverters; logical types aside)
_NUMERIC_UNIONS = {frozenset(("int", "long")): "long", frozenset(("float", "double")): "double"}


def _is_decimal(t: AvroType) -> bool:
    return t.logical == "decimal"


class Layout:
    """The reader schema's columns: ``specs`` (kind, width, child, count) and ``column_children``
    as kb_avro_columns wants them, ``root`` the datum's column."""

    def __init__(self, reader: AvroType):
        self.reader = reader
        self._specs: list[list[int]] = []
        self._children: list[int] = []
        self.columns: list[Column] = []
        self.root = self._column(reader)
        self.specs = np.array(self._specs, np.int32).reshape(-1, 4)
        # kb_avro_check bounds members by the column count: the table holds at least that many
        self.column_children = np.zeros(max(len(self._children), len(self.columns)), np.int32)
        self.column_children[:len(self._children)] = self._children

    @property
    def arrow_type(self) -> pa.DataType:
        return self.root.arrow

    def _new(self, kind: str, arrow: pa.DataType, reader: AvroType, width: int = 0) -> Column:
        c = Column(len(self.columns), kind, arrow, reader, width=width)
        self.columns.append(c)
        self._specs.append([KIND[kind], width, -1, 0])
        return c

    def _members(self, c: Column, members: list[Column]) -> None:
        c.members = members
        if c.kind == "LIST":
            self._specs[c.index][2] = members[0].index
        else:
            self._specs[c.index][2:] = [len(self._children), len(members)]
            self._children.extend(m.index for m in members)

    def _column(self, t: AvroType) -> Column:
        if t.type == "union":
            non_null = [b for b in t.branches if b.type != "null"]
            if not non_null:
                return self._new("NULL", pa.null(), t)
            if len(non_null) == 1:  # nullable (or a union of one): the type itself, with nulls
                return self._column(non_null[0])
            widened = _NUMERIC_UNIONS.get(frozenset(b.type for b in non_null)) if len(non_null) == 2 else None
            if widened is not None:  # Spark's from_avro: int|long is a long, float|double a double
                return self._column(AvroType(widened))
            if len(t.branches) > 127:
                raise SchemaError("a union of more than 127 branches has no Arrow type")
            c = self._new("UNION", pa.null(), t)
            members = [self._column(b) for b in t.branches]
            c.arrow = pa.dense_union([pa.field(b.branch_name(), m.arrow) for b, m in zip(t.branches, members)],
                                     type_codes=list(range(len(members))))
            self._members(c, members)
            return c
        if t.type == "record":
            c = self._new("STRUCT", pa.null(), t)
            members = [self._column(f.type) for f in t.fields]
            c.arrow = pa.struct([pa.field(f.name, m.arrow) for f, m in zip(t.fields, members)])
            self._members(c, members)
            return c
        if t.type == "array":
            c = self._new("LIST", pa.null(), t)
            item = self._column(t.items)
            c.arrow = pa.list_(item.arrow)
            self._members(c, [item])
            return c
        if t.type == "map":
            c = self._new("LIST", pa.null(), t)
            entries = self._new("STRUCT", pa.null(), t)
            key = self._new("BINARY", pa.string(), AvroType("string"))
            value = self._column(t.items)
            c.arrow = columns.avro_map(value.arrow)
            entries.arrow = pa.struct([c.arrow.key_field, c.arrow.item_field])
            self._members(entries, [key, value])
            self._members(c, [entries])
            return c
        if _is_decimal(t):
            c = self._new("DECIMAL", columns.avro_decimal(t.precision, t.scale), t,
                          width=16 if t.precision <= 38 else 32)
            self._specs[c.index][3] = t.precision  # the core refuses a value with more digits
            return c
        if t.type == "enum":
            return self._new("INT32", columns.AVRO_ENUM, t)
        if t.type == "fixed":
            return self._new("FIXED", columns.avro_fixed(t.size), t, width=t.size)
        if t.type in _PHYSICAL_KIND:
            arrow = columns.AVRO_LOGICAL.get(t.logical) or columns.AVRO_PRIMITIVE[t.type]
            c = self._new(_PHYSICAL_KIND[t.type], arrow, t)
            if t.logical in ("time-millis", "time-micros"):
                self._specs[c.index][3] = 1  # the core refuses a time outside a day (value.time_of_day)
            return c
        raise SchemaError(f"no Arrow type for {t.type}")


class Program:
    """One writer schema read as the reader's: the node tables of kb_avro_program."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self._nodes: list[list[int]] = []
        self._children: list[int] = []
        self._table: list[int] = []
        self._defaults = bytearray()
        self._spans: list[tuple[int, int]] = []
        self.reasons: list[str] = []           # MISMATCH nodes' aux
        self._enum_nodes: dict[int, AvroType] = {}  # ENUM node -> writer enum (a symbol the reader lacks)
        self.problems: list[str] = []          # what fails every datum (no default, different names...)

    def finish(self, root: int) -> None:
        self.root = root
        self.nodes = np.array(self._nodes, np.int32).reshape(-1, 6)
        self.children = np.array(self._children or [0], np.int32)
        self.table = np.array(self._table or [0], np.int32)
        self.defaults = bytes(self._defaults)
        self.default_spans = np.array(self._spans or [(0, 0)], np.int64).reshape(-1, 2)
        self.n_defaults = len(self._spans)

    def mismatch_reason(self, node: int, index: int) -> str:
        """The words for a value.schema_mismatch fault the decoder met at ``node``."""
        if node < 0:
            return "the program wrote no value (a pykbatch bug: please report the schemas)"
        if node in self._enum_nodes:
            t = self._enum_nodes[node]
            return f"enum {t.name} symbol {t.symbols[index]!r} is not among the reader's symbols and it has no default"
        return self.reasons[self._nodes[node][4]]

    # -- building --

    def _node(self, op: str, col: int = -1, child: int = -1, count: int = 0, aux: int = 0, min_bytes: int = 0) -> int:
        self._nodes.append([OP[op], col, child, count, aux, min_bytes])
        return len(self._nodes) - 1

    def _set(self, i: int, **values) -> None:
        slots = ("op", "col", "child", "count", "aux", "min_bytes")
        for k, v in values.items():
            self._nodes[i][slots.index(k)] = v

    def _list(self, kids: list[int]) -> int:
        start = len(self._children)
        self._children.extend(kids)
        return start

    def mismatch(self, reason: str, fatal: bool = False) -> int:
        self.reasons.append(reason)
        if fatal:
            self.problems.append(reason)
        return self._node("MISMATCH", aux=len(self.reasons) - 1)

    def min_bytes(self, i: int) -> int:
        return self._nodes[i][5]

    # -- reading without writing (a writer field the reader lacks) --

    def skip(self, w: AvroType) -> int:
        if w.type == "union":
            i = self._node("UNION", min_bytes=1)
            kids = [self.skip(b) for b in w.branches]
            self._set(i, child=self._list(kids), count=len(kids))
            return i
        if w.type == "record":
            i = self._node("RECORD")
            kids = [self.skip(f.type) for f in w.fields]
            self._set(i, child=self._list(kids), count=len(kids), min_bytes=sum(map(self.min_bytes, kids)))
            return i
        if w.type in ("array", "map"):
            i = self._node(w.type.upper(), min_bytes=1)
            self._set(i, child=self.skip(w.items))
            return i
        if w.type == "enum":
            aux = len(self._table)
            self._table.extend(range(len(w.symbols)))
            return self._node("ENUM", count=len(w.symbols), aux=aux, min_bytes=1)
        if w.type == "fixed":
            return self._node("FIXED", count=w.size, min_bytes=w.size)
        return self._node(w.type.upper(), min_bytes=_MIN_BYTES[w.type])

    # -- resolution --

    def resolve(self, w: AvroType, r: AvroType, c: Column) -> int:
        if w.type == "union":
            i = self._node("UNION", min_bytes=1)
            kids = [self.resolve(b, r, c) for b in w.branches]
            self._set(i, child=self._list(kids), count=len(kids))
            return i
        if r.type == "union":
            k = _pick(w, r.branches)
            if k is None:
                return self.mismatch(f"the writer's {_describe(w)} is none of the reader's union {_describe(r)}")
            if c.kind == "UNION":
                i = self._node("BRANCH", col=c.index, count=k)
                inner = self.resolve(w, r.branches[k], c.members[k])
                self._set(i, child=inner, min_bytes=self.min_bytes(inner))
                return i
            return self.resolve(w, r.branches[k], c)  # a nullable union's column is its type's
        if w.type == "null" or r.type == "null":
            if w.type == r.type:
                return self._node("NULL", col=c.index)
            return self.mismatch(f"the writer's {_describe(w)} cannot be read as {_describe(r)}")
        if c.kind == "DECIMAL":
            if w.type not in ("bytes", "fixed") or (_is_decimal(w) and w.scale != r.scale):
                return self.mismatch(f"the writer's {_describe(w)} cannot be read as {_describe(r)}")
            if w.type != r.type or (w.type == "fixed" and r.size != w.size):  # Java: "Found bytes, expecting F8"
                return self.mismatch(f"the writer's {_describe(w)} cannot be read as {_describe(r)}")
            if w.type == "bytes":
                return self._node("DECIMAL_BYTES", col=c.index, min_bytes=1)
            return self._node("DECIMAL_FIXED", col=c.index, count=w.size, min_bytes=w.size)
        if w.type in _PHYSICAL_KIND and r.type in _PHYSICAL_KIND:
            if w.type != r.type and (w.type, r.type) not in _PROMOTIONS:
                return self.mismatch(f"the writer's {_describe(w)} cannot be read as {_describe(r)}")
            op = r.type if r.type in ("bytes", "string") else w.type  # UTF-8 is checked when read as a string
            return self._node(op.upper(), col=c.index, min_bytes=_MIN_BYTES[w.type])
        if w.type != r.type or (w.type in ("record", "enum", "fixed") and not _names_match(w, r)):
            return self.mismatch(f"the writer's {_describe(w)} cannot be read as {_describe(r)}")
        if w.type == "fixed":
            if w.size != r.size:
                return self.mismatch(f"fixed {r.name}: the writer's size {w.size} is not the reader's {r.size}")
            return self._node("FIXED", col=c.index, count=w.size, min_bytes=w.size)
        if w.type == "enum":
            aux = len(self._table)
            for s in w.symbols:
                self._table.append(r.symbols.index(s) if s in r.symbols else
                                   r.symbols.index(r.enum_default) if r.enum_default else -1)
            i = self._node("ENUM", col=c.index, count=len(w.symbols), aux=aux, min_bytes=1)
            self._enum_nodes[i] = w
            return i
        if w.type in ("array", "map"):
            i = self._node(w.type.upper(), col=c.index, min_bytes=1)
            target = c.members[0] if w.type == "array" else c.members[0].members[1]
            self._set(i, child=self.resolve(w.items, r.items, target))
            return i
        return self._record(w, r, c)

    def _record(self, w: AvroType, r: AvroType, c: Column) -> int:
        i = self._node("RECORD", col=c.index)
        by_name = {}
        for k, rf in enumerate(r.fields):
            for n in (rf.name, *rf.aliases):
                by_name.setdefault(n, k)
        kids, taken = [], set()
        for wf in w.fields:
            k = by_name.get(wf.name)
            if k is None or k in taken:
                kids.append(self.skip(wf.type))
                continue
            taken.add(k)
            kids.append(self.resolve(wf.type, r.fields[k].type, c.members[k]))
        for k, rf in enumerate(r.fields):
            if k in taken:
                continue
            if rf.default is NO_DEFAULT:
                kids.append(self.mismatch(f"the reader's field {r.name}.{rf.name} is not in the writer's schema "
                                          f"and has no default", fatal=True))
                continue
            encoded = bytearray()
            try:
                encode_default(rf.type, rf.default, encoded)
            except (SchemaError, TypeError, ValueError, OverflowError, struct.error) as e:
                raise SchemaError(f"field {r.name}.{rf.name}: its default {rf.default!r} is not a "
                                  f"{_describe(rf.type)} ({e})") from None
            d = self._node("DEFAULT", aux=len(self._spans))
            self._spans.append((len(self._defaults), len(encoded)))
            self._defaults += encoded
            self._set(d, child=self.resolve(rf.type, rf.type, c.members[k]))
            kids.append(d)
        self._set(i, child=self._list(kids), count=len(kids), min_bytes=sum(map(self.min_bytes, kids)))
        return i


def compile_program(writer: AvroType, layout: Layout) -> Program:
    """The program that reads data written with ``writer`` into ``layout``'s columns."""
    p = Program(layout)
    if layout.reader.type == "record" and writer.type == "record" and not _names_match(writer, layout.reader):
        p.problems.append(f"the writer's record {writer.name} is not the reader's {layout.reader.name} "
                          "(nor one of its aliases)")
    p.finish(p.resolve(writer, layout.reader, layout.root))
    return p


def _names_match(w: AvroType, r: AvroType) -> bool:
    return bool(w.names() & r.names()) or w.short_name in r.names()


def _same(w: AvroType, b: AvroType) -> bool:
    if w.type != b.type:
        return False
    return _names_match(w, b) if w.type in ("record", "enum", "fixed") else True


def _pick(w: AvroType, branches: list[AvroType]) -> int | None:
    """The reader union's branch a writer's type goes to: the first of the same type (and name),
    else the first it promotes to."""
    for k, b in enumerate(branches):
        if _same(w, b):
            return k
    for k, b in enumerate(branches):
        if (w.type, b.type) in _PROMOTIONS:
            return k
    return None


def _describe(t: AvroType) -> str:
    if t.type == "union":
        return "[" + ", ".join(_describe(b) for b in t.branches) + "]"
    if t.name:
        return f"{t.type} {t.name}"
    if t.logical:
        return f"{t.type} ({t.logical})"
    if t.type in ("array", "map"):
        return f"{t.type} of {_describe(t.items)}"
    return t.type


# ---- a field's default, in Avro's binary encoding (the decoder reads it like a datum) ----

def _long(v: int, out: bytearray) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or not -(1 << 63) <= v < (1 << 63):
        raise SchemaError(f"{v!r} is not a long")
    z = ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def encode_default(t: AvroType, v, out: bytearray) -> None:
    """``v`` (a default as JSON gives it) encoded as ``t``: bytes and fixed defaults are strings of
    code points 0-255, a union's default is its first branch's (the specification; a default that
    fits a later branch is taken too, as Avro 1.12 does)."""
    if t.type == "union":
        for k, b in enumerate(t.branches):
            trial = bytearray()
            try:
                encode_default(b, v, trial)
            except (SchemaError, TypeError, ValueError, OverflowError, struct.error):
                continue
            _long(k, out)
            out += trial
            return
        raise SchemaError(f"{v!r} fits no branch")
    if t.type == "null":
        if v is not None:
            raise SchemaError(f"{v!r} is not null")
    elif t.type == "boolean":
        if not isinstance(v, bool):
            raise SchemaError(f"{v!r} is not a boolean")
        out.append(1 if v else 0)
    elif t.type in ("int", "long"):
        if t.type == "int" and isinstance(v, int) and not -(1 << 31) <= v < (1 << 31):
            raise SchemaError(f"{v!r} is not an int")
        _long(v, out)
    elif t.type in ("float", "double"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SchemaError(f"{v!r} is not a number")
        out += struct.pack("<f" if t.type == "float" else "<d", float(v))
    elif t.type in ("bytes", "string", "fixed"):
        if not isinstance(v, str):
            raise SchemaError(f"{v!r} is not a string")
        raw = v.encode("utf-8") if t.type == "string" else v.encode("latin-1")
        if t.type == "fixed":
            if len(raw) != t.size:
                raise SchemaError(f"{v!r} is not {t.size} bytes")
        else:
            _long(len(raw), out)
        out += raw
    elif t.type == "enum":
        if v not in t.symbols:
            raise SchemaError(f"{v!r} is not a symbol")
        _long(t.symbols.index(v), out)
    elif t.type == "array":
        if not isinstance(v, list):
            raise SchemaError(f"{v!r} is not an array")
        if v:
            _long(len(v), out)
            for item in v:
                encode_default(t.items, item, out)
        out.append(0)
    elif t.type == "map":
        if not isinstance(v, dict):
            raise SchemaError(f"{v!r} is not a map")
        if v:
            _long(len(v), out)
            for key, item in v.items():
                encode_default(AvroType("string"), key, out)
                encode_default(t.items, item, out)
        out.append(0)
    elif t.type == "record":
        if not isinstance(v, dict):
            raise SchemaError(f"{v!r} is not a record")
        for f in t.fields:
            fv = v.get(f.name, f.default)
            if fv is NO_DEFAULT:
                raise SchemaError(f"field {f.name} missing")
            encode_default(f.type, fv, out)
    else:
        raise SchemaError(f"no default for {t.type}")
