"""The documented way of putting pykbatch on executors, done for real: the manylinux wheel, installed
into a fresh virtualenv that holds nothing else of ours, pack that venv with venv-pack, and ship
it with spark.archives to a local-cluster whose executors run ./environment/bin/python. The
executors must import pykbatch from the unpacked archive (not from this checkout) and give the
same answers as the driver: UDFs, SQL, explode_records and the kafka-segment source. The packed
venv holds the wheel and its own dependencies only (no pandas, no pyspark: Spark ships pyspark)."""
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DRIVER = textwrap.dedent('''
    import json, os, sys
    import pyarrow as pa
    from pyspark.sql.functions import arrow_udf
    import pykbatch as kb, spark_udfs
    from spark_udfs.session import quiet_session
    archive = sys.argv[1]
    spark = quiet_session("local-cluster[2,1,1024]", **{"spark.archives": archive + "#environment"})

    @arrow_udf("string")
    def where_from(value: pa.Array) -> pa.Array:
        import pykbatch
        return pa.array([sys.executable + " " + pykbatch.__file__] * len(value))

    rows = []
    for i in range(100):
        data = bytearray(kb.build_batch([(b"k", b"v%d" % i)] * 2))
        if i % 25 == 3:
            data[-2] ^= 1
        rows.append((i, bytes(data)))
    df = spark.createDataFrame(rows, "id int, value binary").repartition(4)
    origins = {r[0] for r in df.select(where_from("value")).collect()}
    spark_ok = sorted(r.id for r in df.where(spark_udfs.kbatch_validate("value").ok).select("id").collect())
    local_ok = sorted(i for i, v in rows if kb.validate(v).ok)
    sql = spark.sql("SELECT count(*) FROM (SELECT kbatch_validate(value) AS v FROM {df}) WHERE NOT v.ok", df=df)
    exploded = spark_udfs.explode_records(df.where(spark_udfs.kbatch_validate("value").ok), "value").count()
    part = os.path.join(sys.argv[2], "orders-3")
    os.makedirs(part)
    with open(os.path.join(part, "00000000000000000000.log"), "wb") as f:
        f.write(b"".join(kb.build_batch([(b"k", b"v")] * 5, base_offset=5 * i) for i in range(40)))
    segment = spark.read.format("kafka-segment").option("validate", "true").load(sys.argv[2])
    seg = segment.selectExpr("count(*)", "count_if(batch_ok)", "min(partition)").first()
    print("RESULT", json.dumps({"origins": sorted(origins), "same": spark_ok == local_ok, "ok": len(spark_ok),
                                "bad_sql": sql.first()[0], "exploded": exploded, "segment": list(seg)}))
    spark.stop()
''')


def first_error(stderr: str) -> str:
    """The driver's stderr from its first Python traceback or Java exception (the cause; what
    follows is mostly shutdown noise)."""
    starts = [i for i in (stderr.find("Traceback"), stderr.find("Exception"), stderr.find("ERROR")) if i >= 0]
    return stderr[min(starts):][:6000] if starts else stderr[-4000:]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def test_packed_venv_in_spark_archives(tmp_path, manylinux_wheel):
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    wheel = manylinux_wheel(platform.machine())  # the manylinux2014 wheel users install
    env = tmp_path / "env"
    made = run([sys.executable, "-m", "venv", str(env)], timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check"]
    # Third-party wheels come from PyPI (or pip's cache); only their absence is a reason to skip.
    deps = run(pip + ["pyarrow", "numpy", "cramjam", "xxhash", "venv-pack"], timeout=900)
    if deps.returncode != 0:
        pytest.skip("cannot install pyarrow/numpy/cramjam/xxhash/venv-pack into a fresh venv (PyPI unreachable?): "
                    + deps.stderr.strip().splitlines()[-1])
    ours = run(pip + ["--no-index", "--no-deps", str(wheel)], timeout=300)
    assert ours.returncode == 0, ours.stderr[-2000:]
    archive = tmp_path / "pykbatch-env.tar.gz"
    packed = run([str(env / "bin" / "venv-pack"), "-p", str(env), "-o", str(archive), "--compress-level", "1"],
                 timeout=900)
    assert packed.returncode == 0, packed.stderr[-2000:]

    # Executors run the shipped interpreter; the driver keeps this one (the checkout's pykbatch).
    # Spark plans a Python data source by running PYSPARK_PYTHON on the driver, from its working
    # directory: in client mode the same environment must be there too (as docs/spark.md says).
    (tmp_path / "environment").symlink_to(env, target_is_directory=True)
    run_env = dict(os.environ, PYSPARK_PYTHON="./environment/bin/python", PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = run([sys.executable, "-c", DRIVER, str(archive), str(tmp_path / "segments")], timeout=600, env=run_env,
               cwd=str(tmp_path))
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert result, first_error(proc.stderr)
    got = json.loads(result[0].split(" ", 1)[1])
    # each executor's own directory (<spark work dir>/app-<id>/<executor>/), where spark.archives is unpacked
    shipped = re.compile(r"/app-[^/]+/\d+/environment/bin/python \S+/app-[^/]+/\d+/environment/lib/\S+/pykbatch/")
    assert got["origins"] and all(shipped.search(o) and ROOT not in o for o in got["origins"]), got["origins"]
    assert (got["same"], got["ok"], got["bad_sql"], got["exploded"]) == (True, 96, 4, 192)
    assert got["segment"] == [200, 200, 3]
