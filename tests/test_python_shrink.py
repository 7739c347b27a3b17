"""A segment cut while Python reads it (a broker truncates segments on leader changes and recoveries).

Python reads segments through mmap; a read of a page past the file's new end raised SIGBUS and
ended the process (a Spark Python worker, an operator's audit).  csrc/kb_shrink_guard.c maps zeros
over what was cut instead and the readers name it (``log.file_shrank``).  Each run, in a child
process so that a crash is seen as one: a segment of drawn batches is cut to a drawn size at a
drawn moment of ``Segment.batches``, ``read_partition`` and before ``Segment.validate``; the child
lives, yields exactly the batches read whole (as written), and names the rest from where the walk
stopped to the old end.  PYKBATCH_SHRINK_SEED replays a run."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import json, os, random, sys
    import pykbatch as kb
    from pykbatch.log import Segment, read_partition
    seed, runs, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    out = []
    for run in range(runs):
        part = os.path.join(folder, "run%d" % run, "t-0")
        os.makedirs(part)
        path = os.path.join(part, "00000000000000000000.log")
        batches, offset = [], 0
        for i in range(rng.randint(1, 300)):
            n = rng.randint(1, 5)
            batches.append(kb.build_batch([(b"k", os.urandom(rng.randint(0, 3000)))] * n, base_offset=offset))
            offset += n
        data = b"".join(batches)
        with open(path, "wb") as f:
            f.write(data)
        mode = rng.choice(["batches", "partition", "validate"])
        moment = rng.randint(0, len(batches))
        cut = rng.choice([0, rng.randint(0, len(data)), sum(map(len, batches[:rng.randint(0, len(batches))]))])
        got, told = [], []
        if mode == "validate":
            with Segment(path) as seg:
                os.truncate(path, cut)
                r = seg.validate(kb.ValidationConfig(origin="log"))
                told = [(c.rule, c.entry_position) for c in r.culprits]
                got = r.entries
        else:
            seg = Segment(path) if mode == "batches" else None
            walk = seg.batches(verify_crc=True, on_lost=lambda s: told.append((s.error.rule, s.position, s.size))) \\
                if seg else read_partition(part, verify_crc=True, on_lost=lambda c: told.append((c.rule, c.position, None)))
            for i, b in enumerate(walk):
                got.append(bytes(b.raw) if seg else b.base_offset)  # read before the cut
                if i == moment:
                    os.truncate(path, cut)
            if moment >= len(got):
                os.truncate(path, cut)
            if seg:
                seg.close()
        out.append({"mode": mode, "moment": moment, "cut": cut, "sizes": [len(b) for b in batches],
                    "bases": [b.base_offset for b in map(lambda x: next(kb.iter_batches(x)), batches)],
                    "same": [g == batches[i] for i, g in enumerate(got)] if mode == "batches" else None,
                    "got": got if mode != "batches" else len(got), "told": told})
    print(json.dumps(out))
''')


def test_a_segment_cut_while_python_reads_it_is_named_and_the_process_lives(tmp_path):
    seed = int(os.environ.get("PYKBATCH_SHRINK_SEED") or random.randrange(2**31))
    print(f"PYKBATCH_SHRINK_SEED={seed}")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(seed), "60", str(tmp_path)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, (seed, proc.returncode, proc.stderr[-3000:])  # -7: SIGBUS
    for run in json.loads(proc.stdout):
        sizes, cut, moment, mode = run["sizes"], run["cut"], run["moment"], run["mode"]
        ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
        whole = sum(1 for e in ends if e <= cut)  # batches the cut file still holds whole
        where = (seed, run)
        if mode == "validate":  # cut before the walk: what is left, then the rest named
            assert run["got"] == whole, where
            lost = [t for t in run["told"] if t[0] == "log.file_shrank"]
            assert run["told"] == lost and len(lost) == (1 if cut < ends[-1] else 0), where
            if lost:
                assert lost[0][1] == (ends[whole - 1] if whole else 0), where
            continue
        read = max(whole, min(moment + 1, len(sizes)))  # read before the cut, or still there after it
        got = run["got"]
        count = got if mode == "batches" else len(got)
        assert count == read, where
        if mode == "batches":
            assert all(run["same"]), where  # every batch yielded is the batch written
        else:
            assert got == run["bases"][:read], where
        shrank = [t for t in run["told"] if t[0] == "log.file_shrank"]
        assert run["told"] == shrank, where  # nothing but the cut is named
        assert len(shrank) == (1 if read < len(sizes) else 0), where
        if shrank and mode == "batches":
            position, size = shrank[0][1], shrank[0][2]
            assert (position, position + size) == (ends[read - 1] if read else 0, ends[-1]), where


def test_kafka_segments_python_reader_names_a_cut_with_a_row(tmp_path):
    """Spark's kafka-segment (Python path, spark_udfs.segment_source.read_split) over a segment cut
    between two windows at drawn places: rows for what was read, then one row for the cut
    (``log.file_shrank``, as the JVM reader gives), and the process lives."""
    seed = int(os.environ.get("PYKBATCH_SHRINK_SEED") or random.randrange(2**31))
    print(f"PYKBATCH_SHRINK_SEED={seed}")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent('''
        import json, os, random, sys
        import pykbatch as kb
        from spark_udfs.segment_source import read_split
        rng = random.Random(int(sys.argv[1]))
        out = []
        for run in range(20):
            path = os.path.join(sys.argv[2], "r%d" % run, "00000000000000000000.log")
            os.makedirs(os.path.dirname(path))
            batches = [kb.build_batch([(b"k", os.urandom(rng.randint(0, 5000)))] * 3, base_offset=3 * i)
                       for i in range(rng.randint(20, 120))]
            open(path, "wb").write(b"".join(batches))
            cut_after = rng.randint(1, 3)
            cut = rng.randint(0, len(b"".join(batches)))
            rows = []
            for i, rb in enumerate(read_split(path, "t", 0, 0, None, "records", True, window_bytes=16384)):
                rows += rb.to_pylist()
                if i == cut_after:
                    os.truncate(path, cut)
            out.append({"cut": cut, "ends": [sum(map(len, batches[:k + 1])) for k in range(len(batches))],
                        "offsets": [r["offset"] for r in rows if r["lost_bytes"] is None],
                        "lost": [(r["error_rule"], r["lost_first_offset"]) for r in rows
                                 if r["lost_bytes"] is not None],
                        "bad": [r["offset"] for r in rows if r["lost_bytes"] is None and not r["batch_ok"]]})
        print(json.dumps(out))
    '''), str(seed), str(tmp_path)], capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, (seed, proc.returncode, proc.stderr[-3000:])
    for run in json.loads(proc.stdout):
        where = (seed, run)
        offsets, lost = run["offsets"], run["lost"]
        assert offsets == list(range(len(offsets))), where  # in order, none skipped, none twice
        if len(offsets) < 3 * len(run["ends"]):  # the cut took some: one row says so, from where rows stop
            assert lost == [["log.file_shrank", lost[0][1]]] and lost[0][1] in (None, len(offsets)), where
        else:
            assert lost == [], where
        assert run["bad"] == [], where
