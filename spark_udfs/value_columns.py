"""Decoded value (and key) columns for the sources (``kafka-segment``, ``kafka-kbatch``): with
``valueDecoder=confluent`` each Arrow batch a source reads gains ``value_decoded`` (the reader
schema's struct, Spark types as ``kbatch_from_confluent`` gives them) and ``value_culprit`` (null,
or the rule, byte and message of a value that cannot be read) -- the same decoding as the UDFs,
done where the batch already is, with no second pass over the column.

Options (names case-insensitive): ``valueDecoder`` / ``keyDecoder`` = ``confluent``;
``valueSubject`` / ``keySubject`` (the output's shape: that subject's latest version) or
``valueReaderSchema`` / ``keyReaderSchema``; the registry's settings as ``schema.registry.url``,
``schema.registry.basic.auth.user.info``, ``schema.registry.ssl.ca.location``, ...
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

DECODERS = ("confluent",)
SIDES = ("value", "key")


def option_names() -> set[str]:
    """The options this module reads (lower case), for sources that refuse unknown ones."""
    names = set()
    for side in SIDES:
        names |= {f"{side}decoder", f"{side}subject", f"{side}readerschema"}
    return names


def is_registry_option(name: str) -> bool:
    return name.lower().startswith("schema.registry.")


@dataclass(frozen=True)
class ColumnDecoding:
    """One side's decoding, fixed on the driver (the reader schema's text) and run on executors."""
    side: str
    registry: tuple  # the registry's properties, as items (hashable, shipped with the plan)
    reader_schema: str

    @classmethod
    def from_options(cls, options: Mapping[str, Any], side: str) -> ColumnDecoding | None:
        opts = {k.lower(): v for k, v in dict(options).items()}
        decoder = opts.get(f"{side}decoder")
        if not decoder:
            return None
        if decoder.lower() not in DECODERS:
            raise ValueError(f"{side}Decoder is one of {DECODERS}, not {decoder!r}")
        registry = {k: v for k, v in dict(options).items() if is_registry_option(k)}
        if not any(k.lower() == "schema.registry.url" for k in registry):
            raise ValueError(f"{side}Decoder=confluent needs schema.registry.url")
        reader = opts.get(f"{side}readerschema")
        if not reader:
            subject = opts.get(f"{side}subject")
            if not subject:
                raise ValueError(f"{side}Decoder=confluent needs the output's shape when the query is planned: "
                                 f"{side}Subject (its latest version) or {side}ReaderSchema")
            from pykbatch.values import SchemaRegistry
            reg = SchemaRegistry.from_config({k.lower(): v for k, v in registry.items()})
            latest = reg.latest(subject)
            if latest is None:
                raise ValueError(f"{side}Subject {subject!r} has no versions in the registry at {reg.url}")
            if latest.schema_type != "AVRO" or latest.references:
                raise ValueError(f"{side}Subject {subject!r}: sources decode Avro without references "
                                 f"(use kbatch_from_confluent for others)")
            reader = latest.schema
        return cls(side, tuple(sorted((k.lower(), v) for k, v in registry.items())), reader)

    @functools.cached_property
    def fields(self) -> tuple[pa.Field, pa.Field]:
        """``<side>_decoded`` (the reader schema's Spark-compatible type) and ``<side>_culprit``."""
        from pykbatch.values.decode import _as_avro, _layout
        from spark_udfs.value_functions import _culprit_struct, spark_compatible
        arrow_type = _layout(_as_avro(self.reader_schema)).arrow_type
        if pa.types.is_union(arrow_type):
            raise ValueError("a reader schema whose top level is a union: decode with kbatch_from_confluent")
        decoded_type = spark_compatible(pa.nulls(0, arrow_type)).type
        return pa.field(f"{self.side}_decoded", decoded_type), pa.field(f"{self.side}_culprit", _culprit_struct())

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        from pykbatch.values import SchemaRegistry, decode_values
        from spark_udfs.value_functions import _result
        registry = SchemaRegistry.from_config(dict(self.registry))  # the executor's process-wide cache
        decoded = decode_values(batch.column(self.side), registry, column=self.side, reader_schema=self.reader_schema)
        both = _result(decoded, "PERMISSIVE", True)
        decoded_field, culprit_field = self.fields
        return pa.RecordBatch.from_arrays([*batch.columns, both.field("value"), both.field("culprit")],
                                          schema=batch.schema.append(decoded_field).append(culprit_field))


def decodings(options: Mapping[str, Any]) -> list[ColumnDecoding]:
    return [d for d in (ColumnDecoding.from_options(options, side) for side in SIDES) if d is not None]


def extend_schema(schema: pa.Schema, decs: list[ColumnDecoding]) -> pa.Schema:
    for d in decs:
        if d.side not in schema.names:
            raise ValueError(f"{d.side}Decoder: the source's rows have no {d.side} column in this mode")
        for f in d.fields:
            schema = schema.append(f)
    return schema


def decode_batches(batches, decs: list[ColumnDecoding]):
    """The source's Arrow batches with the decoded columns added."""
    for batch in batches:
        for d in decs:
            batch = d.apply(batch)
        yield batch
