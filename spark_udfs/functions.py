"""The Spark functions: each a vectorised Arrow UDF over a column function of ``pykbatch.arrow``
(``_functions`` pairs them), its DataFrame form (``kbatch_validate(col)``, ...), their SQL
registration, and ``explode_records`` / ``kbatch_records`` for one row per record."""
# No `from __future__ import annotations` here: PySpark reads the UDFs' type hints as objects.
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from pykbatch.config import ValidationConfig
    # a column by name or as a Column; a config as kbatch_validate documents it
    ColumnOrName = Union[str, Column]
    Config = Union[None, ValidationConfig, Mapping[str, Any], Column]

__all__ = ["register", "kbatch_validate", "kbatch_decode", "kbatch_crc32c", "kbatch_batch_info", "kbatch_repair",
           "explode_records", "config_from_map", "CONFIG_KEYS"]

def _config_fields():
    import dataclasses

    from pykbatch import ValidationConfig
    return {f.name: f for f in dataclasses.fields(ValidationConfig)}


# every ValidationConfig field, by its name (map('compacted', 'true', 'max_message_bytes', '2000'))
CONFIG_KEYS = tuple(_config_fields())


def _parse_option(value, default):
    """A map value (SQL passes strings) as the field's type: booleans, integers (or 'null'), strings."""
    if isinstance(default, bool):
        return str(value).lower() in ("true", "1", "yes")
    if default is None or isinstance(default, int):
        if value is None or str(value).lower() in ("", "null", "none"):
            return None
        return int(value)
    return value


def config_from_map(items):
    """A ``pykbatch.ValidationConfig`` from map entries (string keys and values), as SQL passes them:
    ``map('origin', 'log', 'strict', 'false', 'compacted', 'true')``; keys are ``CONFIG_KEYS``."""
    from pykbatch import ValidationConfig
    fields = _config_fields()
    kwargs = {}
    for key, value in dict(items or {}).items():
        if key not in fields:
            raise ValueError(f"unknown kbatch_validate option {key!r}; expected one of {CONFIG_KEYS}")
        kwargs[key] = _parse_option(value, fields[key].default)
    return ValidationConfig(**kwargs)


def _per_config(values, configs, fn):
    """``fn(values, config)`` with each row's config (rows grouped by config, usually one group)."""
    import numpy as np
    import pyarrow as pa
    if configs is None:
        return fn(values)
    groups = {}
    for row, items in enumerate(configs.to_pylist()):
        groups.setdefault(tuple(sorted(items or [])), []).append(row)
    if len(groups) == 1:
        return fn(values, config_from_map(next(iter(groups))))
    parts, order = [], []
    for items, rows in groups.items():
        parts.append(fn(values.take(pa.array(rows)), config_from_map(items)))
        order.extend(rows)
    inverse = np.empty(len(order), np.int64)
    inverse[np.array(order)] = np.arange(len(order))
    return pa.concat_arrays(parts).take(pa.array(inverse))


from spark_udfs.function_table import functions as _functions  # noqa: E402 (the one table of functions)
from spark_udfs.function_table import PATH_SETTING, PYTHON_SETTING  # noqa: E402,F401 (the session's path: "jvm" or "python")


@lru_cache(maxsize=None)
def _udfs():
    """The UDF objects, made on first use (on the driver: a worker importing a module that
    declares UDFs at import time fails without a SparkContext)."""
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import from_arrow_type
    return {name: arrow_udf(from_arrow_type(result))(_arrow_function(name, fn, configured))
            for name, (fn, result, configured) in _functions().items()}


def _arrow_function(name: str, fn, configured: bool):
    """The function an arrow_udf runs: Arrow in, Arrow out (its type hints tell PySpark so)."""
    import pyarrow as pa
    if configured:
        def run(value: pa.Array, config: pa.Array = None) -> pa.Array:
            return _per_config(value, config, fn)
    else:
        def run(value: pa.Array) -> pa.Array:
            return fn(value)
    run.__name__ = run.__qualname__ = name  # Spark names result columns after it
    return run


def _column(col):
    from spark_udfs.column_args import as_column
    return as_column(col)


def _config_column(config):
    from pyspark.sql.functions import create_map, lit
    if config is None:
        return None
    if hasattr(config, "origin"):  # a ValidationConfig
        config = {k: getattr(config, k) for k in CONFIG_KEYS}
    if isinstance(config, dict):
        pairs = []
        for k, v in config.items():
            pairs += [lit(str(k)), lit(str(v).lower() if isinstance(v, bool) else str(v))]
        return create_map(*pairs)
    return _column(config)


