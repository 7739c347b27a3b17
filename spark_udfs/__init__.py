"""Spark functions over binary columns holding Kafka record batches.

    from spark_udfs import register, kbatch_validate, kbatch_decode
    register(spark)                      # SQL: SELECT kbatch_validate(value) FROM t
    df.select(kbatch_validate("value", {"origin": "log"}))

Every function is a vectorised Arrow UDF running pykbatch's native core over the column's
Arrow buffers; null in gives null out, and corrupt input gives a result row, never a failed
task.  PySpark is imported lazily: importing this package does not need it.
"""
# No `from __future__ import annotations` here: PySpark reads the UDFs' type hints as objects.
from spark_udfs import functions as _functions
from spark_udfs.functions import *  # noqa: F401,F403 (every Spark function, by functions.__all__)
from spark_udfs import value_functions as _value_functions
from spark_udfs.value_functions import *  # noqa: F401,F403 (values as their schemas say)

__all__ = list(_functions.__all__) + list(_value_functions.__all__) + ["split_dead_letters", "ErrorPolicy",
                                                                       "configure_spark_with_pykbatch"]


def __getattr__(name):  # the dead-letter API without importing pyspark at package import
    if name in ("split_dead_letters", "ErrorPolicy"):
        from spark_udfs import dead_letters
        return getattr(dead_letters, name)
    if name == "configure_spark_with_pykbatch":  # the JVM path's session helper (spark_udfs.jvm)
        from spark_udfs.jvm import configure_spark_with_pykbatch
        return configure_spark_with_pykbatch
    raise AttributeError(name)
