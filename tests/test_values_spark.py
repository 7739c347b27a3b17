"""kbatch_from_avro and kbatch_from_confluent in Spark: equal to Spark's own from_avro (spark-avro
from Maven Central) on every Avro type, the registry's schemas on the executors, culprit rows
instead of failed tasks, and SQL."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import kafka_tools
from tests.avro_zoo import ZOO_V1, ZOO_V2, zoo_records
from tests.test_values_avro import datum, fastavro_read
from tests.test_values_registry import avro_serializer, context

ROOT = Path(__file__).resolve().parents[1]

BOTH = """
import json, sys
from spark_udfs.session import quiet_session
spark = quiet_session("local[2]", "from-avro-contrast", **{"spark.jars": sys.argv[3]})
from pyspark.sql.avro.functions import from_avro
from spark_udfs import kbatch_from_avro
schema = open(sys.argv[2]).read()
df = spark.read.parquet(sys.argv[1])
theirs = [r.v for r in df.orderBy("n").select(from_avro("value", schema, {"mode": "PERMISSIVE"}).alias("v")).collect()]
ours = [r.v for r in df.orderBy("n").select(kbatch_from_avro("value", schema).alias("v")).collect()]
bad = [r.n for r in df.select("n").collect() if r.n >= 1000]
same = sum(1 for a, b in zip(theirs, ours) if a == b)
print("ROWS", len(theirs), "SAME", same, "OURS_NULL", sum(1 for b in ours if b is None), flush=True)
"""


def test_kbatch_from_avro_equals_sparks_from_avro(tmp_path):
    """Spark's from_avro and kbatch_from_avro over the same column (the zoo: every Avro type) give
    the same rows; the one damaged value is a null row for us (from_avro PERMISSIVE gives a struct
    of nulls there)."""
    try:
        jars = kafka_tools.spark_jars("spark-avro")
    except RuntimeError as exc:
        pytest.skip(f"spark-avro could not be fetched from Maven Central: {exc}")
    pytest.importorskip("pyspark")
    values = [datum(ZOO_V1, r) for r in zoo_records(24)]
    table = pa.table({"n": list(range(len(values))) + [1000], "value": pa.array(values + [values[3][:7]], pa.binary())})
    pq.write_table(table, tmp_path / "zoo.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(ZOO_V1))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", BOTH, str(tmp_path / "zoo.parquet"), str(tmp_path / "schema.json"), jars],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ROWS"))
    assert line == f"ROWS {len(values) + 1} SAME {len(values)} OURS_NULL 1", line


def test_kbatch_from_confluent_reads_the_registry_on_the_executors(spark, schema_registry, spark_path):
    from spark_udfs import kbatch_from_confluent
    ser1 = avro_serializer(schema_registry, ZOO_V1)
    ser2 = avro_serializer(schema_registry, ZOO_V2)
    ctx = context(f"spark-zoo-{spark_path}")
    v1 = [ser1(r, ctx) for r in zoo_records(6)]
    v2 = [ser2(fastavro_read(datum(ZOO_V1, r), ZOO_V1, ZOO_V2), ctx) for r in zoo_records(6)]
    rows = [(k, v) for k, v in enumerate(v1 + v2 + [b"junk", v1[0][:-2]])]
    df = spark.createDataFrame(rows, "n int, value binary").repartition(2)
    options = {"schema.registry.url": schema_registry.url,
               "basic.auth.user.info": schema_registry.config["basic.auth.user.info"],
               "subject": f"spark-zoo-{spark_path}-value"}
    out = {r.n: r.v for r in df.select("n", kbatch_from_confluent("value", options).alias("v")).collect()}
    assert all(out[k] is not None for k in range(12)) and out[12] is None and out[13] is None
    assert out[0]["added"] == "fresh" and out[7]["i"] == zoo_records(6)[1]["i"]  # v1 read as v2: defaults
    culprits = {r.n: r.v.culprit for r in df.select("n", kbatch_from_confluent("value", options, with_culprits=True)
                                                    .alias("v")).collect() if r.v.culprit is not None}
    assert {k: c.rule for k, c in culprits.items()} == {12: "value.schema_framing", 13: "value.datum_truncated"}
    for n, rule in ((12, "schema_framing"), (13, "datum_truncated")):  # each fault fails the task, named
        with pytest.raises(Exception, match=rf"value\.{rule}"):
            df.where(f"n = {n}").select(kbatch_from_confluent("value", {**options, "mode": "FAILFAST"})).collect()


def _hashes_on_both_paths(spark, df, column) -> tuple[list, list]:
    """column() on the Python path and on the JVM path, rows by n, each as Spark's hash of the
    value (None: null): a flipped byte can make a time or timestamp that neither Python's datetime
    nor Spark's formatting can hold (an Avro time-of-day past 24 h), but Spark's values compare
    all the same."""
    from pyspark.sql.functions import xxhash64

    from spark_udfs.functions import register
    got = {}
    spark.conf.set("spark.sql.legacy.allowHashOnMapType", "true")  # both paths' maps keep the datum's order
    try:
        for path in ("python", "jvm"):
            register(spark, jvm=path == "jvm")
            decoded = df.select("n", column().alias("v"))
            assert ("pykbatch.kbatch_" in decoded._jdf.queryExecution().executedPlan().toString()) == (path == "jvm")
            rows = decoded.select("n", xxhash64("v").alias("h"), decoded.v.isNull().alias("null")).collect()
            got[path] = [None if r.null else r.h for r in sorted(rows, key=lambda r: r.n)]
    finally:
        spark.conf.unset("spark.sql.legacy.allowHashOnMapType")
        register(spark)
    return got["python"], got["jvm"]


def _confluent_both(spark, df, options) -> tuple[list, list]:
    """kbatch_from_confluent (PERMISSIVE) on both paths, as _hashes_on_both_paths gives them."""
    from spark_udfs import kbatch_from_confluent
    return _hashes_on_both_paths(spark, df, lambda: kbatch_from_confluent("value", options))


def test_kbatch_from_confluent_on_the_jvm_equals_the_python_path_on_drawn_values(spark, schema_registry):
    """Values of two versions of a subject, drawn and damaged (cut anywhere, bytes flipped, the
    framing broken, bytes after the datum, ids the registry never gave), read over TLS with basic
    auth: the JVM path equals the Python path row for row -- an id the registry lacks is a null on
    both (the executor asked the registry).  Then a third version registered after the query was
    planned: the JVM task fails saying to plan again (a null would lose a readable value), and
    planned again it reads all three versions as the Python path does.  Seed printed."""
    import random

    from spark_udfs import kbatch_from_confluent
    from spark_udfs.functions import register
    from tests.avro_zoo import ZOO_V3
    from tests.conftest import require_jvm_path
    require_jvm_path(spark)
    seed = int(os.environ.get("PYKBATCH_JVM_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_JVM_SEED={seed}")
    rng = random.Random(seed)
    topic = f"jvm-drawn-{seed}"
    ctx = context(topic)
    ser1, ser2 = avro_serializer(schema_registry, ZOO_V1), avro_serializer(schema_registry, ZOO_V2)
    records = zoo_records(40)
    good = [ser1(r, ctx) for r in records[:20]] + \
        [ser2(fastavro_read(datum(ZOO_V1, r), ZOO_V1, ZOO_V2), ctx) for r in records[20:]]
    values = []
    for k in range(160):
        v = bytearray(rng.choice(good))
        kind = rng.choice(["good", "good", "good", "cut", "flip", "magic", "short", "tail", "unknown_id", "junk", "null"])
        if kind == "cut":
            v = v[:rng.randrange(len(v))]
        elif kind == "flip":
            at = rng.randrange(5, len(v))
            v[at] ^= 1 << rng.randrange(8)
        elif kind == "magic":
            v[0] = rng.randrange(1, 256)
        elif kind == "short":
            v = v[:rng.randrange(5)]
        elif kind == "tail":
            v += rng.randbytes(rng.choice([1, 9]))
        elif kind == "unknown_id":
            v[1:5] = struct.pack(">i", rng.choice([987_654, 2**31 - 1, 0]))
        elif kind == "junk":
            v = bytearray(b"\0" + rng.randbytes(rng.choice([0, 4, 30])))
        values.append(None if kind == "null" else bytes(v))
    df = spark.createDataFrame(list(enumerate(values)), "n int, value binary").repartition(3)
    certs = schema_registry.certificates
    options = {"schema.registry.url": schema_registry.tls_url, "ssl.ca.location": str(certs.ca),
               "basic.auth.user.info": schema_registry.config["basic.auth.user.info"], "subject": f"{topic}-value"}
    python, jvm = _confluent_both(spark, df, options)
    assert jvm == python, (seed, [(n, a, b) for n, (a, b) in enumerate(zip(python, jvm)) if a != b][:3])
    assert 40 < sum(v is not None for v in python) < 150  # readable and unreadable values both drawn

    # a version registered after the query was planned: a failed task, never a null
    register(spark, jvm=True)
    try:
        stale = kbatch_from_confluent("value", options)  # planned now: versions 1 and 2
        v3 = avro_serializer(schema_registry, ZOO_V3)(
            fastavro_read(datum(ZOO_V2, fastavro_read(datum(ZOO_V1, records[0]), ZOO_V1, ZOO_V2)), ZOO_V2, ZOO_V3), ctx)
        planned = df.union(spark.createDataFrame([(1000, v3)], "n int, value binary"))
        with pytest.raises(Exception, match="was not a version of subject .* when the query was planned"):
            planned.select(stale).collect()
    finally:
        register(spark)
    # planned again (the reader named: the subject's latest is cached for minutes): all three read
    python, jvm = _confluent_both(spark, planned, {**options, "reader.schema": json.dumps(ZOO_V3)})
    assert jvm == python and python[-1] is not None
    text = planned.where("n = 1000").select(kbatch_from_confluent("value", {**options, "reader.schema": json.dumps(ZOO_V3)})
                                            .text.alias("t")).first().t
    assert text == records[0]["s"].encode()


def test_a_value_decoder_in_sql(spark, schema_registry):
    from spark_udfs import register_value_decoder
    ser = avro_serializer(schema_registry, ZOO_V1)
    spark.createDataFrame([(ser(r, context("sql-zoo")),) for r in zoo_records(3)], "value binary") \
        .createOrReplaceTempView("sql_zoo")
    register_value_decoder(spark, "zoo_value", options={
        "schema.registry.url": schema_registry.url, "basic.auth.user.info": schema_registry.config["basic.auth.user.info"],
        "reader.schema": json.dumps(ZOO_V1)})
    got = spark.sql("SELECT zoo_value(value).home.street AS street, zoo_value(value).kind AS kind FROM sql_zoo").collect()
    assert [(r.street, r.kind) for r in got] == [("street 0", "A"), ("street 1", "B"), ("street 2", "C")]


def test_the_segment_source_decodes_values_with_the_registry(spark, schema_registry, tmp_path):
    """kafka-segment with valueDecoder=confluent: value_decoded and value_culprit beside the record
    columns, decoded where the batch is read."""
    from pykbatch import build_batch
    ser = avro_serializer(schema_registry, ZOO_V1)
    good = [ser(r, context("segment-zoo")) for r in zoo_records(5)]
    part = tmp_path / "segment-zoo-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        build_batch([{"value": v} for v in good]) + build_batch([{"value": b"\x05junk"}], base_offset=5))
    df = (spark.read.format("kafka-segment").option("valueDecoder", "confluent").option("valueSubject", "segment-zoo-value")
          .option("schema.registry.url", schema_registry.url)
          .option("schema.registry.basic.auth.user.info", schema_registry.config["basic.auth.user.info"]).load(str(part)))
    rows = {r.offset: r for r in df.select("offset", "value_decoded", "value_culprit").collect()}
    assert [rows[k].value_decoded.home.street for k in range(5)] == [f"street {k}" for k in range(5)]
    assert rows[5].value_decoded is None and rows[5].value_culprit.rule == "value.schema_framing"
    assert all(rows[k].value_culprit is None for k in range(5))


def test_the_live_source_decodes_values_with_the_registry(spark, schema_registry, kafka_broker):
    """kafka-kbatch with valueDecoder=confluent on a live topic: the values a confluent-kafka
    producer wrote with the AvroSerializer, decoded; a foreign value a culprit row, not a failure."""
    from confluent_kafka import Producer

    from tests.live_damage import create_topic
    topic = "values-live-zoo"
    create_topic(kafka_broker.bootstrap, topic)
    ser = avro_serializer(schema_registry, ZOO_V1)
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for k, r in enumerate(zoo_records(6)):
        producer.produce(topic, ser(r, context(topic)) if k != 4 else b"not avro")
    assert producer.flush(30) == 0
    df = (spark.read.format("kafka-kbatch").option("kafka.bootstrap.servers", kafka_broker.bootstrap)
          .option("subscribe", topic).option("valueDecoder", "confluent").option("valueSubject", f"{topic}-value")
          .option("schema.registry.url", schema_registry.url)
          .option("schema.registry.basic.auth.user.info", schema_registry.config["basic.auth.user.info"]).load())
    rows = {r.offset: r for r in df.select("offset", "value_decoded", "value_culprit").collect()}
    assert sorted(rows) == list(range(6))
    assert [rows[k].value_decoded.i for k in (0, 1, 2, 3, 5)] == [zoo_records(6)[k]["i"] for k in (0, 1, 2, 3, 5)]
    assert rows[4].value_decoded is None and rows[4].value_culprit.rule == "value.schema_framing"


def test_the_values_page_runs(spark, schema_registry, tmp_path, monkeypatch):
    """docs/values.md's examples, in order, against the session's registry (its
    "http://localhost:8081" and "user:secret"), then its command on a segment of those values."""
    import contextlib
    import io

    from pykbatch import build_batch
    from tests.test_docs import blocks, transcript
    user_info = schema_registry.config["basic.auth.user.info"]
    namespace: dict = {"__name__": "docs_values", "spark": spark}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        for code in blocks("values.md", "python"):
            code = code.replace("http://localhost:8081", schema_registry.url).replace("user:secret", user_info)
            exec(compile(code, "docs/values.md", "exec"), namespace)
    assert "value.schema_framing" in out.getvalue() and "'item': 'tea'" in out.getvalue()
    assert namespace["as_reader"].values.to_pylist()[0] == {"id": 1, "qty": 1}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "orders-0").mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").write_bytes(
        build_batch([{"value": v} for v in namespace["values"]]))
    (tmp_path / "registry.properties").write_text(f"url={schema_registry.url}\nbasic.auth.user.info={user_info}\n")
    [(command, _)] = transcript(blocks("values.md", "console")[0])
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert 'payload: {"id":1,"item":"tea","note":null}' in done.stdout
    assert "payload: <value.schema_framing (87) at byte 0:" in done.stdout


def _plain(v):
    """A Spark value on the in-process decoder's ground: rows as dicts, local datetimes as UTC."""
    import datetime
    if hasattr(v, "asDict"):
        return {k: _plain(x) for k, x in v.asDict().items()}
    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.timezone.utc)
    return v


