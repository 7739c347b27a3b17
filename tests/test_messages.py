"""Kafka's message definitions interpreted (pykbatch/kafka/definitions.py) and the __remote_log_metadata
records built on them: the vendored definitions are Kafka's own, every version and encoding
decodes, hostile bytes give a MessageFormatError naming the byte (never another exception or an
unbounded allocation), and the dump prints crafted records — every record type, every failure
Kafka's deserializer names — line for line as kafka-dump-log --remote-log-metadata-decoder."""
from __future__ import annotations

import json
import uuid
import zipfile
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pykbatch as kb
from pykbatch.kafka import definitions
from pykbatch.commands import main
from pykbatch.kafka.definitions import MessageFormatError
from pykbatch.tiered import metadata
from pykbatch.tiered.metadata import DEFINITIONS, decode_value, encode_value
from tests import kafka_tools

TIP = {"Name": "orders", "Id": uuid.UUID(int=12345678901234567890), "Partition": 7}
SID = {"TopicIdPartition": TIP, "Id": uuid.UUID(int=98765432109876543210)}
SEGMENT = {"RemoteLogSegmentId": SID, "StartOffset": 100, "EndOffset": 199, "BrokerId": 3,
           "MaxTimestampMs": 1700000000000, "EventTimestampMs": 1700000000001,
           "SegmentLeaderEpochs": [{"LeaderEpoch": 4, "Offset": 100}, {"LeaderEpoch": 6, "Offset": 150}],
           "SegmentSizeInBytes": 4096, "CustomMetadata": b"\x01\x02", "RemoteLogSegmentState": 0,
           "TxnIndexEmpty": False}
EXAMPLES = {
    "RemoteLogSegmentMetadataRecord": SEGMENT,
    "RemoteLogSegmentMetadataUpdateRecord": {"RemoteLogSegmentId": SID, "BrokerId": 3, "EventTimestampMs": 5,
                                             "CustomMetadata": b"xyz", "RemoteLogSegmentState": 1},
    "RemotePartitionDeleteMetadataRecord": {"TopicIdPartition": TIP, "BrokerId": 1, "EventTimestampMs": 7,
                                            "RemotePartitionDeleteState": 2},
    "RemoteLogSegmentMetadataSnapshotRecord": {
        "SegmentId": uuid.UUID(int=5), "StartOffset": 1, "EndOffset": 2, "BrokerId": 1, "MaxTimestampMs": 3,
        "EventTimestampMs": 4, "SegmentLeaderEpochs": [{"LeaderEpoch": 1, "Offset": 1}], "SegmentSizeInBytes": 10,
        "CustomMetadata": None, "RemoteLogSegmentState": 1, "TxnIndexEmpty": True},
}


def test_the_vendored_definitions_are_kafkas(tmp_path):
    """Each file in pykbatch/schemas/messages is byte for byte the one in Kafka's jar (4.3.1)."""
    if kafka_tools.unavailable():
        pytest.skip(kafka_tools.unavailable())
    jar = next(p for p in kafka_tools.classpath().split(":") if p.endswith("kafka-storage-4.3.1.jar"))
    folder = resources.files("pykbatch").joinpath("schemas", "messages")
    with zipfile.ZipFile(jar) as z:
        for name in DEFINITIONS:
            assert folder.joinpath(f"{name}.json").read_bytes() == z.read(f"message/{name}.json"), name


def test_every_indexed_definition_is_the_one_in_its_jar():
    """Every definition index.json names (internal topics, embedded messages, KRaft control record
    values) is byte for byte the file in the Kafka 4.3.1 jar it names, and no file is unnamed."""
    if kafka_tools.unavailable():
        pytest.skip(kafka_tools.unavailable())
    jars = {p.rsplit("/", 1)[-1]: p for p in kafka_tools.classpath().split(":")}
    folder = resources.files("pykbatch").joinpath("schemas", "messages")
    index = json.loads(folder.joinpath("index.json").read_text("utf-8"))
    sections = [*index["topics"].values(), index["embedded"], index["control"], index["protocol"]]
    named = set()
    for section in sections:
        with zipfile.ZipFile(jars[f"{section['jar']}-4.3.1.jar"]) as z:
            inside = {n.rsplit("/", 1)[-1]: n for n in z.namelist() if n.endswith(".json") and n.count("/") <= 2}
            for name in section["definitions"]:
                assert folder.joinpath(f"{name}.json").read_bytes() == z.read(inside[f"{name}.json"]), name
                named.add(f"{name}.json")
    files = {f.name for f in folder.iterdir() if f.name.endswith(".json") and f.name != "index.json"}
    assert files == named


