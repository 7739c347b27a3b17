"""Kafka's error-handling vocabulary: per-rule counters and broker metric names (KIP-467), the
code -> class -> action table, and KIP-210 handlers answering CONTINUE or FAIL."""
import logging

import pytest

import pykbatch as kb
from pykbatch import errors
from tests.samples import batch, batch_of_records, record


def mixed():
    bad_crc = bytearray(batch(2))
    bad_crc[-2] ^= 1
    return batch_of_records(*[record(5) for _ in range(10)], last_offset_delta=9) + bytes(bad_crc)


def test_counters_count_every_culprit_past_the_cap():
    result = kb.validate(mixed(), kb.ValidationConfig(max_culprits=3))
    assert len(result.culprits) == 3 and result.culprit_count == 11
    assert result.counters == {"batch.crc_mismatch": 1, "record.offset_not_increasing": 9,
                               "record.offset_delta_not_index": 1}
    assert result.metrics == {"no_key_compacted_topic_records": 0, "invalid_magic_number_records": 0,
                              "invalid_message_crc_records": 1, "non_increasing_offset_records": 9,
                              "record_offset_delta_not_index_records": 1}
    assert kb.validate(batch(3)).counters == {}


def test_every_rule_code_is_in_the_table():
    codes = {row["code"] for row in errors.table()}
    assert set(kb._native._rule_codes()) <= codes | {0}  # every code a rule reports has a class
    for row in errors.table():
        assert row["action"] == errors.ACTIONS[row["error_class"]]
    assert errors.action(2) == "retry the whole batch"
    assert errors.action(87) == "drop the culprits and keep the rest"
    assert errors.action(-1) == errors.action(9999) == "stop"


def test_handler_continue_sees_every_culprit(caplog):
    seen = []

    def handler(culprit):
        seen.append(culprit.rule)
        return errors.CONTINUE

    with caplog.at_level(logging.DEBUG, logger="pykbatch"):
        result = kb.validate(mixed(), on_error=handler)
    assert seen == [c.rule for c in result.culprits] and len(seen) == 11
    assert sum("CONTINUE" in r.message for r in caplog.records) == 11


def test_handler_fail_stops_with_the_culprits_seen():
    answers = iter([errors.CONTINUE, errors.FAIL])
    with pytest.raises(errors.HandlerFailed) as info:
        kb.validate(mixed(), on_error=lambda c: next(answers))
    assert len(info.value.culprits) == 2 and info.value.code == 87


def test_fatal_culprits_never_reach_the_handler():
    gz = bytearray(batch(2))
    gz[22] = 1  # says gzip, is not: UNKNOWN_SERVER_ERROR, fatal
    body = bytes(gz[21:])
    gz[17:21] = kb.crc32c(body).to_bytes(4, "big")
    asked = []
    with pytest.raises(errors.HandlerFailed) as info:
        kb.validate(bytes(gz), on_error=lambda c: asked.append(c) or errors.CONTINUE)
    assert asked == [] and info.value.code == -1 and info.value.error_class == "fatal"


def test_a_handler_must_answer_continue_or_fail():
    with pytest.raises(ValueError, match="CONTINUE or FAIL"):
        kb.validate(mixed(), on_error=lambda c: True)


def test_the_deprecated_difference_setting_stands_in_for_default_limits():
    """Kafka 3.6-3.9: message.timestamp.difference.max.ms replaces a before/after limit left at
    its default, and the message prints the resulting window."""
    now = 1_700_000_000_000
    data = kb.build_batch([{"key": b"k", "value": b"v", "timestamp": now - 5000}])
    config = kb.ValidationConfig(now_ms=now, timestamp_difference_max_ms=1000)
    assert config.timestamp_window == (1000, 1000)
    (c,) = kb.validate(data, config).culprits
    assert c.message == (f"Timestamp {now - 5000} of message with offset 0 is out of range. "
                         f"The timestamp should be within [{now - 1000}, {now + 1000}]")
    explicit = kb.ValidationConfig(now_ms=now, timestamp_difference_max_ms=1000, timestamp_before_max_ms=10_000)
    assert explicit.timestamp_window == (10_000, 1000) and kb.validate(data, explicit).ok
