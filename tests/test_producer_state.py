"""ProducerStateTracker against Kafka's ProducerAppendInfo vectors, and audits of whole logs."""
import re

import pytest

import pykbatch as kb
from pykbatch.kafka.producer_state import ProducerStateTracker, audit_producers
from tests.conftest import kafka_vector

TP = "t-0"


def as_kafka_44(message: str) -> str:
    """The vectors come from a 4.0 snapshot; Kafka 4.4 (what pykbatch follows, and what
    tests/test_kafka_broker.py runs) added a space and reworded the stale-epoch message."""
    message = re.sub(r"producer (\d+)at offset", r"producer \1 at offset", message)
    return re.sub(r"which is smaller than the last seen epoch (\d+)$", r"which is < the last seen epoch \1 (TV-1)",
                  message)


def vector(name):
    return kafka_vector(name)["expected"]["steps"]


def test_sequence_and_epoch_steps_match_kafka():
    """Kafka's script drives ProducerAppendInfo directly, without the leader's duplicate check."""
    tracker = ProducerStateTracker(TP, mode="leader", duplicates=False)
    for step in vector("producer state: sequence/epoch checks (CLIENT origin)"):
        state = tracker.producers.get(7)
        assert (state.epoch if state else -1) == step["stateBefore_epoch"]
        assert (state.last_seq if state else -1) == step["stateBefore_lastSeq"]
        check = tracker.append_data(7, step["producerEpoch"], step["firstSeq"], step["lastSeq"],
                                    step["firstOffset"], step["lastOffset"])
        if step["outcome"] == "ok":
            assert check.culprits == []
        else:
            (c,) = check.culprits
            assert (c.code, c.name, c.message) == (step["errorCode"], step["errorName"],
                                                   as_kafka_44(step["exceptionMessage"]))


def test_transaction_marker_steps_match_kafka():
    tracker = ProducerStateTracker(TP, mode="leader")
    for step in vector("producer state: transaction markers (coordinator epoch fencing)"):
        action = step["action"]
        nums = dict(re.findall(r"(\w+)=(\d+)", action))
        if action.startswith("transactional data batch"):
            check = tracker.append_data(8, int(nums["epoch"]), int(nums["seq"]), int(nums["seq"]),
                                        int(nums["offset"]), int(nums["offset"]), transactional=True)
        else:
            check = tracker.append_marker(8, int(nums["producerEpoch"]), "ABORT" in action,
                                          int(nums["coordinatorEpoch"]), int(nums["offset"]))
        if step["outcome"] == "ok":
            assert check.culprits == []
            if "completedTxn" in step:
                t = check.completed_txn
                assert (f"CompletedTxn(producerId={t.producer_id}, firstOffset={t.first_offset}, "
                        f"lastOffset={t.last_offset}, isAborted={str(t.is_aborted).lower()})") == step["completedTxn"]
        else:
            (c,) = check.culprits
            assert (c.code, c.name, c.message) == (step["errorCode"], step["errorName"],
                                                   as_kafka_44(step["exceptionMessage"]))


def idempotent(base_offset, seq, n=2, epoch=0, pid=5, transactional=False):
    recs = [{"key": b"k", "value": b"v", "timestamp": 1000 + i} for i in range(n)]
    return kb.build_batch(recs, base_offset=base_offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          is_transactional=transactional)


def marker(offset, commit=True, epoch=0, coordinator_epoch=3, pid=5):
    value = b"\x00\x00" + coordinator_epoch.to_bytes(4, "big")
    key = b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
    return kb.build_batch([{"key": key, "value": value, "timestamp": 2000}], base_offset=offset, producer_id=pid,
                          producer_epoch=epoch, is_transactional=True, is_control=True)


def test_a_clean_log_audits_clean():
    log = idempotent(0, 0) + idempotent(2, 2) + idempotent(4, 4, transactional=True) + marker(6)
    audit = audit_producers(log)
    assert audit.ok and audit.open_transactions == {}
    assert audit.completed_transactions == [(5, 4, 6, False)]
    assert audit.producers[5].last_seq == 5


def test_audit_reports_gaps_duplicates_fencing_and_open_transactions():
    log = (idempotent(0, 0) + idempotent(2, 3)          # gap: 2 expected, 3 came
           + idempotent(4, 3)                            # duplicate of the batch at 2..3
           + idempotent(6, 0, epoch=1)                   # a new epoch starting at 0: fine
           + idempotent(8, 5, epoch=0)                   # a zombie from epoch 0
           + idempotent(10, 2, epoch=1, transactional=True))  # continues epoch 1; transaction left open
    audit = audit_producers(log)
    found = [(c.entry, c.name, c.position) for c in audit.culprits]
    starts = [b.position for b in kb.iter_batches(log)]
    assert found == [(1, "OUT_OF_ORDER_SEQUENCE_NUMBER", starts[1]), (2, "DUPLICATE_SEQUENCE_NUMBER", starts[2]),
                     (4, "INVALID_PRODUCER_EPOCH", starts[4])]
    assert audit.culprits[1].message == ("Batch with sequence range [3, 4] of producer 5 at offset 4 in partition "
                                         "t-0 duplicates the batch at offsets [2, 3]")
    assert audit.open_transactions == {5: 10}
    assert [c.error_class for c in audit.culprits] == ["abortable"] * 3


