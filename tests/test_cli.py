"""The command line: dump options beside kafka-dump-log's, validate's exit codes and JSON."""
import json

import pytest

import pykbatch as kb
from pykbatch.commands import main
from tests.samples import batch, batch_of_records, recrc, record


@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "00000000000000000042.log"
    path.write_bytes(batch(2, base_offset=42) + batch(1, base_offset=50, headers=[(b"h", b"v")]))
    return path


def test_dump_batches_only(log_file, capsys):
    assert main(["dump", "--files", str(log_file), "--compacted"]) == 0  # 44-49 are the cleaner's
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Dumping {log_file}" and out[1] == "Log starting offset: 42"
    assert out[2].startswith("baseOffset: 42 lastOffset: 43 count: 2 ") and out[2].endswith("isvalid: true")
    assert len(out) == 4
    # a topic not said to be compacted: offsets 44-49 are lost records
    assert main(["dump", "--files", str(log_file)]) == 1
    assert "log.offset_gap: Offsets 44 to 49 are missing from the log" in capsys.readouterr().err


def test_dump_deep_iteration_reports_offset_gaps(log_file, capsys):
    assert main(["dump", "--files", str(log_file), "--deep-iteration"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[3] == "| offset: 42 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: []"
    assert lines[6].startswith("| offsets missing before it: at byte 89: CORRUPT_MESSAGE(2) log.offset_gap: "
                               "Offsets 44 to 49 are missing")
    assert lines[7].endswith("headerKeys: [h]")
    # Kafka 4.3+'s tool starts from -1, so a segment that does not start at 0 reports that too
    assert captured.err.splitlines()[:3] == [f"Non-consecutive offsets in {log_file.resolve()}",
                                             "  -1 is followed by 42", "  43 is followed by 50"]
    main(["dump", "--files", str(log_file), "--deep-iteration", "--style", "scala", "--compacted"])
    assert capsys.readouterr().err.splitlines() == [f"Non-consecutive offsets in {log_file.resolve()}",
                                                    "  43 is followed by 50"]


def test_dump_skip_record_metadata(log_file, capsys):
    main(["dump", "--files", str(log_file), "--print-data-log", "--skip-record-metadata"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == "| key: k0 payload: value"


def test_dump_max_bytes_and_unknown_files(log_file, tmp_path, capsys):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    main(["dump", "--files", f"{log_file},{other}", "--max-bytes", "100"])
    captured = capsys.readouterr()
    assert "Found" not in captured.out and captured.out.count("baseOffset:") == 1
    assert f"Ignoring unknown file {other}" in captured.err


def test_dump_names_a_broken_record_and_goes_on(tmp_path, capsys):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(batch_of_records(record(0), record(1)[:-1] + b"\x7f") + batch(1, base_offset=2))
    assert main(["dump", "--files", str(path), "--deep-iteration"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[3].startswith("| offset: 0 ")  # the good record before the fault
    assert out[4].startswith("| not readable at byte ")
    assert "INVALID_RECORD(87) record.negative_header_count: Found invalid number of record headers -64" in out[4]
    assert out[5].startswith("baseOffset: 2 ") and out[6].startswith("| offset: 2 ")


def damaged_middle(tmp_path, how: str):
    """A segment of three batches whose middle one cannot be read: its compressed payload
    scrambled (gzip/snappy/lz4/zstd) or an unknown codec id (5-7), its CRC fixed so only the
    records are wrong.  Returns (path, middle batch's position)."""
    first, last = batch(3, base_offset=0), batch(2, base_offset=6)
    if how.isdigit():
        middle = bytearray(batch(3, base_offset=3))
        middle[22] = (middle[22] & ~7) | int(how)
    else:
        middle = bytearray(batch(3, base_offset=3, value=b"payload " * 8, compression=how))
        for i in range(75, len(middle) - 4):
            middle[i] ^= 0x5A
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(first + recrc(bytes(middle)) + last)
    assert kb.validate(path.read_bytes(), kb.ValidationConfig(origin="log")).culprit_count == 1
    return path, len(first)


HOWS = ["gzip", "snappy", "lz4", "zstd", "5", "6", "7"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("flag", ["--deep-iteration", "--print-data-log"])
def test_dump_prints_a_damaged_batch_its_culprit_and_the_batches_after_it(tmp_path, capsys, how, flag):
    path, middle = damaged_middle(tmp_path, how)
    assert main(["dump", "--files", str(path), flag]) == 1
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    (at,) = [i for i, line in enumerate(out) if f" position: {middle} " in line]
    assert out[at].startswith("baseOffset: 3 lastOffset: 5 count: 3 ")
    rule = "batch.unknown_codec" if how.isdigit() else "batch.decompression_failed"
    assert out[at + 1].startswith("| not readable at byte ")
    assert f"UNKNOWN_SERVER_ERROR(-1) {rule}: " in out[at + 1]
    assert out[at + 2].startswith("baseOffset: 6 ") and out[at + 3].startswith("| offset: 6 ")
    assert [line.split()[2] for line in out if line.startswith("| offset:")] == ["0", "1", "2", "6", "7"]
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("how", HOWS)
def test_json_dumps_put_an_error_in_place_of_the_records(tmp_path, capsys, how):
    path, middle = damaged_middle(tmp_path, how)
    assert main(["dump", "--files", str(path), "--format", "json", "--deep-iteration"]) == 1
    (doc,) = json.loads(capsys.readouterr().out)["files"]
    assert [len(b.get("records", ())) for b in doc["batches"]] == [3, 0, 2] and doc["error"] is None
    error = doc["batches"][1]["error"]
    assert doc["batches"][1]["unreadable"] == [error] and error["code"] == -1 and error["position"] > middle
    assert error["rule"] == ("batch.unknown_codec" if how.isdigit() else "batch.decompression_failed")
    assert main(["dump", "--files", str(path), "--format", "jsonl", "--deep-iteration"]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["type"] for o in lines] == ["batch"] + ["record"] * 3 + ["batch", "batch"] + ["record"] * 2 + ["end"]
    assert lines[4]["error"] == error
    validator = _schema_validator()  # the error object is part of the shipped schema
    validator.validate({"files": [doc]})
    for line in lines:
        validator.validate(line)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize("how", ["zstd", "6"])
def test_export_leaves_a_damaged_batch_out_and_says_so(tmp_path, capsys, how, fmt):
    import pyarrow.parquet as pq
    path, middle = damaged_middle(tmp_path, how)
    dest = tmp_path / f"out.{fmt}"
    assert main(["dump", "--files", str(path), "--to", fmt, str(dest)]) == 1
    captured = capsys.readouterr()
    assert "wrote 5 records" in captured.out
    assert f"left out batch 1 at byte {middle}: at byte " in captured.err
    assert "1 damaged batch(es) in " in captured.err
    table = pq.read_table(dest) if fmt == "parquet" else __import__("pyarrow").ipc.open_file(dest).read_all()
    assert table.column("offset").to_pylist() == [0, 1, 2, 6, 7]
    assert table.column("batch_index").to_pylist() == [0, 0, 0, 2, 2]


def test_exit_codes_are_documented(tmp_path, capsys):
    from pykbatch.commands import EXIT_CODES, parser
    assert sorted(EXIT_CODES) == [0, 1, 2]
    assert all(f"{code} {what}" in " ".join(parser().format_help().split()) for code, what in EXIT_CODES.items())
    assert main(["validate", str(tmp_path / "missing.log")]) == 2
    assert "missing.log: no such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["dump"])
    assert exc.value.code == 2
    capsys.readouterr()
    assert main(["validate"]) == 2  # our own usage errors too
    assert "pykbatch validate: error: give FILEs (- for standard input) or --segment DIR" in capsys.readouterr().err
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(batch(1))
    assert main(["dump", "--files", str(log), "--to", "csv", str(tmp_path / "x")]) == 2
    assert main(["repair", str(log), "--out", str(log)]) == 2
    assert main(["dump", "--files", str(log), "--to", "parquet", str(tmp_path / "missing-dir" / "x")]) == 2


def test_validate_exit_codes_and_json(log_file, tmp_path, capsys):
    assert main(["validate", str(log_file), "--compacted"]) == 0
    assert main(["validate", str(log_file)]) == 1  # 44-49 missing, and the topic is not said to be compacted
    assert "batch 1 (offsets 44-49) at byte 89: CORRUPT_MESSAGE(2) log.offset_gap" in capsys.readouterr().out
    bad = tmp_path / "bad.bin"
    data = bytearray(batch(2))
    data[-2] ^= 1
    bad.write_bytes(bytes(data))
    assert main(["validate", "--json", str(bad)]) == 1
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert doc["culprit_count"] == 1 and doc["culprits"][0]["rule"] == "batch.crc_mismatch"
    assert main(["validate", "--no-crc", str(bad)]) == 0


def test_sample_roundtrip(tmp_path, capsys):
    out = tmp_path / "sample.bin"
    assert main(["sample", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["validate", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.count("CORRUPT_MESSAGE") == 1 and "batch.premature_eof" in text
    result = kb.validate(out.read_bytes())
    assert sorted({c.entry for c in result.culprits}) == [3, 7, 11, 15]


def test_validate_audits_producer_state(tmp_path, capsys):
    from tests.test_producer_state import idempotent
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(idempotent(0, 0) + idempotent(2, 5) + idempotent(4, 7, transactional=True))
    assert main(["validate", "--producers", str(path)]) == 1
    out = capsys.readouterr().out
    assert "producer state: 1 producer(s), 0 completed transaction(s), 1 culprit(s)" in out
    assert ("batch 1 at byte 79: OUT_OF_ORDER_SEQUENCE_NUMBER(45) producer.out_of_order_sequence: Out of order "
            "sequence number for producer 5 at offset 2 in partition t-0: 5 (incoming seq. number), 1 (current end "
            "sequence number)") in out
    assert "producer 5: transaction open since offset 4" in out
    assert main(["validate", "--producers", "--json", str(path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["producer_culprits"][0]["code"] == 45 and doc["open_transactions"] == {"5": 4}


def _schema_validator():
    import importlib.resources

    import jsonschema
    schema = json.loads(importlib.resources.files("pykbatch").joinpath("schemas/dump.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def mixed_log(tmp_path):
    """Every magic, a codec, headers, a control marker, a null key, and a truncated tail."""
    from tests.test_producer_state import marker
    data = (kb.build_batch([{"key": b"k", "value": b"v", "timestamp": 5, "headers": [("h", b"x")]},
                            {"key": None, "value": b"w", "timestamp": 6}], compression="gzip")
            + kb.build_batch([{"key": b"a", "value": b"b", "timestamp": 7}], base_offset=2, magic=1)
            + kb.build_batch([{"key": b"c", "value": None}], base_offset=3, magic=0)
            + marker(4) + b"\x00" * 7)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
@pytest.mark.parametrize("flags", [[], ["--deep-iteration"], ["--print-data-log"]])
def test_json_output_follows_the_shipped_schema(tmp_path, capsys, fmt, flags):
    path = mixed_log(tmp_path)
    assert main(["dump", "--files", str(path), "--format", fmt] + flags) == 0
    out = capsys.readouterr().out
    docs = [json.loads(out)] if fmt == "json" else [json.loads(line) for line in out.splitlines()]
    validator = _schema_validator()
    for doc in docs:
        validator.validate(doc)
    batches = docs[0]["files"][0]["batches"] if fmt == "json" else [d for d in docs if d["type"] == "batch"]
    assert [b["magic"] for b in batches] == [2, 1, 0, 2] and batches[3]["is_control"]
    end = docs[0]["files"][0] if fmt == "json" else docs[-1]
    assert end["invalid_tail_bytes"] == 7 and end["error"] is None
    if "--print-data-log" in flags:
        records = batches[0]["records"] if fmt == "json" else [d for d in docs if d["type"] == "record"]
        assert records[0]["key"] == "k" and records[0]["key_encoding"] == "utf8" and records[1]["key"] is None
        assert records[0]["headers"] == [{"key": "h", "value": "x", "value_encoding": "utf8"}]
    with pytest.raises(Exception):  # the schema is not a rubber stamp
        validator.validate({"files": [{"file": "x", "batches": [{"magic": 7}]}]})


def test_export_to_parquet_and_arrow_round_trips(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = mixed_log(tmp_path)
    expected = kb.to_arrow(path.read_bytes()[:-7])
    for fmt, name in (("parquet", "out.parquet"), ("arrow", "out.arrow")):
        dest = tmp_path / name
        assert main(["dump", "--files", str(path), "--to", fmt, str(dest)]) == 0
        assert f"wrote {expected.num_rows} records" in capsys.readouterr().out
        table = pq.read_table(dest) if fmt == "parquet" else pa.ipc.open_file(dest).read_all()
        assert table.equals(expected)


def test_export_windows_keep_file_positions(tmp_path):
    import pyarrow.parquet as pq

    from pykbatch.log.export import export_segment
    data = b"".join(kb.build_batch([{"key": b"k", "value": b"v" * 50, "timestamp": i}] * 3, base_offset=3 * i,
                                   compression=("none", "lz4")[i % 2]) for i in range(40))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    assert export_segment(str(path), str(tmp_path / "w.parquet"), window_bytes=500).rows == 120
    assert pq.read_table(tmp_path / "w.parquet").equals(kb.to_arrow(data))


def test_dump_validate_prints_culprits(tmp_path, capsys):
    path = mixed_log(tmp_path)
    assert main(["dump", "--files", str(path), "--validate", "--compacted"]) == 1
    out = capsys.readouterr().out
    assert "record.compacted_no_key: Compacted topic cannot accept message without key" in out


def test_progress_shows_on_a_terminal_only(tmp_path):
    import contextlib
    import io

    from pykbatch.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True
    tty, pipe = Tty(), io.StringIO()
    for err in (tty, pipe):
        with Progress(Progress.MIN_BYTES, "x.log", err) as meter:
            meter.update(Progress.MIN_BYTES // 2)
    assert "x.log:  50% of" in tty.getvalue() and pipe.getvalue() == ""
    # a long validate, repair and audit draw it; --no-progress and a pipe do not
    batch = bytearray(kb.build_batch([(b"k", b"v" * 1000)] * 100))
    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    with open(log, "wb") as f:
        for n in range((130 << 20) // len(batch)):
            batch[0:8] = (n * 100).to_bytes(8, "big")
            f.write(batch)
    for argv in (["validate", str(log)], ["repair", str(log), "--out", str(tmp_path / "fixed.log")],
                 ["dump", "--files", str(log), "--to", "arrow", str(tmp_path / "x.arrow")]):
        for err, flags, shown in ((Tty(), [], True), (Tty(), ["--no-progress"], False), (io.StringIO(), [], False)):
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                assert main(argv + flags) == 0
            assert ("% of" in err.getvalue()) == shown, (argv, flags)


def test_repair_writes_a_clean_segment_and_dead_letters(tmp_path, capsys):
    import base64
    import struct
    # offsets increase through the file: 0, 1, 2, then 6-7 (keyless), then 8, 9, 10
    good = [kb.build_batch([{"key": b"k%d" % i, "value": b"v", "timestamp": i}], base_offset=i + 5 * (i > 2))
            for i in range(6)]
    keyless = kb.build_batch([{"key": b"a", "value": b"1"}, {"key": None, "value": b"2"}], base_offset=6)
    bad_crc = bytearray(good[2])
    bad_crc[-1] ^= 1
    lost = struct.pack(">qi", 99, 3) + b"\xff" * 20  # framing lost: size 3
    data = good[0] + good[1] + bytes(bad_crc) + keyless + lost + good[3] + good[4] + good[5][:-4]
    src = tmp_path / "00000000000000000000.log"
    src.write_bytes(data)
    out, dlq = tmp_path / "fixed.log", tmp_path / "dead.jsonl"
    assert main(["repair", str(src), "--out", str(src)]) == 2
    assert "never writes over its input" in capsys.readouterr().err
    assert main(["repair", str(src), "--out", str(out), "--dead-letter", str(dlq), "--compacted"]) == 1  # damage
    assert "kept 5 batches, dropped 1 record(s) and 1 batch(es), 32 unreadable byte(s)" in capsys.readouterr().out
    assert src.read_bytes() == data  # never modified
    fixed = out.read_bytes()
    assert kb.validate(fixed, kb.ValidationConfig(origin="log", compacted=True)).ok
    assert [r.key for b in kb.iter_batches(fixed) for r in b] == [b"k0", b"k1", b"a", b"k3", b"k4"]
    letters = [json.loads(line) for line in dlq.read_text().splitlines()]
    assert [x["kind"] for x in letters] == ["batch", "record", "unreadable", "truncated_tail"]
    assert letters[0]["culprits"][0]["rule"] == "batch.crc_mismatch" and base64.b64decode(letters[0]["raw"]) == bad_crc
    assert letters[1]["culprits"][0]["error_class"] == "abortable" and base64.b64decode(letters[1]["value"]) == b"2"
    assert base64.b64decode(letters[2]["raw"]) == lost and letters[2]["culprits"][0]["rule"] == "framing.size_too_small"
    assert base64.b64decode(letters[3]["raw"]) == good[5][:-4]
    # every input byte is either kept or dead-lettered
    assert letters[2]["position"] == len(good[0] + good[1] + bad_crc + keyless)


def test_validate_segment_audits_a_partition(tmp_path, capsys):
    from tests.test_producer_state import idempotent
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(idempotent(0, 0) + idempotent(2, 2))
    (part / "00000000000000000004.log").write_bytes(idempotent(4, 4) + idempotent(3, 9))  # goes back; a gap
    assert main(["validate", "--segment", str(part)]) == 1
    out = capsys.readouterr().out
    # going back inside a segment is the validator's culprit; between segments, an overlap
    # its offsets: from its first to the highest (5: the last entry went back to 3-4)
    assert ["00000000000000000004.log", "2", "4", "1", "0", "4-5"] in [line.split() for line in out.splitlines()]
    assert "offsets: 0 gap(s) inside segments (records missing: each named as log.offset_gap), 0 overlap(s)" in out
    assert "log.offsets_not_increasing: Offsets go backwards in the log: an entry starting at offset 3 follows " \
           "one ending at offset 5" in out and "OUT_OF_ORDER_SEQUENCE_NUMBER" in out
    assert out.rstrip().endswith("problems found")
    assert main(["validate", "--segment", str(part), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["segments"][1]["culprits"][0]["rule"] == "log.offsets_not_increasing"
    assert doc["producer_culprits"][0]["code"] == 45
    (part / "00000000000000000004.log").write_bytes(idempotent(4, 4))
    assert main(["validate", "--segment", str(part)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("ok")
    (part / "00000000000000000000.log").write_bytes(idempotent(0, 0) + idempotent(4, 2))  # ends past the next
    assert main(["validate", "--segment", str(part)]) == 1
    out = capsys.readouterr().out
    assert "1 overlap(s)" in out and "00000000000000000004.log at byte 0: base offset 4 after offset 5" in out


def test_repair_refuses_an_output_that_is_its_input_under_another_name(tmp_path, capsys):
    """A symbolic or hard link to the input as --out (or --dead-letter) is refused before anything
    is opened for writing: the input keeps every byte (it was emptied, and the repair died of SIGBUS
    reading it)."""
    import os
    good = b"".join(kb.build_batch([{"key": b"k", "value": b"v"}], base_offset=i) for i in range(3))
    src = tmp_path / "in.log"
    src.write_bytes(good)
    alias, hard = tmp_path / "alias.log", tmp_path / "hard.log"
    alias.symlink_to(src)
    os.link(src, hard)
    for argv in (["repair", str(alias), "--out", str(src)], ["repair", str(src), "--out", str(alias)],
                 ["repair", str(hard), "--out", str(src)],
                 ["repair", str(src), "--out", str(tmp_path / "o.log"), "--dead-letter", str(hard)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "never writes over its input" in err and "Traceback" not in err, argv
        assert src.read_bytes() == good
    assert not (tmp_path / "o.log").exists()


def test_repair_leaves_no_half_written_output_when_it_fails(tmp_path, monkeypatch):
    """The outputs are written beside their names and renamed into place: a repair that fails
    half-way (here: interrupted while it rebuilds) leaves the earlier output as it was and no
    temporary file behind."""
    from pykbatch import repair
    from pykbatch.repair import repair_segment
    src, out = tmp_path / "in.log", tmp_path / "out.log"
    src.write_bytes(kb.build_batch([{"key": b"k", "value": b"v" * 100}] * 50))
    out.write_bytes(b"an earlier repair's output")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(repair, "drop_culprits", interrupted)
        with pytest.raises(KeyboardInterrupt):
            repair_segment(str(src), str(out), str(tmp_path / "dead.jsonl"))
    assert out.read_bytes() == b"an earlier repair's output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.log", "out.log"]
    with pytest.raises(ValueError, match="under another name"):
        (tmp_path / "alias.log").symlink_to(src)
        repair_segment(str(src), str(tmp_path / "alias.log"))
    report = repair_segment(str(src), str(out))
    assert report.kept_batches == 1 and kb.validate(out.read_bytes()).ok


def test_what_a_new_user_types_gets_a_plain_answer(tmp_path, capsys):
    """The sample the README makes is dumped as validate reads it; --out - and an output in a
    folder that is not one are refused before any work; the system's errors are said in words
    (no "[Errno 20]"); the same bytes get the same verdict whatever their name."""
    sample = tmp_path / "sample.bin"
    assert main(["sample", "--out", str(sample)]) == 0
    capsys.readouterr()
    assert main(["dump", "--files", str(sample), "--deep-iteration"]) == 1  # damaged on purpose
    out = capsys.readouterr()
    assert "Ignoring unknown file" not in out.err and out.out.count("| offset:") == 199
    assert main(["dump", "--files", str(sample), "--to", "parquet", str(tmp_path / "s.parquet")]) == 1
    assert "wrote 199 records" in capsys.readouterr().out
    not_a_log = tmp_path / "notes.txt"
    not_a_log.write_text("hello\n" * 50)
    assert main(["dump", "--files", str(not_a_log)]) == 2
    assert "Ignoring unknown file" in capsys.readouterr().err
    assert main(["repair", str(sample), "--out", "-"]) == 2
    assert "give a path" in capsys.readouterr().err and not (tmp_path / "-").exists()
    for argv, says in ((["repair", str(sample), "--out", str(sample / "x.log")], f"not a directory {sample}"),
                       (["repair", str(sample), "--out", str(tmp_path / "no" / "x.log")], "no such directory"),
                       (["sample", "--out", str(sample / "x")], "not a directory"),
                       (["validate", str(sample / "x")], "not a directory"),
                       (["validate", "--segment", str(sample)], "not a directory")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert says in err and "Errno" not in err, (argv, err)
    log = b"".join(kb.build_batch([(b"k", b"v")] * 3, base_offset=3 * i) for i in range(4))
    verdicts = []
    for name in ("00000000000000000000.log", "copy.txt", "copy"):
        (tmp_path / name).write_bytes(log)
        verdicts.append(main(["validate", str(tmp_path / name)]))
        assert capsys.readouterr().out.split(": ", 1)[1].startswith("4 batches, 12 records, ok")
    assert verdicts == [0, 0, 0]


def test_messages_name_the_partition_the_folder_is_for(tmp_path, capsys):
    """Kafka's messages and the dead letters say "topic partition orders-3" for a segment in
    orders-3/ (it was always the placeholder t-0); --topic-partition still wins."""
    folder = tmp_path / "orders-3"
    folder.mkdir()
    bad = bytearray(kb.build_batch([(b"k", b"v")] * 3))
    bad[-1] ^= 1
    log = folder / "00000000000000000000.log"
    log.write_bytes(bytes(bad))
    assert main(["validate", str(log)]) == 1
    assert "in topic partition orders-3." in capsys.readouterr().out
    assert main(["validate", str(log), "--topic-partition", "x-9"]) == 1
    assert "in topic partition x-9." in capsys.readouterr().out
    dead = tmp_path / "dead.jsonl"
    assert main(["repair", str(log), "--out", str(tmp_path / "fixed.log"), "--dead-letter", str(dead)]) == 1
    assert "in topic partition orders-3." in json.loads(dead.read_text().splitlines()[0])["culprits"][0]["message"]
    assert main(["validate", "--segment", str(folder)]) == 1
    assert "in topic partition orders-3." in capsys.readouterr().out
