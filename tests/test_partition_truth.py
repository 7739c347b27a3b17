"""One verdict of a partition, held on drawn damage (tests/partition_damage.py, seed printed).

For each case, from the generator's record of what was written -- never from pykbatch's report:

* ``validate --segment``, ``dump`` of the directory and ``repair`` of its segments finish
  without a traceback and exit 1 exactly when something written is missing or altered (the
  active segment's torn last write alone is normal: exit 0);
* every offset the log held is read back with its record as written, or inside a finding that
  names it (the validator's culprits and the partition's own: a cut segment, a gap, a deleted
  segment), and no finding names an offset whose record was read as written -- the ranges are
  exact;
* every record the damage did not touch is read back (no good record lost to a neighbour);
* a repaired segment holds exactly the records read as sound, at their original offsets, and
  validates clean on its own.

PYKBATCH_PARTITION_SEED replays a run; PYKBATCH_PARTITION_CASES sets how many cases (CI: 150,
fixed seed; locally a fresh seed each run)."""
from __future__ import annotations

import os
import random
import shutil

import pyarrow
import pyarrow.compute
import pytest

import pykbatch as kb
from pykbatch.config import ValidationConfig
from pykbatch.log.audit import audit_partition
from pykbatch.log import Partition, read_partition
from pykbatch.log.segments import first_offset
from tests.partition_damage import draw
from tests.test_damage_contract import run

SEED = int(os.environ.get("PYKBATCH_PARTITION_SEED") or (20261207 if os.environ.get("CI") else random.randrange(2**32)))
CASES = int(os.environ.get("PYKBATCH_PARTITION_CASES", "150"))


def named_offsets(audit, but=()) -> set:
    """Every offset some finding of the audit names (culprits of segments, the partition's own),
    but those of the rules in ``but``."""
    named = set()
    culprits = [(s.path, c) for s in audit.segments for c in s.result.culprits] + [(None, c) for _, c in audit.lost]
    # an entry out of order: every finding of it names its own offsets, which repeat earlier ones
    excused = {(path, c.entry_position) for path, c in culprits if c.rule in but}
    for c in (c for path, c in culprits if c.rule not in but and (path, c.entry_position) not in excused):
        if c.first_offset is not None:
            last = c.last_offset if c.last_offset is not None else c.first_offset
            named.update(range(c.first_offset, last + 1))
    return named


def sound_records(directory, audit) -> dict:
    """offset -> (key, value, headers, timestamp) of every record read from a batch no finding
    names (the Python partition reader, CRCs checked)."""
    # a gap is reported against the entry after it, whose records are sound
    blamed = {(s.path, c.entry_position) for s in audit.segments for c in s.result.culprits
              if c.rule != "log.offset_gap"}
    out = {}
    for path in Partition(directory).segment_paths:
        with kb.read_segment(path) as seg:
            for b in seg.batches(verify_crc=True):
                if (path, b.position) in blamed or not b.is_valid or b.is_control:
                    continue
                for r in b:
                    out[r.offset] = (r.key, r.value, tuple(r.headers), r.timestamp)
    return out


def _arrow_rows(data: bytes) -> dict:
    """offset -> (key, value, timestamp) of each data record ``to_arrow`` gives."""
    t = kb.to_arrow(data)
    rows = t.filter(pyarrow.compute.invert(t["is_control"])).to_pydict()
    return {o: (k, v, ts) for o, k, v, ts in zip(rows["offset"], rows["key"], rows["value"], rows["timestamp"])}


def _batch_rows(data: bytes) -> dict:
    return {r.offset: (r.key, r.value, r.timestamp) for b in kb.iter_batches(data) if not b.is_control for r in b}


@pytest.mark.parametrize("case", range(CASES))
def test_every_tool_gives_the_partitions_one_verdict(case, tmp_path):
    seed = SEED * 1000 + case
    print(f"PYKBATCH_PARTITION_SEED={SEED} case {case}")
    c = draw(seed, tmp_path / "t-0")
    print(c.describe())
    assert_one_verdict(c, tmp_path)


