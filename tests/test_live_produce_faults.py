"""The producer under real faults and in transactions, on the session's broker, checked by
librdkafka consumers: answers lost by a TCP proxy after the broker appended (idempotent retries:
no duplicate, no gap), the broker restarted mid-stream (a retriable leader change), transactions
committed without their poison records (KIP-1059) equal to what read_committed reads, a fenced
producer (fatal) and a transaction the coordinator timed out (abortable, then recovered)."""
from __future__ import annotations

import threading
import time

import pytest

from pykbatch.live import ProduceFailedError, Producer, ProducerFencedError, TransactionAbortableError
from tests import kafka_tools
from tests.live_damage import create_topic
from tests.tcp_proxy import DroppingProxy
from tests.test_live_produce import consume_all, poisoned

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
confluent_kafka = pytest.importorskip("confluent_kafka")
pa = pytest.importorskip("pyarrow")


def values_table(n: int, prefix: bytes = b"v", start: int = 0):
    rows = range(start, start + n)
    return pa.table({"key": pa.array([b"k%d" % (i % 97) for i in rows], pa.binary()),
                     "value": pa.array([prefix + b"%07d" % i for i in rows], pa.binary())})


def assert_once_in_order(got, n: int, prefix: bytes = b"v"):
    """Every value exactly once, and within each partition in the order it was produced."""
    values = [v for _, _, _, v, _, _ in got]
    assert len(values) == len(set(values)) == n, (len(values), len(set(values)), n)
    assert set(values) == {prefix + b"%07d" % i for i in range(n)}
    by_partition: dict[int, list[bytes]] = {}
    for p, _, _, v, _, _ in got:
        by_partition.setdefault(p, []).append(v)
    assert all(vs == sorted(vs) for vs in by_partition.values())


def test_answers_lost_after_the_append_are_retried_without_duplicates(kafka_broker):
    """The proxy cuts the connection after every third Produce request reached the broker: the
    producer cannot know the batch landed, sends it again with the same sequence, and the broker
    answers it as a duplicate -- every record once, none missing, in order."""
    topic = "faults-proxy"
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    proxy = DroppingProxy(kafka_broker.proxy_port, kafka_broker.proxied_port, drop_every=3)
    try:
        n = 36_000  # enough requests for several lost answers however the batches fall
        with Producer({"bootstrap.servers": kafka_broker.proxy_bootstrap, "linger.ms": 5, "batch.size": 16384,
                       "retry.backoff.ms": 20}) as producer:
            report = producer.produce_arrow(values_table(n), topic=topic)
            retries = producer.metrics["total-retries"]
            unsure, duplicated = producer.metrics["possibly-persisted-batches"], producer.metrics["possibly-duplicated-records"]
    finally:
        proxy.close()
    assert proxy.dropped >= 3, "the proxy dropped no answer: the test proves nothing"
    assert retries >= proxy.dropped
    assert unsure >= 1 and duplicated == 0  # each lost answer's batch is tracked; idempotence keeps one copy
    assert report.counts["delivered"] == n and report.conserved()
    assert_once_in_order(consume_all(kafka_broker.bootstrap, topic, n), n)


def test_without_idempotence_every_record_a_lost_answer_may_have_doubled_is_counted(kafka_broker):
    """The same lost answers with idempotence off: the broker cannot drop the second copy (no
    sequence), so records may be in the log twice -- the producer counts every record sent again
    after a request that got no answer (``possibly-duplicated-records``, franz-go's "unsure if
    produced"): the duplicates the topic holds are never more than that count."""
    topic = "faults-proxy-unsure"
    create_topic(kafka_broker.bootstrap, topic, partitions=1)
    proxy = DroppingProxy(kafka_broker.proxy_port, kafka_broker.proxied_port, drop_every=3)
    try:
        n = 20_000
        with Producer({"bootstrap.servers": kafka_broker.proxy_bootstrap, "linger.ms": 5, "batch.size": 16384,
                       "retry.backoff.ms": 20, "enable.idempotence": False, "acks": "all",
                       "max.in.flight.requests.per.connection": 1}) as producer:
            report = producer.produce_arrow(values_table(n), topic=topic)
            unsure, doubled = producer.metrics["possibly-persisted-batches"], producer.metrics["possibly-duplicated-records"]
    finally:
        proxy.close()
    assert proxy.dropped >= 1, "the proxy dropped no answer: the test proves nothing"
    assert unsure >= 1 and doubled >= 1
    got = consume_all(kafka_broker.bootstrap, topic, n)
    values = [v for _, _, _, v, _, _ in got]
    assert set(values) == {b"v%07d" % i for i in range(n)} and report.counts["delivered"] == n
    assert len(values) - n <= doubled, (len(values) - n, doubled)


