"""Apache Kafka's broker and kafka-dump-log, from Maven Central (tests/kafka_harness/tools), for
the tests that compare pykbatch's dump with Kafka's on segments a real broker wrote.

``dump(files, *flags)`` runs org.apache.kafka.tools.DumpLogSegments; ``Broker`` is a single-node
KRaft broker (broker + controller) on loopback ports in a temporary directory.  The test session
runs one (the ``kafka_broker`` fixture in tests/conftest.py), shared by every test that needs one.
"""
from __future__ import annotations

import functools
import os
import socket
import subprocess
import time
from pathlib import Path

from tests.kafka_broker import unavailable  # noqa: F401  (same requirements: Java 17 and Maven)

TOOLS = Path(__file__).parent / "kafka_harness" / "tools"


@functools.cache
def classpath() -> str:
    out = TOOLS / "target" / "classpath.txt"
    proc = subprocess.run(["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={out}"],
                          cwd=TOOLS, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"resolving tests/kafka_harness/tools failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return out.read_text().strip()


@functools.cache
def spark_jars(connector: str) -> str:
    """One of Spark's own connectors (tests/kafka_harness/<connector>: spark-kafka, spark-avro;
    from Maven Central) as a ``spark.jars`` value: the jars pyspark does not ship already."""
    import re

    import pyspark
    where = TOOLS.parent / connector
    out = where / "target" / "classpath.txt"
    proc = subprocess.run(["mvn", "-q", "-B", "dependency:build-classpath", f"-Dmdep.outputFile={out}",
                           "-Dmdep.includeScope=runtime"], cwd=where, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"resolving {where} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")

    def artifact(jar: str) -> str:
        return re.sub(r"-\d[\w.\-]*\.jar$", "", os.path.basename(jar))
    shipped = {artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return ",".join(j for j in out.read_text().strip().split(":") if artifact(j) not in shipped)


def spark_kafka_jars() -> str:
    """Spark's own Kafka source (spark-sql-kafka-0-10)."""
    return spark_jars("spark-kafka")


def java(main: str, *args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-Xmx512m", "-cp", classpath(), main, *args], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def dump(files: list[str], *flags: str) -> tuple[str, str]:
    """Kafka's kafka-dump-log on ``files`` (one JVM): stdout, and stderr without SLF4J's notes."""
    proc = java("org.apache.kafka.tools.DumpLogSegments", "--files", ",".join(files), *flags)
    err = "".join(line for line in proc.stderr.splitlines(keepends=True) if not line.startswith("SLF4J"))
    return proc.stdout, err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(process: subprocess.Popen, port: int, timeout: float) -> bool:
    """Whether ``process`` opened ``port`` on 127.0.0.1 within ``timeout`` s (False: it exited, or time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.3)
    return False


# The secured listeners' principals (made at format time / in the JAAS lines below)
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"
REAUTH_MS = 4000  # SCRAM-SHA-512's session lifetime on the SASL_SSL listener
DENIED_TOPIC = "secured-denied"  # readable by admin only: alice and bob are not authorized


# what the test brokers (this one and tests/kafka_cluster.py's) do sooner than Kafka's defaults
QUICK_TIMINGS = (
    "group.initial.rebalance.delay.ms=0",
    # KIP-848 groups notice a killed member within seconds, not the default 45
    "group.consumer.min.session.timeout.ms=6000",
    "group.consumer.session.timeout.ms=8000",
    "group.consumer.min.heartbeat.interval.ms=500",
    "group.consumer.heartbeat.interval.ms=1000",
    # a transaction past transaction.timeout.ms is aborted within a second, not ten
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
)


class Broker:
    """A single-node KRaft Kafka (4.3.1) on 127.0.0.1, its data in ``directory``/data.

    Besides PLAINTEXT (``bootstrap``) it listens on ``sasl_bootstrap`` (SASL_SSL: PLAIN for
    alice, SCRAM-SHA-256/512 for bob, OAUTHBEARER with unsecured tokens) and ``mtls_bootstrap`` (SSL, client certificate required),
    with certificates made when it is created (``certs``, tests/tls_certs.py).  The
    StandardAuthorizer is on: PLAINTEXT's principal (ANONYMOUS) is a super user, everyone may use
    a topic without ACLs, and ``DENIED_TOPIC``'s ACL lets only User:admin read it."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.data = directory / "data"
        # Tiered storage (KIP-405) is on for the broker; topics opt in with remote.storage.enable.
        # The remote store is Kafka's own LocalTieredStorage, which writes under <dir>/kafka-tiered-storage.
        self.remote = directory / "remote" / "kafka-tiered-storage"
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.sasl_port, self.mtls_port = free_port(), free_port()
        self.sasl_bootstrap = f"127.0.0.1:{self.sasl_port}"
        self.mtls_bootstrap = f"127.0.0.1:{self.mtls_port}"
        # PROXIED: a plaintext listener that advertises proxy_port, where a test's TCP proxy
        # (tests/tcp_proxy.py) stands between clients and proxied_port to inject faults
        self.proxied_port, self.proxy_port = free_port(), free_port()
        self.proxy_bootstrap = f"127.0.0.1:{self.proxy_port}"
        from tests import tls_certs
        self.certs = tls_certs.make(directory / "certs")
        self.process = None

    def config(self) -> Path:
        path = self.directory / "server.properties"
        path.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port},"
            f"SASL_SSL://127.0.0.1:{self.sasl_port},MTLS://127.0.0.1:{self.mtls_port},"
            f"PROXIED://127.0.0.1:{self.proxied_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port},SASL_SSL://127.0.0.1:{self.sasl_port},"
            f"MTLS://127.0.0.1:{self.mtls_port},PROXIED://127.0.0.1:{self.proxy_port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL,"
            "PROXIED:PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            # OAUTHBEARER with Kafka's unsecured JWS tokens (alg none): the broker checks sub, iat, exp
            "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
            "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required user_{PLAIN_USER}="{PLAIN_PASSWORD}";',
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={self.certs.broker}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={self.certs.ca}",
            "listener.name.mtls.ssl.client.auth=required",
            # SCRAM-SHA-512 sessions expire every few seconds (KIP-368): clients must re-authenticate
            # on a live connection (tests/test_live_produce_security.py)
            f"listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms={REAUTH_MS}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS;User:admin",
            "allow.everyone.if.no.acl.found=true",
            f"log.dirs={self.data}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "share.coordinator.state.topic.num.partitions=1",
            *QUICK_TIMINGS,
            "log.cleaner.backoff.ms=200",
            "log.retention.check.interval.ms=1000",
            "remote.log.storage.system.enable=true",
            "remote.log.storage.manager.class.name=org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
            f"rsm.config.dir={self.remote.parent}",
            "rsm.config.delete.on.close=false",
            "remote.log.metadata.manager.listener.name=PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor=1",
            "rlmm.config.remote.log.metadata.topic.num.partitions=1",
            "remote.log.manager.task.interval.ms=500",
        ]) + "\n")
        return path

    def start(self, timeout: float = 90) -> None:
        """Starts the broker (formatting its storage the first time); again after ``stop`` it
        reopens the same logs on the same ports."""
        config = self.config()
        if not (self.data / "meta.properties").exists():
            cluster = java("kafka.tools.StorageTool", "random-uuid").stdout.strip().splitlines()[-1]
            fmt = java("kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config),
                       *[arg for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                         for arg in ("--add-scram", f"{mech}=[name={SCRAM_USER},password={SCRAM_PASSWORD}]")])
            if fmt.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed:\n{fmt.stdout}\n{fmt.stderr}")
        log = open(self.directory / "broker.log", "a")
        self.process = subprocess.Popen(["java", "-Xmx512m", "-cp", classpath(), "kafka.Kafka", str(config)],
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_for_port(self.process, self.port, timeout):
            if self.process.poll() is not None:
                raise RuntimeError(f"the broker exited:\n{(self.directory / 'broker.log').read_text()[-4000:]}")
            self.stop()
            raise RuntimeError("the broker did not open its port in time")

    def stop(self, timeout: float = 60) -> None:
        """A clean shutdown (SIGTERM): segments closed, indexes trimmed, snapshots written."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()
        self.process = None

    def snapshot(self, into: Path, topics) -> Path:
        """A copy of the data of ``topics`` (names or prefixes ending in ``*``) and of the broker's
        own files as a clean shutdown leaves them (segments closed, indexes trimmed, snapshots
        written): the broker stops, its data is copied, and it starts again."""
        import fnmatch
        import shutil
        self.stop()
        try:
            for part in self.data.iterdir():
                topic = part.name.rsplit("-", 1)[0]
                if part.is_dir() and not any(fnmatch.fnmatch(topic, t) for t in topics):
                    continue
                (shutil.copytree if part.is_dir() else shutil.copy2)(part, into / part.name)
        finally:
            self.start()
        return into

    def files(self, *suffixes: str) -> list[str]:
        return sorted(str(p) for p in self.data.rglob("*") if p.suffix in suffixes and p.is_file())


def s3a_jars_or_skip(why_s3fs: str) -> str:
    """hadoop-aws (Spark's s3a://) as ``spark.jars``, or the test skipped with the reason: s3fs (the
    Python side's way to the same bucket) missing, or Maven Central unreachable."""
    import pytest
    pytest.importorskip("s3fs", reason=why_s3fs)
    try:
        return spark_jars("hadoop-aws")
    except RuntimeError as exc:
        pytest.skip(f"hadoop-aws could not be fetched from Maven Central: {exc}")


def set_transaction_version(bootstrap: str, level: int, timeout: float = 30) -> None:
    """The cluster's finalized ``transaction.version`` set to ``level`` (UpdateFeatures: 2 is
    KIP-890's transactions v2, the default of Kafka 4.x; 1 an older cluster's protocol), waited
    for until the broker's ApiVersions shows it."""
    from kafka.protocol.admin import UpdateFeaturesRequest

    from pykbatch.live import protocol
    from pykbatch.live.cluster import Cluster
    key = UpdateFeaturesRequest.FeatureUpdateKey
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        node = cluster.any_node()
        r = cluster.request(node, UpdateFeaturesRequest(
            timeout_ms=30000, validate_only=False, min_version=1, max_version=1,
            feature_updates=[key(feature=protocol.TXN_V2_FEATURE, max_version_level=level, upgrade_type=1 if level >= 2 else 2)]))
        codes = [r.error_code] + [f.error_code for f in r.results]
        assert not any(codes), r
        deadline = time.monotonic() + timeout
        while protocol.transaction_version(cluster.request(node, protocol.api_versions())) != level:
            assert time.monotonic() < deadline, f"transaction.version never became {level}"
            time.sleep(0.2)


def open_transactions(bootstrap: str, prefix: str) -> list[tuple[str, str]]:
    """(transactional id, state) of every transaction whose id starts with ``prefix`` that the
    cluster still holds open (ListTransactions: not CompleteCommit / CompleteAbort / Empty / Dead)."""
    from kafka.protocol.admin import ListTransactionsRequest

    from pykbatch.live.cluster import Cluster
    ended = {"CompleteCommit", "CompleteAbort", "Empty", "Dead"}
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        r = cluster.request(cluster.any_node(), ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                                        min_version=0, max_version=0))
        assert not r.error_code, r
        return sorted((t.transactional_id, t.transaction_state) for t in r.transaction_states
                      if t.transactional_id.startswith(prefix) and t.transaction_state not in ended)


def describe_transaction(bootstrap: str, transactional_id: str) -> dict:
    """DescribeTransactions of one transactional id, asked of its coordinator: its state, producer
    id and epoch, and the partitions its open transaction holds."""
    from kafka.protocol.admin import DescribeTransactionsRequest

    from pykbatch.live.cluster import Cluster
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        node = cluster.coordinator(transactional_id, "transaction")
        r = cluster.request(node, DescribeTransactionsRequest(transactional_ids=[transactional_id],
                                                              min_version=0, max_version=0))
        (t,) = r.transaction_states
        assert not t.error_code, t
        return {"state": t.transaction_state, "producer_id": t.producer_id, "epoch": t.producer_epoch,
                "partitions": sorted((x.topic, p) for x in t.topics for p in x.partitions)}
