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


def _reader_columns(layout) -> tuple[list, list] | None:
    """(conversions, enum symbols) of a reader's columns, None when the JVM cannot convert one."""
    conversions = [_conversion(c) for c in layout.columns]
    if any(c is None for c in conversions):
        return None
    symbols = ["\0".join(c.reader.symbols) if pa.types.is_dictionary(c.arrow) else None for c in layout.columns]
    return conversions, symbols


def _java_columns(spark, conversions, symbols):
    """The conversions and symbols as the Java arrays define() takes."""
    gateway = spark.sparkContext._gateway
    ints = gateway.new_array(spark._jvm.int, 2 * len(conversions))
    for k, (code, aux) in enumerate(conversions):
        ints[2 * k], ints[2 * k + 1] = code, aux
    names = gateway.new_array(spark._jvm.java.lang.String, len(symbols))
    for k, s in enumerate(symbols):
        names[k] = s
    return ints, names


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
    columns = _reader_columns(layout)
    if columns is None:
        return None
    conversions, symbols = columns
    blob = _pack(program, layout)
    digest = hashlib.sha256(blob + spark_type.encode() + repr((symbols, conversions, mode, trailing)).encode())
    name = f"kbatch_from_avro_{digest.hexdigest()[:16]}"
    ints, names = _java_columns(spark, conversions, symbols)
    spark._jvm.io.pykbatch.spark.AvroFunction.define(name, blob, spark_type, ints, names, mode == "FAILFAST", trailing)
    return name


def define_confluent(spark, plan, spark_type: str) -> str | None:
    """The name of the JVM function reading Confluent-framed values as ``plan`` (value_functions'
    _ConfluentPlan) says: each version of its subject the registry holds now compiled against the
    reader (a version that is not Avro, or that the reader cannot read, refused as the Python
    function refuses it), or None when the JVM does not serve it (no subject: the writers' ids
    cannot be known before the values are read)."""
    from pykbatch.values import SchemaRegistry
    from pykbatch.values.avro_schema import SchemaError
    from pykbatch.values.decode import _layout, _program, _refusal, parse_registered
    if not plan.subject:
        return None
    layout = _layout(plan.reader_type)
    columns = _reader_columns(layout)
    if columns is None:
        return None
    conversions, symbols = columns
    registry = SchemaRegistry.from_config(plan.registry_props)
    writers: dict[int, tuple[bytes | None, str | None]] = {}
    for version in registry.versions(plan.subject):
        rs = registry.version(plan.subject, version)
        if rs is None or rs.id is None or rs.id in writers:
            continue
        if rs.schema_type != "AVRO":
            writers[rs.id] = (None, f"it is a {rs.schema_type} schema and the reader's is AVRO")
            continue
        try:
            program = _program(parse_registered(rs, registry), layout)
        except SchemaError as e:
            writers[rs.id] = (None, f"the registry's schema {rs.id} is not valid Avro: {e}")
            continue
        why = _refusal(program)
        writers[rs.id] = (None, why) if why is not None else (_pack(program, layout), None)
    ids = sorted(writers)
    digest = hashlib.sha256(spark_type.encode() + repr((symbols, conversions, plan.mode, plan.trailing, plan.subject,
                                                        registry.url, ids)).encode())
    for sid in ids:
        digest.update(writers[sid][0] or (writers[sid][1] or "").encode())
    name = f"kbatch_from_confluent_{digest.hexdigest()[:16]}"
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    ints, names = _java_columns(spark, conversions, symbols)
    java_ids = gateway.new_array(jvm.long, len(ids))
    sizes = gateway.new_array(jvm.int, len(ids))  # each id's program in `packed`; -1: refused
    refusals = gateway.new_array(jvm.java.lang.String, len(ids))
    for k, sid in enumerate(ids):
        blob, why = writers[sid]
        java_ids[k], sizes[k], refusals[k] = sid, -1 if blob is None else len(blob), why
    packed = b"".join(writers[sid][0] or b"" for sid in ids)
    ca_pem = None
    if registry.ca:
        with open(registry.ca, encoding="ascii") as f:  # read here: an executor need not hold the file
            ca_pem = f.read()
    timeout_ms = int(registry.timeout * 1000)
    jvm.io.pykbatch.spark.ConfluentFunction.define(
        name, spark_type, ints, names, plan.mode == "FAILFAST", plan.trailing, java_ids, packed, sizes, refusals,
        plan.subject, registry.url, registry.authorization, ca_pem, bool(registry.client_certificate), timeout_ms)
    return name
