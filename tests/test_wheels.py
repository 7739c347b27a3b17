"""The wheels users install on Spark executors: manylinux2014 (glibc 2.17) for x86_64 and aarch64,
built without containers by .ci/build_wheels.py.  Each is checked for the tag it claims (auditwheel)
and its contents; the host's wheel is installed into a fresh venv and run outside the checkout
(tests/wheel_smoke.py); the aarch64 wheel's shared objects are checked for their machine and run
under qemu-user with Debian's arm64 CPython (.ci/arm64_python.sh) where that can be set up."""
import io
import json
import os
import platform
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, wheel_builder

pytestmark = pytest.mark.slow

SMOKE = ROOT / "tests" / "wheel_smoke.py"
ELF_MACHINE = {"x86_64": 62, "aarch64": 183}  # e_machine of EM_X86_64, EM_AARCH64
PACKAGES = {"pykbatch", "pykbatch/log", "pykbatch/tiered", "pykbatch/topics", "pykbatch/kafka", "pykbatch/commands",
            "pykbatch/schemas/messages",
            "spark_udfs"}


def auditwheel_show(wheel: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def glibc_versions(shown: str) -> set:
    """The GLIBC_x.y symbol versions auditwheel found the wheel referencing."""
    return {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", shown)}


@pytest.mark.parametrize("arch", sorted(ELF_MACHINE))
def test_the_wheel_claims_manylinux2014_and_holds_the_whole_package(arch, manylinux_wheel):
    wheel = manylinux_wheel(arch)
    assert wheel.name.endswith(f"manylinux2014_{arch}.manylinux_2_17_{arch}.whl"), wheel.name
    shown = auditwheel_show(wheel)
    assert f'"manylinux_2_17_{arch}"' in shown, shown
    assert glibc_versions(shown) and max(glibc_versions(shown)) <= (2, 17), shown
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        objects = [n for n in names if n.endswith(".so")]
        extensions = [n for n in objects if n.startswith("pykbatch/")]
        assert sorted(n.split(".")[0] for n in extensions) == ["pykbatch/_catalogue", "pykbatch/_native"], objects
        for name in objects:
            head = zf.read(name)[:20]
            assert head[:4] == b"\x7fELF" and struct.unpack_from("<H", head, 18)[0] == ELF_MACHINE[arch], name
        for name in extensions:
            assert f"-{arch}-linux-gnu.so" in name, name
        from spark_udfs.jvm_build import jdk_include
        if jdk_include() is not None:  # the JVM path: its JNI library, and the jar carrying the same bytes
            assert "spark_udfs/native/libpykbatch_jni.so" in names and "spark_udfs/jars/pykbatch-spark.jar" in names
            with zipfile.ZipFile(io.BytesIO(zf.read("spark_udfs/jars/pykbatch-spark.jar"))) as jar:
                java_arch = {"x86_64": "amd64", "aarch64": "aarch64"}[arch]
                carried = jar.read(f"io/pykbatch/spark/native/linux-{java_arch}/libpykbatch_jni.so")
            assert carried == zf.read("spark_udfs/native/libpykbatch_jni.so")
    assert PACKAGES <= {n.rsplit("/", 1)[0] for n in names}, sorted({n.rsplit("/", 1)[0] for n in names})
    assert {"pykbatch/py.typed", "pykbatch/_native.pyi", "pykbatch/schemas/dump.schema.json"} <= set(names)


def host_kernels() -> tuple:
    """The CRC kernels the native core must pick on this CPU (x86-64: from /proc/cpuinfo's flags)."""
    if platform.machine() != "x86_64":
        return ()
    flags = set(Path("/proc/cpuinfo").read_text().split("flags")[1].split("\n")[0].split())
    if not {"sse4_2", "pclmulqdq"} <= flags:
        return ("software",)
    return ("avx512+vpclmulqdq" if {"avx512f", "vpclmulqdq"} <= flags else "sse4.2+pclmul",)


@pytest.mark.parametrize("python", ["%d.%d" % sys.version_info[:2], "3.9", "3.13"])
def test_the_hosts_wheel_runs_from_a_fresh_venv(python, manylinux_wheel, tmp_path):
    """This interpreter's wheel, and the oldest and newest CPython's (their own interpreters from
    pyenv: 3.9 has no ``X | Y`` between classes at run time, 3.13 its own C API)."""
    interpreter = wheel_builder().interpreter
    wheel = manylinux_wheel(platform.machine(), python)
    env = tmp_path / "venv"
    subprocess.run([interpreter(python), "-m", "venv", str(env)], check=True, timeout=300)
    venv_python = str(env / "bin" / "python")
    installed = subprocess.run([venv_python, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True, timeout=900)
    if installed.returncode != 0 and "No matching distribution" in installed.stderr:
        pytest.skip("the wheel's dependencies cannot be fetched (PyPI unreachable?): "
                    + installed.stderr.strip().splitlines()[-1])
    assert installed.returncode == 0, installed.stderr[-3000:]
    run = subprocess.run([venv_python, str(SMOKE)], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    smoke = json.loads(run.stdout.split("SMOKE ", 1)[1])
    assert smoke["file"].startswith(str(env)) and smoke["machine"] == platform.machine(), smoke
    assert smoke["python"].startswith(python + "."), smoke
    # the wheel's kernels are the ones this CPU has (a toolchain without CPU-model data once
    # made every wheel fall back to the portable CRCs)
    assert (smoke["crc32c"],) == host_kernels() or not host_kernels(), smoke


SPARK_SMOKE = """
import json, sys
from spark_udfs import jvm
from spark_udfs.session import quiet_session
import pykbatch as kb
spark = quiet_session("local[2]", "pykbatch-wheel-smoke", jvm=True)
good = kb.build_batch([{"key": b"k", "value": b"v", "timestamp": 1}] * 3, compression="zstd")
bad = bytearray(good)
bad[-2] ^= 1
df = spark.createDataFrame([(0, good), (1, bytes(bad))], "id int, value binary")
df.createOrReplaceTempView("batches")
rows = spark.sql("SELECT id, kbatch_validate(value) AS v FROM batches ORDER BY id").collect()
from spark_udfs import kbatch_validate
configured = df.orderBy("id").select(kbatch_validate("value", {"origin": "log"}).alias("v")).collect()
import os, tempfile
log = os.path.join(tempfile.mkdtemp(), "orders-0")
os.makedirs(log)
with open(os.path.join(log, "00000000000000000000.log"), "wb") as f:
    stored_crc = bytearray(kb.build_batch([{"value": b"y", "timestamp": 3}] * 3, base_offset=3))
    stored_crc[17] ^= 1  # readable records, a refused batch
    f.write(b"".join([good, bytes(stored_crc), kb.build_batch([{"value": b"x", "timestamp": 2}] * 4, base_offset=6)]))
segment = spark.read.format("kafka-segment").option("validate", "true").load(log)
store = os.path.join(tempfile.mkdtemp(), "store")  # a tiered store (LocalTieredStorage's layout), no metadata
upload = os.path.join(store, "orders-0-" + "T" * 22)
os.makedirs(upload)
with open(os.path.join(upload, "00000000000000000000-" + "U" * 22 + ".log"), "wb") as f:
    f.write(good + kb.build_batch([{"value": b"x", "timestamp": 2}] * 4, base_offset=3))
tiered = (spark.read.format("kafka-segment").option("isolationLevel", "read_committed")  # validated: Python's on 4.x
          .option("validate", "false").load(store))
try:  # validated (the default in records mode): Python's source on 4.x; refused on 3.x, which has none
    validated_tiered = spark.read.format("kafka-segment").load(store).count()
except Exception as exc:
    validated_tiered = str(exc)[:3000]
from spark_udfs import explode_records, kbatch_batch_info, kbatch_repair
future = kb.build_batch([{"value": b"a", "timestamp": 1}, {"value": b"late", "timestamp": 2**41},
                         {"value": b"c", "timestamp": 2}], compression="zstd")  # one record from the far future
repairs = spark.createDataFrame([(0, future), (1, bytes(bad))], "id int, value binary").orderBy("id") \
    .select(kbatch_repair("value").alias("r")).collect()
print("SPARK", json.dumps({"path": spark.conf.get("spark.pykbatch.functions"), "jar": jvm.jar(),
                           "repaired": [[r.value.decode() for b in kb.iter_batches(x.r.data) for r in b] for x in repairs],
                           "dropped": [[d.value and bytes(d.value).decode() for d in x.r.dropped] for x in repairs],
                           "unrepairable": [x.r.unrepairable_batches for x in repairs],
                           "info": [[(b.compression, b.is_valid) for b in x.i] for x in
                                    df.orderBy("id").select(kbatch_batch_info("value").alias("i")).collect()],
                           "exploded": explode_records(df, "value").count(),
                           "ok": [r.v.ok for r in rows], "rule": rows[1].v.culprits[0].rule,
                           "spark": spark.version, "configured": [r.v.ok for r in configured],
                           "segment": segment.selectExpr("count(*) AS n", "count_if(batch_ok) AS ok").first().asDict(),
                           "segment_on_jvm": "on the JVM" in segment._jdf.queryExecution().executedPlan().toString(),
                           "tiered": tiered.selectExpr("count(*) AS n", "sum(offset) AS offsets",
                                                       "max(leader_epoch) AS epoch").first().asDict(),
                           "tiered_on_jvm": "on the JVM" in tiered._jdf.queryExecution().executedPlan().toString(),
                           "validated_tiered": validated_tiered}))
spark.stop()
"""


SPARK_35 = "3.5.5"  # Spark 3.5, the LTS line of many managed platforms (Scala 2.12)


@pytest.mark.parametrize("spark_version", ["this", SPARK_35])
def test_the_hosts_wheel_runs_a_spark_job_on_the_jvm_path(spark_version, manylinux_wheel, tmp_path):
    """A fresh venv with the wheel and pyspark (and fsspec, for tiered stores), and no javac on its
    PATH: the wheel's own jar (its JNI library inside, compiled against this pyspark) serves
    kbatch_validate and kafka-segment -- a tiered store too, planned by the venv's Python -- in
    Spark's JVM, in this Spark, and in Spark 3.5, where pykbatch's Python functions and sources
    cannot run."""
    import shutil
    pyspark = pytest.importorskip("pyspark", reason="the JVM path's smoke test installs the same pyspark")
    version = pyspark.__version__ if spark_version == "this" else spark_version
    from spark_udfs.jvm_build import jdk_include
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    if jdk_include() is None or not java:
        pytest.skip("no JDK here: the wheel carries no jar")
    wheel = manylinux_wheel(platform.machine())
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    venv_python = str(env / "bin" / "python")
    installed = subprocess.run([venv_python, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", str(wheel),
                                f"pyspark=={version}", "pandas<3", "fsspec"], capture_output=True, text=True,
                               timeout=1200)
    if installed.returncode != 0 and "No matching distribution" in installed.stderr:
        pytest.skip("pyspark cannot be fetched: " + installed.stderr.strip().splitlines()[-1])
    assert installed.returncode == 0, installed.stderr[-3000:]
    bin_dir = tmp_path / "bin"  # java alone on PATH: no javac to build a jar with
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(os.path.realpath(java))
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAVA_HOME", "PYKBATCH_SPARK_PATH")}
    clean.update(PATH=f"{bin_dir}:{env / 'bin'}:/usr/bin:/bin", PYKBATCH_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([venv_python, "-c", SPARK_SMOKE], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env=clean)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    smoke = json.loads(run.stdout.split("SPARK ", 1)[1])
    assert smoke["path"] == "jvm" and smoke["jar"].startswith(str(env)), smoke
    assert smoke["ok"] == [True, False] and smoke["rule"] == "batch.crc_mismatch", smoke
    assert smoke["spark"] == version and smoke["configured"] == [True, False], smoke
    # kafka-segment's JVM reader: every record of the log, the refused batch's marked
    assert smoke["segment_on_jvm"] and smoke["segment"] == {"n": 10, "ok": 7}, smoke
    # a tiered store on the JVM (its plan made by the venv's Python): every offset, no lineage
    assert smoke["tiered_on_jvm"] and smoke["tiered"] == {"n": 7, "offsets": 21, "epoch": -1}, smoke
    # validated, a tiered read names unreadable ranges in rows: Python's source (4.x), else refused by name
    if version.startswith("3."):
        assert "validate=false" in str(smoke["validated_tiered"]) and "Spark 4.0+" in smoke["validated_tiered"], smoke
    else:
        assert smoke["validated_tiered"] == 7, smoke
    # kbatch_repair (a zstd batch rebuilt by the JVM's codecs), kbatch_batch_info, explode_records
    assert smoke["repaired"] == [["a", "c"], []] and smoke["dropped"] == [["late"], [None]], smoke
    assert smoke["unrepairable"] == [0, 1] and smoke["exploded"] == 3, smoke
    assert smoke["info"] == [[["zstd", True]], [["zstd", False]]], smoke


def arm64_python() -> list:
    done = subprocess.run(["bash", str(ROOT / ".ci" / "arm64_python.sh")], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        pytest.skip("no aarch64 CPython under qemu-user here: " + (done.stderr.strip() or "setup failed")[-300:])
    return done.stdout.split()


def test_the_aarch64_wheel_runs_under_emulation(manylinux_wheel, tmp_path):
    python = arm64_python()
    version = subprocess.run(python + ["-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if version != "%d.%d" % sys.version_info[:2]:
        pytest.skip(f"the emulated CPython is {version}; this interpreter builds the cp{sys.version_info[0]}"
                    f"{sys.version_info[1]} wheel")
    site = tmp_path / "site"
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", "--target", str(site),
         "--platform", "manylinux2014_aarch64", "--python-version", version, "--only-binary=:all:",
         str(manylinux_wheel("aarch64"))], capture_output=True, text=True, timeout=900)
    if fetched.returncode != 0 and "No matching distribution" in fetched.stderr:
        pytest.skip("aarch64 wheels of the dependencies cannot be fetched: " + fetched.stderr.strip()[-300:])
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    run = subprocess.run(python + [str(SMOKE)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(site)))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    smoke = json.loads(run.stdout.split("SMOKE ", 1)[1])
    assert smoke["machine"] == "aarch64" and smoke["crc32c"] == "armv8-crc" and smoke["file"].startswith(str(site))
