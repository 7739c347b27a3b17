"""The tiered reader under the partition's one verdict, on drawn damage (tests/partition_damage.py,
the seed printed as in tests/test_partition_truth.py).

Each drawn partition is laid out as a broker with tiered storage leaves it: its closed segments
uploaded to a remote store (LocalTieredStorage's folder; the listing trusted, as without
``__remote_log_metadata``), its last segment the broker's local log.  Read by ``TieredPartition``,
from the generator's record of what was written:

* every record it hands out is the one written at that offset;
* it reads exactly what the Python partition reader reads (``read_partition``): the same records,
  so no sound record is lost to a damaged neighbour in either;
* every offset of the log is read, a marker's, the active segment's torn last write, or inside a
  report's range; no report names an offset read as written;
* it reports a problem only where something written is missing or altered, and when it reports
  none, everything written was read.

Compacted partitions are not drawn here: tiered storage does not take compacted topics (KIP-405).
"""
from __future__ import annotations

import os
import shutil
import uuid
import warnings

import pytest

import pykbatch as kb
from pykbatch import tiered
from pykbatch.commands.tiered import PROBLEMS
from pykbatch.config import ValidationConfig
from pykbatch.kafka.definitions import kafka_uuid
from pykbatch.log import Partition, base_offset_of, read_partition
from pykbatch.log.audit import audit_partition
from tests.partition_damage import draw
from tests.test_partition_truth import SEED, named_offsets

CASES = int(os.environ.get("PYKBATCH_TIERED_CASES", "60"))
SIBLINGS = (".index", ".timeindex", ".txnindex")  # what an upload carries beside its .log


def as_tiered(directory, root):
    """The store's root and the broker's log directory of partition ``directory`` laid out as
    tiered storage: each closed segment (and its indexes) an upload, the last one local."""
    paths = Partition(directory).segment_paths
    folder = root / "rsm" / "kafka-tiered-storage" / f"t-0-{kafka_uuid(uuid.UUID(int=7))}"
    folder.mkdir(parents=True)
    local = root / "data" / "t-0"
    local.mkdir(parents=True)
    for i, path in enumerate(paths):
        stem = path[:-len(".log")]
        upload = f"{base_offset_of(os.path.basename(path)):020d}-{kafka_uuid(uuid.UUID(int=i + 1))}"
        for suffix in (".log",) + SIBLINGS:
            if os.path.exists(stem + suffix):
                target = local / os.path.basename(stem + suffix) if i + 1 == len(paths) else folder / (upload + suffix)
                shutil.copy(stem + suffix, target)
    return root / "rsm", root / "data"


def drawn_store(case: int, tmp_path):
    """Drawn case ``case`` of the run's seed (printed), laid out as a store (``as_tiered``)."""
    print(f"PYKBATCH_PARTITION_SEED={SEED} case {case}")
    c = draw(SEED * 1000 + case, tmp_path / "t-0")
    if c.compacted:
        pytest.skip("tiered storage does not take compacted topics (KIP-405)")
    print(c.describe())
    return (c, *as_tiered(c.directory, tmp_path / "tiered"))


def _records(batches) -> dict:
    out = {}
    for b in batches:
        if b.is_control:
            continue
        try:
            out.update((r.offset, (r.key, r.value, tuple(r.headers), r.timestamp)) for r in b)
        except kb.KafkaDataError:  # yielded for its header (the walk names it)
            pass
    return out


@pytest.mark.parametrize("case", range(CASES))
def test_the_tiered_reader_gives_the_partitions_one_verdict(case, tmp_path):
    c, store_root, log_dir = drawn_store(case, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tiered.NoMetadataWarning)
        (part,) = tiered.TieredTopicStore(tiered.open_store(str(store_root))).partitions([str(log_dir)])
    reads: dict = {}
    markers: set = set()
    for _, b in part.batches():
        if b.is_control:
            markers.update(range(b.base_offset, b.last_offset + 1))
    reads = {r.offset: (r.key, r.value, tuple(r.headers), r.timestamp) for _, r in part.records()}
    problems = [r for r in part.reports if r.kind in PROBLEMS]
    told = "\n".join(r.line() for r in part.reports)

    written = c.records
    moved = "backwards" in c.kinds  # a moved base offset moves its records: nothing in one file tells
    if not moved:
        altered = {o for o, got in reads.items()
                   if o not in written or got != (written[o].key, written[o].value, written[o].headers,
                                                  written[o].timestamp)}
        assert not altered, (c.describe(), "records not as written", sorted(altered)[:20], told)

    partition_reads = _records(read_partition(str(c.directory), verify_crc=True))
    if moved:
        assert set(reads) <= set(partition_reads), (c.describe(), told)
    else:
        assert reads == partition_reads, (c.describe(), "the tiered reader and read_partition differ",
                                          sorted(set(reads) ^ set(partition_reads))[:20], told)

    audit = audit_partition(str(c.directory), ValidationConfig(origin="log", topic_partition="t-0"))
    end = max([s.last_offset for s in audit.segments if s.last_offset is not None] + list(named_offsets(audit)),
              default=-1)
    offsets = {o for b in c.batches for o in c.held(b) if o <= end}
    reported = set()
    for r in part.reports:
        if r.start is not None:
            reported.update(range(r.start, (r.end if r.end is not None else r.start) + 1))
    unaccounted = offsets - set(reads) - markers - c.normal_tail - reported
    assert not unaccounted, (c.describe(), "offsets neither read nor reported", sorted(unaccounted)[:20], told)
    if not moved:
        wrongly = {o for o in reported & set(reads) if reads[o] == (written[o].key, written[o].value,
                                                                      written[o].headers, written[o].timestamp)}
        assert not wrongly, (c.describe(), "reports name offsets read as written", sorted(wrongly)[:20], told)

    if problems:
        assert c.damaged, (c.describe(), told)
    else:
        missing = {o for o in offsets if o in written} - set(reads) - c.normal_tail
        assert not missing, (c.describe(), "no problem reported, records missing", sorted(missing)[:20], told)


SPARK_CASES = int(os.environ.get("PYKBATCH_TIERED_SPARK_CASES", "3"))


@pytest.mark.spark
@pytest.mark.parametrize("case", range(SPARK_CASES))
def test_kafka_segment_over_a_tiered_store_names_what_it_cannot_read(spark, tmp_path, case):
    """Spark's ``kafka-segment`` (the Python source) over the same store, ``validate=true``: a row
    for every record read back as written, every batch marked, every range it cannot read (the
    checks of tests/test_partition_truth_spark.py), whatever ``splitBytes`` cuts it into."""
    pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")
    from spark_udfs.functions import register
    from spark_udfs.segment_source import PYTHON_NAME
    from tests.test_partition_truth_spark import _check_against_what_was_written, _rows, _same
    c, store_root, log_dir = drawn_store(500 + case, tmp_path)
    register(spark)
    rows = collect(spark.read.format(PYTHON_NAME).options(validate="true", localDirs=str(log_dir)).load(str(store_root)))
    _check_against_what_was_written(c, rows)
    whole = _rows(spark, PYTHON_NAME, str(store_root), localDirs=str(log_dir))
    cut = _rows(spark, PYTHON_NAME, str(store_root), localDirs=str(log_dir), splitBytes="200", windowBytes="300")
    _same(cut, whole, c.describe(), "tiered rows depend on the cut")


def collect(df) -> list:
    from tests.test_spark import collect_plain
    return collect_plain(df)
