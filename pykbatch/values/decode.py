"""Values (or keys) as their registered schemas say, a column at a time: ``decode_values`` reads
the schema registry's framing of every value, fetches each schema id once, resolves every
writer's schema against one reader's schema (the user's, the subject's latest, or the newest id
seen) and decodes the whole column natively into one Arrow column.  A value that cannot be read
is a null in that column and a ``ValueCulprit`` naming its row, the rule and the byte -- never
an exception, and never a lost neighbour."""
from __future__ import annotations

import json
import threading
from zlib import error as zlib_error
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from pykbatch import _native, columns
from pykbatch.errors import KafkaDataError as errors_KafkaDataError
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
    schema_id: int | str | None  # a registry's id, or (Glue) a schema version's UUID
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
        rows = [{**c._asdict(), "schema_id": None if c.schema_id is None else str(c.schema_id)} for c in self.culprits]
        return pa.Table.from_pylist(rows, schema=pa.schema(list(columns.VALUE_CULPRIT)))

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


def _rule_culprit(row: int, column: str, schema_id, rule_id: str, reason: str, position: int | None = None, **fields):
    rule = BY_ID[rule_id]
    return ValueCulprit(row, column, schema_id, rule_id, rule.code, position,
                        rule.message(schema_id=schema_id, reason=reason, **fields))


# ---- decoding ----

def decode_values(data, registry=None, *, column: str = "value", reader_schema=None, subject: str | None = None,
                  framing: str = "confluent", allow_trailing: bool = False) -> DecodedValues:
    """Decode Confluent-framed values (magic byte 0, schema id) into one Arrow column: Avro
    natively, Protobuf and JSON Schema through their libraries -- as the reader's schema says.

    ``registry``: a ``SchemaRegistry``, its URL, a config mapping under the Confluent clients'
    names (``url``/``schema.registry.url``, ``basic.auth.user.info``, ``ssl.ca.location``...), or
    ``{schema_id: schema}``.  ``reader_schema``: the shape of the output (Avro JSON, or a
    ``RegisteredSchema`` of any type); else the latest version of ``subject``, else the newest
    schema id among the values.  Every Avro writer's schema is resolved against it by Avro's rules
    (fields added with defaults, removed, promoted); Protobuf values are parsed as the reader's
    message (Protobuf's own compatibility); JSON values are checked against their writer's schema.
    ``column``: which column of a table (``"key"`` for keys).  A value followed by bytes its
    schema does not read is a culprit (``value.trailing_bytes``) unless ``allow_trailing``."""
    if framing not in ("confluent", "glue"):
        raise ValueError(f"framing {framing!r}: 'confluent' (magic byte 0, schema id) or 'glue' (AWS Glue)")
    registry = as_registry(registry) if framing == "confluent" else registry
    if registry is None:
        raise ValueError("decode_values needs a registry (a SchemaRegistry, its URL, or {schema_id: schema}; "
                         "for Glue a GlueSchemaRegistry)")
    arr = binary_column(data, column)
    ids, payloads, frame_rules, frame_pos, frame_args = _native.read_frames(arr, framing)
    culprits: list[ValueCulprit] = []
    for row in np.flatnonzero(frame_rules > 0):
        culprits.append(_fault_culprit(int(row), column, None, int(frame_rules[row]), int(frame_pos[row]), frame_args[row]))
    framed = frame_rules == 0
    labels = None
    if framing == "glue":
        from pykbatch.values import glue
        arr, framed = _inflate_glue(arr, framed, column, culprits)
        ids, labels = glue.frame_ids(arr, framed)
        registered = {sid: registry.schema_version(u) for sid, u in enumerate(labels)}
    else:
        framed_ids = ids[framed]
        # one schema id for the whole column is the common case: no sort for it
        distinct = framed_ids[:1] if len(framed_ids) and (framed_ids == framed_ids[0]).all() else np.unique(framed_ids)
        registered = {sid: registry.schema(sid) for sid in distinct.tolist()}
    reader = _reader_schema(reader_schema, registry, subject, registered)
    frames = _Frames(arr, ids, payloads, framed, column, registry, registered, labels)
    if reader is not None and reader.schema_type == "PROTOBUF":
        values = _decode_protobuf(frames, reader, culprits)
    elif reader is not None and reader.schema_type == "JSON":
        values = _decode_json(frames, reader, culprits)
    else:
        values = _decode_avro_framed(frames, reader, culprits, allow_trailing)
    culprits.sort(key=lambda c: c.row)
    schema_ids = _ids_array(ids, framed) if labels is None else \
        pa.array([labels[i] if f else None for i, f in zip(ids.tolist(), framed.tolist())], pa.string())
    return DecodedValues(values, schema_ids, culprits, reader.schema if reader is not None else None)