def test_many_readers_in_shuffled_orders_on_one_executor(spark):
    """The executor's Python worker keeps compiled programs from task to task: each reader, in a
    shuffled order (seed printed), gives what it gives alone -- aliases, defaults, logical types
    and names are part of the cache key."""
    import random
    from spark_udfs import kbatch_from_avro
    from tests.test_values_avro import CACHE_READERS, CACHE_RECORDS, CACHE_WRITER, _fresh
    df = spark.createDataFrame([(i, datum(CACHE_WRITER, r)) for i, r in enumerate(CACHE_RECORDS)], "n int, value binary")
    order = list(range(len(CACHE_READERS))) * 2
    random.Random(11).shuffle(order)
    print(f"seed 11: {order}")
    writer = json.dumps(CACHE_WRITER)
    for i in order:
        rows = df.orderBy("n").select(kbatch_from_avro("value", writer, {"reader.schema": json.dumps(CACHE_READERS[i])})
                                      .alias("v")).collect()
        assert [_plain(r.v) for r in rows] == _fresh(CACHE_READERS[i]), (i, CACHE_READERS[i])


CONTRAST = """
import json, sys
from spark_udfs.session import quiet_session
spark = quiet_session("local[2]", "from-avro-types", **{"spark.jars": sys.argv[3]})
from pyspark.sql.avro.functions import from_avro
from spark_udfs import kbatch_from_avro
schema = open(sys.argv[2]).read()
df = spark.read.parquet(sys.argv[1]).orderBy("n")
theirs = df.select(from_avro("value", schema, {"mode": "PERMISSIVE"}).alias("v"))
ours = df.select(kbatch_from_avro("value", schema).alias("v"))
print("TYPES", json.dumps([theirs.schema["v"].dataType.simpleString(), ours.schema["v"].dataType.simpleString()]))
rows = [[None if r.v is None else repr(r.v.asDict()) for r in frame.collect()] for frame in (theirs, ours)]
print("ROWS", json.dumps(rows), flush=True)
"""

