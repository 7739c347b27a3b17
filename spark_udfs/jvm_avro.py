"""``kbatch_from_avro`` on the JVM path: the schema compiled on the driver by pykbatch (its writer and
reader resolved into the program csrc/kb_avro.c runs, its reader laid out as columns), packed and
defined in the driver's JVM as a function of its own (``pykbatch.kbatch_from_avro_<digest>``,
io.pykbatch.spark.AvroFunction) which the executors run with the core, no Python worker.  The Spark
type is the Python function's (``value_functions._spark_type``), and each column is converted as
``value_functions.spark_compatible`` converts it (CONVERSIONS).  What the JVM does not serve --
``with_culprits``, a decimal wider than 38 digits -- stays on the Python path."""
from __future__ import annotations

import hashlib
from typing import Any, Mapping, Optional

import numpy as np
import pyarrow as pa

# per column: how Spark's value is made from the core's (AvroDecoder.java's codes)
PLAIN, STRING, ENUM, MILLIS_TO_MICROS, NANOS_TO_MICROS, MICROS_TO_NANOS, MAP, SCALED = range(8)


def _conversion(column) -> tuple[int, int] | None:
    """(code, aux) of one column of a Layout, None when the JVM has no conversion for it."""
    t = column.arrow
    if pa.types.is_dictionary(t):
        return ENUM, 0
    if pa.types.is_string(t):
        return STRING, 0
    if pa.types.is_timestamp(t):
        return {"ms": (MILLIS_TO_MICROS, 0), "us": (PLAIN, 0), "ns": (NANOS_TO_MICROS, 0)}.get(t.unit)
    if pa.types.is_time64(t):
        return (MICROS_TO_NANOS, 0) if t.unit == "us" else None
    if pa.types.is_map(t):
        return MAP, 0
    if pa.types.is_decimal(t):
        return (SCALED, t.scale) if t.bit_width == 128 else None
    return PLAIN, 0


def _pack(program, layout) -> bytes:
    """The program and the columns as kb_jni.c's avro_unpack reads them (AH_* header, then tables)."""
    header = np.array([len(program.nodes), len(program.children), len(program.table), len(program.default_spans),
                       len(program.defaults), program.root, len(layout.specs), layout.root.index,
                       len(layout.column_children)], "<i4")
    head = header.tobytes() + np.asarray(program.nodes, "<i4").tobytes() + np.asarray(program.children, "<i4").tobytes() \
        + np.asarray(program.table, "<i4").tobytes()
    head += bytes(-len(head) % 8)  # the int64 spans start 8-aligned
    defaults = bytes(program.defaults)
    return head + np.asarray(program.default_spans, "<i8").tobytes() + defaults + bytes(-len(defaults) % 4) \
        + np.asarray(layout.specs, "<i4").tobytes() + np.asarray(layout.column_children, "<i4").tobytes()


def define(spark, json_format_schema: str, options: Mapping[str, Any], mode: str, spark_type: str) -> str | None:
    """The name of the JVM function decoding with this schema and options (defined in ``spark``'s
    JVM; ``mode`` PERMISSIVE / FAILFAST, ``spark_type`` the Python function's, as JSON), or None
    when the JVM does not serve them (the Python function then does)."""
    from pykbatch.values.decode import _as_avro, _layout, _program, _refusal
    reader = options.get("reader.schema") or None
    trailing = str(options.get("allow.trailing.bytes", "false")).lower() == "true"
    writer_type = _as_avro(json_format_schema)
    layout = _layout(_as_avro(reader) if reader else writer_type)
    program = _program(writer_type, layout)
    if _refusal(program) is not None:
        return None  # the Python function names why no datum can be read
    conversions = [_conversion(c) for c in layout.columns]
    if any(c is None for c in conversions):
        return None
    blob = _pack(program, layout)
    symbols = ["\0".join(c.reader.symbols) if pa.types.is_dictionary(c.arrow) else None for c in layout.columns]
    digest = hashlib.sha256(blob + spark_type.encode() + repr((symbols, conversions, mode, trailing)).encode())
    name = f"kbatch_from_avro_{digest.hexdigest()[:16]}"
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    ints = gateway.new_array(jvm.int, 2 * len(conversions))
    for k, (code, aux) in enumerate(conversions):
        ints[2 * k], ints[2 * k + 1] = code, aux
    names = gateway.new_array(jvm.java.lang.String, len(symbols))
    for k, s in enumerate(symbols):
        names[k] = s
    jvm.io.pykbatch.spark.AvroFunction.define(name, blob, spark_type, ints, names, mode == "FAILFAST", trailing)
    return name
