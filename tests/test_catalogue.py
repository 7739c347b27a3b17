"""The catalogue (csrc/kb_rules.def, csrc/kb_kafka_errors.def) is the one list of rules and Kafka
error codes: every rule id the code uses is in it, and C and Python read the same entries."""
import os
import pathlib
import re

import pytest

import pykbatch as kb
from pykbatch import _catalogue, _native, errors
from pykbatch.config import ValidationConfig
from pykbatch.result import Culprit, ValidationResult
from pykbatch.rules import BY_ID, FIELDS, RULES, STAGES

ROOT = pathlib.Path(__file__).resolve().parent.parent
# a rule id as the code writes one: group.name, the group one of the catalogue's
GROUPS = sorted({rule.id.split(".")[0] for rule in RULES if "." in rule.id})
RULE_ID = re.compile(r"""["'](?:%s)\.[a-z0-9_{}]+["']""" % "|".join(GROUPS))


def _sources():
    for folder in ("pykbatch", "spark_udfs"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".pyx", ".pxi"):
                yield path


def kafka_property_names() -> set:
    """Kafka's client property names the code writes, which look like rule ids ("batch.size",
    "value.serializer")."""
    from pykbatch.live.producer import DEFAULTS
    from spark_udfs import live_sink, live_source
    return set(DEFAULTS) | live_sink.CLIENT_IGNORED | live_source.CLIENT_IGNORED


def test_every_rule_id_in_the_code_is_in_the_catalogue():
    used = {}
    for path in _sources():
        for match in RULE_ID.finditer(path.read_text()):
            used.setdefault(match.group()[1:-1], path.name)
    assert len(used) > 10  # the pattern finds the code's rule ids
    templated = {rid for rid in used if "{" in rid}  # control.{what}_size: every expansion must exist
    for rid in templated:
        pattern = re.compile(re.sub(r"\\\{[a-z_]+\\\}", "[a-z_]+", re.escape(rid)) + "$")
        assert any(pattern.match(r.id) for r in RULES), (rid, used[rid])
    properties = kafka_property_names()
    missing = {rid: where for rid, where in used.items()
               if rid not in BY_ID and rid not in templated and rid not in properties}
    assert not missing, f"rule ids outside csrc/kb_rules.def: {missing}"


def test_rules_are_unique_and_complete():
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert RULES[0].id == "none"
    for rule in RULES[1:]:
        assert rule.template, rule.id
        assert rule.code in errors.CODES, rule.id
        assert rule.stage in STAGES or rule.stage == "framing", rule.id


def test_c_and_python_read_the_same_codes():
    assert _native._rule_codes() == [rule.code for rule in RULES]
    assert kb.native_info()["rules"] == len(RULES)


def _reference_kip467(culprits, config):
    """KIP-467's answer as the partition leader reaches it, written out plainly: the culprits of the
    earliest (stage, entry) -- a framing fault at "request" for the first two entries of a
    ProduceRequest, else at "append" -- give the code; a batch-level one wins; else each record
    once with its first message."""
    rank = {s: i for i, s in enumerate(STAGES)}

    def key(c):
        stage = BY_ID[c.rule].stage
        if stage == "framing":
            stage = "request" if config.produce_version and c.entry <= 1 else "append"
        return rank[stage], c.entry

    if not culprits:
        return 0, [], None
    first = min(map(key, culprits))
    failing = [c for c in culprits if key(c) == first]
    for c in failing:
        if c.record_index is None or not BY_ID[c.rule].record_error:
            framing = BY_ID[c.rule].stage == "framing"
            return c.code, [], c.message if config.origin == "client" and c.entry == 0 and framing else None
    code = 32 if any(c.code == 32 for c in failing) else 87
    records, seen = [], set()
    for c in failing:
        if c.record_index not in seen:
            seen.add(c.record_index)
            records.append((c.record_index, c.message))
    if code == 32:
        return code, records, "One or more records have been rejected due to invalid timestamp"
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in records[:3])
    return code, records, (f"One or more records have been rejected due to {len(records)} record errors in total, "
                           f"and only showing the first three errors at most: [{shown}]")