NUMERIC = {"type": "record", "name": "N", "fields": [
    {"name": "il", "type": ["int", "long"]},
    {"name": "df", "type": ["double", "float"]},
    {"name": "nli", "type": ["null", "long", "int"]},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "big", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}},
]}


def test_numeric_unions_and_overflowing_decimals_as_from_avro(tmp_path):
    """Types and values equal to Spark's from_avro: int|long a bigint, double|float a double, a
    decimal with more digits than its precision a null row (a culprit), not a failed job."""
    import decimal
    try:
        jars = kafka_tools.spark_jars("spark-avro")
    except RuntimeError as exc:
        pytest.skip(f"spark-avro could not be fetched from Maven Central: {exc}")
    pytest.importorskip("pyspark")
    records = [{"il": 5, "df": 1.5, "nli": None, "price": decimal.Decimal("12.34"), "big": decimal.Decimal(7)},
               {"il": 2**40, "df": -0.25, "nli": 2**33, "price": decimal.Decimal("9999999.99"),
                "big": decimal.Decimal(10**37)},
               {"il": -7, "df": 3.0, "nli": -4, "price": decimal.Decimal("-0.01"), "big": decimal.Decimal(-(10**37))}]
    values = [datum(NUMERIC, r) for r in records]
    # unscaled 10^12 in a decimal(9,2); 10^38 in a decimal(38,0): more digits than their precision
    over = values[0].replace(b"\x04\x04\xd2", b"\x0c" + (10**12).to_bytes(6, "big"))
    huge = values[0][:-2] + bytes([2 * 16]) + (10**38).to_bytes(16, "big")
    assert over != values[0] and len(huge) > len(values[0])
    table = pa.table({"n": list(range(5)), "value": pa.array(values + [over, huge], pa.binary())})
    pq.write_table(table, tmp_path / "n.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(NUMERIC))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", CONTRAST, str(tmp_path / "n.parquet"), str(tmp_path / "schema.json"),
                           jars], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    types = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("TYPES"))[6:])
    assert types[0] == types[1], types
    assert "il:bigint,df:double,nli:bigint" in types[1]
    theirs, ours = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("ROWS"))[5:])
    nulls = repr({f["name"]: None for f in NUMERIC["fields"]})  # from_avro PERMISSIVE: a struct of nulls
    assert [None if t == nulls else t for t in theirs] == ours, (theirs, ours)
    assert ours[3] is None and ours[4] is None and ours[0] is not None


