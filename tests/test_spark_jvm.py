"""The JVM path of the Spark functions (spark_udfs.jvm: the C core called from Spark's JVM through
csrc/jni/kb_jni.c) against the Python path, row for row, on drawn input: batches of every magic and
codec, damage drawn in kind and position, options drawn (origin, strictness, compaction, caps,
clocks).  Seed printed; PYKBATCH_JVM_SEED repeats a run."""
import os
import random
import struct

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")

import pykbatch as kb  # noqa: E402
from tests.conftest import require_jvm_path  # noqa: E402
from tests.test_spark import as_python  # noqa: E402

pytestmark = pytest.mark.spark

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_FAILED = "batch.decompression_failed"


def _records(rng: random.Random, n: int, base_ts: int, magic: int) -> list:
    out = []
    for i in range(n):
        key = None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 1, 8, 40]))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 5, 100, 3000]))
        headers = [(f"h{k}", rng.randbytes(3)) for k in range(rng.choice([0, 0, 1, 3]))] if magic == 2 else []
        out.append({"key": key, "value": value, "timestamp": base_ts + rng.randrange(-5000, 5000), "headers": headers})
    return out


def _batch(rng: random.Random, now_ms: int, base_offset: int) -> bytes:
    magic = rng.choice([2, 2, 2, 2, 1, 0])
    codec = rng.choice(CODECS if magic == 2 else CODECS[:4])  # zstd came with v2
    ts = now_ms + rng.choice([0, -10**9, 10**8])  # some far in the past or future: the timestamp rules
    data = kb.build_batch(_records(rng, rng.choice([1, 2, 5, 20]), ts, magic), base_offset=base_offset, compression=codec,
                          magic=magic)
    return data


def _damage(rng: random.Random, data: bytes) -> tuple:
    """The batch damaged (or not), and whether a compressed payload was changed."""
    kind = rng.choice(["none", "none", "flip", "flip_fixed", "truncate", "zeros", "garbage_tail", "length"])
    if kind == "none" or len(data) < 30:
        return data, False
    b = bytearray(data)
    pos = rng.randrange(len(b))
    if kind == "flip":
        b[pos] ^= 1 << rng.randrange(8)
    elif kind == "flip_fixed":  # a change behind a CRC made to match: the record checks see it
        pos = rng.randrange(61, len(b)) if len(b) > 61 else pos
        b[pos] ^= 1 << rng.randrange(8)
        if b[16] == 2:
            b[17:21] = struct.pack(">I", kb.crc32c(bytes(b[21:])))
    elif kind == "truncate":
        del b[pos:]
    elif kind == "zeros":
        end = min(len(b), pos + rng.choice([1, 4, 12, 40]))
        b[pos:end] = bytes(end - pos)
    elif kind == "garbage_tail":
        b += rng.randbytes(rng.choice([1, 7, 30]))
    elif kind == "length":
        b[8:12] = struct.pack(">i", rng.choice([0, 5, len(b), len(b) + 100, 2**31 - 1, -1]))
    compressed = data[16] == 2 and data[22] & 7 or data[16] < 2 and data[21] & 7
    return bytes(b), bool(compressed) and kind in ("flip", "flip_fixed", "truncate", "zeros", "length")


def _row(rng: random.Random, now_ms: int) -> tuple:
    """A row's bytes, and whether a compressed payload in it was damaged."""
    if rng.random() < 0.05:
        return None, False
    if rng.random() < 0.05:
        return rng.randbytes(rng.choice([0, 3, 17, 64])), False
    parts, offset, codec_damaged = [], 0, False
    for _ in range(rng.choice([1, 1, 2, 3])):
        data, damaged = _damage(rng, _batch(rng, now_ms, offset))
        parts.append(data)
        codec_damaged |= damaged
        offset += 30
    return b"".join(parts), codec_damaged


def _options(rng: random.Random, now_ms: int) -> dict:
    """Drawn options; a client's append keeps its size limits off, since the size of what a broker
    rebuilds from v0/v1 messages is checked by the Python function only (Options.rebuilt)."""
    options = {"origin": rng.choice(["client", "log", "replication"]), "now_ms": now_ms,
               "strict": rng.choice([True, False]), "verify_crc": rng.choice([True, True, False]),
               "compacted": rng.choice([True, False]), "max_culprits": rng.choice([0, 1, 3, 1000]),
               "topic_partition": rng.choice(["t-0", "orders-12", "ünï-3"]),
               "timestamp_type": rng.choice(["CreateTime", "LogAppendTime"]),
               "timestamp_after_max_ms": rng.choice([3_600_000, 1000])}
    if options["origin"] == "client":
        options.update(max_message_bytes=None, segment_bytes=None,
                       produce_version=rng.choice([None, None, 3, 11]))
    return options