def test_the_cores_verdict_is_kafkas_on_drawn_culprits():
    """csrc/kb_verdict.c against the plain reading above: culprits of every rule drawn at random
    entries, records (out of order too) and origins."""
    import random
    seed = int(os.environ.get("PYKBATCH_VERDICT_SEED", "20261127"))
    rng = random.Random(seed)
    for trial in range(3000):
        config = ValidationConfig(origin=rng.choice(["client", "log"]),
                                  produce_version=rng.choice([None, None, 3, 9]))
        culprits = []
        for _ in range(rng.choice([0, 1, 2, 3, 5, 12])):
            rule = rng.choice(RULES[1:])
            record = rng.choice([None, 0, 1, 2, 3, 7]) if rng.random() < 0.8 else None
            culprits.append(Culprit(rng.choice([0, 0, 1, 2]), record, None, rule.code, rule.id, 0, None, 0,
                                    f"m{rng.randrange(100)}", None, rule.kafka))
        result = ValidationResult(culprits, len(culprits), 3, 0, 0, None, None, 0, config)
        assert result.kip467() == _reference_kip467(culprits, config), (seed, trial)


def test_exception_classes_use_catalogue_codes():
    for cls in (errors.CorruptRecordError, errors.InvalidRecordError, errors.InvalidTimestampError,
                errors.RecordTooLargeError, errors.UnsupportedForMessageFormatError,
                errors.UnsupportedCompressionTypeError, errors.UnknownServerError):
        assert cls.code in errors.CODES
        assert errors.error_for(cls.code, "m").__class__ is cls
    assert errors.exception_class(2).endswith("CorruptRecordException")
    assert errors.exception_class(12345).endswith("UnknownServerException")


@pytest.mark.parametrize("rule_id, values", [
    ("control.message", {"what": "the LeaderChange value does not read"}),
    ("producer.duplicate", {"seq": 0, "last": 4, "pid": 7, "offset": 10, "tp": "t-0", "first_offset": 0,
                            "last_offset": 4}),
    ("encode.too_large", {}),
])
def test_python_checked_rules_render(rule_id, values):
    exc = errors.rule_error(rule_id, 3, **values)
    assert exc.rule == rule_id and exc.offset == 3 and exc.code == BY_ID[rule_id].code
    assert "{" not in exc.message


def test_names_come_from_the_core():
    assert _catalogue.CODEC_NAMES == ("none", "gzip", "snappy", "lz4", "zstd")
    assert kb.native_info()["codecs"] == _catalogue.CODEC_NAMES
    assert _catalogue.codec_name(6) == "unknown(6)"
    assert _catalogue.TIMESTAMP_TYPES == ("CreateTime", "LogAppendTime")
    assert FIELDS[0] == "length" and FIELDS[-1] == "header value"
    assert {r.id for r in RULES if r.names_field} == {
        "record.invalid_structure", "record.varint_too_long", "record.negative_length"}


def test_every_columnar_output_selects_from_the_one_schema():
    """to_arrow, the Spark structs, the kafka-segment source and the dump's JSON name fields of
    pykbatch.columns with its types."""
    from pykbatch import arrow, columns
    from pykbatch import dump
    from spark_udfs import segment_source
    table = kb.to_arrow(kb.build_batch([{"key": b"k", "value": b"v", "headers": [("h", b"1")]}]))
    for field in table.schema:
        expected = columns.RECORD[field.name]
        assert field.type == expected or (field.name == "timestamp_type" and pa_is_dictionary(field.type))
    for struct, types in ((arrow.RECORD, columns.RECORD), (arrow.BATCH_INFO, columns.BATCH)):
        assert all(types[f.name] == f.type for f in struct)
    for f in segment_source.BATCH_COLUMNS:
        assert {**columns.LOCATION, **columns.BATCH, **columns.RECORD}[f.name] == f.type, f.name
    for f in segment_source.RECORD_COLUMNS:  # Spark's Kafka source's columns first
        assert {**columns.LOCATION, **columns.RECORD, **columns.SPARK_KAFKA}[f.name] == f.type, f.name
    assert [f.name for f in segment_source.RECORD_COLUMNS[:len(columns.SPARK_KAFKA)]] == list(columns.SPARK_KAFKA)
    assert set(dump.BATCH_FIELDS) <= set(columns.BATCH)


def pa_is_dictionary(t) -> bool:
    import pyarrow as pa
    return pa.types.is_dictionary(t) and t.value_type == pa.string()


