"""KIP-320 on a real cluster: a log truncated under the reader is named, never read on as another
history.

Three brokers and a separate controller (tests/kafka_cluster.py: two brokers can be down while the
quorum stays); a topic that allows unclean elections.  The leader alone takes writes (both
followers killed, acks=1), the reader reads them, the leader dies and a stale follower is elected
without them; new writes land at the same offsets.  Before KIP-320 in the reader, it went on from
its position reading the new records there, and what it had delivered below was simply gone
(found with this very sequence: offsets 150-179 of epoch 1 read after 100-149 of epoch 0 that no
longer exist).  Now: failOnDataLoss raises naming the offsets; without it the divergence is
reported and the reader reads the new log from where the two part.
"""
from __future__ import annotations

import time

import pytest

from tests import kafka_tools

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
confluent_kafka = pytest.importorskip("confluent_kafka")


def _produce(bootstrap: str, topic: str, values: list[bytes], acks: str) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False,
                                  "message.timeout.ms": 30000, "log_level": 0})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(60) == 0


def _until(what: str, check, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_a_log_truncated_under_the_reader_is_named_never_read_as_another_history(tmp_path):
    from pykbatch.live import DataLossError, Reader
    from tests.kafka_cluster import KafkaCluster
    cluster = KafkaCluster(tmp_path / "cluster", separate_controller=True)
    topic = "diverged"
    try:
        cluster.start_all()
        cluster.create_topic(topic, 1, **{"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
        _produce(cluster.direct_bootstrap, topic, [b"a%d" % i for i in range(100)], "all")
        leader = cluster.leader(topic)
        followers = [n for n in cluster.nodes if n != leader]
        for f in followers:
            cluster.kill(f)
        _until("the ISR did not shrink to the leader",
               lambda: cluster.admin().list_topics(topic, timeout=10).topics[topic].partitions[0].isrs == [leader])
        _produce(cluster.direct_bootstrap, topic, [b"a%d" % i for i in range(100, 150)], "1")  # the leader's alone

        readers = {strict: Reader({"bootstrap.servers": cluster.bootstrap, "request.timeout.ms": 5000}, assign={topic: [0]},
                                  starting_offsets="earliest", fail_on_data_loss=strict) for strict in (True, False)}
        got: dict[bool, list] = {True: [], False: []}

        def read(strict: bool) -> None:
            t = readers[strict].poll(300).table
            got[strict] += list(zip(t.column("offset").to_pylist(), t.column("value").to_pylist(),
                                    t.column("leader_epoch").to_pylist()))
        for strict in readers:
            _until("a reader did not read the leader's 150 records", lambda: read(strict) or len(got[strict]) >= 150)
            assert [v for _, v, _ in got[strict]] == [b"a%d" % i for i in range(150)]

        cluster.kill(leader)  # the only replica with offsets 100-149 ...
        cluster.start(followers[0])  # ... and a stale one elected in its place (unclean)
        _until("no unclean leader", lambda: cluster.admin().list_topics(topic, timeout=10).topics[topic]
               .partitions[0].leader == followers[0])
        _produce(cluster.direct_bootstrap, topic, [b"b%d" % i for i in range(80)], "1")  # at offsets 100-179

        def raised() -> str | None:
            try:
                read(True)
            except DataLossError as exc:
                return str(exc)
            return None
        message = _until("failOnDataLoss: no DataLossError for the truncated log", raised)
        assert "Offsets 100 to 149 were read from leader epoch" in message and "ends at offset 100" in message, message
        assert len(got[True]) == 150, "a record of the other history was delivered before the divergence was named"

        _until("the lenient reader did not read the new log", lambda: read(False) or len(got[False]) >= 230)
        lenient = readers[False]
        assert [(d.first_offset, d.last_offset, d.rule) for d in lenient.divergences] == [(100, 149,
                                                                                          "consumer.log_diverged")]
        assert lenient.metrics.as_dict()["offsets-diverged"] == 50
        after = got[False][150:]
        assert [(o, v) for o, v, _ in after] == [(100 + i, b"b%d" % i) for i in range(80)]  # the log as it is now
    finally:
        for r in locals().get("readers", {}).values():
            r.close()
        cluster.stop()