def test_sequence_wraps_past_int32_max():
    top = 2**31 - 1
    log = idempotent(0, top - 1) + idempotent(2, 0)
    assert audit_producers(log).ok
    assert not audit_producers(idempotent(0, top - 1) + idempotent(2, 1)).ok


def test_the_leader_skips_a_duplicate_that_appendinfo_alone_would_refuse():
    """Kafka's step 9 (epoch 1, seq 0 again) is OUT_OF_ORDER for ProducerAppendInfo, but the
    leader finds it among the retained batches first and answers success."""
    steps = vector("producer state: sequence/epoch checks (CLIENT origin)")
    tracker = ProducerStateTracker(TP, mode="leader")
    for s in steps[:-1]:
        tracker.append_data(7, s["producerEpoch"], s["firstSeq"], s["lastSeq"], s["firstOffset"], s["lastOffset"])
    last = steps[-1]
    check = tracker.append_data(7, last["producerEpoch"], last["firstSeq"], last["lastSeq"], last["firstOffset"],
                                last["lastOffset"])
    assert check.culprits == [] and check.duplicate_of.first_offset == 11


def test_a_leader_answers_a_duplicate_with_the_original_offsets():
    tracker = ProducerStateTracker(TP, mode="leader")
    first, again = (next(kb.iter_batches(idempotent(0, 0))), next(kb.iter_batches(idempotent(40, 0))))
    assert tracker.append(first).culprits == []
    check = tracker.append(again)
    assert check.culprits == [] and check.duplicate_of.first_offset == 0 and check.duplicate_of.last_offset == 1


def test_only_five_batches_are_remembered():
    tracker = ProducerStateTracker(TP, mode="leader")
    for i in range(6):
        tracker.append_data(5, 0, 2 * i, 2 * i + 1, 2 * i, 2 * i + 1)
    assert tracker.append_data(5, 0, 2, 3, 20, 21).duplicate_of is not None
    assert tracker.append_data(5, 0, 0, 1, 20, 21).duplicate_of is None  # forgotten: out of order now


def test_a_rejected_append_leaves_the_leaders_state_alone():
    tracker = ProducerStateTracker(TP, mode="leader")
    tracker.append_data(5, 0, 0, 1, 0, 1)
    assert tracker.append_data(5, 0, 7, 7, 2, 2).culprits
    assert tracker.producers[5].last_seq == 1


def test_transactional_producer_writing_outside_its_transaction():
    log = idempotent(0, 0, transactional=True) + idempotent(2, 2)
    (c,) = audit_producers(log).culprits
    assert (c.code, c.name, c.error_class) == (48, "INVALID_TXN_STATE", "fatal")


def test_replication_origin_reports_nothing():
    tracker = ProducerStateTracker(TP, mode="audit", append_origin="replication")
    tracker.append_data(5, 3, 0, 0, 0, 0)
    assert tracker.append_data(5, 1, 9, 9, 1, 1).culprits == []


def test_the_old_origin_keyword_still_works_with_a_warning():
    with pytest.warns(DeprecationWarning, match="append_origin"):
        tracker = ProducerStateTracker(TP, mode="audit", origin="replication")
    assert tracker.append_origin == "replication"
    tracker.append_data(5, 3, 0, 0, 0, 0)
    assert tracker.append_data(5, 1, 9, 9, 1, 1).culprits == []


@pytest.mark.parametrize("bad", [dict(mode="x"), dict(append_origin="x")])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        ProducerStateTracker(**bad)


@pytest.mark.parametrize("mode,origin,duplicates", [("audit", "client", True), ("leader", "client", True),
                                                    ("audit", "client", False), ("leader", "coordinator", True)])
def test_the_in_order_fast_path_answers_as_the_full_checks_do(mode, origin, duplicates):
    """Random producers' batches -- mostly in order, with gaps, repeats, epoch bumps, transactions
    and markers -- give the same culprits, duplicates, transactions and state with and without the
    fast path for a producer's next batch in order."""
    import random
    rng = random.Random(7)
    fast = ProducerStateTracker(mode=mode, append_origin=origin, duplicates=duplicates)
    slow = ProducerStateTracker(mode=mode, append_origin=origin, duplicates=duplicates)
    slow._fast_path = False
    next_seq, epochs, offset = {}, {}, 0
    for _ in range(4000):
        pid = rng.choice([1, 2, 3])
        epoch = epochs.setdefault(pid, 0)
        roll = rng.random()
        if roll < 0.03:
            epochs[pid] = epoch = epoch + 1
            next_seq[pid] = 0
        if roll > 0.97:
            args = (pid, epoch, rng.random() < 0.5, rng.choice([0, 1]), offset, offset)
            answers = [t.append_marker(*args) for t in (fast, slow)]
        else:
            count = rng.randint(1, 4)
            first = next_seq.get(pid, 0)
            if roll < 0.08:
                first += rng.choice([-count, -1, 1, 5])  # a repeat, an overlap or a gap
            first = max(first, 0)
            last = first + count - 1
            args = (pid, epoch, first, last, offset, offset + count - 1, offset, 0.88 < roll < 0.9)
            answers = [t.append_data(*args) for t in (fast, slow)]
            next_seq[pid] = last + 1
            offset += count
        offset += 1
        (a, b) = answers
        assert [c.message for c in a.culprits] == [c.message for c in b.culprits]
        assert (a.duplicate_of, a.completed_txn) == (b.duplicate_of, b.completed_txn)
    assert fast.producers == slow.producers
    assert fast.completed_transactions == slow.completed_transactions
