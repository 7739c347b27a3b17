"""A quiet SparkSession with pykbatch ready: the one way pykbatch's tests, benchmarks and examples
start Spark (and a convenient one for a notebook or a job).

    from spark_udfs.session import quiet_session
    spark = quiet_session("local[4]", **{"spark.sql.shuffle.partitions": "4"})
"""
from __future__ import annotations

import os
import sys


def quiet_session(master: str = "local[2]", app: str = "pykbatch", jvm: bool | None = None, **conf):
    """A SparkSession on ``master`` without the UI or progress bars, logging errors only, with
    pykbatch's functions and the ``kafka-segment`` source registered (``spark_udfs.register``):
    the JVM functions where pykbatch's jar can be had (``jvm``: None, the default; $PYKBATCH_SPARK_PATH
    "python" or "jvm" overrides it), else the Python ones; True requires the JVM path, False
    keeps to Python.
    ``conf``: further Spark settings by their full names.  Workers run this interpreter (unless
    ``PYSPARK_PYTHON`` says otherwise); a ``local-cluster`` master's executor work directories
    are removed when the process exits."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_udfs.functions import register
    from spark_udfs.jvm import configure_spark_with_pykbatch
    if jvm is None and os.environ.get("PYKBATCH_SPARK_PATH"):
        jvm = os.environ["PYKBATCH_SPARK_PATH"] == "jvm"
    if master.startswith("local-cluster"):  # its executors look for Spark's scripts in SPARK_HOME
        import pyspark
        os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    builder = (SparkSession.builder.master(master).appName(app).config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    if jvm is not False:
        builder = configure_spark_with_pykbatch(builder)  # unchanged where there is no jar
    spark = builder.getOrCreate()
    if master.startswith("local-cluster"):  # executors work in $SPARK_HOME/work/<app id>
        import atexit
        import shutil
        atexit.register(shutil.rmtree, os.path.join(os.environ["SPARK_HOME"], "work",
                                                    spark.sparkContext.applicationId), True)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark, jvm)
    return spark
