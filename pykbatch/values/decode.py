"""Values (or keys) as their registered schemas say, a column at a time: ``decode_values`` reads
the schema registry's framing of every value, fetches each schema id once, resolves every
writer's schema against one reader's schema (the user's, the subject's latest, or the newest id
seen) and decodes the whole column natively into one Arrow column.  A value that cannot be read
is a null in that column and a ``ValueCulprit`` naming its row, the rule and the byte -- never
an exception, and never a lost neighbour."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from pykbatch import _native, columns
from pykbatch.rules import BY_ID, RULES, render
from pykbatch.values import avro_schema
from pykbatch.values.arrow_columns import layout_array
from pykbatch.values.avro_program import Layout, Program, compile_program
from pykbatch.values.avro_schema import AvroType, SchemaError
from pykbatch.values.registry import RegisteredSchema, as_registry

FRAMINGS = tuple(_native.FRAMINGS)


class ValueCulprit(NamedTuple):
    """One value that could not be read as its schema says."""
    row: int
    column: str
    schema_id: int | None
    rule: str
    code: int
    position: int | None
    message: str


@dataclass
class DecodedValues:
    """The decoded column (nulls where a value was null or a culprit), each row's schema id, and
    the culprits."""
    values: pa.Array
    schema_ids: pa.Array
    culprits: list[ValueCulprit]
    reader_schema: str | None = None

    @property
    def ok(self) -> bool:
        return not self.culprits

    def culprit_rows(self) -> np.ndarray:
        return np.array([c.row for c in self.culprits], np.int64)

    def culprits_table(self) -> pa.Table:
        return pa.Table.from_pylist([c._asdict() for c in self.culprits], schema=pa.schema(list(columns.VALUE_CULPRIT)))

    def __repr__(self) -> str:
        return f"<DecodedValues {len(self.values)} rows, {len(self.culprits)} culprits, {self.values.type}>"


# ---- compiled programs, per process (a Spark executor's worker keeps them between tasks) ----

_CACHE_LOCK = threading.Lock()
_LAYOUTS: dict[str, Layout] = {}
_PROGRAMS: dict[tuple[str, str], Program | SchemaError] = {}
_PARSED: dict[tuple[Any, int | None], AvroType] = {}


def _layout(reader: AvroType) -> Layout:
    key = avro_schema.fingerprint(reader)
    found = _LAYOUTS.get(key)
    if found is None:
        found = Layout(reader)
        with _CACHE_LOCK:
            _LAYOUTS[key] = found
    return found


def _program(writer: AvroType, layout: Layout) -> Program | SchemaError:
    key = (avro_schema.fingerprint(writer), avro_schema.fingerprint(layout.reader))
    found = _PROGRAMS.get(key)
    if found is None:
        try:
            found = compile_program(writer, layout)
        except SchemaError as e:
            found = e
        with _CACHE_LOCK:
            _PROGRAMS[key] = found
    return found


def parse_registered(rs: RegisteredSchema, registry=None) -> AvroType:
    """An Avro schema from the registry, its references parsed first."""
    key = (rs.schema, rs.references)
    found = _PARSED.get(key)
    if found is None:
        named: dict[str, AvroType] = {}
        if rs.references and registry is not None:
            for _, ref in registry.referenced(rs):
                _, named = avro_schema.parse_with_names(ref.schema, named)
        found = avro_schema.parse(rs.schema, named)
        with _CACHE_LOCK:
            _PARSED[key] = found
    return found


# ---- the input column ----

def binary_column(data, column: str = "value") -> pa.Array:
    """``data``'s values as one Arrow binary array: a table's (or record batch's) ``column``, an
    array, a list of bytes, or Kafka record bytes (decoded with ``to_arrow``)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = _native.to_arrow(data)
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        if column not in data.column_names:
            raise KeyError(f"no column {column!r} (columns: {', '.join(data.column_names)})")
        data = data.column(column)
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks() if data.num_chunks != 1 else data.chunk(0)
    if isinstance(data, (list, tuple)):
        data = pa.array(data, pa.binary())
    if not isinstance(data, pa.Array):
        raise TypeError(f"values come as an Arrow table/array, a list of bytes or Kafka record bytes, not {type(data).__name__}")
    t = data.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        data = data.view(pa.binary() if pa.types.is_string(t) else pa.large_binary())
    elif not (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        data = data.cast(pa.large_binary())  # binary_view and friends
    return data


# ---- culprits ----

def _fault_culprit(row: int, column: str, schema_id, rule_index: int, position: int, args, reason: str | None = None):
    rule = RULES[rule_index]
    if rule.id in ("value.schema_mismatch", "value.schema_unknown"):
        message = rule.message(schema_id=schema_id, reason=reason or "")
    else:
        message = render(rule, [int(a) for a in args], "")[0]
    return ValueCulprit(row, column, schema_id, rule.id, rule.code, int(position), message)


def _rule_culprit(row: int, column: str, schema_id, rule_id: str, reason: str, position: int | None = None):
    rule = BY_ID[rule_id]
    return ValueCulprit(row, column, schema_id, rule_id, rule.code, position, rule.message(schema_id=schema_id, reason=reason))


# ---- decoding ----

def decode_values(data, registry=None, *, column: str = "value", reader_schema=None, subject: str | None = None,
                  framing: str = "confluent", allow_trailing: bool = False) -> DecodedValues:
    """Decode Confluent-framed (magic byte 0, schema id) Avro values into one Arrow column.

    ``registry``: a ``SchemaRegistry``, its URL, a config mapping under the Confluent clients'
    names (``url``/``schema.registry.url``, ``basic.auth.user.info``, ``ssl.ca.location``...), or
    ``{schema_id: schema}``.  ``reader_schema``: the shape of the output (Avro JSON); else the
    latest version of ``subject``, else the newest schema id among the values.  Every writer's
    schema is resolved against it by Avro's rules (fields added with defaults, removed, promoted).
    ``column``: which column of a table (``"key"`` for keys).  A value followed by bytes its
    schema does not read is a culprit (``value.trailing_bytes``) unless ``allow_trailing``."""
    if framing not in ("confluent",):
        raise ValueError(f"framing {framing!r}: decode_values reads the Confluent framing of Avro values")
    registry = as_registry(registry)
    if registry is None:
        raise ValueError("decode_values needs a registry (a SchemaRegistry, its URL, or {schema_id: schema})")
    arr = binary_column(data, column)
    n = len(arr)
    ids, payloads, frame_rules, frame_pos, frame_args = _native.read_frames(arr, framing)
    culprits: list[ValueCulprit] = []
    for row in np.flatnonzero(frame_rules > 0):
        culprits.append(_fault_culprit(int(row), column, None, int(frame_rules[row]), int(frame_pos[row]), frame_args[row]))
    framed = frame_rules == 0
    framed_ids = ids[framed]
    # one schema id for the whole column is the common case: no sort for it
    distinct = framed_ids[:1] if len(framed_ids) and (framed_ids == framed_ids[0]).all() else np.unique(framed_ids)
    writers: dict[int, AvroType | tuple[str, str]] = {}  # id -> schema, or (rule, why it cannot be had)
    for sid in distinct.tolist():
        rs = registry.schema(sid)
        if rs is None:
            writers[sid] = ("value.schema_unknown", f"the registry at {registry.url} has no schema {sid}")
        elif rs.schema_type != "AVRO":
            writers[sid] = ("value.schema_mismatch", f"it is a {rs.schema_type} schema, and this reads Avro")
        else:
            try:
                writers[sid] = parse_registered(rs, registry)
            except SchemaError as e:
                writers[sid] = ("value.schema_mismatch", f"the registry's schema {sid} is not valid Avro: {e}")
    reader = _reader(reader_schema, registry, subject, writers)
    if reader is None:  # nothing decodable and no reader named: a column of nulls
        for row in np.flatnonzero(framed):
            sid = int(ids[row])
            culprits.append(_rule_culprit(int(row), column, sid, *writers[sid], 1))  # type: ignore[misc]
        culprits.sort(key=lambda c: c.row)
        return DecodedValues(pa.nulls(n), _ids_array(ids, framed), culprits)
    layout = _layout(reader)
    programs: list[Program] = []
    index_of: dict[int, int] = {}
    refused: dict[int, tuple[str, str]] = {}
    for sid, w in writers.items():
        if isinstance(w, tuple):
            refused[sid] = w
            continue
        p = _program(w, layout)
        if isinstance(p, SchemaError):
            refused[sid] = ("value.schema_mismatch", str(p))
        elif p.problems:
            refused[sid] = ("value.schema_mismatch", "; ".join(p.problems))
        else:
            index_of[sid] = len(programs)
            programs.append(p)
    which = np.full(n, -1, np.int32)
    if len(index_of) == 1 and len(distinct) == 1:
        which[framed] = 0
    elif index_of:
        keys = np.array(sorted(index_of), np.int64)
        slots = np.array([index_of[k] for k in keys.tolist()], np.int32)
        at = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
        hit = framed & (keys[at] == ids)
        which[hit] = slots[at[hit]]
    for row in np.flatnonzero(framed & (which < 0)):
        sid = int(ids[row])
        rule_id, reason = refused[sid]
        culprits.append(_rule_culprit(int(row), column, sid, rule_id, reason, 1))
    cols = _native.AvroColumns(layout.specs, layout.column_children, layout.root.index, n)
    rules, positions, args = _native.avro_decode(arr, payloads, which, programs, cols, allow_trailing)
    for row in np.flatnonzero(rules):
        sid = int(ids[row])
        reason = None
        if RULES[rules[row]].id == "value.schema_mismatch":
            reason = programs[which[row]].mismatch_reason(int(args[row][0]), int(args[row][1]))
        culprits.append(_fault_culprit(int(row), column, sid, int(rules[row]), int(positions[row]), args[row], reason))
    culprits.sort(key=lambda c: c.row)
    return DecodedValues(layout_array(layout, cols), _ids_array(ids, framed), culprits, avro_schema.canonical_form(reader))


def decode_avro(data, schema, *, reader_schema=None, column: str = "value", allow_trailing: bool = False) -> DecodedValues:
    """Decode unframed Avro datums (Spark's ``from_avro``: every value written with ``schema``)
    into one Arrow column, read as ``reader_schema`` when given."""
    writer = _as_avro(schema)
    reader = _as_avro(reader_schema) if reader_schema is not None else writer
    arr = binary_column(data, column)
    n = len(arr)
    layout = _layout(reader)
    p = _program(writer, layout)
    culprits: list[ValueCulprit] = []
    if isinstance(p, SchemaError) or p.problems:
        reason = str(p) if isinstance(p, SchemaError) else "; ".join(p.problems)
        for row in np.flatnonzero(~np.asarray(arr.is_null())):
            culprits.append(_rule_culprit(int(row), column, None, "value.schema_mismatch", reason, 0))
        which = np.full(n, -1, np.int32)
        programs = []
    else:
        which = np.zeros(n, np.int32)
        programs = [p]
    cols = _native.AvroColumns(layout.specs, layout.column_children, layout.root.index, n)
    rules, positions, args = _native.avro_decode(arr, np.zeros(n, np.int32), which, programs, cols, allow_trailing)
    for row in np.flatnonzero(rules):
        reason = None
        if RULES[rules[row]].id == "value.schema_mismatch":
            reason = p.mismatch_reason(int(args[row][0]), int(args[row][1]))
        culprits.append(_fault_culprit(int(row), column, None, int(rules[row]), int(positions[row]), args[row], reason))
    culprits.sort(key=lambda c: c.row)
    return DecodedValues(layout_array(layout, cols), pa.nulls(n, pa.int64()), culprits, avro_schema.canonical_form(reader))


def _as_avro(schema) -> AvroType:
    if isinstance(schema, AvroType):
        return schema
    if isinstance(schema, RegisteredSchema):
        return parse_registered(schema)
    key = (schema if isinstance(schema, (str, bytes)) else repr(schema), None)
    found = _PARSED.get(key)
    if found is None:
        found = avro_schema.parse(schema)
        _PARSED[key] = found
    return found


def _reader(reader_schema, registry, subject, writers) -> AvroType | None:
    if reader_schema is not None:
        return _as_avro(reader_schema)
    if subject:
        rs = registry.latest(subject)
        if rs is None:
            raise ValueError(f"subject {subject!r} has no versions in the registry at {registry.url}")
        if rs.schema_type != "AVRO":
            raise ValueError(f"subject {subject!r} holds {rs.schema_type} schemas: decode_values reads Avro")
        return parse_registered(rs, registry)
    usable = [sid for sid, w in writers.items() if isinstance(w, AvroType)]
    return writers[max(usable)] if usable else None  # type: ignore[return-value]


def _ids_array(ids: np.ndarray, framed: np.ndarray) -> pa.Array:
    return pa.array(ids, pa.int64(), mask=~framed)