def test_kbatch_from_avro_on_the_jvm_equals_the_python_function(spark):
    """The JVM function (the driver's compiled program run by the core in Spark's JVM,
    spark_udfs.jvm_avro) and the Python function, row for row: the zoo (every Avro type) read as
    itself and through two evolutions, values damaged at drawn bytes (seed printed;
    PYKBATCH_AVRO_SEED repeats a run); FAILFAST names the damaged value on both."""
    import random

    from spark_udfs import kbatch_from_avro
    from spark_udfs.functions import register
    from tests.avro_zoo import ZOO_V3
    from tests.conftest import require_jvm_path
    require_jvm_path(spark)
    seed = int(os.environ.get("PYKBATCH_AVRO_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_AVRO_SEED={seed}")
    rng = random.Random(seed)
    values = [datum(ZOO_V1, r) for r in zoo_records(40)]
    sound = list(values)
    for _ in range(40):  # damage: cut, a byte changed, bytes added -- to a sound value (a value cut
        v = bytearray(rng.choice(sound))  # to nothing has no byte left to damage: seed 119027329)
        kind = rng.choice(["cut", "flip", "tail"])
        if kind == "cut":
            del v[rng.randrange(len(v)):]
        elif kind == "flip":
            v[rng.randrange(len(v))] ^= 1 << rng.randrange(8)
        else:
            v += rng.randbytes(rng.choice([1, 5]))
        values.append(bytes(v))
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values + [None])], "n int, value binary")
    writer = json.dumps(ZOO_V1)
    try:
        for reader in (None, ZOO_V2, ZOO_V3):
            options = {"reader.schema": json.dumps(reader)} if reader else {}
            python, jvm = _hashes_on_both_paths(spark, df, lambda: kbatch_from_avro("value", writer, options))
            assert jvm == python, (seed, reader and reader["fields"][-1]["name"])
            assert sum(v is None for v in jvm) > 10  # damage the decoder refused
            assert len(set(jvm)) > 40  # the sound values are told apart, not all hashed alike
        for path in ("python", "jvm"):
            register(spark, jvm=path == "jvm")
            with pytest.raises(Exception, match="PERMISSIVE"):
                spark.createDataFrame([(0, values[0][:3])], "n int, value binary") \
                    .select(kbatch_from_avro("value", writer, {"mode": "FAILFAST"})).collect()
    finally:
        register(spark)