def test_broker_restart_mid_stream_loses_and_repeats_nothing(kafka_broker):
    """The broker stops (clean shutdown) and starts again while a producer is sending: the
    retriable errors on the way (connections refused, NOT_LEADER while it loads) are retried,
    and the topic holds every record once."""
    topic = "faults-restart"
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    chunk = 2000
    restarted = threading.Event()
    out: dict = {"reports": []}

    def produce():
        with Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 5, "batch.size": 4096,
                       "retry.backoff.ms": 50, "delivery.timeout.ms": 180_000}) as producer:
            after = 0  # chunks sent once the broker is back
            while after < 3 and len(out["reports"]) < 400:
                table = values_table(chunk, start=chunk * len(out["reports"]))
                out["reports"].append(producer.produce_arrow(table, topic=topic, wait=False))
                after += restarted.is_set()
                time.sleep(0.05)
            producer.flush()
            out["metrics"] = producer.metrics_dict()
    worker = threading.Thread(target=produce)
    worker.start()
    time.sleep(1.0)
    kafka_broker.stop()
    time.sleep(2.0)
    kafka_broker.start()
    time.sleep(1.0)
    restarted.set()
    worker.join(300)
    assert not worker.is_alive()
    n = chunk * len(out["reports"])
    assert sum(r.counts["delivered"] for r in out["reports"]) == n
    m = out["metrics"]
    assert m["network-errors"] + m["metadata-refreshes"] > 0  # the restart did fall mid-stream
    assert_once_in_order(consume_all(kafka_broker.bootstrap, topic, n), n)


def test_transactions_commit_without_their_poison_records(kafka_broker, transaction_version):
    """KIP-1059: a poison record dropped by the policy does not doom its transaction; committed
    transactions are read by read_committed exactly, an aborted one not at all -- under
    transactions v2 (KIP-890) and v1."""
    bootstrap = kafka_broker.bootstrap
    topic = f"txn-poison-v{transaction_version}"
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact"})
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "errors.tolerance": "all",
                   "preflight": False}) as producer:
        producer.init_transactions()
        assert producer.transaction_version == transaction_version
        producer.begin_transaction()
        first = producer.produce(poisoned("nokey", n=30), topic=topic)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.produce([{"key": b"x", "value": b"aborted-%d" % i} for i in range(5)], topic=topic)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.produce([{"key": b"y", "value": b"second"}], topic=topic)
        producer.commit_transaction()
    assert first.counts == {"delivered": 27, "dropped": 3, "dead_lettered": 0, "failed": 0}
    committed = consume_all(bootstrap, topic, 28, read_committed=True)
    want = [r["value"] for i, r in enumerate(poisoned("nokey", n=30)) if i % 10 != 9] + [b"second"]
    assert [v for _, _, _, v, _, _ in committed] == want
    assert len(consume_all(bootstrap, topic, 33)) == 33  # read_uncommitted sees the aborted ones too


def abort_then_commit(p, topic: str, value: bytes) -> None:
    """An abortable transaction: its commit refuses, the abort works, and the next transaction
    commits ``value``."""
    with pytest.raises(TransactionAbortableError):
        p.commit_transaction()
    p.abort_transaction()
    p.begin_transaction()
    p.produce([{"key": b"k", "value": value}], topic=topic)
    p.commit_transaction()