def _inflate_glue(arr: pa.Array, framed: np.ndarray, column: str, culprits: list) -> tuple[pa.Array, np.ndarray]:
    """Glue's zlib-compressed values inflated (and reframed uncompressed); one that does not
    inflate is a culprit."""
    from pykbatch.values import glue
    rows = glue.compressed_rows(arr, framed)
    if not len(rows):
        return arr, framed
    values = arr.to_pylist()
    framed = framed.copy()
    for row in rows.tolist():
        try:
            values[row] = glue.inflate(values[row])
        except (ValueError, zlib_error) as e:
            culprits.append(_rule_culprit(row, column, None, "value.compressed_invalid", str(e), glue.HEADER))
            framed[row] = False
    return pa.array(values, pa.binary()), framed


@dataclass
class _Frames:
    """A column's values after their framing was read, with the schemas of their ids."""
    arr: pa.Array
    ids: np.ndarray
    payloads: np.ndarray
    framed: np.ndarray
    column: str
    registry: Any
    registered: dict
    labels: list | None = None  # Glue: the schema version UUID of each small id

    def label(self, sid: int):
        """How a culprit names a schema: its id, or (Glue) its version's UUID."""
        return self.labels[sid] if self.labels is not None else sid

    def unknown(self, sid: int) -> tuple[str, str] | None:
        if self.registered.get(sid) is None:
            return "value.schema_unknown", f"the registry at {self.registry.url} has no schema {self.label(sid)}"
        return None

    def refusals(self, schema_type: str) -> dict[int, tuple[str, str]]:
        """The ids whose values a ``schema_type`` reader cannot read: unknown, or of another type."""
        out = {}
        for sid, rs in self.registered.items():
            why = self.unknown(sid)
            if why is None and rs.schema_type != schema_type:
                why = ("value.schema_mismatch", f"it is a {rs.schema_type} schema and the reader's is {schema_type}")
            if why is not None:
                out[sid] = why
        return out

    def rows_to_read(self, refused: dict[int, tuple[str, str]], culprits: list):
        """``(row, id)`` of each framed value whose schema can be had; the others become culprits."""
        for row in np.flatnonzero(self.framed).tolist():
            sid = int(self.ids[row])
            if sid in refused:
                culprits.append(_rule_culprit(row, self.column, self.label(sid), *refused[sid], 1))
            else:
                yield row, sid

    def refuse_rows(self, refused: dict[int, tuple[str, str]], culprits: list, rows=None) -> None:
        for row in np.flatnonzero(self.framed) if rows is None else rows:
            sid = int(self.ids[row])
            if sid in refused:
                culprits.append(_rule_culprit(int(row), self.column, self.label(sid), *refused[sid], 1))


