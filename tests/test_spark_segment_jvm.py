"""kafka-segment's JVM reader (io.pykbatch.spark.SegmentSource: the core walks and decodes each split
window by window, Spark gets ColumnarBatches over its buffers) against the Python source, row for
row, on drawn logs: entries of every magic and codec, damage drawn in kind and place (flipped bits,
cut entries whose framing is lost, zeroed spans, garbage between entries, zero tails), indexes true
and stale, splits and windows of drawn sizes, with and without the validator's verdict.  Seed
printed; PYKBATCH_SEGMENT_SEED repeats a run."""
import os
import random
import struct

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")

from tests.conftest import require_jvm_path  # noqa: E402
from tests.test_spark import collect_plain  # noqa: E402
from tests.test_spark_jvm import _batch, _damage  # noqa: E402

pytestmark = pytest.mark.spark

JVM_SCAN = "pykbatch's core on the JVM"


def _segment(rng: random.Random, now_ms: int, base: int) -> tuple:
    """A segment's bytes, the (position, next offset) of each entry, and the positions of entries
    whose compressed payload was damaged (the codecs are each host's: their records may differ)."""
    out, entries, codec_damaged, offset = bytearray(), [], set(), base
    for _ in range(rng.choice([1, 3, 8, 20])):
        if rng.random() < 0.08:  # bytes that are no entry: the framing is lost, then found again
            out += rng.choice([rng.randbytes(rng.choice([3, 20, 70])), bytes(rng.choice([12, 40]))])
        data, damaged = _damage(rng, _batch(rng, now_ms, offset)) if rng.random() < 0.3 \
            else (_batch(rng, now_ms, offset), False)
        if damaged:
            codec_damaged.add(len(out))
        entries.append((len(out), offset + 30))
        out += data
        offset += 30
    if rng.random() < 0.2:
        out += bytes(rng.choice([1, 100, 4096]))  # a preallocated tail
    return bytes(out), entries, codec_damaged


def _index(rng: random.Random, entries: list, base: int) -> bytes:
    """A .index: true entries (a batch's last offset, its position) and now and then a stale one."""
    picked = sorted(rng.sample(entries, min(len(entries), rng.choice([0, 2, 5]))))
    out = b""
    for position, end in picked:
        if rng.random() < 0.1:
            position += rng.choice([1, 13])  # stale: not a batch's start
        out += struct.pack(">ii", end - 1 - base, position)
    return out + bytes(8 * rng.choice([0, 3]))


def _time_index(rng: random.Random, entries: list, base: int, now_ms: int) -> bytes:
    """A .timeindex: (timestamp, relative offset) entries drawn about the batches' times, in order or
    not (a damaged one), and now and then a preallocated zero tail."""
    picked = sorted(rng.sample(entries, min(len(entries), rng.choice([0, 1, 3]))))
    stamps = sorted(now_ms + rng.choice([-10**9, -5000, 0, 5000, 10**8]) for _ in picked)
    if rng.random() < 0.15:
        rng.shuffle(stamps)
    out = b"".join(struct.pack(">qi", t, end - 1 - base) for t, (_, end) in zip(stamps, picked))
    return out + bytes(12 * rng.choice([0, 2]))


def _ranges(rng: random.Random, now_ms: int) -> dict:
    """Range options drawn about the drawn logs' offsets (batches 30 apart) and times."""
    out = {}
    if rng.random() < 0.5:
        out["startingOffset"] = str(rng.choice([0, 1, 29, 30, 47, 95, 150, 10**6]))
    if rng.random() < 0.35:
        out["endingOffset"] = str(rng.choice([1, 31, 62, 120, 400]))
    if rng.random() < 0.4:
        out["startingTimestamp"] = str(now_ms + rng.choice([-10**9 - 6000, -10**9, -1, 0, 3000, 10**8]))
    if rng.random() < 0.3:
        out["endingTimestamp"] = str(now_ms + rng.choice([-10**9 + 4000, 0, 1, 10**8 + 6000]))
    return out


