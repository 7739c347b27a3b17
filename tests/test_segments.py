"""The real .log segments of the conformance corpus (written by real brokers, some compacted,
some with KRaft metadata, consumer offsets and transactions): every one validates, decodes to the
manifest's entry and record counts, converts to Arrow and dumps as kafka-dump-log does."""
from pathlib import Path

import pytest

import pykbatch as kb
from pykbatch.dump import dump_log
from tests.conftest import CONFORMANCE, load_json, shared_file, shared_params

MANIFEST = CONFORMANCE / "segments" / "manifest.json"


def kafka_segments():
    # entries with "records" and "entries" are Kafka segments (Redpanda's native ones have "format")
    return shared_params(MANIFEST, lambda: [
        pytest.param(item, id=item["file"]) for items in load_json(MANIFEST).values() for item in items
        if "entries" in item and "records" in item and "format" not in item])


SEGMENTS = kafka_segments()


def test_the_corpus_has_its_86_kafka_segments():
    shared_file(MANIFEST)
    assert len(SEGMENTS) == 86


@pytest.mark.parametrize("item", SEGMENTS)
def test_segment(item, tmp_path):
    path = CONFORMANCE / item["file"]
    data = path.read_bytes()
    result = kb.validate(data, kb.ValidationConfig(origin="log"))
    assert result.ok, result.culprits[:5]
    assert result.entries == item["entries"] and result.records == item["records"]
    batches = list(kb.iter_batches(data))
    assert sum(len(list(b)) for b in batches) == item["records"]
    assert [b.magic for b in batches].count(2) == item["magics"].get("2", 0)
    assert kb.to_arrow(data).num_rows == item["records"]
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as o, open(err, "w") as e:
        assert dump_log(str(path), o, e, print_data=True) == 0
    assert out.read_text().count("| offset:") == item["records"]


def corpus_partitions():
    root = CONFORMANCE / "segments"
    return shared_params(root, lambda: sorted({str(p.parent) for p in root.rglob("*.log")}))


@pytest.mark.parametrize("directory", corpus_partitions())
def test_real_partitions_audit_clean(directory):
    """Partition directories written by real brokers: segments, offsets across them, producer
    state and whatever index files survived all check out."""
    from pykbatch.log.audit import audit_partition
    audit = audit_partition(directory)
    assert audit.ok, (audit.overlaps, audit.below_base, audit.index_problems, audit.producers.culprits,
                      [(s.path, s.result.culprits[:3], s.read_error) for s in audit.segments if not s.result.ok])


def test_dumping_a_large_segment_keeps_memory_bounded(tmp_path):
    """A 384 MiB segment (mmap-ed) dumps with the resident set well under its size: read pages are
    handed back as the dump goes (benchmarks/segment_memory.py measures 1 GiB beside Kafka's tool)."""
    import os
    import subprocess
    import sys
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from segment_memory import write_segment
    seg = tmp_path / "00000000000000000000.log"
    write_segment(seg, 384 * 2**20)

    def peak_mib(*args):
        proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        return usage.ru_maxrss / 1024
    baseline = peak_mib("-c", "import pykbatch.commands")
    assert peak_mib("-m", "pykbatch", "dump", "--files", str(seg), "--no-progress") - baseline < 150