def comparable(value):
    """A result with what the codec libraries say in their own words set aside: a decompression
    failure's cause and position (zstd-jni / the JDK on the JVM, cramjam / zlib in Python)."""
    if value is None:
        return None
    out = dict(value)
    out["culprits"] = [dict(c, message=c["message"].split(": ")[0], position=None) if c["rule"] == CODEC_FAILED else c
                       for c in value["culprits"]]
    codec_failed = {c["message"] for c in value["culprits"] if c["rule"] == CODEC_FAILED}
    if out["error_message"] in codec_failed:
        out["error_message"] = out["error_message"].split(": ")[0]
    return out


def comparable_repair(value):
    """A kbatch_repair result with the codec libraries' own say set aside: a decompression
    failure's words, and the bytes of rebuilt compressed batches (compared as what they hold)."""
    if value is None:
        return None
    out = dict(value)
    out["dropped"] = [dict(d, message=d["message"].split(": ")[0]) if CODEC_FAILED in d["rules"] else d
                      for d in value["dropped"]]
    if any(b.compression != "none" for b in kb.iter_batches(value["data"], verify_crc=False)):
        out["data"] = _rebuilt(value["data"])
    return out


def _validate_both(spark, rows, options):
    from spark_udfs import kbatch_validate
    from spark_udfs.functions import register
    df = spark.createDataFrame(list(enumerate(rows)), "id int, value binary")
    got = {}
    for path in ("python", "jvm"):
        register(spark, jvm=path == "jvm")
        result = df.select("id", kbatch_validate("value", options).alias("v")).collect()
        got[path] = [as_python(r.v) for r in sorted(result, key=lambda r: r.id)]
    register(spark)
    return got["python"], got["jvm"]


