"""Three Apache Kafka brokers (the session broker's jars: tests/kafka_tools) in one KRaft quorum,
each node broker and controller, for the tests that hold pykbatch's live promises through faults
(tests/test_cluster_faults.py).  Topics are made with replication factor 3 and
``min.insync.replicas=2``; every client reaches every broker through a FaultProxy
(tests/fault_proxy.py) the tests own, so the network between a client and each broker can fail
while the brokers talk to each other directly.

Faults a test drives (``KafkaCluster``): ``kill``/``start`` (SIGKILL, then the same node started on
its logs), ``pause``/``resume`` (SIGSTOP/SIGCONT: a garbage collector's stop), ``proxy(node)``
(the network faults), ``elect_preferred`` (a preferred leader election), and ``leader``/
``controller`` to aim them.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.fault_proxy import FaultProxy
from tests.kafka_tools import QUICK_TIMINGS, classpath, free_port, java, wait_for_port

NODES = (1, 2, 3)
# how fast the cluster notices a lost broker: KRaft's broker session and the ISR's lag bound
SESSION_MS, REPLICA_LAG_MS = 4000, 4000


class Node:
    def __init__(self, directory: Path, node_id: int):
        self.id = node_id
        self.directory = directory
        self.data = directory / "data"
        self.port, self.controller_port = free_port(), free_port()  # brokers and controllers, direct
        self.client_port, self.proxy_port = free_port(), free_port()  # clients, through the proxy
        self.process: subprocess.Popen | None = None
        self.paused = False

    def controller_config(self, voters: str) -> Path:
        """A controller and nothing else (the cluster's quorum apart from its brokers)."""
        path = self.directory / "server.properties"
        path.write_text("\n".join([
            "process.roles=controller", f"node.id={self.id}", f"controller.quorum.voters={voters}",
            f"listeners=CONTROLLER://127.0.0.1:{self.controller_port}", "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT", f"log.dirs={self.data}",
            f"broker.session.timeout.ms={SESSION_MS}",
        ]) + "\n")
        return path

    def config(self, voters: str, roles: str = "broker,controller") -> Path:
        path = self.directory / "server.properties"
        controller = f",CONTROLLER://127.0.0.1:{self.controller_port}" if "controller" in roles else ""
        path.write_text("\n".join([
            f"process.roles={roles}",
            f"node.id={self.id}",
            f"controller.quorum.voters={voters}",
            f"listeners=INTERNAL://127.0.0.1:{self.port}{controller},CLIENT://127.0.0.1:{self.client_port}",
            f"advertised.listeners=INTERNAL://127.0.0.1:{self.port},CLIENT://127.0.0.1:{self.proxy_port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=INTERNAL",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,CLIENT:PLAINTEXT",
            f"log.dirs={self.data}",
            "num.partitions=1",
            "default.replication.factor=3",
            "min.insync.replicas=2",
            "unclean.leader.election.enable=false",
            "offsets.topic.replication.factor=3",
            "offsets.topic.num.partitions=3",
            "transaction.state.log.replication.factor=3",
            "transaction.state.log.min.isr=2",
            "transaction.state.log.num.partitions=3",
            "share.coordinator.state.topic.replication.factor=3",
            "share.coordinator.state.topic.min.isr=2",
            "share.coordinator.state.topic.num.partitions=1",
            *QUICK_TIMINGS,
            f"broker.session.timeout.ms={SESSION_MS}",
            "broker.heartbeat.interval.ms=500",
            f"replica.lag.time.max.ms={REPLICA_LAG_MS}",
            "controller.quorum.election.timeout.ms=1000",
            "controller.quorum.fetch.timeout.ms=2000",
            "leader.imbalance.check.interval.seconds=5",
            "log.retention.check.interval.ms=1000",
        ]) + "\n")
        return path


def _launch(n: Node) -> None:
    """``n``'s JVM started on its server.properties, its output in broker.log."""
    with open(n.directory / "broker.log", "a") as log:
        n.process = subprocess.Popen(["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                      "-cp", classpath(), "kafka.Kafka", str(n.directory / "server.properties")],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


class KafkaCluster:
    """Three KRaft nodes on 127.0.0.1; ``bootstrap`` reaches them through the proxies."""

    def __init__(self, directory: Path, separate_controller: bool = False):
        """``separate_controller``: one controller-only node (id 9) holds the quorum and the three
        nodes are brokers only, so two brokers can be down at once (an unclean election needs it);
        by default each node is broker and controller."""
        self.directory = directory
        self.nodes = {i: Node(directory / f"node-{i}", i) for i in NODES}
        self.quorum = Node(directory / "controller", 9) if separate_controller else None
        for n in [*self.nodes.values(), *([self.quorum] if self.quorum else [])]:
            n.directory.mkdir(parents=True, exist_ok=True)
        voters = [self.quorum] if self.quorum else self.nodes.values()
        self.voters = ",".join(f"{n.id}@127.0.0.1:{n.controller_port}" for n in voters)
        self.proxies = {i: FaultProxy(n.proxy_port, n.client_port) for i, n in self.nodes.items()}
        self.bootstrap = ",".join(f"127.0.0.1:{n.proxy_port}" for n in self.nodes.values())
        self.direct_bootstrap = ",".join(f"127.0.0.1:{n.client_port}" for n in self.nodes.values())
        self._admin = None

    # -- life ------------------------------------------------------------------------------------

    def start_all(self, timeout: float = 180) -> None:
        cluster_id = None
        roles = "broker" if self.quorum else "broker,controller"
        configs = [(n, n.config(self.voters, roles)) for n in self.nodes.values()]
        if self.quorum:
            configs.insert(0, (self.quorum, self.quorum.controller_config(self.voters)))
        for n, config in configs:
            if not (n.data / "meta.properties").exists():
                if cluster_id is None:
                    cluster_id = java("kafka.tools.StorageTool", "random-uuid").stdout.strip().splitlines()[-1]
                fmt = java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config))
                if fmt.returncode != 0:
                    raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")
        if self.quorum:
            _launch(self.quorum)
            if not wait_for_port(self.quorum.process, self.quorum.controller_port, timeout):
                raise RuntimeError("the controller did not open its port:\n"
                                   + (self.quorum.directory / "broker.log").read_text()[-4000:])
        for i in NODES:
            self.start(i, wait=False)
        for i in NODES:
            self._wait_port(i, timeout)
        self.wait_healthy(timeout)

    def start(self, node_id: int, wait: bool = True, timeout: float = 120) -> None:
        n = self.nodes[node_id]
        assert n.process is None, f"node {node_id} runs already"
        _launch(n)
        if wait:
            self._wait_port(node_id, timeout)

    def _wait_port(self, node_id: int, timeout: float) -> None:
        n = self.nodes[node_id]
        if not wait_for_port(n.process, n.client_port, timeout):
            tail = (n.directory / "broker.log").read_text()[-4000:]
            raise RuntimeError(f"node {node_id} did not open its port:\n{tail}")

    def kill(self, node_id: int) -> None:
        """SIGKILL: no clean shutdown, its logs as a crash leaves them."""
        n = self.nodes[node_id]
        if n.process is None:
            return
        if n.paused:
            self.resume(node_id)
        os.killpg(n.process.pid, signal.SIGKILL)
        n.process.wait()
        n.process = None

    def pause(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if n.process is not None and not n.paused:
            os.killpg(n.process.pid, signal.SIGSTOP)
            n.paused = True

    def resume(self, node_id: int) -> None:
        n = self.nodes[node_id]
        if n.process is not None and n.paused:
            os.killpg(n.process.pid, signal.SIGCONT)
            n.paused = False

    def heal(self) -> None:
        """Every fault ended: proxies pass, paused nodes run, killed nodes start again."""
        for i, n in self.nodes.items():
            self.proxies[i].heal()
            self.resume(i)
            if n.process is None:
                self.start(i)

    def stop(self) -> None:
        self._admin = None
        for i, n in self.nodes.items():
            self.resume(i)
            if n.process is not None:
                n.process.terminate()
        for n in self.nodes.values():
            if n.process is not None:
                try:
                    n.process.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(n.process.pid, signal.SIGKILL)
                    n.process.wait()
                n.process = None
        for p in self.proxies.values():
            p.close()
        if self.quorum is not None and self.quorum.process is not None:
            self.quorum.process.terminate()
            try:
                self.quorum.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.quorum.process.pid, signal.SIGKILL)
                self.quorum.process.wait()
            self.quorum.process = None

    def proxy(self, node_id: int) -> FaultProxy:
        return self.proxies[node_id]

    # -- what the cluster says (asked directly, past the proxies) ---------------------------------

    def admin(self):
        """librdkafka's admin client, past the proxies (one, kept: its futures die with it)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.direct_bootstrap, "socket.timeout.ms": 5000,
                                       "topic.metadata.refresh.interval.ms": 1000, "log_level": 0})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1, **config: str) -> None:
        from confluent_kafka.admin import NewTopic
        config = {"min.insync.replicas": "2", **config}
        futures = self.admin().create_topics([NewTopic(name, partitions, 3, config=config)], request_timeout=30)
        for f in futures.values():
            f.result(timeout=60)
        self.wait_topic(name, partitions)

    def wait_topic(self, name: str, partitions: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            md = self.admin().list_topics(name, timeout=10)
            t = md.topics.get(name)
            if t is not None and not t.error and len(t.partitions) == partitions \
                    and all(p.leader >= 0 and len(p.isrs) == 3 for p in t.partitions.values()):
                return
            assert time.monotonic() < deadline, f"topic {name} never had a leader and a full ISR"
            time.sleep(0.3)

    def leader(self, topic: str, partition: int = 0, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while True:
            md = self.admin().list_topics(topic, timeout=10)
            t = md.topics.get(topic)
            if t is not None and partition in t.partitions and t.partitions[partition].leader >= 0:
                return t.partitions[partition].leader
            assert time.monotonic() < deadline, f"{topic}-{partition} has no leader"
            time.sleep(0.2)

    def coordinator(self, key: str, kind: str = "transaction") -> int:
        """The node coordinating a transactional id or a group (FindCoordinator, past the proxies)."""
        from pykbatch.live.cluster import Cluster
        with Cluster({"bootstrap.servers": self.direct_bootstrap}, timeout_ms=10_000) as c:
            return c.coordinator(key, kind)

    def controller(self) -> int:
        return self.admin().list_topics(timeout=10).controller_id

    def wait_healthy(self, timeout: float = 120, topics: tuple[str, ...] = ()) -> None:
        """Every node up and registered, and every partition of ``topics`` with its full ISR."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                md = self.admin().list_topics(timeout=10)
                if len(md.brokers) == len(NODES) and all(
                        len(p.isrs) == 3 for t in topics for p in md.topics[t].partitions.values()):
                    return
            except Exception:  # a node still starting: asked again
                pass
            assert time.monotonic() < deadline, "the cluster did not become healthy"
            time.sleep(0.5)

    def elect_preferred(self, topic: str, partitions: list[int]) -> None:
        from confluent_kafka import ElectionType, TopicPartition
        f = self.admin().elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in partitions])
        try:
            f.result(timeout=30)
        except Exception:  # already the preferred leader, or none in sync: the schedule goes on
            pass