def kbatch_validate(col: "ColumnOrName", config: "Config" = None) -> "Column":
    """Validate a binary column of record batches.

    ``config``: None, a ``pykbatch.ValidationConfig``, a dict of its options, or a
    ``map<string,string>`` Column (keys: origin, verify_crc, strict, max_culprits,
    topic_partition).

    Spark type: ``struct<ok: boolean, error_code: int, error_name: string, error_message: string,
    error_records: array<struct<batch_index: int, message: string>>, culprits: array<struct<entry:
    int, record_index: int, relative_offset: bigint, code: int, name: string, rule: string,
    position: bigint, entry_position: bigint, message: string, detail: string, kafka: boolean>>,
    culprit_count: bigint, records: bigint, truncated_tail_position: bigint>``.
    """
    cfg = _config_column(config)
    args = [_column(col)] + ([] if cfg is None else [cfg])
    if _on_jvm():
        return _call("kbatch_validate", *args)
    return _udfs()["kbatch_validate"](*args)


def kbatch_decode(col: "ColumnOrName") -> "Column":
    """Decode a binary column of record batches into its records (explode it for one row per
    record).  Null for null input and for input that does not decode cleanly (see
    ``kbatch_validate``).

    Spark type: ``array<struct<offset: bigint, timestamp: bigint, key: binary, value: binary,
    headers: array<struct<key: string, value: binary>>, sequence: int, batch_index: int,
    partition_leader_epoch: int, producer_id: bigint, producer_epoch: smallint,
    is_transactional: boolean, is_control: boolean, timestamp_type: string>>``.
    """
    if _on_jvm():
        return _call("kbatch_decode", _column(col))
    return _udfs()["kbatch_decode"](_column(col))


def kbatch_crc32c(col: "ColumnOrName") -> "Column":
    """CRC-32C of each value. Spark type: ``bigint``."""
    if _on_jvm():
        return _call("kbatch_crc32c", _column(col))
    return _udfs()["kbatch_crc32c"](_column(col))


def kbatch_batch_info(col: "ColumnOrName") -> "Column":
    """The header of every batch of each value (explodable).

    Spark type: ``array<struct<position: bigint, size: bigint, magic: tinyint, base_offset: bigint,
    last_offset: bigint, record_count: int, compression: string, timestamp_type: string,
    max_timestamp: bigint, producer_id: bigint, producer_epoch: smallint, base_sequence: int,
    partition_leader_epoch: int, is_transactional: boolean, is_control: boolean, crc: bigint,
    is_valid: boolean>>``.
    """
    if _on_jvm():
        return _call("kbatch_batch_info", _column(col))
    return _udfs()["kbatch_batch_info"](_column(col))


def kbatch_repair(col: "ColumnOrName", config: "Config" = None) -> "Column":
    """Each value rebuilt without its culprit records (KIP-467 client side / KIP-1059): clean
    values come back unchanged; batches damaged as a whole are dropped and counted.  ``config`` as
    for ``kbatch_validate``.

    Spark type: ``struct<data: binary, dropped: array<struct<entry: int, record_index: int, offset:
    bigint, key: binary, value: binary, code: int, rules: array<string>, message: string>>,
    unrepairable_batches: int>``.
    """
    cfg = _config_column(config)
    if _on_jvm():
        return _call("kbatch_repair", _column(col)) if cfg is None else _call("kbatch_repair", _column(col), cfg)
    udf = _udfs()["kbatch_repair"]
    return udf(_column(col)) if cfg is None else udf(_column(col), cfg)


