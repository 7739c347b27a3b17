"""Per-record truth in the producer, against the session's real broker (issue 33's cases): each
record the broker names gets the code and rule of its own message (one partition code answers a
produce), pre-flight and broker agree record by record, Arrow timestamps of any unit are taken as
Spark's Kafka sink takes them, topic limits loosened by an operator are seen by an open producer,
and dead letters never fail for their record's reason (their topic created as Kafka Connect does)."""
from __future__ import annotations

import datetime as dt
import time

import pytest

from pykbatch import errors as kb_errors
from pykbatch.live import Producer
from tests import kafka_tools
from tests.live_damage import create_topic
from tests.test_live_produce import consume_all

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
confluent_kafka = pytest.importorskip("confluent_kafka")
pa = pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def bootstrap(kafka_broker):
    return kafka_broker.bootstrap


def mixed_poison(now_ms: int) -> list[dict]:
    """A keyless record (refused by a compacted topic) and one far in the future, among good ones."""
    recs = [{"key": b"k%d" % i, "value": b"good-%d" % i} for i in range(8)]
    recs[2] = {"key": None, "value": b"no-key"}
    recs[5] = {"key": b"k5", "value": b"future", "timestamp": now_ms + 3_600_000}
    return recs


@pytest.mark.parametrize("preflight", [False, True], ids=["broker", "preflight"])
def test_each_named_record_gets_its_own_code_and_rule(bootstrap, preflight):
    topic = f"truth-mixed-{'pre' if preflight else 'broker'}"
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact", "message.timestamp.after.max.ms": "60000"})
    recs = mixed_poison(int(time.time() * 1000))
    with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "preflight": preflight,
                   "linger.ms": 100}) as producer:
        report = producer.produce(recs, topic=topic)
    got = {c.row: (c.error.code, c.error.name, c.error.rule, c.error.source) for c in report.culprits}
    source = "preflight" if preflight else "broker"
    assert got == {2: (87, "INVALID_RECORD", "record.compacted_no_key", source),
                   5: (32, "INVALID_TIMESTAMP", "record.timestamp_out_of_range", source)}
    assert report.counts["delivered"] == 6
    assert [v for *_, v, _, _ in consume_all(bootstrap, topic, 6)] == \
        [r["value"] for i, r in enumerate(recs) if i not in (2, 5)]


def test_dead_letters_carry_the_rule_take_the_send_time_and_their_topic_is_created(bootstrap):
    topic = "truth-dlq"
    dlq = "truth-dlq-letters-created"  # not created by the test: the producer creates it
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact", "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    recs = mixed_poison(now)
    with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "preflight": False, "linger.ms": 100,
                   "errors.deadletterqueue.topic.name": dlq}) as producer:
        report = producer.produce(recs, topic=topic)
    assert report.counts == {"delivered": 6, "dropped": 0, "dead_lettered": 2, "failed": 0}, report.culprits
    letters = consume_all(bootstrap, dlq, 2)
    by_value = {v: (dict(h), ts) for _, _, _, v, h, ts in letters}
    headers, ts = by_value[b"future"]
    assert headers["__pykbatch.errors.rule"] == b"record.timestamp_out_of_range"
    assert headers["__pykbatch.errors.timestamp"] == str(now + 3_600_000).encode()
    assert now - 60_000 < ts < now + 120_000  # the send time, not the refused one
    headers, _ = by_value[b"no-key"]
    assert headers["__pykbatch.errors.rule"] == b"record.compacted_no_key"
    assert headers["__connect.errors.exception.class.name"] == b"org.apache.kafka.common.InvalidRecordException"


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_arrow_timestamps_of_any_unit_are_truncated_to_milliseconds(bootstrap, unit):
    topic = f"truth-ts-{unit}"
    create_topic(bootstrap, topic)
    when = dt.datetime.now(dt.timezone.utc).replace(microsecond=123456)
    table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([when, None], pa.timestamp(unit, tz="UTC"))})
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        report = producer.produce_arrow(table, topic=topic)
    assert report.counts["delivered"] == 2
    got = consume_all(bootstrap, topic, 2)
    want = int(when.timestamp()) * 1000 + (0 if unit == "s" else 123)
    assert got[0][5] == want


def test_an_open_producer_sees_limits_an_operator_loosened(bootstrap):
    """max.message.bytes raised and compaction turned off while the producer is open: it must not
    keep dropping records the broker would now take."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    topic = "truth-loosened"
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact", "max.message.bytes": "2000"})
    with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "linger.ms": 20}) as producer:
        first = producer.produce([{"key": None, "value": b"x"}, {"key": b"k", "value": b"y" * 5000}], topic=topic)
        assert first.counts["dropped"] == 2
        admin = AdminClient({"bootstrap.servers": bootstrap})
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", "100000", incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(timeout=30)
        time.sleep(1.5)  # the broker applies it; the producer's copy is older than a second now
        second = producer.produce([{"key": None, "value": b"x"}, {"key": b"k", "value": b"y" * 5000}], topic=topic)
    assert second.counts == {"delivered": 2, "dropped": 0, "dead_lettered": 0, "failed": 0}, second.culprits


def test_a_broker_answer_names_rules_from_the_catalogue():
    from pykbatch.rules import rule_of_message
    assert rule_of_message("Compacted topic cannot accept message without key in topic partition t-0").id == \
        "record.compacted_no_key"
    assert rule_of_message("Timestamp 9 of message with offset 3 is out of range. The timestamp should be "
                           "within [1, 2]").code == kb_errors.CODE["INVALID_TIMESTAMP"]
    assert rule_of_message("something else entirely") is None


def test_a_dead_letter_that_cannot_land_fails_the_call_under_tolerance_all(bootstrap):
    """The record's outcome is failed (its letter was refused: a compacted dead-letter topic takes no
    keyless record), and the call says so: no failure is silent whatever errors.tolerance says."""
    from pykbatch.live.produced import ProduceFailedError
    topic, dlq = "truth-dlq-refused", "truth-dlq-refused-letters"
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact"})
    create_topic(bootstrap, dlq, **{"cleanup.policy": "compact"})
    recs = [{"key": b"k0", "value": b"good"}, {"key": None, "value": b"no-key"}, {"key": b"k2", "value": b"good"}]
    with Producer({"bootstrap.servers": bootstrap, "errors.tolerance": "all", "preflight": False,
                   "errors.deadletterqueue.topic.name": dlq}) as producer:
        with pytest.raises(ProduceFailedError) as caught:
            producer.produce(recs, topic=topic)
        metrics = producer.metrics_dict()
    report = caught.value.report
    assert report.counts == {"delivered": 2, "dropped": 0, "dead_lettered": 0, "failed": 1}
    assert report.outcome_of(1) == "failed" and metrics["deadletterqueue-produce-failures"] == 1
