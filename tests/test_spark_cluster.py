"""pykbatch on Spark executors that are separate JVMs (local-cluster[2,1,1024]), the way a
cluster runs it with the package installed on the nodes: the UDFs, the segment source and the
dead-letter split work off the driver's process."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = textwrap.dedent('''
    import os, sys
    import pykbatch as kb, spark_udfs
    from spark_udfs.dead_letters import ErrorPolicy, split_dead_letters
    from spark_udfs.session import quiet_session
    spark = quiet_session("local-cluster[2,1,1024]")
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    rows = []
    for i in range(200):
        data = bytearray(kb.build_batch([(b"k", b"v%d" % i)] * 3))
        if i % 50 == 7:
            data[18] ^= 1
        rows.append((i, bytes(data)))
    df = spark.createDataFrame(rows, "id int, value binary").repartition(4)
    import tempfile
    log = os.path.join(tempfile.mkdtemp(), "orders-0")
    os.makedirs(log)
    with open(os.path.join(log, "00000000000000000000.log"), "wb") as f:
        for i in range(200):  # the same batches, at a log's offsets
            data = bytearray(kb.build_batch([(b"k", b"v%d" % i)] * 3, base_offset=3 * i))
            if i % 50 == 7:
                data[18] ^= 1
            f.write(bytes(data))
    paths = ["python"] + (["jvm"] if spark.conf.get("spark.pykbatch.functions") == "jvm" else [])
    for path in paths:  # the JVM path: pykbatch's jar shipped to the executors by spark.jars
        spark_udfs.register(spark, jvm=path == "jvm")
        ok = df.select(spark_udfs.kbatch_validate("value").alias("v")).selectExpr("count_if(v.ok)").first()[0]
        good, dead = split_dead_letters(df, "value", ErrorPolicy(tolerance="all"))
        records = spark_udfs.explode_records(good, "value").count()
        pids = set(df.rdd.map(lambda r: os.getpid()).collect())
        # kafka-segment: the JVM reader on the JVM path (its jar's source found by the executors too)
        segment = spark.read.format("kafka-segment").option("validate", "true").option("splitBytes", "4000").load(log)
        on_jvm = "on the JVM" in segment._jdf.queryExecution().executedPlan().toString()
        segment_ok = segment.selectExpr("count_if(batch_ok)").first()[0]
        print("RESULT", path, executors, ok, dead.count(), records, os.getpid() not in pids, segment_ok,
              on_jvm == (path == "jvm"))
    spark.stop()
''')


def test_local_cluster_executors_run_pykbatch(tmp_path):
    import shutil
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = {line.split()[1]: line.split()[2:] for line in proc.stdout.splitlines() if line.startswith("RESULT")}
    assert result, proc.stderr[-3000:]
    from spark_udfs import jvm
    if jvm.unavailable_reason() is None:
        assert set(result) == {"python", "jvm"}, proc.stderr[-3000:]
    for path, (executors, ok, dead, records, off_driver, segment_ok, segment_path) in result.items():
        assert (int(executors), int(ok), int(dead), int(records), off_driver) == (2, 196, 4, 588, "True"), path
        assert (int(segment_ok), segment_path) == (588, "True"), path  # each damaged batch's 3 records marked
