"""The JVM path of the Spark layer: pykbatch's C core called from Spark's JVM through JNI, its
functions Spark's own expressions (no Python worker on the hot path).

    from spark_udfs.jvm import configure_spark_with_pykbatch
    spark = configure_spark_with_pykbatch(SparkSession.builder.master("local[2]")).getOrCreate()
    spark_udfs.register(spark)         # the JVM functions where the jar is loaded, else the Python ones

The jar (``jar()``) holds the Java classes (spark_udfs/jvm/src), the JNI shim library setup.py
built beside this module (spark_udfs/native/), and what both paths must agree on written from
pykbatch's own definitions: the functions' Spark types (pykbatch.columns) and kbatch_validate's
options (pykbatch.ValidationConfig).  A wheel may carry it prebuilt (spark_udfs/jars/); otherwise
it is compiled once, against the running pyspark's jars, into ``cache_dir()`` (a JDK's javac is
needed then; executors need only a JVM).
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from functools import lru_cache

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = os.path.join(HERE, "jvm", "src", "main", "java")
PACKAGE = "io/pykbatch/spark"
LIBRARY = os.path.join(HERE, "native", "libpykbatch_jni.so")
LIBRARY_VERSION = os.path.join(HERE, "native", "libpykbatch_jni.version")
PREBUILT = os.path.join(HERE, "jars", "pykbatch-spark.jar")
JAR_NAME = "pykbatch-spark.jar"
CATALOG = "pykbatch"
CATALOG_CLASS = "io.pykbatch.spark.KbatchCatalog"


class JvmPathUnavailable(RuntimeError):
    """The JVM path cannot be had here; the message says why (the Python path still serves)."""


def cache_dir() -> str:
    """Where built jars are kept: $PYKBATCH_CACHE, else ~/.cache/pykbatch."""
    return os.environ.get("PYKBATCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "pykbatch")


def _platform_dir() -> str:
    """The jar's directory for this machine's library, as Java names the platform (os.name-os.arch)."""
    import platform
    arch = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine(),
                                                                                              platform.machine())
    return f"{platform.system().lower()}-{arch}"


def _resources(version_file: str = LIBRARY_VERSION) -> dict[str, bytes]:
    """What the JVM classes read from the jar, written from pykbatch's definitions (``version_file``:
    the build id of the library the jar carries)."""
    from pyspark.sql.pandas.types import from_arrow_type

    from pykbatch._catalogue import LOG_APPEND_TIME
    from pykbatch.config import LONG_MAX, ORIGINS, TIMESTAMP_TYPES, ValidationConfig
    lines = [f"keys={','.join(f.name for f in dataclasses.fields(ValidationConfig))}",
             f"origins={','.join(ORIGINS)}", f"timestamp_types={','.join(TIMESTAMP_TYPES)}",
             f"log_append_time={LOG_APPEND_TIME}", f"long_max={LONG_MAX}"]
    for f in dataclasses.fields(ValidationConfig):
        value = f.default
        lines.append(f"default.{f.name}=" + ("null" if value is None else str(value).lower() if isinstance(value, bool)
                                              else str(value)))
    from spark_udfs.function_table import JVM, functions
    table = functions()
    types = {name: from_arrow_type(table[name][1]).json() for name in JVM}
    import pyarrow as pa

    from spark_udfs import segment_columns
    from pykbatch.log.indexes import OffsetIndex, TimeIndex
    from pykbatch.tiered.layouts import LocalTieredStorage
    from pykbatch.tiered.tables import EPOCH
    from spark_udfs.function_table import PATH_SETTING, PYTHON_SETTING
    for part, columns in (("records", segment_columns.RECORD_COLUMNS), ("batches", segment_columns.BATCH_COLUMNS),
                          ("path", segment_columns.PATH_COLUMN), ("validation", segment_columns.VALIDATION_COLUMNS),
                          ("tiered", [EPOCH])):
        types[f"{segment_columns.NAME}.{part}"] = from_arrow_type(pa.struct(columns)).json()
    with open(version_file) as f:
        version = f.read().strip()
    build = {"version": version, "path_setting": PATH_SETTING, "python_segment_source": segment_columns.PYTHON_NAME,
             "python_setting": PYTHON_SETTING,
             **{name: f"{kind.SUFFIX} {kind.FORMAT} {kind.RELATIVE}"  # the sparse indexes' layouts
                for name, kind in (("offset_index", OffsetIndex), ("time_index", TimeIndex))},
             # a folder LocalTieredStorage keeps a partition in: how a tiered store is told (Java's syntax)
             "tiered_folder": LocalTieredStorage.FOLDER.pattern.replace("(?P<", "(?<"),
             "tiered_home": LocalTieredStorage.HOME}
    return {
        f"{PACKAGE}/build.properties": "".join(f"{k}={_escape(v)}\n" for k, v in build.items()).encode(),
        # kafka-segment's JVM reader under its short name (Spark's ServiceLoader lookup)
        "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister": b"io.pykbatch.spark.SegmentSource\n",
        f"{PACKAGE}/validation.properties": ("\n".join(lines) + "\n").encode(),
        f"{PACKAGE}/types.properties": "".join(f"{k}={_escape(v)}\n" for k, v in types.items()).encode(),
    }


def _escape(value: str) -> str:
    """A value as java.util.Properties reads it back unchanged (its escapes; one line)."""
    return value.replace("\\", "\\\\").replace(":", "\\:").replace("=", "\\=").replace("\n", "\\n")


def _spark_jars() -> str:
    import pyspark
    home = os.environ.get("SPARK_HOME")
    for jars in ([os.path.join(home, "jars")] if home else []) + [os.path.join(os.path.dirname(pyspark.__file__), "jars")]:
        if glob.glob(os.path.join(jars, "spark-sql_*.jar")):
            return jars
    raise JvmPathUnavailable("no Spark jars found (pyspark's jars directory, or $SPARK_HOME/jars) to compile against")


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "javac") if home and os.path.exists(os.path.join(home, "bin", "javac")) \
        else shutil.which("javac")
    if not found:
        raise JvmPathUnavailable("no javac (a JDK 17+) to compile pykbatch's Spark classes; the Python functions serve")
    return found


@lru_cache(maxsize=None)
def jar() -> str:
    """The path of the jar for this pykbatch and pyspark: the wheel's, or one built (once) into
    ``cache_dir()``.  Raises ``JvmPathUnavailable`` saying why there is none."""
    if os.path.exists(PREBUILT):
        return PREBUILT
    if not os.path.exists(LIBRARY):
        raise JvmPathUnavailable("pykbatch was installed without its JNI library (no JDK at install time: "
                                 "install a JDK 17+ and reinstall pykbatch)")
    import pyspark
    sources = sorted(glob.glob(os.path.join(SOURCES, PACKAGE, "*.java")))
    resources = _resources()
    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in sources + [LIBRARY]:
        with open(path, "rb") as f:
            digest.update(f.read())
    for name, data in sorted(resources.items()):
        digest.update(name.encode() + data)
    target = os.path.join(cache_dir(), f"jvm-{digest.hexdigest()[:20]}", JAR_NAME)
    if not os.path.exists(target):
        _build(target, sources, resources, LIBRARY, _platform_dir())
    return target


def build_jar(target: str, library: str, version_file: str, platform_dir: str) -> None:
    """A jar at ``target`` carrying ``library`` (a JNI shim of the build ``version_file`` names) for
    ``platform_dir`` (Java's os.name-os.arch, e.g. "linux-aarch64"): how a wheel gets its prebuilt
    jar (.ci/build_wheels.py), compiled against the running pyspark."""
    sources = sorted(glob.glob(os.path.join(SOURCES, PACKAGE, "*.java")))
    _build(target, sources, _resources(version_file), library, platform_dir)


def _build(target: str, sources: list, resources: dict, library: str, platform_dir: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as tmp:
        classes = os.path.join(tmp, "classes")
        cmd = [_javac(), "--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp",
               os.path.join(_spark_jars(), "*"), "-d", classes, *sources]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise JvmPathUnavailable(f"compiling pykbatch's Spark classes failed:\n{done.stderr[-4000:]}")
        staged = os.path.join(tmp, JAR_NAME)
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: pykbatch\n")
            for root, _, files in os.walk(classes):
                for name in sorted(files):
                    path = os.path.join(root, name)
                    z.write(path, os.path.relpath(path, classes))
            for name, data in resources.items():
                z.writestr(name, data)
            z.write(library, f"{PACKAGE}/native/{platform_dir}/libpykbatch_jni.so")
        os.replace(staged, target)  # atomic: another process building the same jar finds a whole one


def unavailable_reason() -> str | None:
    """Why the JVM path cannot be had here, or None when ``jar()`` gives one."""
    try:
        jar()
        return None
    except JvmPathUnavailable as exc:
        return str(exc)


def configure_spark_with_pykbatch(builder):
    """``builder`` (a SparkSession.Builder) with pykbatch's jar added to ``spark.jars`` and its
    function catalog named ``pykbatch``: the session gets the JVM functions (delta-spark's
    ``configure_spark_with_delta_pip``, for pykbatch).  Without a jar (no JDK when pykbatch was
    installed) the builder comes back unchanged and ``register`` gives the Python functions."""
    try:
        path = jar()
    except JvmPathUnavailable:
        return builder
    current = builder._options.get("spark.jars", "") if hasattr(builder, "_options") else ""
    jars = ",".join(filter(None, [current, path]))
    from spark_udfs.function_table import PYTHON_SETTING
    return builder.config("spark.jars", jars).config(f"spark.sql.catalog.{CATALOG}", CATALOG_CLASS) \
        .config(PYTHON_SETTING, sys.executable)


def loaded(spark) -> bool:
    """Whether ``spark``'s JVM has pykbatch's classes (its jar on the session's classpath)."""
    jvm = getattr(spark, "_jvm", None) or getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:  # Spark Connect: no JVM in this process
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("io.pykbatch.spark.Functions", True, loader)
        return True
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        return False


def register(spark) -> list:
    """Registers the JVM functions' plain names in ``spark`` (they replace the Python functions of
    the same names); returns the names."""
    return list(spark._jvm.io.pykbatch.spark.Functions.register(spark._jsparkSession))
