"""Spark's ``kafka-segment`` gives the partition's one verdict (issue 53): drawn damaged partitions
(tests/partition_damage.py, seed printed) read with ``validate=true`` on the JVM reader and on the
Python source, checked against the generator's own record of what was written:

* both paths give the same rows, in records and in batches mode, including a row of its own for
  every range whose records cannot be read (``lost_bytes`` not null: its rule, code, byte span and
  the offsets it hides);
* the rows do not depend on how the read is cut: drawn ``splitBytes`` / ``windowBytes`` give the
  rows of one split and one window per segment (``batch_index``, a record's entry in its window,
  aside);
* every offset the log held is a record read back as written, a record of a batch marked
  ``batch_ok = false``, or inside a row that names it; no such row names an offset whose record was
  read as written; every record the damage did not touch is read.

PYKBATCH_PARTITION_SEED replays a run; PYKBATCH_SPARK_PARTITION_CASES sets how many cases (CI: 6,
fixed seed; locally a fresh seed each run)."""
from __future__ import annotations

import os
import random

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")

from tests.conftest import require_jvm_path  # noqa: E402
from tests.partition_damage import draw  # noqa: E402
from tests.test_spark import collect_plain  # noqa: E402

pytestmark = pytest.mark.spark

SEED = int(os.environ.get("PYKBATCH_PARTITION_SEED") or (20261208 if os.environ.get("CI") else random.randrange(2**32)))
CASES = int(os.environ.get("PYKBATCH_SPARK_PARTITION_CASES", "6"))
JVM_SCAN = "pykbatch's core on the JVM"


def _rows(spark, fmt: str, path: str, **options) -> list:
    df = spark.read.format(fmt).options(validate="true", **options).load(path)
    if fmt == "kafka-segment":
        assert JVM_SCAN in df._jdf.queryExecution().executedPlan().toString()
    rows = collect_plain(df)
    assert df.count() == len(rows)  # rows counted without a column read: the same rows
    for r in rows:  # the decompressor's own words are its library's (snappy-java's on the JVM)
        if r.get("error_rule") == "batch.decompression_failed" and r.get("batch_error"):
            r["batch_error"] = r["batch_error"].split(" record stream:")[0]
    return sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_index")) for r in rows)


def _same(got: list, want: list, *why) -> None:
    """``got == want``, or a failure naming the rows in one and not the other (left: ``got``)."""
    if got != want:
        print(*why, "\nonly left:", *sorted(set(got) - set(want))[:6], "\nonly right:", *sorted(set(want) - set(got))[:6],
              sep="\n")
    assert got == want, why


def _check_against_what_was_written(case, rows: list) -> None:
    written = case.records
    offsets = {o for b in case.batches for o in case.held(b)}
    read, flagged, named = {}, set(), set()
    for r in rows:
        if r["lost_bytes"] is not None:
            first, last = r["lost_first_offset"], r["lost_last_offset"]
            if first is not None:
                named.update(range(first, (last if last is not None else first) + 1))
        elif r["batch_ok"]:
            if not r["is_control"]:
                read[r["offset"]] = (r["key"], r["value"], r["timestamp"] // 1000)
        else:
            flagged.add(r["offset"])
    for offset, got in read.items():
        w = written.get(offset)
        assert w is not None and got == (w.key, w.value, w.timestamp), (case.describe(), offset, got)
    untouched = {o for o in written if o not in case.lost and o not in case.normal_tail}
    missing = untouched - set(read) - flagged
    assert not missing, (case.describe(), "records the damage did not touch, not read", sorted(missing)[:20])
    controls = {o for b in case.batches if b.control for o in range(b.first, b.last + 1)}
    end = max(list(read) + list(named) + list(flagged), default=-1)
    unaccounted = {o for o in offsets if o <= end} - case.normal_tail - set(read) - named - flagged - controls
    assert not unaccounted, (case.describe(), "offsets neither read nor named", sorted(unaccounted)[:20])
    wrongly = named & set(read)
    if "backwards" not in case.kinds:  # offsets that go backwards repeat those before them
        assert not wrongly, (case.describe(), "rows name offsets read as written", sorted(wrongly)[:20])


@pytest.mark.parametrize("case", range(CASES))
def test_kafka_segment_names_what_it_cannot_read_on_both_paths(spark, tmp_path, case):
    seed = SEED * 1000 + case
    print(f"PYKBATCH_PARTITION_SEED={SEED} case {case}")
    c = draw(seed, tmp_path / "t-0")
    print(c.describe())
    assert_both_paths_give_the_one_verdict(spark, c, random.Random(seed))


def assert_both_paths_give_the_one_verdict(spark, c, rng: random.Random) -> None:
    """Every check of the module docstring on the damaged partition ``c``, the read cut as
    ``rng`` draws it."""
    from spark_udfs.functions import register
    from spark_udfs.segment_source import NAME, PYTHON_NAME
    require_jvm_path(spark)
    register(spark)
    path = str(c.directory)
    told = {"compacted": "true"} if c.compacted else {}  # what the partition is: not a cut of the read
    cut = {"splitBytes": str(rng.choice([1, 100, 700, 5000])), "windowBytes": str(rng.choice([1, 300, 4000])), **told}

    python = _rows(spark, PYTHON_NAME, path, **told)
    _same(_rows(spark, NAME, path, **told), python, c.describe(), "the JVM reader and the Python source differ")
    _same(_rows(spark, PYTHON_NAME, path, **cut), python, c.describe(), cut, "rows depend on the cut")
    _same(_rows(spark, NAME, path, **cut), python, c.describe(), cut, "JVM rows depend on the cut")
    batches = _rows(spark, PYTHON_NAME, path, mode="batches", **told)
    _same(_rows(spark, NAME, path, mode="batches", **cut), batches, c.describe(), cut, "batches mode")

    rows = collect_plain(spark.read.format(PYTHON_NAME).options(validate="true", **told).load(path))
    _check_against_what_was_written(c, rows)
