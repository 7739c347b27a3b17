"""The one table of pykbatch's Spark functions: each name with its column function of
``pykbatch.arrow`` and Arrow result type.  Read by the Python functions (spark_udfs.functions: the
Arrow UDFs) and by the JVM path (spark_udfs.jvm: the Spark types written into the jar)."""

# the session setting that says which functions register() gave it: "jvm" or "python" (the JVM's
# kafka-segment reader reads it too, from the jar's build.properties)
PATH_SETTING = "spark.pykbatch.functions"
# the driver's Python, which the JVM's kafka-segment reader runs to plan a tiered read
# (spark_udfs.tiered_plan): set by register() and configure_spark_with_pykbatch()
PYTHON_SETTING = "spark.pykbatch.python"


def on_jvm() -> bool:
    """Whether the active session's kbatch_* functions are the JVM's (register said so)."""
    from pyspark.sql import SparkSession
    session = SparkSession.getActiveSession()
    return session is not None and session.conf.get(PATH_SETTING, "python") == "jvm"


def functions() -> dict:
    """name -> (the column function, its Arrow result type, whether it takes a per-row config)."""
    import pyarrow as pa

    from pykbatch import arrow
    return {
        "kbatch_validate": (arrow.validate_array, arrow.VALIDATION, True),
        "kbatch_decode": (arrow.decode_array, pa.list_(arrow.RECORD), False),
        "kbatch_crc32c": (arrow.crc32c_array, pa.int64(), False),
        "kbatch_batch_info": (arrow.batch_info_array, pa.list_(arrow.BATCH_INFO), False),
        "kbatch_repair": (arrow.repair_array, arrow.REPAIR, True),
    }


JVM = ("kbatch_validate", "kbatch_crc32c", "kbatch_decode", "kbatch_batch_info", "kbatch_repair")
"""The functions that also have a JVM form (spark_udfs/jvm/src: KbatchCatalog.NAMES)."""
