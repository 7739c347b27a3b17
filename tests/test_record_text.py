"""What ``pykbatch consume`` prints and ``pykbatch produce`` reads, offline: kafka-console-consumer's
lines (DefaultMessageFormatter's properties), kcat's -f format, JSON lines that round-trip any
bytes, headers as Kafka has them (ordered, repeatable), and the Java consumer's property names."""
from __future__ import annotations

import argparse
import json

import pytest

from pykbatch.commands import UsageError, record_text
from pykbatch.live.reader import ConsumedRecord
from pykbatch.live.settings import SettingsError, consumer_settings

R = ConsumedRecord("orders", 3, 42, 1_700_000_000_123, 0, b"k1", b"v\x00\xff", [("h", b"x"), ("h", None)], 5)
NULLS = ConsumedRecord("orders", 0, 7, 5, 1, None, None, (), 0)


def test_the_console_consumers_lines():
    assert record_text.console({})(R) == b"v\x00\xff\n"
    every = {k: "true" for k in ("print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")}
    assert record_text.console(every)(R) == b"CreateTime:1700000000123\tPartition:3\tOffset:42\th:x,h:null\tk1\tv\x00\xff\n"
    assert record_text.console({**every, "key.separator": " | ", "null.literal": "-"})(NULLS) == \
        b"LogAppendTime:5 | Partition:0 | Offset:7 | NO_HEADERS | - | -\n"
    assert record_text.console({"print.key": "true", "print.value": "false", "line.separator": "\\n\\n"})(R) == b"k1\n\n"
    with pytest.raises(UsageError, match="print.keys"):
        record_text.console({"print.keys": "true"})


def test_kcats_format():
    line = record_text.kcat("%t/%p@%o %T [%k=%s] %K %S {%h} 100%%\\n")(R)
    assert line == b"orders/3@42 1700000000123 [k1=v\x00\xff] 2 3 {h=x,h=} 100%\n"
    assert record_text.kcat("%k|%s|%K|%S")(NULLS) == b"||-1|-1"


def test_json_lines_carry_any_bytes():
    doc = json.loads(record_text.json_line(R))
    assert doc["key"] == "k1" and doc["key_encoding"] == "utf8"
    assert doc["value_encoding"] == "base64" and doc["timestamp_type"] == "CreateTime"
    assert doc["headers"] == [{"key": "h", "value": "x", "value_encoding": "utf8"},
                              {"key": "h", "value": None, "value_encoding": None}]


def _produce_table(tmp_path, lines: list):
    from pykbatch.commands.produce import _table
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    return _table(argparse.Namespace(input=str(path), parse_key=False, key_separator="\t"))


def test_produce_reads_headers_as_kafka_has_them_and_what_consume_writes(tmp_path):
    """Ordered and repeatable pairs, consume's --jsonl objects (base64 where not UTF-8), or a
    plain object; anything else names the line (it was a traceback)."""
    table = _produce_table(tmp_path, [
        {"value": "a", "headers": [["h", "1"], ["h", "2"], ["g", None]]},
        json.loads(record_text.json_line(R)),
        {"value": "c", "headers": {"x": "y"}}])
    assert table["headers"].to_pylist() == [
        [{"key": "h", "value": b"1"}, {"key": "h", "value": b"2"}, {"key": "g", "value": None}],
        [{"key": "h", "value": b"x"}, {"key": "h", "value": None}],
        [{"key": "x", "value": b"y"}]]
    assert table["value"].to_pylist() == [b"a", b"v\x00\xff", b"c"]  # base64 decoded back to the bytes
    with pytest.raises(UsageError, match="line 2: headers are"):
        _produce_table(tmp_path, [{"value": "a"}, {"value": "b", "headers": [["only-a-key"]]}])


def test_the_java_consumers_properties_map_or_are_refused_with_the_way():
    conn, reader = consumer_settings({"bootstrap.servers": "b:9092", "group.id": "g", "kafka.isolation.level":
                                      "read_committed", "max.partition.fetch.bytes": "2048", "fetch.max.bytes": "4096",
                                      "fetch.max.wait.ms": "100", "auto.offset.reset": "latest",
                                      "enable.auto.commit": "false", "security.protocol": "SSL"})
    assert conn == {"bootstrap.servers": "b:9092", "security.protocol": "SSL"}
    assert reader == {"group_id": "g", "isolation_level": "read_committed", "max_partition_fetch_bytes": 2048,
                      "fetch_max_bytes": 4096, "max_wait_ms": 100, "auto_offset_reset": "latest",
                      "enable_auto_commit": False}
    for key, says in (("value.deserializer", "pykbatch.values"), ("max.poll.records", "Reader.polls()"),
                      ("enable.auto.commit", "expected true or false"),
                      ("session.timeout.ms", "session.timeout.ms: invalid literal")):
        with pytest.raises(SettingsError, match=says.replace("(", r"\(").replace(")", r"\)")):
            consumer_settings({"bootstrap.servers": "b:9092", key: "yes"})
    with pytest.raises(SettingsError, match="auto.offset.reset is earliest or latest"):
        consumer_settings({"auto.offset.reset": "none"})


def test_a_readers_keywords_outside_a_group_leave_a_members_settings_out():
    """consume without --group and copy read on their own: a member's settings have no use there
    (left out, as enable.auto.commit=false always was), enable.auto.commit=true is refused."""
    from pykbatch.live.settings import outside_group
    _, reader = consumer_settings({"group.id": "g", "enable.auto.commit": "false", "session.timeout.ms": "6000",
                                   "group.protocol": "classic", "fetch.max.bytes": "4096"})
    assert outside_group(reader) == {"group_id": "g", "fetch_max_bytes": 4096}
    with pytest.raises(SettingsError, match="enable.auto.commit=true: a reader outside a group commits when asked"):
        outside_group(consumer_settings({"enable.auto.commit": "true"})[1])
