"""The kafka-segment reader without Spark: range pruning (segments by name, start positions by
.index / .timeindex, batches by header) must never change which records come out — a pruned
read equals the unpruned records filtered by brute force, on generated partitions with
broker-style indexes and on the real segments of the conformance corpus."""
import random
import struct

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pykbatch as kb
from pykbatch.log import segment_file_name
from spark_udfs.segment_plan import Ranges, find_segments, plan_splits, read_mode, start_position
from spark_udfs.segment_source import arrow_schema, read_split
from tests.conftest import CONFORMANCE, shared_file
from tests.samples import write_partition


def read_all(path, ranges, split_bytes=2000, mode="records", validate=False):
    """Every split the planner makes, read as Spark's tasks would, as one table (None: no rows);
    records' ``timestamp`` (a TimestampType, as Spark's Kafka source) as epoch milliseconds."""
    batches = [b for s in plan_splits(str(path), split_bytes, ranges)
               for b in read_split(s.path, s.topic, s.partition, s.start, s.end, mode, validate, ranges,
                                   next_base=s.next_base, follows=s.follows, previous=s.previous)]
    table = pa.Table.from_batches(batches, schema=arrow_schema(mode, validate)) if batches else None
    if table is not None and mode == "records":
        millis = pc.divide(table["timestamp"].cast(pa.int64()), 1000)
        table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", millis)
    return table


def brute_force(path, ranges):
    """(offset, timestamp) of every record of every segment under path within the ranges."""
    out = []
    for seg, _, _ in find_segments(str(path)):
        for batch in kb.iter_batches(open(seg, "rb").read()):
            for r in batch:
                if ((ranges.first_offset is None or r.offset >= ranges.first_offset)
                        and (ranges.end_offset is None or r.offset < ranges.end_offset)
                        and (ranges.first_timestamp is None or r.timestamp >= ranges.first_timestamp)
                        and (ranges.end_timestamp is None or r.timestamp < ranges.end_timestamp)):
                    out.append((r.offset, r.timestamp))
    return sorted(out)


def pairs(table):
    return sorted(zip(table["offset"].to_pylist(), table["timestamp"].to_pylist())) if table is not None else []


def random_ranges(rng, max_offset, max_ts):
    pick = lambda top: rng.choice([None, rng.randint(-5, top + 5)])  # noqa: E731
    return Ranges(pick(max_offset), pick(max_offset), pick(max_ts), pick(max_ts))


def test_pruned_reads_equal_brute_force_on_generated_partitions(tmp_path):
    part = write_partition(tmp_path / "orders-2")
    rng = random.Random(1)
    for _ in range(60):
        ranges = random_ranges(rng, 180, 2_500)
        assert pairs(read_all(tmp_path, ranges)) == brute_force(tmp_path, ranges), ranges
    assert len(brute_force(part, Ranges())) == 180


def test_segments_out_of_the_offset_range_are_not_opened(tmp_path):
    write_partition(tmp_path / "orders-2")  # segments at 0, 60, 120
    names = lambda ranges: sorted({s[0].rsplit("/", 1)[1] for s in plan_splits(str(tmp_path), 1 << 30, ranges)})  # noqa: E731
    assert names(Ranges(first_offset=65)) == [segment_file_name(60, ".log"), segment_file_name(120, ".log")]
    assert names(Ranges(end_offset=60)) == [segment_file_name(0, ".log")]
    assert names(Ranges(first_offset=60, end_offset=61)) == [segment_file_name(60, ".log")]
    assert len(names(Ranges())) == 3


def test_start_positions_come_from_the_indexes_and_stale_ones_are_ignored(tmp_path):
    part = write_partition(tmp_path / "orders-2", segments=1, batches=40)
    log = str(part / segment_file_name(0, ".log"))
    positions = {b.base_offset: b.position for b in kb.iter_batches(open(log, "rb").read())}
    start = start_position(log, Ranges(first_offset=150))
    assert 0 < start <= positions[150] and start in positions.values()
    assert start_position(log, Ranges(first_timestamp=10**12)) > 0  # past every entry: the last one
    assert start_position(log, Ranges(first_timestamp=0)) == 0
    # an index from another life of the segment: its positions are not batch starts
    (part / segment_file_name(0, ".index")).write_bytes(struct.pack(">ii", 100, 7) + struct.pack(">ii", 150, 999999))
    assert start_position(log, Ranges(first_offset=150)) == 0
    assert pairs(read_all(tmp_path, Ranges(first_offset=150))) == brute_force(tmp_path, Ranges(first_offset=150))
    # a batch start whose batch begins past the entry's offset; a position inside a batch whose
    # bytes there happen to look like a header (same offsets and size) but whose CRC cannot match
    data = bytearray(open(log, "rb").read())
    (part / segment_file_name(0, ".index")).write_bytes(struct.pack(">ii", 120, positions[150]))
    assert start_position(log, Ranges(first_offset=150)) == 0
    fake = positions[150] + 70
    data[fake:fake + 21] = data[positions[150]:positions[150] + 21]
    open(log, "wb").write(bytes(data))
    (part / segment_file_name(0, ".index")).write_bytes(struct.pack(">ii", 150, fake))
    assert start_position(log, Ranges(first_offset=150)) == 0