@pytest.mark.parametrize("name", DEFINITIONS)
def test_every_definition_round_trips(name):
    schema = definitions.load(name)
    data = schema.encode(EXAMPLES[name], 0)
    assert schema.decode(data, 0, 0) == (EXAMPLES[name], len(data))


def test_a_tagged_field_left_at_its_default_is_not_written_and_unknown_tags_are_kept():
    schema = definitions.load("RemoteLogSegmentMetadataRecord")
    plain = schema.encode({**SEGMENT, "TxnIndexEmpty": False}, 0)
    tagged = schema.encode({**SEGMENT, "TxnIndexEmpty": True}, 0)
    assert plain[-1] == 0 and tagged.endswith(b"\x01\x00\x01\x01")  # one tag: 0, size 1, true
    unknown = plain[:-1] + b"\x01\x05\x02ab"  # tag 5, 2 bytes
    fields, _ = schema.decode(unknown, 0, 0)
    assert fields["_unknown_tagged_fields"] == {5: b"ab"} and fields["TxnIndexEmpty"] is False


NON_FLEXIBLE = """// a definition in the style of Kafka's older messages
{ "name": "Sample", "validVersions": "0-2", "flexibleVersions": "2+",
  "fields": [
    { "name": "Id", "type": "int32", "versions": "0+" },
    { "name": "Label", "type": "string", "versions": "0+", "nullableVersions": "1+" },
    { "name": "Items", "type": "[]Item", "versions": "0+", "fields": [
        { "name": "Value", "type": "int64", "versions": "0+" }]},
    { "name": "Since1", "type": "int16", "versions": "1+", "default": "-1" },
    { "name": "Shared", "type": "Common", "versions": "0+" }],
  "commonStructs": [{ "name": "Common", "versions": "0+", "fields": [
        { "name": "Flag", "type": "bool", "versions": "0+" }]}]
}"""


def test_non_flexible_versions_defaults_and_common_structs():
    schema = definitions.parse_definition(NON_FLEXIBLE)
    v0 = b"\x00\x00\x00\x2a" + b"\x00\x02hi" + b"\x00\x00\x00\x01" + b"\x00" * 7 + b"\x09" + b"\x01"
    assert schema.decode(v0, 0, 0) == ({"Id": 42, "Label": "hi", "Items": [{"Value": 9}], "Since1": -1,
                                        "Shared": {"Flag": True}}, len(v0))
    v1 = b"\x00\x00\x00\x01" + b"\xff\xff" + b"\x00\x00\x00\x00" + b"\x00\x07" + b"\x00"
    assert schema.decode(v1, 0, 1)[0] == {"Id": 1, "Label": None, "Items": [], "Since1": 7, "Shared": {"Flag": False}}
    with pytest.raises(MessageFormatError, match="null string in a version where it is not nullable"):
        schema.decode(b"\x00\x00\x00\x01\xff\xff", 0, 0)
    with pytest.raises(MessageFormatError, match="has no version 3"):
        schema.decode(v1, 0, 3)
    for version in (0, 1, 2):
        value = {"Id": 5, "Label": "x", "Items": [{"Value": 1}, {"Value": 2}], "Since1": 3 if version else -1,
                 "Shared": {"Flag": True}}
        assert schema.decode(schema.encode(value, version), 0, version)[0] == value


def test_every_truncation_names_a_byte_inside_the_value():
    value = encode_value("RemoteLogSegmentMetadataRecord", SEGMENT)
    for cut in range(len(value)):
        with pytest.raises(MessageFormatError) as info:
            decode_value(value[:cut])
        assert info.value.offset is None or 0 <= info.value.offset <= cut
        assert info.value.kafka_message


