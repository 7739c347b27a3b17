"""Values as their schemas say, in Spark: ``kbatch_from_avro`` (Spark's ``from_avro``: bare Avro
datums and a schema) and ``kbatch_from_confluent`` (Confluent-framed values, schemas from a
registry), vectorised Arrow UDFs over ``pykbatch.values``.

Their Spark type is the reader schema's, known when the query is planned: given
(``jsonFormatSchema`` / ``reader.schema``) or the latest version of ``subject`` in the registry,
fetched once on the driver.  On the executors each Python worker keeps its registry cache and
compiled programs from task to task (a schema id is fetched once per executor process, not per
micro-batch).  A value that cannot be read is a null (``mode`` PERMISSIVE, Spark's default), a
failed task (FAILFAST), or -- ``with_culprits=True`` -- a row ``struct<value, culprit>`` whose
culprit names the rule, byte and message.  SQL: ``register_value_decoder(spark, name, ...)``.

Arrow types Spark cannot hold become the ones ``from_avro`` gives: enums as strings, fixed as
binary, a union of several types as a struct of ``member0, member1, ...`` (its non-null branches),
time-millis as int, timestamps in microseconds.
"""
# No `from __future__ import annotations` here: PySpark reads the UDFs' type hints as objects.
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Optional, Union

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession
    ColumnOrName = Union[str, Column]

__all__ = ["kbatch_from_avro", "kbatch_from_confluent", "register_value_decoder", "spark_compatible"]

MODES = ("PERMISSIVE", "FAILFAST")
_READER_KEYS = ("reader.schema", "subject", "mode", "allow.trailing.bytes")


def spark_compatible(arr):
    """``arr`` with the Arrow types Spark's Arrow bridge cannot take replaced by from_avro's."""
    import pyarrow as pa
    import pyarrow.compute as pc
    t = arr.type
    if pa.types.is_dictionary(t):
        return arr.cast(t.value_type)
    if pa.types.is_fixed_size_binary(t):
        return arr.cast(pa.binary())
    if pa.types.is_time32(t):  # time-millis: from_avro's int (time-micros is Spark 4.3's TIME)
        return arr.cast(pa.int32())
    if pa.types.is_time64(t) and t.unit != "ns":  # Spark's TIME travels as nanoseconds
        return arr.cast(pa.time64("ns"))
    if pa.types.is_timestamp(t) and t.unit != "us":
        return pc.cast(arr, pa.timestamp("us", tz=t.tz), safe=False)
    if pa.types.is_union(t):  # as from_avro: a struct of the non-null branches, null for the null branch
        import numpy as np
        type_ids = np.asarray(arr.type_codes)
        offsets = np.asarray(arr.offsets)
        members, names, null_branch = [], [], np.zeros(len(arr), bool)
        for k in range(t.num_fields):
            mine = type_ids == t.type_codes[k]
            if pa.types.is_null(t.field(k).type):
                null_branch |= mine
                continue
            child = spark_compatible(arr.field(k))
            taken = child.take(pa.array(np.where(mine, offsets, 0), pa.int32())) if len(child) else pa.nulls(len(arr), child.type)
            members.append(pc.if_else(pa.array(mine), taken, pa.scalar(None, taken.type)))
            names.append(f"member{len(names)}")
        return pa.StructArray.from_arrays(members, names=names, mask=pa.array(null_branch) if null_branch.any() else None)
    if pa.types.is_struct(t):
        children = [spark_compatible(arr.field(k)) for k in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=[pa.field(t.field(k).name, c.type) for k, c in enumerate(children)],
                                          mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        keys, items = arr.keys, spark_compatible(arr.items)
        if items.type == arr.items.type:
            return arr
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t):
        values = spark_compatible(arr.values)
        if values.type == arr.values.type:
            return arr
        return pa.ListArray.from_arrays(arr.offsets, values, mask=arr.is_null() if arr.null_count else None)
    return arr