def test_jvm_and_python_agree_row_for_row_on_drawn_input(spark):
    """Equal row for row, but for rows whose compressed payload was damaged: there the codecs are
    the host's (cramjam / zlib in Python, zstd-jni / snappy-java / lz4-java / the JDK on the JVM),
    which stop at different bytes and hand different prefixes on, so only the verdict (ok) must
    agree until the codecs' framing lives in the core (ARCHITECTURE.md, "codecs")."""
    require_jvm_path(spark)
    seed = int(os.environ.get("PYKBATCH_JVM_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_JVM_SEED={seed}")
    rng = random.Random(seed)
    now_ms = 1_760_000_000_000
    differences = 0
    for trial in range(6):
        options = _options(rng, now_ms)
        drawn = [_row(rng, now_ms) for _ in range(150)]
        rows = [row for row, _ in drawn]
        python, jvm = _validate_both(spark, rows, options)
        assert sum(1 for r in python if r and not r["ok"]) > 0, "the draw should damage some rows"
        for i, (p, j) in enumerate(zip(python, jvm)):
            where = (seed, trial, i, options, rows[i].hex() if rows[i] else rows[i])
            if drawn[i][1]:
                assert (j is None, j and j["ok"]) == (p is None, p and p["ok"]), where
                continue
            assert comparable(j) == comparable(p), where
            differences += p != j
    print(f"rows differing only in a codec library's words: {differences}")


def test_jvm_decode_equals_the_python_decode_on_drawn_input(spark):
    """kbatch_decode and kbatch_batch_info on both paths, row for row, on the drawn rows above
    (every magic and codec, damage of every kind): the same records or the same null, the same
    headers up to the same fault -- but for rows whose compressed payload was damaged, where each
    host's codec library decides what the damaged bytes yield."""
    from spark_udfs import kbatch_batch_info, kbatch_decode
    from spark_udfs.functions import register
    require_jvm_path(spark)
    seed = int(os.environ.get("PYKBATCH_JVM_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_JVM_SEED={seed}")
    rng = random.Random(seed)
    drawn = [_row(rng, 1_760_000_000_000) for _ in range(600)]
    for magic in (0, 1, 2) * 4:  # and a checksum that fails under a header that reads, of every magic, for sure
        bad = bytearray(kb.build_batch(_records(rng, 2, 1_760_000_000_000, magic), magic=magic))
        bad[-1] ^= 1
        drawn.append((bytes(bad), False))
    df = spark.createDataFrame([(i, row) for i, (row, _) in enumerate(drawn)], "id int, value binary")
    got = {}
    for path in ("python", "jvm"):
        register(spark, jvm=path == "jvm")
        rows = df.select("id", kbatch_decode("value").alias("d"), kbatch_batch_info("value").alias("b")).collect()
        got[path] = [as_python(r.d) for r in sorted(rows, key=lambda r: r.id)]
        got[path + " headers"] = [as_python(r.b) for r in sorted(rows, key=lambda r: r.id)]
    register(spark)
    compared = [i for i, (_, codec_damaged) in enumerate(drawn) if not codec_damaged]
    for i in compared:
        assert got["jvm"][i] == got["python"][i], (seed, i, drawn[i][0].hex() if drawn[i][0] else None)
        assert got["jvm headers"][i] == got["python headers"][i], (seed, i, drawn[i][0].hex() if drawn[i][0] else None)
    headers = [h for i in compared for h in got["python headers"][i] or ()]
    assert {h["magic"] for h in headers} == {0, 1, 2} and sum(not h["is_valid"] for h in headers) > 10
    assert any(h["record_count"] is None and h["compression"] != "none" for h in headers)  # wrappers' inner sets read
    assert sum(1 for i in compared if got["python"][i] is None) > 20  # damage the decode refuses
    assert sum(len(got["python"][i] or ()) for i in compared) > 300


def _rebuilt(data):
    """What a repaired value holds, codec bytes aside (each host's codec library compresses in its
    own way): every entry's header fields and records, its CRC checked -- or the error reading it."""
    try:
        out = []
        for b in kb.iter_batches(data, verify_crc=True):
            records = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in b]
            out.append((b.magic, b.base_offset, b.last_offset, b.compression, b.timestamp_type, b.max_timestamp,
                        b.producer_id, b.base_sequence, b.record_count, records))
        return out
    except ValueError as exc:
        return f"unreadable: {type(exc).__name__}"


def test_jvm_repair_equals_the_python_repair_on_drawn_input(spark):
    """kbatch_repair on both paths, row for row, on drawn rows under drawn options: the same
    records dropped with the same culprits, the same batches left out whole, and rebuilt values
    holding the same entries and records with sound CRCs (byte for byte where nothing compressed
    was rebuilt) -- but for rows whose compressed payload was damaged (the codec libraries' own
    say).  A cap below a row's culprits fails the task on both paths."""
    from spark_udfs import kbatch_repair
    from spark_udfs.functions import register
    require_jvm_path(spark)
    seed = int(os.environ.get("PYKBATCH_JVM_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_JVM_SEED={seed}")
    rng = random.Random(seed)
    now_ms = 1_760_000_000_000
    dropped = rebuilt = 0
    for trial in range(3):
        options = dict(_options(rng, now_ms), max_culprits=1000)
        drawn = [_row(rng, now_ms) for _ in range(200)]
        df = spark.createDataFrame([(i, row) for i, (row, _) in enumerate(drawn)], "id int, value binary")
        got = {}
        for path in ("python", "jvm"):
            register(spark, jvm=path == "jvm")
            rows = df.select("id", kbatch_repair("value", options).alias("r")).collect()
            got[path] = [as_python(r.r) for r in sorted(rows, key=lambda r: r.id)]
        register(spark)
        for i, (p, j) in enumerate(zip(got["python"], got["jvm"])):
            where = (seed, trial, i, options, drawn[i][0].hex() if drawn[i][0] else None)
            if drawn[i][1] or p is None:
                assert (p is None) == (j is None), where
                continue
            assert j["dropped"] == p["dropped"] and j["unrepairable_batches"] == p["unrepairable_batches"], where
            assert _rebuilt(j["data"]) == _rebuilt(p["data"]), where
            if all(b.compression == "none" for b in kb.iter_batches(p["data"], verify_crc=False)):
                assert j["data"] == p["data"], where
            dropped += len(p["dropped"])
            rebuilt += p["data"] != drawn[i][0]
    assert dropped > 30 and rebuilt > 30, (dropped, rebuilt)
    two = kb.build_batch([{"key": None, "value": b"v", "timestamp": now_ms + 10**9}] * 2)  # two records in the future
    capped = spark.createDataFrame([(0, two)], "id int, value binary")
    for path in ("python", "jvm"):
        register(spark, jvm=path == "jvm")
        with pytest.raises(Exception, match="holds only part of its culprits"):
            capped.select(kbatch_repair("value", {"max_culprits": 1, "now_ms": now_ms})).collect()
    register(spark)


def test_the_jvm_path_refuses_what_it_does_not_check(spark):
    """A client's append of v0/v1 messages with size limits: the size of the batch a broker rebuilds
    is the Python function's; the JVM function says so and fails the task instead of skipping it."""
    from spark_udfs import kbatch_validate
    from spark_udfs.functions import register
    require_jvm_path(spark)
    register(spark, jvm=True)
    legacy = kb.build_batch([{"key": b"k", "value": b"v", "timestamp": 1}], magic=1)
    df = spark.createDataFrame([(0, legacy)], "id int, value binary")
    with pytest.raises(Exception, match="checked by the Python function only"):
        df.select(kbatch_validate("value")).collect()
    ok = df.select(kbatch_validate("value", {"max_message_bytes": None, "segment_bytes": None}).alias("v")).first()
    assert ok.v.ok
    register(spark)


def test_unknown_options_are_named(spark, spark_path):
    from spark_udfs import kbatch_validate
    df = spark.createDataFrame([(0, kb.build_batch([{"value": b"v", "timestamp": 1}]))], "id int, value binary")
    with pytest.raises(Exception, match="unknown kbatch_validate option 'nope'"):
        df.select(kbatch_validate("value", {"nope": "1"})).collect()


def test_the_jvm_catalog_names_the_functions_the_table_says(spark):
    """KbatchCatalog.NAMES (what the JVM registers) and function_table.JVM (whose types the jar
    carries, and which the DataFrame functions send to the JVM) are the same list."""
    from spark_udfs import jvm
    from spark_udfs.function_table import JVM
    from spark_udfs.functions import register
    require_jvm_path(spark)
    assert sorted(jvm.register(spark)) == sorted(JVM)
    register(spark)