def test_a_huge_array_count_is_refused_before_anything_is_allocated():
    value = encode_value("RemoteLogSegmentMetadataRecord", SEGMENT)
    schema = definitions.load("RemoteLogSegmentMetadataRecord")
    # the epochs array's count sits after the id (2 + 6 + 16 + 4 + 16 + 1 tag byte... found by search)
    at = value.index(bytes([len(SEGMENT["SegmentLeaderEpochs"]) + 1]), 3 + 60)
    hostile = value[:at] + b"\xff\xff\xff\xff\x07" + value[at + 1:]
    with pytest.raises(MessageFormatError, match="array of .* elements in"):
        schema.decode(hostile, 3, 0)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_fail_with_a_message_format_error(data):
    try:
        event = decode_value(b"\x01" + data)
    except MessageFormatError as exc:
        assert exc.kafka_message
    else:
        assert event.java_str()


def crafted_values() -> list:
    good = encode_value("RemoteLogSegmentMetadataRecord", SEGMENT)
    values = [encode_value(name, value) for name, value in EXAMPLES.items()]
    values += [encode_value("RemoteLogSegmentMetadataRecord", {**SEGMENT, "RemoteLogSegmentState": 9}),
               encode_value("RemoteLogSegmentMetadataRecord", {**SEGMENT, "CustomMetadata": None}),
               encode_value("RemotePartitionDeleteMetadataRecord",
                            {**EXAMPLES["RemotePartitionDeleteMetadataRecord"], "RemotePartitionDeleteState": 0})]
    values += [b"\x00\x00\x00", b"\x02\x00\x00" + good[3:], b"\x01\x07\x00", b"\x01\x00\x05" + good[3:],
               good + b"\x00\x00", good[:20], good[:3], b"", b"\x01\x00\x00\xff\xff\xff\xff\x0f",
               b"\x01\xff\xff\x03\x00", None]
    return values


def test_crafted_metadata_dumps_like_kafka(tmp_path, capsys):
    if kafka_tools.unavailable():
        pytest.skip(kafka_tools.unavailable())
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(kb.build_batch([{"key": None, "value": v, "timestamp": 1700000000000} for v in crafted_values()]))
    theirs, _ = kafka_tools.dump([str(log)], "--remote-log-metadata-decoder")
    main(["dump", "--files", str(log), "--remote-log-metadata-decoder", "--no-progress"])
    ours = capsys.readouterr().out
    assert ours.splitlines() == theirs.splitlines()
    for text in ("RemotePartitionDeleteMetadata{", "RemoteLogSegmentMetadataSnapshot{", "Optional[CustomMetadata{",
                 "Error at offset", "garbage after", "Unknown metadata id", "state can not be null"):
        assert text in ours, text


def test_decoded_events_carry_kafkas_meaning():
    event = decode_value(encode_value("RemoteLogSegmentMetadataRecord", SEGMENT))
    assert event.leader_epochs == {4: 100, 6: 150} and event.partition.name == "orders-7"
    assert str(event.partition) == f"{metadata.kafka_uuid(TIP['Id'])}:orders-7"
    assert metadata.parse_kafka_uuid(metadata.kafka_uuid(SID["Id"])) == SID["Id"]


def test_a_repeated_key_with_a_damaged_value_dumps_like_kafka(tmp_path, capsys):
    """Keys repeat in __consumer_offsets; a record whose key was seen before and whose value does
    not decode still gets Kafka's line (the error on the key side, no payload)."""
    if kafka_tools.unavailable():
        pytest.skip(kafka_tools.unavailable())
    key = (1).to_bytes(2, "big") + definitions.load("OffsetCommitKey").encode({"group": "g", "topic": "t", "partition": 0}, 0)
    value = (3).to_bytes(2, "big") + definitions.load("OffsetCommitValue").encode(
        {"offset": 5, "leaderEpoch": 1, "metadata": "", "commitTimestamp": 7}, 3)
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(kb.build_batch([{"key": key, "value": value, "timestamp": 1},
                                    {"key": key, "value": value[:5], "timestamp": 2},
                                    {"key": key, "value": None, "timestamp": 3}]))
    theirs, _ = kafka_tools.dump([str(log)], "--offsets-decoder")
    main(["dump", "--files", str(log), "--offsets-decoder", "--no-progress"])
    ours = capsys.readouterr().out
    assert ours.splitlines() == theirs.splitlines()
    assert "key: Error at offset 1, skipping." in ours and "<DELETE>" in ours
