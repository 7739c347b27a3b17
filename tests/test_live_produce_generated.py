"""The producer's promise on generated cases, against the session's real broker: every record one
outcome, only the culprits kept out, the topic's exact content what was delivered.

Each case draws poison kinds (a keyless record for a compacted topic, a timestamp too far ahead, a
record larger than the topic's limit), their positions (first, last, runs, anywhere), the codec, the
batch size and linger, the policy (tolerance none / all, a handler that answers FAIL at some call, a
dead-letter topic), the pre-flight on or off and a transaction or not.  What the topic holds is read
back by librdkafka (read_committed) and compared with the rows the report says were delivered, in
order; the dead-letter topic with the rows it says were dead-lettered.

PYKBATCH_PRODUCE_CASES sets the number of cases (default 40), PYKBATCH_PRODUCE_SEED the first seed
(fixed under CI, random elsewhere; printed, and each case's seed is in its test id).
"""
from __future__ import annotations

import os
import random
import time

import numpy as np
import pytest

from pykbatch import errors as kb_errors
from pykbatch.live import Producer
from pykbatch.live.produced import ProduceFailedError
from pykbatch.live.transactions import TransactionAbortableError
from tests import kafka_tools
from tests.live_damage import create_topic
from tests.test_live_produce import consume_all

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
pytest.importorskip("confluent_kafka")

CASES = int(os.environ.get("PYKBATCH_PRODUCE_CASES", "40"))
FIRST_SEED = int(os.environ.get("PYKBATCH_PRODUCE_SEED") or (7331 if os.environ.get("CI") else
                                                             random.randrange(1 << 30)))
SEEDS = list(range(FIRST_SEED, FIRST_SEED + CASES))
print(f"\ntests/test_live_produce_generated.py: {CASES} cases from seed {FIRST_SEED} "
      f"(replay: PYKBATCH_PRODUCE_SEED={FIRST_SEED} PYKBATCH_PRODUCE_CASES={CASES})")

MAX_MESSAGE_BYTES = 4000
CODE = {"nokey": kb_errors.CODE["INVALID_RECORD"], "future": kb_errors.CODE["INVALID_TIMESTAMP"],
        "large": kb_errors.CODE["MESSAGE_TOO_LARGE"]}