def assert_one_verdict(c, tmp_path) -> None:
    """Every check of the module docstring on the damaged partition ``c`` (its files in
    ``c.directory``, what was written in ``c.batches``)."""
    written = c.records
    offsets = {o for b in c.batches for o in c.held(b)}
    flags = ["--compacted"] if c.compacted else []
    want = 1 if c.damaged else 0

    status, out, err = run(["validate", *flags, "--segment", str(c.directory)])
    assert status == want, (c.describe(), out, err)
    status, _, err = run(["dump", *flags, "--files", str(c.directory)])
    dumped = status
    audit = audit_partition(str(c.directory), ValidationConfig(origin="log", topic_partition="t-0",
                                                               compacted=c.compacted))
    assert audit.ok == (not c.damaged), c.describe()

    sound = sound_records(c.directory, audit)
    for offset, got in sound.items():  # read back as written
        r = written.get(offset)
        assert r is not None and got == (r.key, r.value, r.headers, r.timestamp), (c.describe(), offset)
    named = named_offsets(audit)
    untouched = {o for o in offsets if o not in c.lost and o not in c.normal_tail}
    data_offsets = set(written)
    missing = (data_offsets & untouched) - set(sound)
    assert not missing, (c.describe(), "records lost though the damage did not touch them", sorted(missing)[:20])
    # the log's end as the files show it: offsets past it (a last batch whose base offset was moved
    # back) no file names -- a broker's checkpoints beside the partition would
    end = max([s.last_offset for s in audit.segments if s.last_offset is not None] + list(named), default=-1)
    unaccounted = {o for o in offsets if o <= end} - c.normal_tail - set(sound) - named - {
        o for b in c.batches if b.control for o in range(b.first, b.last + 1)}
    assert not unaccounted, (c.describe(), "offsets neither read nor named", sorted(unaccounted)[:20])
    # offsets that go backwards name the entry's own, which repeat those before it: which of the
    # two is wrong is not known
    wrongly_named = named_offsets(audit, but=("log.offsets_not_increasing",)) & set(sound)
    assert not wrongly_named, (c.describe(), "findings name offsets read as written", sorted(wrongly_named)[:20])

    # the Python partition reader: every offset in a batch it yields or in a range it names
    told = []
    covered = set()
    before = None  # the last offset yielded: a wrapper whose records do not read starts after it
    for b in read_partition(str(c.directory), on_lost=told.append, verify_crc=True, compacted=c.compacted):
        first = first_offset(b, before)
        covered.update(range(b.last_offset if first is None else first, b.last_offset + 1))
        try:  # a v0 wrapper's header offset moved back: its records keep their own (absolute) offsets
            covered.update(r.offset for r in b)
        except kb.KafkaDataError:
            pass
        before = b.last_offset
    for t in told:
        if t.first_offset is not None:
            covered.update(range(t.first_offset, (t.last_offset if t.last_offset is not None else t.first_offset) + 1))
    unread = {o for o in offsets if o <= end} - c.normal_tail - covered
    assert not unread, (c.describe(), "offsets the partition reader neither yields nor names", sorted(unread)[:20])

    # the bytes readers of each segment (to_arrow, iter_batches): the first problem raised, or
    # every untouched record given, none altered (a torn end they cannot tell from a cut one)
    for path in Partition(c.directory).segment_paths:
        here = {o for b in c.batches if str(c.path(b.segment)) == path for o in c.held(b)}
        for read in (_arrow_rows, _batch_rows):
            try:
                rows = read(open(path, "rb").read())
            except kb.KafkaDataError:
                continue
            if "backwards" not in c.kinds:  # a moved base offset moves its records: nothing in one file tells
                altered = {o for o, got in rows.items()
                           if o not in written or got != (written[o].key, written[o].value, written[o].timestamp)}
                assert not altered, (c.describe(), read.__name__, path, sorted(altered)[:20])
            dropped = (here & untouched & data_offsets) - set(rows)
            assert not dropped, (c.describe(), read.__name__, path, "untouched records not given", sorted(dropped)[:20])

    # the dump of the directory agrees (it prints; damage it sees or the partition shows: exit 1)
    assert dumped == want, (c.describe(), err)

    # repair: each segment's sound records at their offsets, clean on its own
    fixed_dir = tmp_path / "fixed" / "t-0"
    fixed_dir.mkdir(parents=True)
    for path in Partition(c.directory).segment_paths:
        out_path = fixed_dir / os.path.basename(path)
        status, out, err = run(["repair", path, "--out", str(out_path), *flags])
        assert status in (0, 1) and "Traceback" not in err, (c.describe(), out, err)
        kept_rows = [(r.offset, (r.key, r.value, tuple(r.headers), r.timestamp))
                     for b in kb.iter_batches(out_path.read_bytes()) if not b.is_control for r in b]
        kept = dict(kept_rows)
        here = {o for b in c.batches if str(c.path(b.segment)) == path for o in c.held(b)}
        mine = {o: v for o, v in sound.items() if o in here}
        alone = shutil.copy(out_path, tmp_path / "alone.log")
        status, out, err = run(["validate", *flags, str(alone)])
        if "backwards" in c.kinds:  # which of two entries holds the wrong offset is not known: both kept
            assert set(kept_rows) >= set(mine.items()), (c.describe(), path)
            continue
        assert kept == mine, (c.describe(), path, sorted(set(kept) ^ set(mine))[:20])
        assert status == 0, (c.describe(), path, out)


