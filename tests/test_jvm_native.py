"""The JVM path's native side outside Spark (csrc/jni/kb_jni.c through pykbatch's jar): the library
refuses a jar of another build, says which build it is, and frees its native memory with the
validators that own it (resident set flat over 10^6 batches)."""
import os
import shutil
import subprocess
import zipfile

import pytest

import pykbatch as kb

pyspark = pytest.importorskip("pyspark", reason="pyspark is the [spark] extra (the jar is compiled against it)")

HERE = os.path.dirname(os.path.abspath(__file__))


def _java():
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


@pytest.fixture(scope="module")
def jar():
    from spark_udfs import jvm
    reason = jvm.unavailable_reason()
    if reason or not _java():
        if os.environ.get("CI"):
            pytest.fail(f"the JVM path must run on CI: {reason or 'no java'}")
        pytest.skip(f"JVM path unavailable: {reason or 'no java'}")
    return jvm.jar()


def _classpath(*jars):
    from spark_udfs.jvm import _spark_jars
    return os.pathsep.join(list(jars) + [os.path.join(_spark_jars(), "*")])


def _run(*args, timeout=600, crash_dir=None):
    """java with ``args``; a JVM that dies writes its crash report into ``crash_dir`` (never the
    working directory: a checkout)."""
    import tempfile
    where = crash_dir or tempfile.gettempdir()
    return subprocess.run([_java(), f"-XX:ErrorFile={where}/hs_err_pid%p.log", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_jar_says_which_build_it_is(jar):
    from spark_udfs.jvm import LIBRARY_VERSION
    with open(LIBRARY_VERSION) as f:
        version = f.read().strip()
    done = _run("-cp", _classpath(jar), "io.pykbatch.spark.Functions")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"pykbatch-spark {version} (native library loaded)"


def test_a_library_of_another_build_is_refused(jar, tmp_path):
    """The classes and the library of two builds on one classpath: refused with a message naming
    both builds, before any row is read."""
    doctored = tmp_path / "other.jar"
    with zipfile.ZipFile(jar) as src, zipfile.ZipFile(doctored, "w") as out:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("/build.properties"):
                data = b"version=0.0.0+another-build\n"
            out.writestr(item, data)
    done = _run("-cp", _classpath(str(doctored)), "io.pykbatch.spark.Functions")
    assert done.returncode == 1
    assert "but the jar's classes are 0.0.0+another-build" in done.stderr and "Keep one" in done.stderr


def test_native_memory_is_freed_with_the_validators(jar, tmp_path):
    """10^6 batches, small and compressed, sound and damaged, through the JVM function, a new
    validator every 100 rows (each with a culprit buffer and a decompression scratch): the
    resident set after the first tenth and at the end stay within a few MiB."""
    classes = tmp_path / "classes"
    javac = shutil.which("javac") or os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "javac")
    built = subprocess.run([javac, "-nowarn", "-cp", _classpath(jar), "-d", str(classes),
                            os.path.join(HERE, "jvm", "NativeMemoryProbe.java")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    rows = []
    small = kb.build_batch([{"key": b"k", "value": b"x" * 100, "timestamp": 1}] * 2)
    bad = bytearray(small)
    bad[-3] ^= 1
    big = [{"key": b"k%d" % i, "value": os.urandom(64) * 16, "timestamp": 1} for i in range(100)]
    for name, codec in (("zstd", "zstd"), ("gzip", "gzip"), ("lz4", "lz4"), ("snappy", "snappy")):
        rows.append(kb.build_batch(big, compression=codec))
        damaged = bytearray(rows[-1])
        damaged[len(damaged) // 2] ^= 0xFF  # the payload: a codec failure (the CRC fails too)
        rows.append(bytes(damaged))
    rows += [small, bytes(bad), small[:40], b"\x00" * 7]
    paths = []
    for i, data in enumerate(rows):
        paths.append(tmp_path / f"row{i}.bin")
        paths[-1].write_bytes(data)
    done = _run("-Xmx256m", "-cp", _classpath(jar, str(classes)), "NativeMemoryProbe", "1000000", "100",
                *map(str, paths))
    assert done.returncode == 0, done.stderr[-3000:]
    _, warm, end, _, ok = done.stdout.split()
    sound = [kb.validate(r).ok for r in rows]
    assert int(ok) == sum(sound[i % len(rows)] for i in range(1000000))
    growth = int(end) - int(warm)
    print(f"resident set: {int(warm) >> 20} MiB after 10^5 rows, {int(end) >> 20} MiB after 10^6")
    assert growth < 48 << 20, f"native memory grew {growth >> 20} MiB over 900,000 rows"


def test_a_segment_cut_short_while_it_is_read_does_not_take_the_jvm_down(jar, tmp_path):
    """kafka-segment's JVM reader maps the segment; a broker's recovery can truncate it meanwhile,
    and a mapped page past the new end faults in native code (SIGBUS: the executor's JVM would
    die).  The reader asks the file's size before each window and reads to the new end."""
    import pykbatch as kb
    classes = _compile_probe(jar, tmp_path, "SegmentTruncationProbe")
    batches = [kb.build_batch([{"value": bytes(1000), "timestamp": 1}] * 4, base_offset=4 * i) for i in range(400)]
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(batches))
    keep = sum(map(len, batches[:100])) + 100  # 100 whole batches, then part of one
    done = _run("-cp", _classpath(str(classes), jar), "io.pykbatch.spark.SegmentTruncationProbe", str(log),
                str(16 * 1024), str(keep))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    first, total = map(int, done.stdout.split("ROWS ", 1)[1].split())
    assert 0 < first < total == 400  # the first window, then the rest of the 100 whole batches


def test_a_segment_cut_or_deleted_at_drawn_moments_while_read_loses_no_executor(jar, tmp_path):
    """Issue 53: the check of the file's size before each window races a truncation, and a mapped
    page past the new end faulted in native code (SIGBUS) and took the JVM down (three crash dumps
    were committed from such probes).  A segment cut to a drawn size, or deleted, at a drawn moment
    while kafka-segment's JVM reader reads and validates it, 40 times: the JVM lives, the records
    read are at most those written, and a cut that took bytes the read had not reached is a row of
    its own (``log.file_shrank``) -- or, cut between a window's read and its checks, the task fails
    with an IOException that says the segment shrank (Spark runs it again).  PYKBATCH_SHRINK_SEED replays a run."""
    import random
    classes = _compile_probe(jar, tmp_path, "SegmentShrinkProbe")
    batches = [kb.build_batch([{"value": bytes(200), "timestamp": 1}] * 20, base_offset=20 * i) for i in range(6000)]
    pristine = tmp_path / "pristine.log"
    pristine.write_bytes(b"".join(batches))
    seed = int(os.environ.get("PYKBATCH_SHRINK_SEED") or random.randrange(2**31))
    print(f"PYKBATCH_SHRINK_SEED={seed}")
    done = _run("-cp", _classpath(str(classes), jar), "io.pykbatch.spark.SegmentShrinkProbe", str(pristine),
                str(tmp_path / "00000000000000000000.log"), str(64 << 20), "40", str(seed), crash_dir=tmp_path)
    assert done.returncode == 0 and "DONE" in done.stdout, (seed, done.stdout[-2000:] + done.stderr[-3000:])
    runs = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("RUN ")]
    assert len(runs) == 40, done.stdout[-3000:]
    whole = len(batches[0])
    for cut, size, records, shrank, other, failed in (map(int, r) for r in runs):
        assert other == 0 and records <= 20 * 6000 and failed != 2, (seed, cut, records, other, failed)
        if failed:  # cut between a window's read and its checks: the task fails saying so
            continue
        if cut >= 0 and records < 20 * 6000:  # the cut came before the read's end: named, once
            assert shrank == 1 and records <= 20 * (cut // whole), (seed, cut, records, shrank)
        else:
            assert shrank == 0 and records == 20 * 6000, (seed, cut, records, shrank)
    assert sum(1 for r in runs if r[3] == "1") >= 5, "no cut met the read: the probe proves nothing"
    assert not list(tmp_path.glob("hs_err_pid*.log"))


def test_a_null_array_is_a_java_exception_not_a_dead_jvm(jar, tmp_path):
    """Native methods handed a null array throw NullPointerException (Spark passes a null value to
    a magic method as it is: reading through it would kill the executor), and bounds outside their
    array IndexOutOfBoundsException -- batch info, repair and the Confluent framing included."""
    classes = _compile_probe(jar, tmp_path, "NullArrayProbe")
    done = _run("-cp", _classpath(str(classes), jar), "io.pykbatch.spark.NullArrayProbe")
    assert done.returncode == 0 and "NPE 11 of 11" in done.stdout and "IOOBE 4 of 4" in done.stdout, \
        done.stdout[-2000:] + done.stderr[-3000:]


def _compile_probe(jar, tmp_path, name: str):
    """tests/jvm/io/pykbatch/spark/<name>.java compiled against the jar (package-private access)."""
    classes = tmp_path / "classes"
    javac = shutil.which("javac") or os.path.join(os.environ.get("JAVA_HOME", ""), "bin", "javac")
    built = subprocess.run([javac, "-nowarn", "-cp", _classpath(jar), "-d", str(classes),
                            os.path.join(HERE, "jvm", "io", "pykbatch", "spark", f"{name}.java")],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return classes