def draw(seed: int):
    rng = random.Random(seed)
    n = rng.randrange(5, 200)
    kinds = rng.sample(sorted(CODE), rng.randrange(1, 4))
    where = rng.choice(("first", "last", "run", "any"))
    count = rng.randrange(1, max(2, n // 8))
    rows = {"first": range(count), "last": range(n - count, n)}.get(where)
    if rows is None and where == "run":
        at = rng.randrange(0, n - count + 1)
        rows = range(at, at + count)
    poison = {r: rng.choice(kinds) for r in (rows if rows is not None else rng.sample(range(n), count))}
    return {
        "seed": seed, "n": n, "poison": poison, "codec": rng.choice(("none", "gzip", "snappy", "lz4", "zstd")),
        "preflight": rng.random() < 0.5, "transactional": rng.random() < 0.3,
        "tolerance": rng.choice(("none", "all", "all")), "dlq": rng.random() < 0.4,
        "handler_fail_at": rng.choice((None, None, rng.randrange(1, 4))),
        "batch_size": rng.choice((1024, 16384, 1 << 20)), "linger": rng.choice((0, 5, 50)),
    }


def records(case, now_ms: int) -> list[dict]:
    rng = random.Random(case["seed"] + 1)
    out = []
    for i in range(case["n"]):
        rec = {"key": b"k%d" % i, "value": b"v%d-" % i + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))}
        kind = case["poison"].get(i)
        if kind == "nokey":
            rec["key"] = None
        elif kind == "future":
            rec["timestamp"] = now_ms + 3_600_000
        elif kind == "large":
            rec["value"] = b"L%d-" % i + rng.randbytes(MAX_MESSAGE_BYTES + 500)  # random: no codec shrinks it
        out.append(rec)
    return out


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed-{s}" for s in SEEDS])
def test_every_record_one_outcome_and_the_topic_holds_exactly_the_delivered(kafka_broker, seed):
    case = draw(seed)
    why = f"case {case}"
    bootstrap = kafka_broker.bootstrap
    topic, dlq = f"pgen-{seed}", f"pgen-{seed}-dlq"
    config = {"max.message.bytes": MAX_MESSAGE_BYTES, "message.timestamp.after.max.ms": 60_000}
    if "nokey" in case["poison"].values():
        config["cleanup.policy"] = "compact"
    create_topic(bootstrap, topic, **config)
    recs = records(case, int(time.time() * 1000))
    seen: list[int] = []

    def handler(record, error):
        seen.append(record["row"])
        return kb_errors.FAIL if len(seen) == case["handler_fail_at"] else kb_errors.CONTINUE
    props = {"bootstrap.servers": bootstrap, "compression.type": case["codec"], "preflight": case["preflight"],
             "errors.tolerance": case["tolerance"], "batch.size": case["batch_size"], "linger.ms": case["linger"]}
    if case["dlq"]:
        props["errors.deadletterqueue.topic.name"] = dlq
    if case["transactional"]:
        props["transactional.id"] = f"pgen-{seed}"
    committed = True
    with Producer(props, handler=handler if case["handler_fail_at"] else None) as producer:
        if case["transactional"]:
            producer.init_transactions()
            producer.begin_transaction()
        try:
            report = producer.produce(recs, topic=topic)
        except ProduceFailedError as exc:
            report = exc.report
        if case["transactional"]:
            try:
                producer.commit_transaction()
            except TransactionAbortableError:
                producer.abort_transaction()
                committed = False
    # one outcome per record, and only the culprits kept out
    assert report.conserved() and report.complete, why
    outcome = {i: report.outcome_of(i) for i in range(case["n"])}
    for i in range(case["n"]):
        if i in case["poison"]:
            assert outcome[i] != "delivered", f"row {i} ({case['poison'][i]}) delivered ({why})"
        else:
            assert outcome[i] == "delivered", f"row {i}: {outcome[i]} ({why})"
    errors = {c.row: c.error for c in report.culprits}
    for i, kind in case["poison"].items():
        assert errors[i].code == CODE[kind], f"row {i} ({kind}): {errors[i]} ({why})"
    # the policy: tolerated culprits dropped or dead-lettered, the others failed
    failed = {i for i in case["poison"] if outcome[i] == "failed"}
    if case["handler_fail_at"]:
        before_fail = set(seen[:case["handler_fail_at"] - 1])
        assert failed == set(case["poison"]) - before_fail, why
    elif case["tolerance"] == "none":
        assert failed == set(case["poison"]), why
    else:
        assert not failed, why
        assert {outcome[i] for i in case["poison"]} == {"dead_lettered" if case["dlq"] else "dropped"}, why
    # the topic holds exactly the delivered records, in order (nothing when the transaction aborted)
    delivered = [recs[i]["value"] for i in range(case["n"]) if outcome[i] == "delivered"]
    if case["transactional"]:
        assert committed == (not failed), why
    visible = delivered if committed else []
    got = consume_all(bootstrap, topic, len(visible), read_committed=True)
    assert [v for *_, v, _, _ in got] == visible, why
    if case["dlq"] and committed:
        letters = [recs[i]["value"] for i in range(case["n"]) if outcome[i] == "dead_lettered"]
        got = consume_all(bootstrap, dlq, len(letters), read_committed=True)
        assert sorted(v for *_, v, _, _ in got) == sorted(letters), why


def test_the_report_counts_are_the_outcomes():
    from pykbatch.live.produced import ProduceReport
    r = ProduceReport(3)
    r.delivered(np.array([0, 2]), 0, 10)
    assert r.outcome_of(0) == "delivered" and r.outcome_of(1) == "pending"
