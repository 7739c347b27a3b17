"""Spark functions over binary columns holding Kafka record batches.

    from spark_udfs import register, kbatch_validate, kbatch_decode
    register(spark)                      # SQL: SELECT kbatch_validate(value) FROM t
    df.select(kbatch_validate("value", {"origin": "log"}))

Every function is a vectorised Arrow UDF running pykbatch's native core over the column's
Arrow buffers; null in gives null out, and corrupt input gives a result row, never a failed
task.  PySpark is imported lazily: importing this package does not need it.
"""
# No `from __future__ import annotations` here: PySpark reads the UDFs' type hints as objects.
from spark_udfs.functions import (  # noqa: F401
    CONFIG_KEYS, config_from_map, explode_records, kbatch_batch_info, kbatch_crc32c, kbatch_decode, kbatch_repair,
    kbatch_validate, register,
)

__all__ = ["register", "kbatch_validate", "kbatch_decode", "kbatch_crc32c", "kbatch_batch_info", "kbatch_repair",
           "explode_records", "split_dead_letters", "ErrorPolicy", "config_from_map", "CONFIG_KEYS"]


def __getattr__(name):  # the dead-letter API without importing pyspark at package import
    if name in ("split_dead_letters", "ErrorPolicy"):
        from spark_udfs import dead_letters
        return getattr(dead_letters, name)
    raise AttributeError(name)