def explode_records(df: "DataFrame", col: str, keep: Optional[Sequence[str]] = None) -> "DataFrame":
    """One row per record of the batches in ``col`` (Arrow all the way: ``mapInArrow``, no
    Python object per record), with the ``keep`` columns (default: all others but ``col``)
    repeated beside the record fields of ``kbatch_decode``.  Rows that are null or do not decode
    give no records: ``kbatch_validate`` says why.  On the JVM path it is ``explode(kbatch_decode(col))``
    (SQL's form there: ``SELECT id, r.* FROM t LATERAL VIEW explode(kbatch_decode(value)) AS r``)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from pykbatch.arrow import explode_batch, exploded_schema
    keep = [c for c in df.columns if c != col] if keep is None else list(keep)
    if _on_jvm():  # kbatch_decode in the JVM, its array of records exploded: no Python worker
        from pyspark.sql.functions import col as column, explode
        # explode, not inline: inline makes every nested field nullable (a header's key is not)
        return df.select(*keep, explode(kbatch_decode(col)).alias("__kbatch_record")) \
            .select(*(column(f"`{k}`") for k in keep), "__kbatch_record.*")
    schema = exploded_schema(to_arrow_schema(df.schema), keep)

    def explode(batches):
        for batch in batches:
            out = explode_batch(batch, col, keep)
            yield pa.RecordBatch.from_arrays(out.columns, schema=schema)
    return df.select(*keep, col).mapInArrow(explode, from_arrow_schema(schema))


@lru_cache(maxsize=None)
def _records_udtf():
    """``kbatch_records``: the SQL form of ``explode_records`` (an Arrow UDTF over a TABLE argument
    with columns ``id`` and ``value``)."""
    import pyarrow as pa
    from pyspark.sql.functions import arrow_udtf
    from pyspark.sql.pandas.types import from_arrow_schema

    from pykbatch.arrow import RECORD, explode_batch
    from pykbatch.columns import ROW_ID, fields
    schema = pa.schema(fields(ROW_ID, "id") + list(RECORD))

    @arrow_udtf(returnType=from_arrow_schema(schema))
    class KbatchRecords:
        def eval(self, batch: pa.RecordBatch):
            out = explode_batch(batch, "value", keep=["id"])
            columns = [out.column(0).cast(ROW_ID["id"])] + out.columns[1:]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
    return KbatchRecords




def register(spark: "SparkSession", jvm: Optional[bool] = None) -> str:
    """Make the kbatch_* functions callable from SQL (``kbatch_records(TABLE(SELECT id, value
    FROM t))`` for one row per record) and the data sources readable: ``kafka-segment``
    (``spark.read.format("kafka-segment").load(path)``, see ``spark_udfs.segment_source``) and
    ``kafka-kbatch`` (a live cluster, Spark's Kafka source's options; ``spark_udfs.live_source``).

    ``jvm``: None (default) uses the JVM functions (the C core called from Spark's JVM, no Python
    worker; ``spark_udfs.jvm``) for those that have one when pykbatch's jar is on the session's
    classpath (``spark_udfs.jvm.configure_spark_with_pykbatch``), the Python functions otherwise;
    True requires them (raises saying why not); False registers the Python functions only.
    Returns the path taken, "jvm" or "python" (also the session setting ``spark.pykbatch.functions``,
    which the DataFrame functions read).

    On Spark 3.5 (no Arrow UDFs, no Python data sources) only the JVM functions can be had: they
    are registered, and the rest is named in one line."""
    from spark_udfs import jvm as jvm_path
    if python_functions_supported():
        _register_python(spark)
    elif jvm is False or not jvm_path.loaded(spark):
        import pyspark
        raise RuntimeError(f"pykbatch's Python functions need pyspark >= 4.1 (Arrow UDFs), not "
                           f"{pyspark.__version__}; on Spark 3.5 build the session with "
                           "spark_udfs.jvm.configure_spark_with_pykbatch(builder) for the JVM functions")
    else:
        import pyspark
        print(f"pykbatch: Spark {pyspark.__version__}: the JVM functions only (the Python functions and data "
              "sources need pyspark >= 4.1)", file=sys.stderr)
    path = "python"
    if jvm is not False:
        if jvm_path.loaded(spark):
            jvm_path.register(spark)
            path = "jvm"
        elif jvm:
            raise jvm_path.JvmPathUnavailable(
                (jvm_path.unavailable_reason() or "pykbatch's jar is not on this session's classpath")
                + " (build the session with spark_udfs.jvm.configure_spark_with_pykbatch(builder))")
    spark.conf.set(PATH_SETTING, path)
    spark.conf.set(PYTHON_SETTING, sys.executable)
    _make_active(spark)
    return path


def _make_active(spark) -> None:
    """The session made the JVM's active one for this thread: Spark looks a Python data source's
    name (kafka-segment, kafka-kbatch) up in the active session only (DataSource.lookupDataSource),
    so a read or write right after registering on a session that is not active there fails with
    DATA_SOURCE_NOT_FOUND."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is not None:  # (a Spark Connect session has no JVM here)
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def _pyspark_version() -> tuple:
    import pyspark
    return tuple(int(p) for p in pyspark.__version__.split(".")[:2])


def python_functions_supported() -> bool:
    """Whether this pyspark runs pykbatch's Python functions and sources (Arrow UDFs: 4.1+)."""
    return _pyspark_version() >= (4, 1)


def _register_python(spark) -> None:
    from spark_udfs import jvm as jvm_path
    from spark_udfs import live_source
    from spark_udfs.segment_source import NAME, PYTHON_NAME, data_source_class
    for name, udf in _udfs().items():
        spark.udf.register(name, udf)
    spark.udtf.register("kbatch_records", _records_udtf())
    # with the jar on the classpath its reader holds the name and hands what it does not serve to this one
    spark.dataSource.register(data_source_class(PYTHON_NAME if jvm_path.loaded(spark) else NAME))
    spark.dataSource.register(live_source.data_source_class())


def _on_jvm() -> bool:
    """Whether the active session's kbatch_* functions are the JVM's (register said so)."""
    from spark_udfs.function_table import on_jvm
    return on_jvm()


def _call(name: str, *cols) -> "Column":
    """``name`` on the JVM path: the temporary function register() made, which Spark resolves to
    the catalog's (no Python worker); its column is named as the Python function's."""
    from pyspark.sql.functions import call_function
    return call_function(name, *cols)