FLAT = {"type": "record", "name": "Flat", "fields": [
    {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
    {"name": "y", "type": "bytes"}, {"name": "n", "type": "null"}, {"name": "o", "type": ["null", "string"]},
    {"name": "il", "type": ["int", "long"]}, {"name": "x", "type": {"type": "fixed", "name": "X", "size": 5}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 18, "scale": 3}},
    {"name": "small", "type": {"type": "fixed", "name": "S", "size": 4, "logicalType": "decimal", "precision": 9,
                               "scale": 0}},
]}


def test_a_flat_record_on_the_jvm_is_the_python_functions_row(spark):
    """A record of flat fields, which the core writes as Spark's UnsafeRow itself
    (csrc/jni/kb_unsafe_row.c): every flat type, nulls, values long and empty, damage drawn (seed
    printed; PYKBATCH_AVRO_SEED): the JVM's rows are the Python function's."""
    import decimal
    import random

    from spark_udfs import kbatch_from_avro
    from spark_udfs.functions import register
    from tests.conftest import require_jvm_path
    require_jvm_path(spark)
    seed = int(os.environ.get("PYKBATCH_AVRO_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_AVRO_SEED={seed}")
    rng = random.Random(seed)

    def record():
        return {"b": rng.random() < 0.5, "i": rng.randint(-2**31, 2**31 - 1), "l": rng.randint(-2**63, 2**63 - 1),
                "f": rng.uniform(-1e6, 1e6), "d": rng.uniform(-1e300, 1e300), "s": "ü" * rng.choice([0, 1, 7, 300]),
                "y": rng.randbytes(rng.choice([0, 3, 8, 9])), "n": None,
                "o": rng.choice([None, "", "x" * rng.randint(1, 20)]), "il": rng.randint(-2**40, 2**40),
                "x": rng.randbytes(5), "day": rng.randint(-10**5, 10**5), "tm": rng.randint(0, 86_399_999),
                "ts_ms": rng.randint(-2**40, 2**40), "ts_us": rng.randint(-2**50, 2**50), "lts": rng.randint(0, 2**40),
                "price": decimal.Decimal(rng.randint(-10**18 + 1, 10**18 - 1)).scaleb(-3),
                "small": decimal.Decimal(rng.randint(-10**9 + 1, 10**9 - 1))}
    values = [datum(FLAT, record()) for _ in range(300)]
    sound = list(values)
    for _ in range(30):  # cuts of sound values (a value cut to nothing cannot be cut again)
        v = bytearray(rng.choice(sound))
        del v[rng.randrange(len(v)):]
        values.append(bytes(v))
    df = spark.createDataFrame([(k, v) for k, v in enumerate(values)], "k int, value binary")
    got = {}
    try:
        for path in ("python", "jvm"):
            register(spark, jvm=path == "jvm")
            got[path] = [_plain(r.v) for r in df.orderBy("k").select(kbatch_from_avro("value", json.dumps(FLAT))
                                                                     .alias("v")).collect()]
    finally:
        register(spark)
    assert got["jvm"] == got["python"], seed
    assert sum(v is None for v in got["jvm"]) > 5


def test_a_time_of_day_outside_a_day_is_a_culprit_on_both_paths(spark):
    """A time-micros (Spark's TIME) and a time-millis past a day or below midnight: a null on the
    Python and the JVM path alike (never a value collect() cannot show), its neighbours read;
    FAILFAST names value.time_of_day on both."""
    from spark_udfs import kbatch_from_avro
    from spark_udfs.functions import register
    from tests.conftest import require_jvm_path
    from tests.test_values_avro import _zigzag
    require_jvm_path(spark)
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ms", "type": {"type": "int", "logicalType": "time-millis"}}]}
    day_us, day_ms = 86_400_000_000, 86_400_000
    cases = [(day_us - 1, day_ms - 1, True), (day_us, 0, False), (0, day_ms, False), (-1, 5, False), (0, -1, False),
             (7, 7, True)]
    values = [_zigzag(us) + _zigzag(ms) for us, ms, _ in cases]
    df = spark.createDataFrame(list(enumerate(values)), "n int, value binary")
    try:
        for path in ("python", "jvm"):
            register(spark, jvm=path == "jvm")
            rows = df.orderBy("n").select(kbatch_from_avro("value", json.dumps(schema)).alias("v")).collect()
            assert [r.v is not None for r in rows] == [ok for _, _, ok in cases], path
            assert rows[-1].v.ms == 7 and rows[0].v.ms == day_ms - 1, path  # time-millis is from_avro's int
            with pytest.raises(Exception, match=r"value\.time_of_day"):
                df.where("n = 1").select(kbatch_from_avro("value", json.dumps(schema), {"mode": "FAILFAST"})).collect()
    finally:
        register(spark)