def _spark_type(arrow_type):
    """The Spark type of a decoded column (after ``spark_compatible``)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_type
    probe = spark_compatible(pa.nulls(1, arrow_type) if not pa.types.is_union(arrow_type) else
                             pa.UnionArray.from_dense(pa.array([0], pa.int8()), pa.array([0], pa.int32()),
                                                      [pa.nulls(1, arrow_type.field(k).type) for k in range(arrow_type.num_fields)],
                                                      [arrow_type.field(k).name for k in range(arrow_type.num_fields)]))
    return from_arrow_type(probe.type)


def _culprit_struct():
    import pyarrow as pa

    from pykbatch import columns
    return pa.struct([f for f in columns.VALUE_CULPRIT if f.name not in ("row", "column")])


def _result(decoded, mode: str, with_culprits: bool):
    import pyarrow as pa
    if decoded.culprits and mode == "FAILFAST":
        c = decoded.culprits[0]
        raise ValueError(f"{c.rule} ({c.code}) at byte {c.position} of row {c.row} of the batch: {c.message} "
                         f"({len(decoded.culprits)} values could not be read; mode PERMISSIVE makes them nulls)")
    values = spark_compatible(decoded.values)
    if not with_culprits:
        return values
    return pa.StructArray.from_arrays([values, _culprit_column(decoded, len(values))], names=["value", "culprit"])


def _culprit_column(decoded, n: int):
    """Each row's culprit as a struct, null where the value was read (culprits taken into place by
    their rows: no Python object a row)."""
    import numpy as np
    import pyarrow as pa
    table = decoded.culprits_table()
    fields = list(_culprit_struct())
    culprits = pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in fields], fields=fields)
    place = np.full(n, -1, np.int64)
    place[np.asarray(table.column("row"), np.int64)] = np.arange(table.num_rows)
    return culprits.take(pa.array(place, mask=place < 0))


def _mode(options: Mapping[str, Any]) -> str:
    mode = str(options.get("mode", "PERMISSIVE")).upper()
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    return mode


def _make_udf(run, arrow_type, with_culprits: bool, name: str):
    import pyarrow as pa
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.types import StructField, StructType

    from pyspark.sql.pandas.types import from_arrow_type
    spark_type = _spark_type(arrow_type)
    if with_culprits:
        spark_type = StructType([StructField("value", spark_type), StructField("culprit", from_arrow_type(_culprit_struct()))])

    def decode(value: pa.Array) -> pa.Array:
        return run(value)
    decode.__name__ = decode.__qualname__ = name
    return arrow_udf(spark_type)(decode)


def avro_udf(json_format_schema: str, options: Optional[Mapping[str, Any]] = None, with_culprits: bool = False,
             name: str = "kbatch_from_avro"):
    """The UDF of ``kbatch_from_avro`` (what ``register_value_decoder`` registers for SQL)."""
    from pykbatch.values import decode_avro
    from pykbatch.values.decode import _as_avro, _layout
    options = dict(options or {})
    mode = _mode(options)
    reader = options.get("reader.schema") or None
    trailing = str(options.get("allow.trailing.bytes", "false")).lower() == "true"
    arrow_type = _layout(_as_avro(reader or json_format_schema)).arrow_type

    def run(value):
        return _result(decode_avro(value, json_format_schema, reader_schema=reader, allow_trailing=trailing),
                       mode, with_culprits)
    return _make_udf(run, arrow_type, with_culprits, name)


class _ConfluentPlan(NamedTuple):
    """What ``kbatch_from_confluent``'s options settle when the query is planned."""
    registry_props: dict
    reader: Optional[str]   # the reader's text the executors parse (None: the subject's latest, with references)
    subject: Optional[str]
    reader_type: Any        # the reader parsed: the output's shape
    mode: str
    trailing: bool


def _confluent_plan(options: Mapping[str, Any]) -> _ConfluentPlan:
    from pykbatch.values import SchemaRegistry
    from pykbatch.values.decode import _as_avro, parse_registered
    options = dict(options)
    mode = _mode(options)
    registry_props = {k: v for k, v in options.items() if k not in _READER_KEYS}
    reader = options.get("reader.schema")
    subject = options.get("subject")
    trailing = str(options.get("allow.trailing.bytes", "false")).lower() == "true"
    if reader:
        reader_type = _as_avro(reader)
    elif subject:
        registry = SchemaRegistry.from_config(registry_props)
        latest = registry.latest(subject)
        if latest is None:
            raise ValueError(f"subject {subject!r} has no versions in the registry at {registry.url}")
        reader_type = parse_registered(latest, registry)
        reader = latest.schema if not latest.references else None
    else:
        raise ValueError("kbatch_from_confluent needs the output's shape when the query is planned: "
                         "options 'subject' (its latest version) or 'reader.schema'")
    return _ConfluentPlan(registry_props, reader, subject, reader_type, mode, trailing)


