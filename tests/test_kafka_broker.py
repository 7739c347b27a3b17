"""Differential test against Apache Kafka 4.4's own partition log (tests/kafka_broker.py).

Generated produce appends (every codec, magic 0/1/2, producer fields, control and LogAppendTime
batches, damaged headers, records and CRCs, second batches, truncation) under generated topic
configs go through ``UnifiedLog.appendAsLeader`` and through ``pykbatch.validate`` with the same
settings; the error code, KIP-467's ``error_message`` and ``error_records``, and the message of a
batch-level error must be Kafka's.  Differences pykbatch makes on purpose are listed in
DELIBERATE with their reasons, and each must still occur (so the list cannot go stale).
"""
from __future__ import annotations

import random

import pytest

import pykbatch as kb
from tests import kafka_broker
from tests.kafka_broker import NOW_MS, Case
from tests.kafka_cases import damage, random_batch

CASES = int(__import__('os').environ.get('PYKBATCH_KAFKA_CASES', 4000))

pytestmark = pytest.mark.skipif(kafka_broker.unavailable() is not None, reason=str(kafka_broker.unavailable()))


def random_case(i: int) -> tuple[Case, kb.ValidationConfig]:
    rng = random.Random(i)
    magic = rng.choice([2] * 8 + [1, 0])
    data = random_batch(rng, magic)
    if magic == 2 and rng.random() < 0.35:
        data = damage(rng, data)
    if rng.random() < 0.08:
        data += random_batch(rng, rng.choice([magic, 2, 1]))
    settings: dict = {}
    config = {"origin": "client", "strict": False, "single_append": True, "now_ms": NOW_MS}
    if rng.random() < 0.25:
        settings["cleanup.policy"] = "compact"
        config["compacted"] = True
    if rng.random() < 0.15:
        settings["message.timestamp.type"] = config["timestamp_type"] = "LogAppendTime"
    if rng.random() < 0.3:
        window = rng.choice([1000, 3_600_000])
        settings["message.timestamp.before.max.ms"] = config["timestamp_before_max_ms"] = window
        settings["message.timestamp.after.max.ms"] = config["timestamp_after_max_ms"] = window
    if rng.random() < 0.12:
        settings["max.message.bytes"] = config["max_message_bytes"] = rng.randint(60, 200)
    if rng.random() < 0.2:
        settings["compression.type"] = config["target_compression"] = rng.choice(
            ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
    if rng.random() < 0.3:
        settings["harness.produce.version"] = config["produce_version"] = rng.choice([3, 5, 7, 9, 11])
    return Case(f"gen{i}", [data], settings), kb.ValidationConfig(**config)


def verdict_rule(ours: kb.ValidationResult) -> str | None:
    return ours.verdict.rule if ours.culprits else None


# Where pykbatch answers differently on purpose: (name, test on (case, ours, kafka's answer), reason).
DELIBERATE = [
    ("codec text", lambda case, ours, k: verdict_rule(ours) == "batch.decompression_failed"
        and k["errorCode"] == -1,
     "a payload the codec rejects: Kafka's message is the JVM codec library's exception text; pykbatch "
     "names the codec, the byte position and the Python codec's complaint (same UNKNOWN_SERVER_ERROR code)"),
]

def differences(ours: kb.ValidationResult, kafka: dict) -> list[str]:
    """What pykbatch's answer has that Kafka's ProduceResponse would not."""
    out = []
    if ours.error_code != kafka["errorCode"]:
        out.append(f"error_code {ours.error_code} ({ours.culprits[:2]}) != Kafka's {kafka['errorCode']} "
                   f"({kafka.get('exceptionMessage') or kafka.get('errorMessage')})")
        return out
    if not kafka["errorCode"]:
        return out
    if ours.error_message != kafka["errorMessage"]:
        out.append(f"error_message {ours.error_message!r} != {kafka['errorMessage']!r}")
    if [list(r) for r in ours.error_records] != kafka["recordErrors"]:
        out.append(f"error_records {ours.error_records} != {kafka['recordErrors']}")
    first = ours.verdict
    if "exceptionMessage" in kafka and first.message != kafka["exceptionMessage"]:
        out.append(f"message {first.message!r} != {kafka['exceptionMessage']!r}")
    return out


@pytest.fixture(scope="module")
def generated():
    cases = [random_case(i) for i in range(CASES)]
    answers = kafka_broker.run([case for case, _ in cases])
    return [(case, config, answers[case.id][0]) for case, config in cases]


def test_generated_appends_get_kafkas_answer(generated):
    unexplained, used = [], set()
    for case, config, kafka in generated:
        ours = kb.validate(case.appends[0], config)
        found = differences(ours, kafka)
        if not found:
            continue
        why = next((name for name, applies, _ in DELIBERATE if applies(case, ours, kafka)), None)
        if why:
            used.add(why)
        else:
            unexplained.append(f"{case.id} {case.settings} {case.appends[0].hex()}: {found}")
    assert not unexplained, f"{len(unexplained)} differences:\n" + "\n".join(unexplained[:15])
    assert used == {name for name, _, _ in DELIBERATE}, "a deliberate difference no longer occurs"


def test_the_generator_reaches_every_kind_of_answer(generated):
    """The cases exercise success, batch-level errors, record errors and several codes."""
    codes = {k["errorCode"] for _, _, k in generated}
    assert {0, 2, 10, 32, 87, -1} <= codes, codes
    assert sum(1 for _, _, k in generated if k.get("recordErrors")) >= 20


def producer_case(i: int) -> Case:
    """Eight appends from two idempotent (sometimes transactional) producers: in-order sequences,
    gaps, retries of earlier batches, epoch bumps and zombies."""
    rng = random.Random(10_000 + i)
    state = {1: [0, 0], 2: [0, 0]}  # pid -> [epoch, next sequence]
    sent: list[tuple] = []
    appends = []
    for _ in range(8):
        pid = rng.choice([1, 2])
        epoch, seq = state[pid]
        roll = rng.random()
        if roll < 0.15 and sent:
            pid, epoch, seq, n, txn = rng.choice(sent)  # a retry
        else:
            if roll < 0.25:
                seq += rng.choice([1, 2])  # a gap
            elif roll < 0.35:
                epoch, seq = epoch + 1, rng.choice([0, 0, 3])  # a new epoch
            elif roll < 0.42 and epoch > 0:
                epoch -= 1  # a zombie
            n, txn = rng.randint(1, 3), rng.random() < 0.2
            sent.append((pid, epoch, seq, n, txn))
            state[pid] = [max(epoch, state[pid][0]), seq + n]
        recs = [{"key": b"k", "value": b"v", "timestamp": NOW_MS} for _ in range(n)]
        appends.append(kb.build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                      is_transactional=txn))
    return Case(f"producers{i}", appends)


