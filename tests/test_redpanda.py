"""Redpanda native segments (pykbatch/log/redpanda.py): the two real ones in the conformance corpus
decode to their manifest's batches, types and record counts and re-frame byte for byte as the
corpus's Kafka conversion; native segments built here from Kafka batches round-trip; damage in
either CRC, the size or a truncation is reported at its byte, never raised."""
from __future__ import annotations

import json
import struct

import pyarrow.parquet as pq
import pytest

import pykbatch as kb
from pykbatch.log import redpanda
from pykbatch.commands import main
from tests.conftest import CONFORMANCE, load_json, shared_file
from tests.samples import batch

RP = CONFORMANCE / "segments" / "redpanda-data+redpanda"


def native(kafka_batch: bytes, batch_type: int = redpanda.RAFT_DATA) -> bytes:
    """A Kafka v2 batch as Redpanda stores it (little-endian header, header CRC over the rest)."""
    base, _, _, _, crc = struct.unpack_from(">qiibI", kafka_batch)
    attrs, lod, fts, mts, pid, pe, bseq, cnt = struct.unpack_from(">hiqqqhii", kafka_batch, 21)
    records = kafka_batch[61:]
    rest = struct.pack("<iqbIhiqqqhii", 61 + len(records), base, batch_type, crc, attrs, lod, fts, mts, pid, pe,
                       bseq, cnt)
    return struct.pack("<I", kb.crc32c(rest)) + rest + records


@pytest.mark.parametrize("name", ["test_segment.bin", "3676-7429-77-1-v1.log.1"])
def test_the_corpus_segments_decode_to_their_manifest(name):
    data = shared_file(RP / name).read_bytes()
    manifest = load_json(CONFORMANCE / "segments" / "manifest.json")
    entry = next(e for e in manifest["redpanda-data/redpanda"] if e["file"].endswith(name))
    report = redpanda.Report()
    got = list(redpanda.batches(data, report))
    assert [b.type for b in got] == entry["batch_types"] and report.ok
    assert sum(b.record_count for b in got) == entry["records"]
    assert report.zero_padding == entry["zero_padding_after"]
    kafka, _ = redpanda.kafka_log(data, data_only=False)
    vectors = load_json(CONFORMANCE / "vectors.json")
    items = vectors if isinstance(vectors, list) else vectors["vectors"]
    (converted,) = [v for v in items if v["id"].endswith(f"{name}_converted_to_Kafka_wire_format")]
    assert kafka.hex() == converted["hex"]
    data_only, _ = redpanda.kafka_log(data)
    assert kb.validate(data_only, kb.ValidationConfig(origin="log")).ok
    assert [b.type_name for b in got if b.type != redpanda.RAFT_DATA] == \
        [redpanda.type_name(t) for t in entry["batch_types"] if t != redpanda.RAFT_DATA]


def sample_segment() -> tuple[bytes, list[bytes]]:
    kafka = [batch(3, base_offset=0), batch(2, base_offset=3, compression="gzip"), batch(4, base_offset=5)]
    return b"".join(native(k) for k in kafka) + b"\x00" * 100, kafka


def test_native_batches_round_trip_to_kafkas():
    data, kafka = sample_segment()
    assert redpanda.is_native(data) and not redpanda.is_native(b"".join(kafka))
    out, report = redpanda.kafka_log(data)
    assert report.ok and report.batches == 3 and report.zero_padding == 100
    relabelled = [k[:12] + b"\xff\xff\xff\xff" + k[16:] for k in kafka]  # partition leader epoch -1
    assert out == b"".join(relabelled)
    assert [r.offset for b in kb.iter_batches(out) for r in b] == list(range(9))


def test_damage_is_reported_at_its_byte_and_never_raised():
    data, _ = sample_segment()
    second = len(native(batch(3, base_offset=0)))  # the second batch's position
    header = bytearray(data)
    header[second + 9] ^= 1  # the second batch's base offset: its header CRC fails
    report = redpanda.Report()
    assert len(list(redpanda.batches(bytes(header), report))) == 1
    assert report.faults[0][:2] == (second, "redpanda.header_crc")
    records = bytearray(data)
    records[second + 70] ^= 1  # inside the second batch's records: Kafka's CRC fails, the walk goes on
    report = redpanda.Report()
    assert len(list(redpanda.batches(bytes(records), report))) == 3
    assert [f[:2] for f in report.faults] == [(second, "batch.crc_mismatch")]
    for cut in range(1, len(data) - 100):
        report = redpanda.Report()
        got = list(redpanda.batches(data[:cut], report))
        assert report.valid_bytes <= cut and len(got) <= 3
        if report.valid_bytes < cut:
            assert report.faults and report.faults[-1][1] in ("redpanda.truncated",)


def test_the_command_line_dumps_validates_and_exports(tmp_path, capsys):
    data, _ = sample_segment()
    path = tmp_path / "0-1-v1.log"
    path.write_bytes(data)
    assert main(["redpanda", str(path)]) == 0
    out = capsys.readouterr().out
    assert "type: raft_data(1)" in out and "100 zero bytes" in out
    assert main(["redpanda", str(path), "--json", "--to", "parquet", str(tmp_path / "r.parquet")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["records"] for b in doc["batches"]] == [3, 2, 4]
    assert pq.read_table(tmp_path / "r.parquet").num_rows == 9
    damaged = bytearray(data)
    damaged[len(native(batch(3, base_offset=0))) + 70] ^= 1
    path.write_bytes(bytes(damaged))
    assert main(["redpanda", str(path)]) == 1
    assert "batch.crc_mismatch" in capsys.readouterr().out
    assert main(["redpanda", str(tmp_path / "r.parquet")]) == 2  # not a native segment: refused with a hint


@pytest.mark.spark
def test_spark_reads_redpanda_native_segments(spark, tmp_path):
    data, kafka = sample_segment()
    part = tmp_path / "kafka" / "orders" / "0_17"
    part.mkdir(parents=True)
    (part / "0-1-v1.log").write_bytes(data)
    df = spark.read.format("kafka-segment").option("format", "redpanda").option("validate", "true") \
        .load(str(tmp_path / "kafka"))
    rows = df.select("topic", "partition", "offset", "batch_ok").collect()
    assert [(r.topic, r.partition, r.offset, r.batch_ok) for r in rows] == [("orders", 0, o, True) for o in range(9)]