def test_a_failed_record_makes_the_transaction_abortable(kafka_broker, transaction_version):
    """errors.tolerance=none inside a transaction: the culprit fails, the commit refuses
    (abortable), the abort works and the producer goes on."""
    bootstrap = kafka_broker.bootstrap
    topic = f"txn-abortable-v{transaction_version}"
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact"})
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "preflight": False}) as p:
        p.init_transactions()
        assert p.transaction_version == transaction_version
        p.begin_transaction()
        with pytest.raises(Exception):
            p.produce(poisoned("nokey", n=10), topic=topic)
        abort_then_commit(p, topic, b"after-abort")
    assert [v for *_, v, _, _ in consume_all(bootstrap, topic, 1, read_committed=True)] == [b"after-abort"]


def test_fenced_producer_is_fatal(kafka_broker, transaction_version):
    """A second producer with the same transactional.id fences the first: its next record is
    refused (INVALID_PRODUCER_EPOCH), its commit refuses, and the abort learns from the
    coordinator that it was fenced -- fatal: the producer takes nothing more."""
    bootstrap = kafka_broker.bootstrap
    topic = f"txn-fenced-v{transaction_version}"
    create_topic(bootstrap, topic)
    old = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    old.init_transactions()
    old.begin_transaction()
    old.produce([{"key": b"k", "value": b"before"}], topic=topic)
    new = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    new.init_transactions()  # a newer epoch: the old producer's transaction is aborted, it is fenced
    with pytest.raises(ProduceFailedError) as caught:
        old.produce([{"key": b"k", "value": b"zombie"}], topic=topic)
    assert caught.value.report.culprits[0].error.name == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(TransactionAbortableError):
        old.commit_transaction()
    with pytest.raises(ProducerFencedError, match="PRODUCER_FENCED"):
        old.abort_transaction()
    with pytest.raises(RuntimeError, match="fatal"):
        old.send(topic, b"more")
    old.close()
    new.begin_transaction()
    new.produce([{"key": b"k", "value": b"new"}], topic=topic)
    new.commit_transaction()
    new.close()
    assert [v for *_, v, _, _ in consume_all(bootstrap, topic, 1, read_committed=True)] == [b"new"]


def test_a_timed_out_transaction_is_abortable_and_recovers(kafka_broker, transaction_version):
    """The coordinator aborts a transaction past transaction.timeout.ms and bumps the epoch: the
    next produce is refused (INVALID_PRODUCER_EPOCH), the commit refuses (abortable).  Then what the
    coordinator answers: under transactions v2 the abort succeeds (a retried abort of a bumped
    epoch) with the epoch to go on with, and the next transaction commits; under v1 (this broker
    at transaction.version 1) the abort and KIP-360's InitProducerId are answered PRODUCER_FENCED,
    as Kafka's own client is (TransactionsTest.testFencingOnTransactionExpiration): fatal, said
    with both possible causes, and a new producer with the same id goes on.  Either way
    read_committed sees only what was committed after."""
    bootstrap = kafka_broker.bootstrap
    topic = f"txn-timeout-v{transaction_version}"
    create_topic(bootstrap, topic)
    settings = {"bootstrap.servers": bootstrap, "transactional.id": topic, "transaction.timeout.ms": 1500}
    with Producer(settings) as p:
        p.init_transactions()
        assert p.transaction_version == transaction_version
        p.begin_transaction()
        p.produce([{"key": b"k", "value": b"slow-1"}], topic=topic)
        time.sleep(4)
        with pytest.raises(ProduceFailedError, match="INVALID_PRODUCER_EPOCH"):
            p.produce([{"key": b"k", "value": b"slow-2"}], topic=topic)
        if transaction_version == 2:
            abort_then_commit(p, topic, b"fresh")
        else:
            with pytest.raises(TransactionAbortableError):
                p.commit_transaction()
            with pytest.raises(ProducerFencedError, match="transaction.timeout.ms"):
                p.abort_transaction()
            with pytest.raises(RuntimeError, match="fatal"):
                p.send(topic, b"more")
    if transaction_version == 1:
        with Producer(settings) as again:
            again.init_transactions()
            again.begin_transaction()
            again.produce([{"key": b"k", "value": b"fresh"}], topic=topic)
            again.commit_transaction()
    assert [v for *_, v, _, _ in consume_all(bootstrap, topic, 1, read_committed=True)] == [b"fresh"]