def _decode_avro_framed(frames: _Frames, reader_rs: RegisteredSchema | None, culprits: list,
                        allow_trailing: bool) -> pa.Array:
    n = len(frames.arr)
    refused = frames.refusals("AVRO")
    writers: dict[int, AvroType] = {}
    for sid, rs in frames.registered.items():
        if sid not in refused:
            try:
                writers[sid] = parse_registered(rs, frames.registry)
            except SchemaError as e:
                refused[sid] = ("value.schema_mismatch", f"the registry's schema {frames.label(sid)} is not valid Avro: {e}")
    if reader_rs is None:  # nothing decodable and no reader named: a column of nulls
        frames.refuse_rows(refused, culprits)
        return pa.nulls(n)
    layout = _layout(parse_registered(reader_rs, frames.registry))
    programs: list[Program] = []
    index_of: dict[int, int] = {}
    for sid, w in writers.items():
        p = _program(w, layout)
        why = _refusal(p)
        if why is not None:
            refused[sid] = ("value.schema_mismatch", why)
        else:
            index_of[sid] = len(programs)
            programs.append(p)  # type: ignore[arg-type]
    ids, framed = frames.ids, frames.framed
    which = np.full(n, -1, np.int32)
    if len(index_of) == 1 and len(frames.registered) == 1:
        which[framed] = 0
    elif index_of:
        keys = np.array(sorted(index_of), np.int64)
        slots = np.array([index_of[k] for k in keys.tolist()], np.int32)
        at = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
        hit = framed & (keys[at] == ids)
        which[hit] = slots[at[hit]]
    frames.refuse_rows(refused, culprits, np.flatnonzero(framed & (which < 0)))
    return _run_avro(frames.arr, frames.payloads, which, programs, layout, allow_trailing, culprits, frames.column,
                     lambda row: frames.label(int(ids[row])))


def _run_avro(arr: pa.Array, payloads, which: np.ndarray, programs: list[Program], layout: Layout,
              allow_trailing: bool, culprits: list, column: str, schema_of) -> pa.Array:
    """The native decode of a column (row i by ``programs[which[i]]``, -1 a null), its faults as
    culprits (``schema_of(row)``: how a culprit names the row's schema)."""
    cols = _native.AvroColumns(layout.specs, layout.column_children, layout.root.index, len(arr))
    rules, positions, args = _native.avro_decode(arr, payloads, which, programs, cols, allow_trailing)
    for row in np.flatnonzero(rules).tolist():
        reason = None
        if RULES[rules[row]].id == "value.schema_mismatch":
            reason = programs[which[row]].mismatch_reason(int(args[row][0]), int(args[row][1]))
        culprits.append(_fault_culprit(row, column, schema_of(row), int(rules[row]), int(positions[row]), args[row],
                                       reason))
    return layout_array(layout, cols)


def _refusal(p: Program | SchemaError) -> str | None:
    """Why a compiled program reads no datum at all (None: it reads them)."""
    if isinstance(p, SchemaError):
        return str(p)
    return "; ".join(p.problems) if p.problems else None


def _decode_protobuf(frames: _Frames, reader_rs: RegisteredSchema, culprits: list) -> pa.Array:
    from google.protobuf.message import DecodeError
    from google.protobuf import message_factory

    from pykbatch.values import protobuf_values as pb
    fd = pb.file_descriptor(reader_rs, frames.registry)
    values = frames.arr.to_pylist()
    reader_desc = pb.message_at(fd, _reader_message_path(frames, values, reader_rs))
    cls = message_factory.GetMessageClass(reader_desc)
    t = pb.arrow_type(reader_desc)
    rows: list = [None] * len(frames.arr)
    for row, sid in frames.rows_to_read(frames.refusals("PROTOBUF"), culprits):
        value = values[row]
        try:
            _, start, indexes = _native.read_frame(value, "confluent-protobuf")
        except errors_KafkaDataError as e:
            culprits.append(ValueCulprit(int(row), frames.column, frames.label(sid), e.rule, e.code, e.offset, str(e)))
            continue
        try:
            writer_desc = pb.message_at(pb.file_descriptor(frames.registered[sid], frames.registry), indexes)
            if writer_desc.name != reader_desc.name:
                raise ValueError(f"the value is a {writer_desc.full_name}, the reader reads {reader_desc.full_name}")
            rows[row] = pb.to_row(cls.FromString(value[start:]))
        except (DecodeError, ValueError) as e:
            culprits.append(_rule_culprit(int(row), frames.column, frames.label(sid), "value.protobuf_invalid", str(e) or "does not parse",
                                          start, message=reader_desc.full_name))
    return pa.array(rows, t)


