"""The Spark UDFs in a real local Spark: output equals the direct core call on the same bytes,
from the DataFrame API and from SQL; nulls and corrupt rows never fail the task."""

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")

import pykbatch as kb  # noqa: E402
from pykbatch.arrow import decode_array, validate_array  # noqa: E402
from tests.samples import batch, batch_of_records, record  # noqa: E402

pytestmark = pytest.mark.spark


def sample_rows():
    crc_bad = bytearray(batch(2))
    crc_bad[-2] ^= 1
    return [batch(3), None, bytes(crc_bad), batch(2) + batch(4, base_offset=2)[:40],
            batch_of_records(record(0), record(2), record(1), last_offset_delta=2),
            batch(1, headers=[(b"h", b"v"), (b"n", None)]), b"", b"\x00" * 5,
            batch_of_records(record(0), record(3), count=2, last_offset_delta=3)]


@pytest.fixture(scope="session")
def frame(spark):
    rows = sample_rows()
    df = spark.createDataFrame([(i, v) for i, v in enumerate(rows)], "id int, value binary")
    df.createOrReplaceTempView("batches")
    return df, rows


def by_id(rows, field):
    return [r[field] for r in sorted(rows, key=lambda r: r["id"])]


def as_python(value):
    """Spark Rows -> plain dicts/lists for comparison with Arrow's to_pylist()."""
    if hasattr(value, "asDict"):
        return {k: as_python(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [as_python(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def collect_plain(df) -> list[dict]:
    """A frame's rows as plain dicts, its timestamps as epoch microseconds: a damaged batch's
    timestamp may lie beyond year 9999, which Spark holds and Python's datetime (PySpark's
    collect) cannot, and comparisons of damaged reads must not fail on the way out."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType
    plain = df.select(*[F.unix_micros(F.col(f.name)).alias(f.name) if isinstance(f.dataType, TimestampType)
                        else F.col(f.name) for f in df.schema.fields])
    return [as_python(r.asDict(recursive=True)) for r in plain.collect()]


def test_validate_equals_direct_call(frame, spark_path):
    import pyarrow as pa
    from spark_udfs import kbatch_validate
    df, rows = frame
    got = by_id(df.select("id", kbatch_validate("value").alias("v")).collect(), "v")
    want = validate_array(pa.array(rows, pa.binary())).to_pylist()
    assert [as_python(g) for g in got] == want
    assert want[0]["ok"] and want[1] is None and want[2]["error_name"] == "CORRUPT_MESSAGE"
    direct = kb.validate(rows[4])
    assert want[4]["error_records"] == [{"batch_index": i, "message": m} for i, m in direct.error_records]
    assert [c["rule"] for c in want[4]["culprits"]] == [c.rule for c in direct.culprits]


def test_validate_config_from_sql_and_dataframe(frame, spark, spark_path):
    import pyarrow as pa
    from spark_udfs import kbatch_validate
    df, rows = frame
    log = kb.ValidationConfig(origin="log")
    want = validate_array(pa.array(rows, pa.binary()), log).to_pylist()
    sql = spark.sql("SELECT id, kbatch_validate(value, map('origin', 'log')) AS v FROM batches").collect()
    assert [as_python(g) for g in by_id(sql, "v")] == want
    api = df.select("id", kbatch_validate("value", log).alias("v")).collect()
    assert [as_python(g) for g in by_id(api, "v")] == want
    assert want[8]["ok"] and not as_python(by_id(df.select("id", kbatch_validate("value").alias("v")).collect(),
                                                  "v")[8])["ok"]


def test_decode_equals_direct_call_and_explodes(frame, spark, spark_path):
    import pyarrow as pa
    from spark_udfs import kbatch_decode
    df, rows = frame
    got = by_id(df.select("id", kbatch_decode("value").alias("r")).collect(), "r")
    want = decode_array(pa.array(rows, pa.binary())).to_pylist()
    assert [as_python(g) for g in got] == want
    assert [r["offset"] for r in want[0]] == [0, 1, 2]
    exploded = spark.sql("SELECT id, rec.offset, rec.value FROM batches "
                         "LATERAL VIEW explode(kbatch_decode(value)) AS rec").collect()
    direct = [(i, r.offset, r.value) for i, v in enumerate(rows) if want[i] is not None
              for b in kb.iter_batches(v) for r in b]
    assert sorted((r["id"], r["offset"], bytes(r["value"])) for r in exploded) == sorted(direct)


def test_crc32c_udf(frame, spark, spark_path):
    from spark_udfs import kbatch_crc32c
    df, rows = frame
    want = [None if v is None else kb.crc32c(v) for v in rows]
    assert by_id(spark.sql("SELECT id, kbatch_crc32c(value) AS c FROM batches").collect(), "c") == want
    assert by_id(df.select("id", kbatch_crc32c("value").alias("c")).collect(), "c") == want
    assert want[0] > 2**31  # bigint, not a sign-flipped int


def test_batch_info_equals_direct_call(frame, spark):
    import pyarrow as pa

    from pykbatch.arrow import batch_info_array
    df, rows = frame
    got = by_id(spark.sql("SELECT id, kbatch_batch_info(value) AS b FROM batches").collect(), "b")
    want = batch_info_array(pa.array(rows, pa.binary())).to_pylist()
    assert [as_python(g) for g in got] == want
    assert [b["base_offset"] for b in want[3]] == [0]  # the truncated second batch is not a batch
    assert want[2][0]["is_valid"] is False and want[1] is None


def test_repair_equals_direct_call_and_repairs(frame, spark):
    import pyarrow as pa

    from pykbatch.arrow import repair_array
    from spark_udfs import kbatch_repair
    df, rows = frame
    log = kb.ValidationConfig(origin="log")
    want = repair_array(pa.array(rows, pa.binary()), log).to_pylist()
    sql = spark.sql("SELECT id, kbatch_repair(value, map('origin', 'log')) AS r FROM batches").collect()
    api = df.select("id", kbatch_repair("value", log).alias("r")).collect()
    assert [as_python(g) for g in by_id(sql, "r")] == want == [as_python(g) for g in by_id(api, "r")]
    assert want[0]["data"] == rows[0] and want[0]["dropped"] == []
    assert want[2]["unrepairable_batches"] == 1 and want[2]["data"] == b""  # CRC damage: the batch goes
    assert [d["record_index"] for d in want[4]["dropped"]] == [2]           # the out-of-order record goes
    for r in want:
        if r is not None:
            assert kb.validate(r["data"], log).ok


def test_explode_records_equals_iteration(frame, spark, spark_path):
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    from pykbatch.arrow import exploded_schema
    from spark_udfs import explode_records
    df, rows = frame
    exploded = explode_records(df, "value")
    # the same columns and Spark types on both paths (the JVM's: explode(kbatch_decode))
    assert exploded.schema == from_arrow_schema(exploded_schema(to_arrow_schema(df.schema), ["id"]))
    out = exploded.collect()
    want = decode_array(__import__("pyarrow").array(rows, __import__("pyarrow").binary())).to_pylist()
    direct = sorted((i, r["offset"], r["value"], r["key"]) for i, recs in enumerate(want) if recs for r in recs)
    assert sorted((r["id"], r["offset"], as_python(r["value"]), as_python(r["key"])) for r in out) == direct
    assert set(explode_records(df, "value").columns) >= {"id", "offset", "timestamp", "headers", "producer_id"}


def test_every_core_capability_has_a_spark_function(spark):
    """Every column function of pykbatch.arrow (a ``*_array`` function: Arrow in, Arrow out) is
    a Spark function, from a DataFrame and from SQL: found by looking, not from a list, so a
    capability added without its UDF fails here."""
    import inspect

    import spark_udfs
    from pykbatch import arrow
    from spark_udfs.functions import _functions, _udfs
    column_functions = {fn for name, fn in inspect.getmembers(arrow, inspect.isfunction)
                        if name.endswith("_array") and fn.__module__ == arrow.__name__}
    assert len(column_functions) >= 5
    assert {fn for fn, _, _ in _functions().values()} == column_functions
    sql = {f.name for f in spark.catalog.listFunctions() if f.name.startswith("kbatch_")}
    for name in _functions():
        assert name in _udfs() and name in sql
        assert name in spark_udfs.__all__ and "Spark type" in getattr(spark_udfs, name).__doc__
    assert callable(spark_udfs.explode_records) and "kbatch_records" in sql


def test_segment_source_reads_the_real_segments(spark):
    """spark.read.format("kafka-segment") over the corpus: the manifest's record counts per
    segment, and one row per batch in header-only mode."""
    from tests.conftest import CONFORMANCE, load_json, shared_file
    root = CONFORMANCE / "segments"
    manifest = load_json(shared_file(root / "manifest.json"))
    expected = {}
    for items in manifest.values():
        for item in items:
            if "records" in item and "entries" in item and item.get("file", "").endswith(".log"):
                expected[str(CONFORMANCE / item["file"])] = (item["records"], item["entries"])
    df = spark.read.format("kafka-segment").option("includePath", "true").load(str(root))
    per_file = {r["path"]: r["count"] for r in df.groupBy("path").count().collect()}
    assert {p: n for p, n in per_file.items()} == {p: r for p, (r, _) in expected.items() if r}
    batches = spark.read.format("kafka-segment").option("mode", "batches").option("includePath", "true") \
        .load(str(root)).groupBy("path").count().collect()
    assert {r["path"]: r["count"] for r in batches} == {p: e for p, (_, e) in expected.items() if e}


def test_segment_source_splits_validates_and_filters(spark, tmp_path):
    """A partition directory with an index: several splits, identical rows to to_arrow, the
    validator's verdict per batch, offset ranges."""
    from pykbatch.log import segment_file_name
    part = tmp_path / "orders-3"
    part.mkdir()
    batches = [kb.build_batch([{"key": b"k%d" % i, "value": b"v" * 200, "timestamp": 1000 + i}] * 5,
                              base_offset=5 * i) for i in range(40)]
    bad = bytearray(batches[7])
    bad[18] ^= 1  # its stored CRC
    batches[7] = bytes(bad)
    broken = bytearray(batches[9])
    broken[-1] ^= 1  # the last record's header count: batch 9's records cannot be read
    batches[9] = bytes(broken)
    data = b"".join(batches)
    (part / segment_file_name(0, ".log")).write_bytes(data)
    import struct
    positions, pos = [], 0
    for b in batches:
        positions.append(pos)
        pos += len(b)
    index = b"".join(struct.pack(">ii", 5 * i + 4, positions[i]) for i in range(0, 40, 4))
    (part / segment_file_name(0, ".index")).write_bytes(index)
    reader = (spark.read.format("kafka-segment").option("splitBytes", "2000").option("validate", "true")
              .load(str(tmp_path)))
    assert reader.rdd.getNumPartitions() > 3
    everything = reader.collect()
    rows = [r for r in everything if r["lost_bytes"] is None]
    assert len(rows) == 195 and {r["topic"] for r in rows} == {"orders"} and {r["partition"] for r in rows} == {3}
    assert sorted(r["offset"] for r in rows) == [o for o in range(200) if o // 5 != 9]  # no failed task
    assert {r["offset"] // 5 for r in rows if not r["batch_ok"]} == {7}
    assert all(r["batch_error"].startswith("Record is corrupt") for r in rows if not r["batch_ok"])
    # batch 9, whose records cannot be read, is a row of its own: the offsets it holds, its bytes
    [lost] = [r for r in everything if r["lost_bytes"] is not None]
    assert (lost["lost_first_offset"], lost["lost_last_offset"], lost["batch_position"], lost["lost_bytes"]) == (
        45, 49, positions[9], len(batches[9])) and not lost["batch_ok"] and lost["offset"] is None
    assert lost["error_rule"] == "batch.crc_mismatch" and lost["error_code"] == 2  # its first culprit
    ranged = spark.read.format("kafka-segment").option("startingOffset", "12").option("endingOffset", "30") \
        .load(str(part))
    assert sorted(r["offset"] for r in ranged.collect()) == list(range(12, 30))
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:  # WHERE clauses prune like the options: fewer splits, the same rows
        pushed = spark.read.format("kafka-segment").option("pushFilters", "true").option("splitBytes", "2000") \
            .load(str(tmp_path)).where("offset >= 150 AND partition = 3 AND timestamp < timestamp_millis(1038)")
        assert sorted(r["offset"] for r in pushed.collect()) == list(range(150, 190))
        assert 0 < pushed.rdd.getNumPartitions() < reader.rdd.getNumPartitions()
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    timed = spark.read.format("kafka-segment").option("startingTimestamp", "1010") \
        .option("endingTimestamp", "1020").load(str(part))
    assert sorted(r["offset"] for r in timed.collect()) == list(range(50, 100))
    header_only = spark.read.format("kafka-segment").option("deep", "false").option("validate", "true") \
        .load(str(part)).collect()
    assert len(header_only) == 40 and sorted(r["base_offset"] for r in header_only if not r["batch_ok"]) == [35, 45]
    spark.sql(f"CREATE OR REPLACE TEMP VIEW segs USING `kafka-segment` OPTIONS (path '{part}', mode 'batches')")
    assert spark.sql("SELECT count(*) AS n FROM segs").collect()[0]["n"] == 40


def test_segment_source_has_the_kafka_sources_columns_and_refuses_a_missing_path(spark, tmp_path):
    """The columns Spark's own Kafka source has, with its names and types, come first (one source
    can stand in for the other); a path that does not exist fails the read, as Spark's file
    sources fail it."""
    import datetime

    from pyspark.sql.types import StructType

    from pykbatch.log import segment_file_name
    part = tmp_path / "orders-1"
    part.mkdir()
    (part / segment_file_name(0, ".log")).write_bytes(kb.build_batch(
        [{"key": b"k", "value": b"v", "timestamp": 1_700_000_000_123, "headers": [("h", b"x")]}], base_offset=0))
    df = spark.read.format("kafka-segment").load(str(tmp_path))
    kafka = StructType.fromDDL("key binary, value binary, topic string, partition int, offset bigint, "
                               "timestamp timestamp, timestampType int, headers array<struct<key: string, value: binary>>")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields[:len(kafka.fields)]] == \
        [(f.name, f.dataType.simpleString()) for f in kafka.fields]  # (a header key is never null here)
    row = df.collect()[0]
    assert (row.topic, row.partition, row.offset, row.timestampType) == ("orders", 1, 0, 0)
    assert row.timestamp.astimezone(datetime.timezone.utc) == datetime.datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)
    assert df.where("timestamp >= timestamp_millis(1700000000123)").count() == 1
    with pytest.raises(Exception, match="PATH_NOT_FOUND"):
        spark.read.format("kafka-segment").load(str(tmp_path / "no" / "such" / "path")).collect()


@pytest.fixture(scope="module")
def million(spark):
    """1M records in 10,000 batches of 100, 1% of the batches corrupted (CRC, structure, count)."""
    template = [{"key": b"k%03d" % i, "value": b"value-%03d" % i, "timestamp": 1_700_000_000_000 + i}
                for i in range(100)]
    good_batch = bytearray(kb.build_batch(template))
    rows, bad_ids = [], set()
    for n in range(10_000):
        data = bytearray(good_batch)
        if n % 100 == 37:
            bad_ids.add(n)
            kind = (n // 100) % 3
            if kind == 0:
                data[18] ^= 1                      # stored CRC
            elif kind == 1:
                data[-1] ^= 1                      # the last record's header count
                data[17:21] = kb.crc32c(bytes(data[21:])).to_bytes(4, "big")
            else:
                data[57:61] = (101).to_bytes(4, "big")  # the record count
                data[17:21] = kb.crc32c(bytes(data[21:])).to_bytes(4, "big")
        rows.append((n, "orders", n % 4, bytes(data)))
    df = spark.createDataFrame(rows, "id int, topic string, partition int, value binary").repartition(4)
    return df, bad_ids


def test_dead_letters_conserve_every_record(million):
    from spark_udfs import explode_records
    from spark_udfs.dead_letters import ErrorPolicy, split_dead_letters
    df, bad_ids = million
    split = split_dead_letters(df, "value", ErrorPolicy(tolerance="all", config=kb.ValidationConfig(origin="log")),
                               topic_col="topic", partition_col="partition")
    good, dead = split
    dead_rows = dead.select("id", "value", "error_context").collect()
    assert {r["id"] for r in dead_rows} == bad_ids
    assert {r["error_context"]["error_name"] for r in dead_rows} == {"CORRUPT_MESSAGE", "INVALID_RECORD"}
    assert all(r["error_context"]["topic"] == "orders" and r["error_context"]["culprits"] for r in dead_rows)
    crc = [r for r in dead_rows if r["error_context"]["error_name"] == "CORRUPT_MESSAGE"]
    assert crc and all(f"in topic partition orders-{r['id'] % 4}." in r["error_context"]["exception_message"]
                       and "t-0" not in r["error_context"]["culprits"][0]["message"] for r in crc)
    good_records = explode_records(good, "value", keep=["id"]).count()
    dead_records = sum(100 for _ in dead_rows)
    assert good_records + dead_records == 1_000_000 and good.count() + len(dead_rows) == 10_000
    m = split.metrics()
    assert m["total-records"] == 10_000 and m["total-record-failures"] == m["total-record-errors"] == 100
    assert m["deadletterqueue-produce-requests"] == 100 and m["total-records-skipped"] == 0
    assert m["total-records"] == good.count() + m["deadletterqueue-produce-requests"] + m["total-records-skipped"]
    assert m["last-error-timestamp"] > 0
    skipping = split_dead_letters(df, "value", ErrorPolicy(tolerance="all", dead_letter=False,
                                                           config=kb.ValidationConfig(origin="log")))
    assert skipping.dead.count() == 0 and skipping.good.count() == 9_900
    assert skipping.metrics()["total-records-skipped"] == 100


def test_tolerance_none_and_max_errors_fail_with_the_culprits(million):
    from spark_udfs.dead_letters import DeadLetterError, ErrorPolicy, split_dead_letters
    df, _ = million
    with pytest.raises(DeadLetterError) as info:
        split_dead_letters(df, "value", ErrorPolicy(config=kb.ValidationConfig(origin="log")))
    assert info.value.culprits and "Tolerance exceeded" in str(info.value)
    with pytest.raises(DeadLetterError, match="more than 50 batches"):
        split_dead_letters(df, "value", ErrorPolicy(tolerance="all", max_errors=50,
                                                    config=kb.ValidationConfig(origin="log")))
    ok = split_dead_letters(df, "value", ErrorPolicy(tolerance="all", max_errors=100,
                                                     config=kb.ValidationConfig(origin="log")))
    assert ok.dead.count() == 100


def test_handler_and_error_log(million, spark, caplog):
    from pyspark.errors import PythonException

    from pykbatch import errors
    from spark_udfs.dead_letters import ErrorPolicy, error_context, split_dead_letters
    df, _ = million
    small = df.filter("id < 400")
    cont = split_dead_letters(small, "value", ErrorPolicy(tolerance="all", handler=lambda c: errors.CONTINUE,
                                                          log_enable=True, config=kb.ValidationConfig(origin="log")))
    assert cont.dead.count() == 4
    fail = split_dead_letters(small, "value", ErrorPolicy(tolerance="all", handler=lambda c: errors.FAIL,
                                                          config=kb.ValidationConfig(origin="log")))
    with pytest.raises(PythonException, match="handler answered FAIL"):
        fail.dead.count()
    doc = error_context({"error_code": 2, "error_name": "CORRUPT_MESSAGE"},
                        [{"code": 2, "message": "Record is corrupt"}], "orders", 1, 42, include_messages=False,
                        value=b"secret")
    assert doc["exception"]["class"] == "org.apache.kafka.common.errors.CorruptRecordException"
    assert "value" not in doc["record"] and doc["stage"]["type"] == "VALIDATE"
    assert error_context({}, [], include_messages=True, value=b"x")["record"]["value"] == "eA=="


def test_streaming_micro_batches_split_records_and_dead_letters(spark, tmp_path):
    from spark_udfs.streaming_example import start
    rows = []
    for n in range(12):
        data = bytearray(kb.build_batch([{"key": b"k%d" % i, "value": b"v", "timestamp": 5} for i in range(3)]))
        if n in (4, 9):
            data[18] ^= 1
        rows.append(("orders", n % 2, bytes(data)))
    inp = tmp_path / "in"
    spark.createDataFrame(rows[:6], "topic string, partition int, value binary").write.parquet(str(inp / "a"))
    spark.createDataFrame(rows[6:], "topic string, partition int, value binary").write.parquet(str(inp / "b"))
    out = tmp_path / "out"
    start(spark, str(inp) + "/*", str(out)).awaitTermination()
    records = spark.read.parquet(str(out / "records"))
    dead = spark.read.parquet(str(out / "dead-letters"))
    assert records.count() == 30 and dead.count() == 2
    assert {r["error_context"]["error_name"] for r in dead.collect()} == {"CORRUPT_MESSAGE"}


def test_transient_reads_are_retried_but_data_errors_are_not():
    from spark_udfs.segment_source import retry_io
    calls, sleeps = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("reset by peer")
        return "bytes"
    assert retry_io(flaky, sleep=sleeps.append) == "bytes" and len(calls) == 3 and len(sleeps) == 2
    assert all(0 <= s <= 0.4 for s in sleeps)  # full jitter under the exponential cap

    def corrupt():
        calls.append(1)
        raise kb.CorruptRecordError("Record is corrupt", 17, "batch.crc_mismatch")
    calls.clear()
    with pytest.raises(kb.CorruptRecordError):
        retry_io(corrupt, sleep=sleeps.append)
    assert len(calls) == 1

    def down():
        raise TimeoutError("read timed out")
    with pytest.raises(TimeoutError):
        retry_io(down, attempts=4, sleep=lambda s: None)


def test_every_udf_equals_the_core_on_the_conformance_corpus(spark, spark_path):
    """The peer corpus's vectors (valid and hostile, every magic and codec) and Kafka's own batch
    vectors through every UDF, against the column functions on the same bytes."""
    import pyarrow as pa

    from pykbatch.arrow import batch_info_array, crc32c_array, repair_array
    from spark_udfs import kbatch_batch_info, kbatch_crc32c, kbatch_decode, kbatch_repair, kbatch_validate
    from tests.conftest import CONFORMANCE, conformance_vectors, kafka_vectors, vector_bytes
    values = [vector_bytes(p.values[0]) for p in conformance_vectors(lambda v: v["framing"] in ("log", "batch"))
              if p.values[0] is not None]
    values += [bytes.fromhex(p.values[0]["hex"]) for p in kafka_vectors(lambda v: bool(v.get("hex")))]
    log = kb.ValidationConfig(origin="log")
    df = spark.createDataFrame(list(enumerate(values)), "id int, value binary")
    got = df.select("id", kbatch_validate("value", log).alias("v"), kbatch_decode("value").alias("d"),
                    kbatch_crc32c("value").alias("c"), kbatch_batch_info("value").alias("b"),
                    kbatch_repair("value", log).alias("r")).collect()
    got = sorted(got, key=lambda r: r["id"])
    arr = pa.array(values, pa.binary())
    want = {"v": validate_array(arr, log).to_pylist(), "d": decode_array(arr).to_pylist(),
            "c": crc32c_array(arr).to_pylist(), "b": batch_info_array(arr).to_pylist(),
            "r": repair_array(arr, log).to_pylist()}
    if spark_path == "jvm":  # a damaged compressed payload: the codec library's words and position set aside
        from tests.test_spark_jvm import comparable, comparable_repair
        want["v"] = [comparable(v) for v in want["v"]]
        want["r"] = [comparable_repair(r) for r in want["r"]]
        got = [dict(r.asDict(), v=comparable(as_python(r["v"])), r=comparable_repair(as_python(r["r"]))) for r in got]
    for field, expected in want.items():
        assert [as_python(r[field]) for r in got] == expected, field
    with_corpus = (CONFORMANCE / "vectors.json").exists()  # Kafka's 159 alone on a user's clone
    assert len(values) > (250 if with_corpus else 150)
    assert sum(1 for v in want["v"] if not v["ok"]) > (40 if with_corpus else 20)


def test_sql_records_udtf_equals_explode_records(frame, spark, spark_path):
    from spark_udfs import explode_records
    df, rows = frame
    sql = spark.sql("SELECT * FROM kbatch_records(TABLE(SELECT CAST(id AS BIGINT) AS id, value FROM batches))")
    api = explode_records(df, "value", keep=["id"])

    def rows_of(frame_):
        return sorted((tuple(as_python(v) for v in r) for r in frame_.collect()), key=repr)
    got, want = rows_of(sql), rows_of(api)
    assert got == want and len(got) == 11  # the records of the sample rows that decode
    if spark_path == "jvm":  # SQL's form where the Python table function cannot run (Spark 3.5)
        lateral = spark.sql("SELECT id, r.* FROM batches LATERAL VIEW explode(kbatch_decode(value)) AS r")
        assert rows_of(lateral) == want and lateral.schema == api.schema


def test_the_demo_pipeline_keeps_the_good_records_of_damaged_batches(spark, spark_path):
    """python -m spark_udfs.demo: batches 7 and 11 keep their good records (9 and 8), the
    culprit records and the two batches damaged as a whole are dead-lettered, and every input
    record (by the batch headers' counts) is accounted for."""
    from spark_udfs.demo import run
    ledger = run(spark, 20, show=False)
    assert ledger == {
        "input records": 19 * 10 + 12,  # batch 15's header claims 12
        "good records": 16 * 10 + 9 + 8,
        "dead-lettered records (dropped from their batch)": 3,
        "dead-lettered records (in batches damaged as a whole)": 10 + 12,
        "skipped records": 0,
    }


def test_a_missing_object_is_not_retried():
    from pykbatch.retry import retry_io
    calls = []

    def gone():
        calls.append(1)
        raise FileNotFoundError("s3://bucket/key")
    with pytest.raises(FileNotFoundError):
        retry_io(gone, sleep=lambda s: None)
    assert len(calls) == 1


def test_kafka_segment_decodes_consumer_offsets(spark):
    """decode=offsets: __consumer_offsets as (group, topic, partition, offset, commit timestamp...)
    rows, from Spark SQL, equal to pykbatch.topics's table of the same file."""
    from pathlib import Path

    from pykbatch.topics.tables import record_table
    path = Path(__file__).parent / "kafka" / "broker-files" / "__consumer_offsets-0"
    df = spark.read.format("kafka-segment").option("decode", "offsets").load(str(path))
    df.createOrReplaceTempView("offsets")
    got = spark.sql("select `group`, topic, partition, offset, commit_timestamp, tombstone, log_topic from offsets "
                    "where decode_error is null").collect()
    table, errors = record_table((path / "00000000000000000000.log").read_bytes(), "OffsetCommit")
    want = table.select(["group", "topic", "partition", "offset", "commit_timestamp", "tombstone"]).to_pylist()
    assert [r.asDict() for r in got] == [{**w, "log_topic": "__consumer_offsets"} for w in want] and not errors
    assert want and want[0]["group"] == "g1"