def test_producer_state_gets_kafkas_answers():
    """ProducerStateTracker(mode="leader") beside Kafka's log, append by append: the same errors
    with the same messages, the same duplicates answered with the same original offsets."""
    from pykbatch.kafka.producer_state import ProducerStateTracker
    cases = [producer_case(i) for i in range(60)]
    answers = kafka_broker.run(cases)
    seen = set()
    for case in cases:
        tracker = ProducerStateTracker("t-0", mode="leader")
        log_end = 0
        for data, kafka in zip(case.appends, answers[case.id]):
            (batch,) = kb.iter_batches(data)
            count = batch.record_count
            check = tracker.append_data(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                        batch.last_sequence, log_end, log_end + count - 1,
                                        transactional=batch.is_transactional)
            where = f"{case.id} append {kafka['append']}"
            if check.duplicate_of is not None:
                seen.add("duplicate")
                assert kafka["errorCode"] == 0, where
                assert (kafka["firstOffset"], kafka["lastOffset"]) == (check.duplicate_of.first_offset,
                                                                      check.duplicate_of.last_offset), where
            elif check.culprits:
                (c,) = check.culprits[:1]
                seen.add(c.name)
                assert (c.code, c.name) == (kafka["errorCode"], kafka.get("errorName")), (where, c, kafka)
                if c.rule == "producer.non_transactional_in_transaction":  # Kafka prints its LogOffsetMetadata
                    assert kafka["exceptionMessage"].startswith(c.message.split(" at offset")[0]), where
                else:
                    assert c.message == kafka["exceptionMessage"], where
            else:
                assert kafka["errorCode"] == 0, (where, kafka)
                assert kafka["firstOffset"] == log_end, where
                log_end += count
    assert {"duplicate", "OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH"} <= seen, seen