def _reader_message_path(frames: _Frames, values: list, reader_rs: RegisteredSchema) -> list[int]:
    """Which message of the reader's file the output is: the one the values of the reader's id
    name (else the first framed value's), the file's first when no value says."""
    candidates = np.flatnonzero(frames.framed & (frames.ids == (reader_rs.id if reader_rs.id is not None else -1)))
    if not len(candidates):
        candidates = np.flatnonzero(frames.framed)
    for row in candidates[:16]:
        try:
            return _native.read_frame(values[row], "confluent-protobuf")[2]
        except errors_KafkaDataError:
            continue
    return [0]


def _decode_json(frames: _Frames, reader_rs: RegisteredSchema, culprits: list) -> pa.Array:
    import json

    from pykbatch.values import json_values as js
    t = js.arrow_type(js.parse_schema(reader_rs.schema))
    rows: list = [None] * len(frames.arr)
    values = frames.arr.to_pylist()
    for row, sid in frames.rows_to_read(frames.refusals("JSON"), culprits):
        start = int(frames.payloads[row])
        try:
            doc = json.loads(values[row][start:])
        except ValueError as e:
            culprits.append(_rule_culprit(int(row), frames.column, frames.label(sid), "value.json_invalid", str(e), start))
            continue
        error = next(iter(js.validator(frames.registered[sid].schema).iter_errors(doc)), None)
        if error is not None:
            path = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            culprits.append(_rule_culprit(int(row), frames.column, frames.label(sid), "value.json_schema", error.message, start, path=path))
            continue
        try:
            rows[row] = js.to_row(doc, t)
        except ValueError as e:
            culprits.append(_rule_culprit(int(row), frames.column, frames.label(sid), "value.json_schema",
                                          f"{e} (the reader's schema)", start, path="$"))
    return pa.array(rows, t)


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
    why = _refusal(p)
    if why is not None:
        for row in np.flatnonzero(~np.asarray(arr.is_null())):
            culprits.append(_rule_culprit(int(row), column, None, "value.schema_mismatch", why, 0))
        which, programs = np.full(n, -1, np.int32), []
    else:
        which, programs = np.zeros(n, np.int32), [p]
    values = _run_avro(arr, np.zeros(n, np.int32), which, programs, layout, allow_trailing, culprits, column,
                       lambda row: None)
    culprits.sort(key=lambda c: c.row)
    return DecodedValues(values, pa.nulls(n, pa.int64()), culprits, avro_schema.canonical_form(reader))


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


def _reader_schema(reader_schema, registry, subject, registered) -> RegisteredSchema | None:
    """The schema the output is laid out as: the user's, the subject's latest, or the newest id's."""
    if reader_schema is not None:
        if isinstance(reader_schema, RegisteredSchema):
            return reader_schema
        if isinstance(reader_schema, AvroType):  # parsed already: known to parse_registered by a key of its own
            key = "pykbatch:" + avro_schema.fingerprint(reader_schema)
            _PARSED[(key, ())] = reader_schema
            return RegisteredSchema(None, key, "AVRO")
        text = reader_schema if isinstance(reader_schema, str) else json.dumps(reader_schema)
        return RegisteredSchema(None, text, "AVRO")
    if subject:
        rs = registry.latest(subject)
        if rs is None:
            raise ValueError(f"subject {subject!r} has no versions in the registry at {registry.url}")
        return rs
    known = [sid for sid, rs in registered.items() if rs is not None]  # the newest: by version, then id
    return registered[max(known, key=lambda sid: (registered[sid].version or 0, sid))] if known else None


def _ids_array(ids: np.ndarray, framed: np.ndarray) -> pa.Array:
    return pa.array(ids, pa.int64(), mask=~framed)