def test_drawn_transactions_read_committed_exactly_and_epochs_follow_the_version(kafka_broker, transaction_version):
    """Drawn transactions (commit or abort, partitions, sizes, poison records the policy drops,
    a group's offsets sent with some) under transactions v2 and v1: read_committed (librdkafka)
    holds exactly the committed ones' delivered records, in order in each partition; the group's
    committed offsets are the last committed transaction's; each transaction's records carry the
    epoch the version says -- v2 one more at every end (KIP-890: a late write of an ended
    transaction is fenced), v1 the same throughout.  Seed printed; PYKBATCH_TXN_SEED repeats."""
    import os
    import random

    import confluent_kafka

    import pykbatch as kb
    from pykbatch.live.cluster import TopicPartition
    seed = int(os.environ.get("PYKBATCH_TXN_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_TXN_SEED={seed}")
    rng = random.Random(seed)
    bootstrap = kafka_broker.bootstrap
    topic, group = f"txn-drawn-v{transaction_version}-{seed}", f"txn-drawn-group-{transaction_version}-{seed}"
    create_topic(bootstrap, topic, partitions=3, **{"cleanup.policy": "compact"})
    want: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    ended, group_offsets = [], None
    with Producer({"bootstrap.servers": bootstrap, "transactional.id": topic, "errors.tolerance": "all",
                   "preflight": False, "linger.ms": rng.choice([0, 5])}) as p:
        p.init_transactions()
        assert p.transaction_version == transaction_version
        for t in range(rng.randrange(4, 9)):
            p.begin_transaction()
            sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
            for i in range(rng.randrange(1, 40)):
                part = rng.randrange(3)
                value = b"t%d-r%d" % (t, i)
                poison = rng.random() < 0.1  # no key on a compacted topic: the broker names it, the policy drops it
                p.send(topic, value, key=None if poison else b"k%d" % i, partition=part)
                if not poison:
                    sent[part].append(value)
            offsets = None
            if rng.random() < 0.4:
                offsets = {TopicPartition(topic, 0): rng.randrange(1000)}
                p.send_offsets_to_transaction(offsets, group)
            commit = rng.random() < 0.7
            if commit:
                p.commit_transaction()
                for part, values in sent.items():
                    want[part].extend(values)
                group_offsets = offsets or group_offsets
            else:
                p.abort_transaction()
            ended.append((t, commit))
    committed = consume_all(bootstrap, topic, sum(map(len, want.values())), read_committed=True)
    for part in want:
        assert [v for pp, _, _, v, _, _ in committed if pp == part] == want[part], (seed, part)
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()
    assert got == (group_offsets[TopicPartition(topic, 0)] if group_offsets else confluent_kafka.OFFSET_INVALID), seed
    epochs: dict[int, set] = {}  # transaction -> the epochs its records carry, read off the broker's own log
    for log in sorted(kafka_broker.data.glob(f"{topic}-*/*.log")):
        with kb.read_segment(str(log)) as seg:
            for b in seg.batches():
                if not b.is_control:
                    for r in b.records():
                        epochs.setdefault(int(r.value.split(b"-")[0][1:]), set()).add(b.producer_epoch)
    assert epochs, seed
    first = min(min(e) for e in epochs.values())
    for t, _ in ended:
        if t in epochs:
            assert epochs[t] == {first + t if transaction_version == 2 else first}, (seed, t, epochs)


def test_the_exactly_once_sink_writes_a_replayed_batch_once_and_aborts_a_killed_attempt(kafka_broker):
    """The sink's task (spark_udfs.live_sink.write_batches with a transaction) without Spark:
    an attempt killed mid-transaction (its producer gone, the transaction open) is aborted by the
    next attempt's InitProducerId; a batch written and then handed over again (a replayed
    micro-batch, a task retried after its commit) writes nothing; the next batch writes.
    read_committed holds each batch's rows once, the killed attempt's never."""
    import pyarrow as pa

    from spark_udfs import exactly_once as eo
    from spark_udfs.live_sink import write_batches
    bootstrap = kafka_broker.bootstrap
    topic = "eos-task"
    create_topic(bootstrap, topic, partitions=2)
    settings = eo.Settings(None, topic)
    props = {"bootstrap.servers": bootstrap}

    def rows(tag: bytes, n: int = 7):
        return [pa.RecordBatch.from_pydict({"key": [b"k%d" % i for i in range(n)],
                                            "value": [tag + b"-%d" % i for i in range(n)]})]
    zombie = Producer({**props, "transactional.id": "pykbatch-q-0"})
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.produce([{"key": b"z", "value": b"killed-attempt"}], topic=topic)
    zombie._sender.close(1)  # killed: no EndTxn, the transaction left open
    zombie.cluster.close()

    first = write_batches(props, topic, rows(b"batch-3"), (settings, eo.TaskTransaction("pykbatch-q-0", 3)))
    assert (first.delivered, first.replayed) == (7, False)
    again = write_batches(props, topic, rows(b"batch-3-again"), (settings, eo.TaskTransaction("pykbatch-q-0", 3)))
    assert (again.records, again.replayed) == (0, True)
    older = write_batches(props, topic, rows(b"batch-2"), (settings, eo.TaskTransaction("pykbatch-q-0", 2)))
    assert older.replayed
    nxt = write_batches(props, topic, rows(b"batch-4", 3), (settings, eo.TaskTransaction("pykbatch-q-0", 4)))
    assert (nxt.delivered, nxt.replayed) == (3, False)
    got = sorted(v for *_, v, _, _ in consume_all(bootstrap, topic, 10, read_committed=True))
    assert got == sorted([b"batch-3-%d" % i for i in range(7)] + [b"batch-4-%d" % i for i in range(3)])
    assert kafka_tools.open_transactions(bootstrap, "pykbatch-q-") == []


def test_the_exactly_once_sinks_culprits_go_to_the_dead_letters_inside_its_transaction(kafka_broker):
    """A task's rows with poison among them (no key on a compacted topic), tolerance all and a
    dead-letter topic: the good rows and the dead letters commit together, once, and a replay of
    the batch adds neither; read_committed sees both topics whole."""
    import pyarrow as pa

    from spark_udfs import exactly_once as eo
    from spark_udfs.live_sink import write_batches
    bootstrap = kafka_broker.bootstrap
    topic, dlq = "eos-poison", "eos-poison-dlq"
    create_topic(bootstrap, topic, **{"cleanup.policy": "compact"})
    create_topic(bootstrap, dlq)
    props = {"bootstrap.servers": bootstrap, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
             "preflight": "false"}
    keys = [None if i % 5 == 4 else b"k%d" % i for i in range(20)]
    batch = pa.RecordBatch.from_pydict({"key": keys, "value": [b"v%d" % i for i in range(20)]})
    txn = (eo.Settings(None, topic), eo.TaskTransaction("pykbatch-poison-0", 0))
    first = write_batches(props, topic, [batch], txn)
    assert (first.delivered, first.dead_lettered, first.failed) == (16, 4, 0)
    assert write_batches(props, topic, [batch], txn).replayed
    good = consume_all(bootstrap, topic, 16, read_committed=True)
    assert sorted(v for *_, v, _, _ in good) == sorted(b"v%d" % i for i in range(20) if i % 5 != 4)
    letters = consume_all(bootstrap, dlq, 4, read_committed=True)
    assert len(letters) == 4
    import pykbatch as kb
    written = []
    for log in sorted(kafka_broker.data.glob(f"{dlq}-*/*.log")):
        with kb.read_segment(str(log)) as seg:
            written += [b.is_transactional for b in seg.batches() if not b.is_control]
    assert written and all(written)  # in the task's transaction, not beside it