def test_rules_command_lists_the_catalogue(capsys):
    import json

    from pykbatch.commands import main
    assert main(["rules", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in listed] == [r.id for r in RULES[1:]]
    assert main(["rules", "legacy."]) == 0
    text = capsys.readouterr().out
    assert "legacy.inner_magic" in text and "batch.crc_mismatch" not in text


def test_the_readme_and_the_docs_name_only_rules_that_exist():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    named = {m.group()[1:-1] for m in re.finditer(r"`(?:%s)\.[a-z0-9_]+`" % "|".join(GROUPS), text)}
    named = {n for n in named if not (n.startswith("batch.") and hasattr(kb.Batch, n[6:]))}  # `batch.control`
    assert len(named) >= 5 and named <= set(BY_ID), named - set(BY_ID)  # (the full table is generated)


def test_every_log_file_type_is_dumped_and_fuzzed():
    """A reader added to pykbatch.log.INDEX_TYPES is dispatched by the dump (by its SUFFIX),
    checked by the audit and validate, and reached by the CLI fuzz (tests/test_cli_fuzz.py damages
    every file ``pykbatch.log.checks.kind_of`` names)."""
    from pykbatch import dump
    from pykbatch.log import INDEX_TYPES, OffsetIndex, TimeIndex
    from pykbatch.log.checks import KINDS, _CHECKS
    suffixes = {kind.SUFFIX for kind in INDEX_TYPES}
    assert suffixes <= {OffsetIndex.SUFFIX, TimeIndex.SUFFIX} | set(dump._DUMPERS)
    assert suffixes < set(KINDS) and set(KINDS) - {".log"} == set(_CHECKS)


def test_refresh_actions_are_javas_invalid_metadata_errors():
    """The codes whose action is to ask the metadata again are those Kafka's Java client makes
    InvalidMetadataException subclasses, as kafka-python (a maintained client) reads them too."""
    import kafka.errors as kafka_python
    for code in errors.CODES:
        expected = bool(getattr(kafka_python.for_code(code), "invalid_metadata", False))
        assert (errors.REFRESH in errors.ERROR_ACTIONS[code]) == expected, errors.error_name(code)
    assert errors.POSSIBLY_PERSISTED in errors.ERROR_ACTIONS[errors.CODE["NETWORK_EXCEPTION"]]


_CORE_FIELDS = {f"a{i}" for i in range(8)} | {"tp", "field", "record", "record_class"}


def _reference_text(template: str, rule, args, tp: str) -> str:
    """What a rule's text says, filled by Python's str.format: the reference the core's renderer
    (csrc/kb_render.c) is held to."""
    from pykbatch import _catalogue
    values = {f"a{i}": v for i, v in enumerate(args)}
    a0 = args[0]
    values["field"] = FIELDS[a0] if rule.names_field and 0 <= a0 < len(FIELDS) else ""
    values["tp"] = tp
    offset, magic, _, attributes, crc, key_len, value_len, timestamp = args
    codec = attributes & 7
    fields = [f"magic={magic}", f"attributes={attributes}",
              f"compression={_catalogue.CODEC_NAMES[codec] if codec < len(_catalogue.CODEC_NAMES) else codec}",
              f"crc={crc}"]
    if magic > 0:
        fields.append(f"{_catalogue.TIMESTAMP_TYPES[(attributes >> 3) & 1]}={timestamp}")
    fields += [f"key={max(key_len, 0)} bytes", f"value={max(value_len, 0)} bytes"]
    values["record"] = f"LegacyRecordBatch(offset={offset}, Record({', '.join(fields)}))"
    values["record_class"] = "PartialDefaultRecord" if args[4] else "DefaultRecord"
    return template.format_map(values)


def test_the_core_fills_every_rule_text_as_python_formats_it():
    """Every template, detail and reader template whose fields the core fills (the rules the C
    core finds), on drawn values (negative, 64-bit extremes, field numbers in and out of range,
    every codec and magic), reads exactly as str.format makes it; the others are refused."""
    import random
    from pykbatch.rules import render
    seed = 20261127
    print(f"seed {seed}")
    rng = random.Random(seed)
    filled = 0
    for rule in RULES:
        texts = [rule.template, rule.detail, rule.reader_template or rule.template]
        names = {n for t in texts for n in re.findall(r"\{([^}]*)\}", t or "")}
        if not names <= _CORE_FIELDS:
            with pytest.raises(ValueError, match=rule.id):
                render(rule, [0] * 8, "t-0")
            continue
        filled += 1
        for _ in range(40):
            args = [rng.choice([0, 1, -1, 2, 7, 12, 13, 2**63 - 1, -2**63, rng.randrange(-2**40, 2**40)])
                    for _ in range(8)]
            args[3] = rng.randrange(0, 64)  # attributes: any codec bits, either timestamp type
            tp = rng.choice(["t-0", "orders-12", "é-3", ""])
            message, detail = render(rule, args, tp)
            assert message == _reference_text(rule.template, rule, args, tp), rule.id
            assert detail == (_reference_text(rule.detail, rule, args, tp) if rule.detail else ""), rule.id
            reader, _ = render(rule, args, tp, reader=True)
            assert reader == _reference_text(rule.reader_template or rule.template, rule, args, tp), rule.id
    assert filled >= 60  # the core's rules, most of the catalogue