def test_windows_skip_batches_in_the_middle_without_mixing_verdicts(tmp_path):
    """Time ranges skip batches inside a window (timestamps are not monotonic); each window's
    verdicts stay with their own batches."""
    part = tmp_path / "orders-0"
    part.mkdir()
    batches = []
    for i in range(30):
        ts = 5_000 + i * 10 if i % 3 else 100  # every third batch from the past
        batches.append(bytearray(kb.build_batch([{"value": b"x", "timestamp": ts}] * 4, base_offset=4 * i)))
    batches[10][-2] ^= 1  # corrupt (CRC) and in range
    (part / segment_file_name(0, ".log")).write_bytes(b"".join(batches))
    table = read_all(tmp_path, Ranges(first_timestamp=1_000), validate=True)
    bad = sorted({o // 4 for o, ok in zip(table["offset"].to_pylist(), table["batch_ok"].to_pylist()) if not ok})
    assert bad == [10]
    assert sorted({o // 4 for o in table["offset"].to_pylist()}) == [i for i in range(30) if i % 3]
    header_rows = read_all(tmp_path, Ranges(first_timestamp=1_000), mode="batches", validate=True)
    assert sorted(header_rows["base_offset"].to_pylist()) == [4 * i for i in range(30) if i % 3]
    assert [b // 4 for b, ok in zip(header_rows["base_offset"].to_pylist(), header_rows["batch_ok"].to_pylist())
            if not ok] == [10]
    # Kafka's message names the partition the folder is for, not the placeholder t-0
    errors = {e for e in header_rows["batch_error"].to_pylist() if e}
    assert errors and all("in topic partition orders-0." in e for e in errors), errors


def test_pruned_reads_equal_brute_force_on_the_real_segments():
    root = shared_file(CONFORMANCE / "segments")
    rng = random.Random(7)
    checked = 0
    for directory in sorted({p.parent for p in root.rglob("*.log")}):
        everything = brute_force(directory, Ranges())
        if not everything:
            continue
        offsets = [o for o, _ in everything]
        stamps = [t for _, t in everything]
        for _ in range(4):
            ranges = Ranges(rng.choice([None, rng.choice(offsets)]), rng.choice([None, rng.choice(offsets) + 1]),
                            rng.choice([None, rng.choice(stamps)]), rng.choice([None, rng.choice(stamps) + 1]))
            assert pairs(read_all(directory, ranges, split_bytes=4096)) == brute_force(directory, ranges), \
                (directory, ranges)
        checked += 1
    assert checked > 20


def test_read_mode_from_mode_or_deep():
    assert read_mode({}) == "records"
    assert read_mode({"deep": "false"}) == "batches" and read_mode({"deep": "true"}) == "records"
    assert read_mode({"mode": "batches", "deep": "false"}) == "batches"
    with pytest.raises(ValueError, match="contradicts"):
        read_mode({"mode": "records", "deep": "false"})
    with pytest.raises(ValueError, match="not 'rows'"):
        read_mode({"mode": "rows"})


def test_remote_partitions_are_read_through_fsspec_and_pruned_by_name(tmp_path, monkeypatch):
    """A partition in an fsspec filesystem (memory://, standing in for s3:// or a tiered-storage
    bucket): segments are found, pruned by the base offsets in their names without being opened,
    spooled and read; the rows equal the local read of the same files."""
    fsspec = pytest.importorskip("fsspec", reason="fsspec is the [remote] extra")
    local = write_partition(tmp_path / "orders-2")
    fs = fsspec.filesystem("memory")
    for f in local.iterdir():
        fs.pipe(f"/bucket/orders-2/{f.name}", f.read_bytes())
    opened = []
    real_open = fsspec.open
    monkeypatch.setattr(fsspec, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))
    ranges = Ranges(first_offset=70, end_offset=100)
    remote = read_all("memory://bucket", ranges)
    assert pairs(remote) == brute_force(local, ranges) and len(pairs(remote)) == 30
    assert set(remote["topic"].to_pylist()) == {"orders"} and set(remote["partition"].to_pylist()) == {2}
    assert [p.split("/bucket/")[-1] for p in opened] == ["orders-2/" + segment_file_name(60, ".log")]
    assert find_segments("memory://bucket/orders-2/" + segment_file_name(0, ".log"))[0][1:] == ("orders", 2)


def test_remote_paths_without_fsspec_say_what_to_install(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_fsspec(name, *args, **kwargs):
        if name == "fsspec":
            raise ImportError("No module named 'fsspec'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_fsspec)
    with pytest.raises(ImportError, match=r"s3://bucket/t-0 needs fsspec \(pip install 'pykbatch\[remote\]'"):
        find_segments("s3://bucket/t-0")


def test_pushed_filters_narrow_the_ranges_conservatively(tmp_path):
    """Spark's pushed filters (pyspark.sql.datasource) as ranges; a pruned read under them equals
    the full read filtered the same way (Spark re-checks every filter, so only that matters)."""
    ds = pytest.importorskip("pyspark.sql.datasource", reason="pyspark is the [spark] extra")
    from spark_udfs.segment_plan import narrow
    filters = [ds.GreaterThanOrEqual(("offset",), 70), ds.LessThan(("offset",), 100), ds.GreaterThan(("offset",), 64),
               ds.LessThanOrEqual(("timestamp",), 2_000), ds.In(("partition",), (2, 5)), ds.EqualTo(("topic",), "orders"),
               ds.EqualTo(("value",), b"x"), ds.StringStartsWith(("topic",), "ord"), ds.In(("offset",), ())]
    ranges = narrow(Ranges(first_offset=10), filters)
    assert ranges == Ranges(70, 100, None, 2_001, frozenset({"orders"}), frozenset({2, 5}))
    assert narrow(Ranges(), [ds.EqualTo(("offset",), 7)], mode="batches") == Ranges()  # no offset column there
    assert narrow(Ranges(), [ds.In(("timestamp",), (5, 3, 9))]) == Ranges(None, None, 3, 10)
    write_partition(tmp_path / "orders-2")
    write_partition(tmp_path / "orders-3", seed=1)
    write_partition(tmp_path / "payments-2", seed=2)
    assert {s[1:3] for s in plan_splits(str(tmp_path), 1 << 30, ranges)} == {("orders", 2)}
    everything = read_all(tmp_path, Ranges())
    keep = [(t, p, o, ts) for t, p, o, ts in zip(*(everything[c].to_pylist() for c in ("topic", "partition", "offset",
                                                                                       "timestamp")))
            if t == "orders" and p in (2, 5) and 70 <= o < 100 and ts <= 2_000]
    pruned = read_all(tmp_path, ranges)
    assert sorted(zip(*(pruned[c].to_pylist() for c in ("topic", "partition", "offset", "timestamp")))) == sorted(keep)
    assert keep


def test_an_unreadable_wrapper_is_kept_for_its_reader_to_name(tmp_path):
    """endingOffset needs a compressed v0/v1 wrapper's first offset (its inner set's): a wrapper
    whose payload does not decompress is kept -- it gives no rows, its neighbours theirs -- where
    asking its first offset used to raise out of the read (a traceback in Spark)."""
    folder = tmp_path / "t-0"
    folder.mkdir()
    good = [kb.build_batch([{"value": b"v%d" % i, "timestamp": 1000}], base_offset=i, magic=1) for i in range(3)]
    wrapper = bytearray(kb.build_batch([{"value": b"x" * 50, "timestamp": 1000}] * 3, base_offset=3, magic=1,
                                       compression="gzip"))
    wrapper[-10:] = bytes(10)  # the gzip stream broken inside the wrapper's value
    tail = kb.build_batch([{"value": b"w", "timestamp": 1000}], base_offset=6, magic=1)
    (folder / segment_file_name(0, ".log")).write_bytes(b"".join(good) + bytes(wrapper) + tail)
    table = read_all(folder, Ranges(end_offset=7))
    assert table["offset"].to_pylist() == [0, 1, 2, 6]
    batches = read_all(folder, Ranges(end_offset=7), mode="batches")
    assert 0 in batches["base_offset"].to_pylist()


def test_timestamp_bounds_do_not_prune_a_v1_wrapper_by_its_own_timestamp(tmp_path):
    """Issue 53: librdkafka writes 0 as a compressed v1 wrapper's timestamp around records stamped
    now (CreateTime): a timestamp bound (startingTimestamp, or a pushed WHERE) pruned the wrapper by
    its header and lost its records (3 rows without pushdown, 0 with it, at dccad64).  A
    LogAppendTime wrapper's own timestamp is its records', and still prunes."""
    import zlib
    folder = tmp_path / "t-0"
    folder.mkdir()
    stamp = 1_700_000_000_000
    wrapper = bytearray(kb.build_batch([{"value": b"v%d" % i, "timestamp": stamp + i} for i in range(3)],
                                       base_offset=0, magic=1, compression="gzip"))
    wrapper[18:26] = (0).to_bytes(8, "big")  # the wrapper's own timestamp, as librdkafka leaves it
    wrapper[12:16] = (zlib.crc32(bytes(wrapper[16:])) & 0xFFFFFFFF).to_bytes(4, "big")
    (folder / segment_file_name(0, ".log")).write_bytes(bytes(wrapper))
    table = read_all(folder, Ranges(first_timestamp=stamp))
    assert table is not None and table["offset"].to_pylist() == [0, 1, 2]
    assert read_all(folder, Ranges(first_timestamp=stamp + 2))["offset"].to_pylist() == [2]