REPAIRED_CASES = int(os.environ.get("PYKBATCH_REPAIRED_CASES", "120"))


def test_kafka_reads_each_repaired_partition_as_written(tmp_path):
    """``repair`` of every segment of a drawn damaged partition, then Kafka's own log
    (``UnifiedLog``, opened as after an unclean shutdown: every segment recovered from offset 0,
    a batch that does not validate truncates the log there) serves exactly the records read as
    sound, at their original offsets, with their keys, values and timestamps -- nothing
    truncated, nothing renumbered (tests/kafka_harness/LogReadHarness.java, one JVM for all the
    cases).  A transaction whose marker the damage took is closed by the repair (an ABORT marker:
    Kafka refuses a log where its producer then writes outside a transaction), so Kafka loads every
    repaired partition.  Offsets that went backwards are left out (which of two entries is wrong is
    not known: both are kept, and Kafka's recovery judges them)."""
    from tests import kafka_broker
    why = kafka_broker.unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"Kafka's log must read the repairs on CI: {why}")
        pytest.skip(why)
    print(f"PYKBATCH_PARTITION_SEED={SEED}")
    assert_kafka_reads_the_repairs((draw(SEED * 1000 + 500 + case, tmp_path / f"case{case}" / "t-0")
                                    for case in range(REPAIRED_CASES)), tmp_path)


def assert_kafka_reads_the_repairs(cases, tmp_path) -> None:
    """Each damaged partition of ``cases`` repaired segment by segment; Kafka's UnifiedLog serves
    each repaired partition's sound records, as written, at their offsets."""
    import json
    import subprocess

    from tests import kafka_broker
    expected, dirs = {}, []
    for case, c in enumerate(cases):
        if "backwards" in c.kinds:
            continue
        audit = audit_partition(str(c.directory), ValidationConfig(origin="log", topic_partition="t-0",
                                                                   compacted=c.compacted))
        fixed = tmp_path / f"fixed{case}" / "t-0"
        fixed.mkdir(parents=True)
        for path in Partition(c.directory).segment_paths:
            status, out, err = run(["repair", path, "--out", str(fixed / os.path.basename(path)),
                                    *(["--compacted"] if c.compacted else [])])
            assert status in (0, 1) and "Traceback" not in err, (c.describe(), out, err)
        expected[str(fixed)] = (c.describe(), {o: (k, v, ts) for o, (k, v, _, ts) in sound_records(c.directory,
                                                                                                      audit).items()})
        dirs.append(str(fixed))
    proc = subprocess.run(["java", "-cp", kafka_broker.classpath(), "pykbatch.harness.LogReadHarness", *dirs],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    served: dict = {d: {} for d in dirs}
    wrong = []
    for line in proc.stdout.splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "error" in row:
            wrong.append((expected[row["dir"]][0], "Kafka refuses the repaired log", row["error"]))
        elif "offset" in row and not row["control"]:
            key = bytes.fromhex(row["key"]) if row["key"] is not None else None
            value = bytes.fromhex(row["value"]) if row["value"] is not None else None
            served[row["dir"]][row["offset"]] = (key, value, row["timestamp"])
    for d in dirs:
        describe, want = expected[d]
        got = served[d]
        if got != want and not any(w[0] == describe for w in wrong):
            wrong.append((describe, "Kafka serves other records", sorted(set(got) ^ set(want))[:20]))
    assert not wrong, wrong
