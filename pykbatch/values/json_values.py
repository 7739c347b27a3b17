"""Confluent-framed JSON Schema values into Arrow: each value parsed (``json``), checked against
its writer's schema (``jsonschema``, the draft its ``$schema`` names), and laid out as the reader
schema says -- an object's properties as a struct, arrays as lists, a type with ``null`` nullable;
what has no single type (``oneOf``, ``anyOf``, an object without properties) is kept as JSON text.
"""
from __future__ import annotations

import json

import pyarrow as pa

from pykbatch import columns

_VALIDATORS: dict[str, object] = {}


def parse_schema(text: str) -> dict:
    schema = json.loads(text)
    if not isinstance(schema, (dict, bool)):
        raise ValueError("a JSON Schema is an object")
    return schema if isinstance(schema, dict) else {}


def validator(text: str):
    """A compiled validator for a registered schema (one a process)."""
    found = _VALIDATORS.get(text)
    if found is None:
        import jsonschema
        schema = parse_schema(text)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        cls.check_schema(schema)
        found = cls(schema)
        _VALIDATORS[text] = found
    return found


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    return [t] if isinstance(t, str) else list(t or [])


def arrow_type(schema: dict, _depth: int = 0) -> pa.DataType:
    """The Arrow type a JSON Schema lays values out as."""
    if _depth > 64 or not isinstance(schema, dict):
        return columns.JSON_TEXT
    types = [t for t in _types(schema) if t != "null"]
    if len(types) != 1 or any(k in schema for k in ("oneOf", "anyOf", "$ref")):
        return columns.JSON_TEXT
    t = types[0]
    if t == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return columns.JSON_TEXT
        return pa.struct([pa.field(name, arrow_type(sub, _depth + 1)) for name, sub in props.items()])
    if t == "array":
        items = schema.get("items")
        return pa.list_(arrow_type(items, _depth + 1)) if isinstance(items, dict) else columns.JSON_TEXT
    return columns.JSON_SCHEMA_SCALAR.get(t, columns.JSON_TEXT)


def to_row(value, t: pa.DataType):
    """A parsed JSON value in the Python form of ``t`` (properties it does not name dropped)."""
    if value is None:
        return None
    if t == columns.JSON_TEXT and not isinstance(value, str):
        return json.dumps(value, separators=(",", ":"))
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise ValueError(f"expected an object, got {type(value).__name__}")
        return {t.field(k).name: to_row(value.get(t.field(k).name), t.field(k).type) for k in range(t.num_fields)}
    if pa.types.is_list(t):
        if not isinstance(value, list):
            raise ValueError(f"expected an array, got {type(value).__name__}")
        return [to_row(v, t.value_type) for v in value]
    if pa.types.is_integer(t) and (isinstance(value, bool) or not isinstance(value, int)):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"expected an integer, got {value!r}")
    return value