def _write_log(rng: random.Random, root, now_ms: int) -> set:
    """Partition folders of one or two segments each (and a file that is no segment); returns the
    (file, position) of the entries whose compressed payload was damaged."""
    damaged = set()
    for p in range(rng.choice([1, 2])):
        folder = root / f"{rng.choice(['orders', 'ünï', 'a-b'])}-{p}"
        folder.mkdir()
        (folder / "leader-epoch-checkpoint").write_text("0\n0\n")
        base = 0
        for _ in range(rng.choice([1, 2])):
            data, entries, codec_damaged = _segment(rng, now_ms, base)
            log = folder / f"{base:020d}.log"
            log.write_bytes(data)
            (folder / f"{base:020d}.index").write_bytes(_index(rng, entries, base))
            if rng.random() < 0.7:
                (folder / f"{base:020d}.timeindex").write_bytes(_time_index(rng, entries, base, now_ms))
            damaged |= {(str(log), pos) for pos in codec_damaged}
            base = entries[-1][1] if entries else base + 1
    return damaged


def _rows(df) -> list:
    return collect_plain(df)


def _comparable(row: dict) -> dict:
    """A row with a codec library's own words set aside (its failure's cause follows ': ')."""
    error = row.get("batch_error")
    if error and error.startswith("Failed to decompress"):
        return dict(row, batch_error=error.split(": ")[0])
    return row


def _splits(df) -> int:
    """A read's input partitions; nothing to read is one (the Python source plans an empty split, the
    JVM's none)."""
    return max(1, df.rdd.getNumPartitions())


def _order(row: dict) -> tuple:
    """Rows in file order: a record's (or batch's) by its offset, a row for what cannot be read
    (offsets unknown) by its rule."""
    offset = row.get("offset", row.get("base_offset"))
    return (row["path"], row["batch_position"], offset is None, offset or 0, row.get("error_rule") or "",
            row.get("lost_bytes") or 0)