def confluent_udf(options: Mapping[str, Any], with_culprits: bool = False, name: str = "kbatch_from_confluent"):
    """The UDF of ``kbatch_from_confluent``."""
    from pykbatch.values import SchemaRegistry, decode_values
    from pykbatch.values.decode import _layout
    plan = _confluent_plan(options)
    registry_props, reader, subject, mode, trailing = plan.registry_props, plan.reader, plan.subject, plan.mode, \
        plan.trailing
    arrow_type = _layout(plan.reader_type).arrow_type

    def run(value):
        registry = SchemaRegistry.from_config(registry_props)  # on the executor: its process-wide cache
        decoded = decode_values(value, registry, reader_schema=reader, subject=None if reader else subject,
                                allow_trailing=trailing)
        return _result(decoded, mode, with_culprits)
    return _make_udf(run, arrow_type, with_culprits, name)


def kbatch_from_avro(col: "ColumnOrName", jsonFormatSchema: str, options: Optional[Mapping[str, Any]] = None,
                     with_culprits: bool = False) -> "Column":
    """Spark's ``from_avro``, native: each value a bare Avro datum written with ``jsonFormatSchema``
    (a Confluent-framed value: ``substring(value, 6)``, or ``kbatch_from_confluent``).

    Spark type: the schema's record as a struct (from_avro's mapping); options ``mode``
    (PERMISSIVE: a value that cannot be read is null; FAILFAST: the task fails naming it),
    ``reader.schema`` (read with Avro's resolution into another schema),
    ``allow.trailing.bytes``.  ``with_culprits``: ``struct<value, culprit>`` instead."""
    from spark_udfs.column_args import as_column
    from spark_udfs.function_table import on_jvm
    if not with_culprits and on_jvm():
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import call_function

        from pykbatch.values.decode import _as_avro, _layout
        from spark_udfs import jvm, jvm_avro
        session = SparkSession.getActiveSession()
        given = dict(options or {})
        reader = given.get("reader.schema") or jsonFormatSchema
        name = jvm_avro.define(session, jsonFormatSchema, given, _mode(given),
                               _spark_type(_layout(_as_avro(reader)).arrow_type).json())
        if name is not None:  # the core in Spark's JVM (spark_udfs.jvm_avro); its column named as the UDF's
            return call_function(f"{jvm.CATALOG}.{name}", as_column(col)).alias(
                f"kbatch_from_avro({as_column(col)._jc.toString()})")
    return avro_udf(jsonFormatSchema, options, with_culprits)(as_column(col))



def kbatch_from_confluent(col: "ColumnOrName", options: Mapping[str, Any], with_culprits: bool = False) -> "Column":
    """Confluent-framed values (magic byte 0, schema id, Avro) decoded with their registered
    schemas, each writer's resolved against one reader schema.

    Spark type: the reader schema's struct -- ``reader.schema``, or the latest version of
    ``subject``.  Options: the registry's (``schema.registry.url``, ``basic.auth.user.info``,
    ``ssl.ca.location``, ...), ``subject`` / ``reader.schema``, ``mode``,
    ``allow.trailing.bytes``.  ``with_culprits``: ``struct<value, culprit>``.

    On the JVM path (``subject`` given) every version the subject has when the query is planned is
    compiled on the driver; an executor meeting another id asks the registry: unknown there, the
    value cannot be read; in it, the task fails saying to plan the query again (never a null for a
    value the Python path reads)."""
    from spark_udfs.column_args import as_column
    from spark_udfs.function_table import on_jvm
    if not with_culprits and on_jvm():
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import call_function

        from pykbatch.values.decode import _layout
        from spark_udfs import jvm, jvm_avro
        plan = _confluent_plan(options)
        name = jvm_avro.define_confluent(SparkSession.getActiveSession(), plan,
                                         _spark_type(_layout(plan.reader_type).arrow_type).json())
        if name is not None:  # the core in Spark's JVM, the subject's schemas compiled here
            return call_function(f"{jvm.CATALOG}.{name}", as_column(col)).alias(
                f"kbatch_from_confluent({as_column(col)._jc.toString()})")
    return confluent_udf(options, with_culprits)(as_column(col))


def register_value_decoder(spark: "SparkSession", name: str, *, schema: Optional[str] = None,
                           options: Optional[Mapping[str, Any]] = None, with_culprits: bool = False) -> None:
    """A SQL function ``name(value)`` decoding with a fixed schema: bare Avro with ``schema``
    (``kbatch_from_avro``), else Confluent-framed values with ``options`` (``kbatch_from_confluent``)."""
    udf = avro_udf(schema, options, with_culprits, name) if schema else confluent_udf(options or {}, with_culprits, name)
    spark.udf.register(name, udf)