def _first_difference(jvm: list, python: list):
    """The first rows of two sorted lists that differ, and the fields in which they do."""
    for i, (a, b) in enumerate(zip(jvm, python)):
        if a != b:
            return i, {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    return len(jvm), len(python)


def test_jvm_reader_equals_the_python_source_on_drawn_logs(spark, tmp_path):
    from spark_udfs.functions import register
    from spark_udfs.segment_source import NAME, PYTHON_NAME
    require_jvm_path(spark)
    register(spark)
    seed = int(os.environ.get("PYKBATCH_SEGMENT_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_SEGMENT_SEED={seed}")
    rng = random.Random(seed)
    now_ms = 1_760_000_000_000
    total = 0
    for trial in range(8):
        root = tmp_path / f"log{trial}"
        root.mkdir()
        damaged = _write_log(rng, root, now_ms)
        options = {"validate": rng.choice(["true", "false"]), "includePath": "true",
                   "splitBytes": str(rng.choice([100, 2000, 64 << 20])),
                   "windowBytes": str(rng.choice([1, 500, 8 << 20])),
                   **rng.choice([{}, {}, {"mode": "batches"}, {"deep": "false"}]),  # a row a record, or a batch
                   **(_ranges(rng, now_ms) if rng.random() < 0.6 else {})}
        jvm_df = spark.read.format(NAME).options(**options).load(str(root))
        assert JVM_SCAN in jvm_df._jdf.queryExecution().executedPlan().toString()
        python_df = spark.read.format(PYTHON_NAME).options(**options).load(str(root))
        assert jvm_df.schema == python_df.schema
        where = (seed, trial, options)
        assert _splits(jvm_df) == _splits(python_df), where

        def keyed(rows):
            return sorted((_comparable(r) for r in rows if (r["path"], r["batch_position"]) not in damaged),
                          key=_order)
        jvm, python = _rows(jvm_df), _rows(python_df)
        assert keyed(jvm) == keyed(python), (where, _first_difference(keyed(jvm), keyed(python)))
        assert len(jvm) == len(python), where  # a damaged compressed entry gives rows on both or neither
        # a query that reads no column of the rows: the core counts them without filling any
        assert jvm_df.count() == len(jvm), where
        by_file = {r["path"]: r["count"] for r in jvm_df.groupBy("path").count().collect()}
        assert by_file == {r["path"]: r["count"] for r in python_df.groupBy("path").count().collect()}, where
        total += len(jvm)
        if rng.random() < 0.5:  # WHERE clauses narrowing the ranges too (pushFilters)
            low, high = rng.choice([0, 29, 31, 60]), rng.choice([30, 61, 200])
            stamp = now_ms + rng.choice([-10**9, 0, 10**8])
            where_clause = rng.choice([f"offset >= {low} AND offset < {high}", f"offset = {low}",
                                       f"timestamp >= timestamp_millis({stamp})",
                                       f"offset IN ({low}, {high}) OR timestamp < timestamp_millis({stamp})",
                                       f"timestamp > timestamp_millis({stamp}) AND offset <= {high}"])
            if "offset" not in jvm_df.columns:
                continue
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
            try:
                pushed = {**options, "pushFilters": "true"}
                jvm_where = spark.read.format(NAME).options(**pushed).load(str(root)).where(where_clause)
                python_where = spark.read.format(PYTHON_NAME).options(**pushed).load(str(root)).where(where_clause)
                assert JVM_SCAN in jvm_where._jdf.queryExecution().executedPlan().toString()
                assert keyed(_rows(jvm_where)) == keyed(_rows(python_where)), (where, where_clause)
                assert _splits(jvm_where) == _splits(python_where), (where, where_clause)
            finally:
                spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    assert total > 0


def test_reads_the_jvm_reader_does_not_serve_go_to_the_python_source(spark, tmp_path):
    """Options beyond the JVM reader's (decode...) and a session registered for the Python
    path are served by the Python source under the one name, with its answers; batches mode is the
    JVM's, with the same answer."""
    import pykbatch as kb
    from spark_udfs.functions import register
    from spark_udfs.segment_source import NAME
    require_jvm_path(spark)
    folder = tmp_path / "t-0"
    folder.mkdir()
    (folder / f"{0:020d}.log").write_bytes(b"".join(
        kb.build_batch([{"value": b"v", "timestamp": 1000 + i}], base_offset=i) for i in range(10)))
    register(spark)

    def plan(df):
        return df._jdf.queryExecution().executedPlan().toString()
    served = spark.read.format(NAME).load(str(tmp_path))
    assert JVM_SCAN in plan(served) and served.count() == 10
    ranged = spark.read.format(NAME).option("startingOffset", "4").option("endingTimestamp", "1008").load(str(tmp_path))
    assert JVM_SCAN in plan(ranged) and sorted(r.offset for r in ranged.collect()) == list(range(4, 8))
    assert ranged.count() == 4  # counted by the core, no column filled: the same rule
    with pytest.raises(Exception, match="startingOffset must be a whole number"):
        spark.read.format(NAME).option("startingOffset", "four").load(str(tmp_path)).collect()
    decoded = spark.read.format(NAME).option("decode", "offsets").load(str(tmp_path))
    assert JVM_SCAN not in plan(decoded)
    headers = spark.read.format(NAME).option("mode", "batches").load(str(tmp_path))
    assert JVM_SCAN in plan(headers) and sorted(r.base_offset for r in headers.collect()) == list(range(10))
    with pytest.raises(Exception, match="contradicts"):
        spark.read.format(NAME).option("mode", "records").option("deep", "false").load(str(tmp_path)).collect()
    register(spark, jvm=False)
    try:
        python = spark.read.format(NAME).load(str(tmp_path))
        assert JVM_SCAN not in plan(python) and python.count() == 10
    finally:
        register(spark)
    with pytest.raises(Exception, match="PATH_NOT_FOUND"):
        spark.read.format(NAME).load(str(tmp_path / "nowhere")).collect()
    # a scheme no Hadoop file system of the session serves: fsspec's, through the Python source
    with pytest.raises(Exception, match="PATH_NOT_FOUND"):
        spark.read.format(NAME).load("memory://nowhere/t-0").collect()
    with pytest.raises(Exception, match="splitBytes must be a positive number"):
        spark.read.format(NAME).option("splitBytes", "-3").load(str(tmp_path)).collect()


def test_where_clauses_prune_whole_segments_on_the_jvm(spark, tmp_path):
    """WHERE on topic, partition and offset leaves out the segments that cannot hold such rows
    (their offsets end below the next segment's base): fewer partitions read, the same rows as the
    Python source's with the same WHERE."""
    import pykbatch as kb
    from spark_udfs.functions import register
    from spark_udfs.segment_source import NAME, PYTHON_NAME
    require_jvm_path(spark)
    register(spark)
    for topic, partition in (("orders", 0), ("orders", 1), ("pay", 0)):
        folder = tmp_path / f"{topic}-{partition}"
        folder.mkdir()
        for base in (0, 100, 200):
            (folder / f"{base:020d}.log").write_bytes(b"".join(
                kb.build_batch([{"value": b"v%d" % o, "timestamp": 1}] * 10, base_offset=o) for o in range(base, base + 100, 10)))
    wheres = ["offset >= 150", "offset < 100 AND partition = 1", "topic = 'pay' AND offset BETWEEN 120 AND 130",
              "offset = 299", "offset = 200", "offset < 200 AND offset >= 199", "offset > 9223372036854775806", "partition IN (0, 7) AND offset <= 100", "value IS NOT NULL"]
    everything = spark.read.format(NAME).load(str(tmp_path)).rdd.getNumPartitions()
    for where in wheres:
        jvm = spark.read.format(NAME).load(str(tmp_path)).where(where)
        python = spark.read.format(PYTHON_NAME).load(str(tmp_path)).where(where)
        assert sorted(map(tuple, jvm.collect())) == sorted(map(tuple, python.collect())), where
        if where != "value IS NOT NULL":
            assert jvm.rdd.getNumPartitions() < everything, where


S3A_JOB = r"""
import json, sys
from spark_udfs.session import quiet_session
from spark_udfs.functions import register
from spark_udfs.segment_source import NAME, PYTHON_NAME
url, endpoint, jars, runs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
spark = quiet_session("local[2]", "s3a", **{
    "spark.jars": jars, "spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.path.style.access": "true",
    "spark.hadoop.fs.s3a.access.key": "testing", "spark.hadoop.fs.s3a.secret.key": "testing",
    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false", "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"})
register(spark)
out = []
for options in runs:
    answers = {}
    for name in (NAME, PYTHON_NAME):
        df = spark.read.format(name).options(**options).load(url)
        plan = df._jdf.queryExecution().executedPlan().toString()
        rows = sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=repr) for r in df.collect())
        answers[name] = {"jvm": "pykbatch's core on the JVM" in plan, "rows": rows, "count": df.count()}
    out.append(answers)
try:
    spark.read.format(NAME).load(url + "-nowhere").collect()
    print("MISSING read")
except Exception as exc:
    print("MISSING " + ("PATH_NOT_FOUND" if "PATH_NOT_FOUND" in str(exc) else repr(exc)[:300]))
print("ANSWERS " + json.dumps(out))
"""


def test_a_store_sparks_file_systems_serve_is_read_on_the_jvm(s3_server, tmp_path):
    """s3a:// -- a real S3-compatible server (moto) through Hadoop's S3A, the path Spark gives --
    is read by the JVM reader (each segment spooled by its task) with the Python source's rows
    (fsspec's s3fs over the same bucket), ranges and batches mode included; a URL no Hadoop file
    system serves still goes to the Python source."""
    import json
    import subprocess
    import sys
    from tests import kafka_tools
    jars = kafka_tools.s3a_jars_or_skip("the Python source reads s3a:// through s3fs")
    seed = int(os.environ.get("PYKBATCH_SEGMENT_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_SEGMENT_SEED={seed}")
    rng = random.Random(seed)
    now_ms = 1_760_000_000_000
    root = tmp_path / "log"
    root.mkdir()
    damaged = _write_log(rng, root, now_ms)
    url = s3_server.upload(root, "segments", "cluster").replace("s3://", "s3a://", 1)
    runs = [{"includePath": "true", "validate": "true"}, {"includePath": "true", "mode": "batches"},
            {"includePath": "true", **_ranges(rng, now_ms)}, {"includePath": "true", "startingOffset": "31"}]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=s3_server.endpoint,
               AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    proc = subprocess.run([sys.executable, "-c", S3A_JOB, url, s3_server.endpoint, jars, json.dumps(runs)],
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    answers = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("ANSWERS "))[len("ANSWERS "):])
    assert "MISSING PATH_NOT_FOUND" in proc.stdout, proc.stdout[-2000:]
    local_damage = {(path.replace(str(root), url), position) for path, position in damaged}
    total = 0
    for options, answer in zip(runs, answers):
        jvm, python = answer["kafka-segment"], answer["kafka-segment-python"]
        assert jvm["jvm"] and not python["jvm"], options
        def kept(rows):
            return [json.loads(r) for r in rows if (json.loads(r)["path"], json.loads(r)["batch_position"])
                    not in local_damage]
        assert kept(jvm["rows"]) == kept(python["rows"]), \
            (seed, options, _first_difference(kept(jvm["rows"]), kept(python["rows"])))
        assert jvm["count"] == len(jvm["rows"]) and len(jvm["rows"]) == len(python["rows"]), (seed, options)
        assert all(json.loads(r)["path"].startswith(url + "/") for r in jvm["rows"])
        total += len(jvm["rows"])
    assert total > 0
