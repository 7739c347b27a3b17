"""Shared fixtures: Kafka's own vectors (kept in tests/kafka) and the conformance corpus of other
clients (../shared/conformance, beside a developer's checkout only: tests that need it skip, naming
the missing file, where it is absent)."""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import settings

# CI must be repeatable: derandomised examples there; local runs keep exploring new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PYKBATCH_SHARED", ROOT.parent / "shared"))
# Bytes and verdicts produced by running Apache Kafka's code, kept with the tests (tests/kafka/README.md)
KAFKA_VECTORS = ROOT / "tests" / "kafka" / "kafka-vectors.json"
CONFORMANCE = SHARED / "conformance"


def absent(path: Path) -> str:
    """The skip reason for a file of ../shared that is not there."""
    return f"{path} not present (the shared reference folder is not beside this checkout)"


def shared_file(path: Path) -> Path:
    """``path`` (under ../shared), or a skip of the calling test naming it when it is absent."""
    if not path.exists():
        pytest.skip(absent(path))
    return path


def shared_params(path: Path, make):
    """pytest params from ``make()`` when ``path`` exists, else one param skipped naming it."""
    if not path.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=absent(path)))]
    return make()


@lru_cache(maxsize=None)
def load_json(path: Path):
    """The parsed file, or None when it is absent (../shared is not beside the checkout)."""
    if not path.exists():
        return None
    with open(path) as f:
        return json.load(f)


def kafka_vectors(predicate=lambda v: True):
    """pytest params over Kafka's own vectors."""
    return [pytest.param(v, id=v["name"]) for v in load_json(KAFKA_VECTORS) if predicate(v)]


def kafka_vector(name: str) -> dict:
    """The one vector of Kafka's called ``name``."""
    (v,) = [v for v in load_json(KAFKA_VECTORS) if v["name"] == name]
    return v


def conformance_vectors(predicate=lambda v: True):
    path = CONFORMANCE / "vectors.json"
    return shared_params(path, lambda: [pytest.param(v, id=v["id"]) for v in load_json(path)["vectors"]
                                        if predicate(v)])


def vector_bytes(v) -> bytes:
    if "hex" in v:
        return bytes.fromhex(v["hex"])
    return (CONFORMANCE / v["hex_file"]).read_bytes()


def arrow_matches_iteration(data: bytes) -> None:
    """to_arrow (copying and zero-copy) holds exactly the records iteration yields."""
    import pykbatch as kb
    want = [(r.offset, r.timestamp, r.key, r.value, [{"key": k, "value": v} for k, v in r.headers])
            for b in kb.iter_batches(data) for r in b]
    for zero_copy in (False, True):
        t = kb.to_arrow(data, zero_copy=zero_copy)
        t.validate(full=True)
        got = list(zip(*(t.column(c).to_pylist() for c in ("offset", "timestamp", "key", "value", "headers"))))
        assert [tuple(g) for g in got] == want


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """The test session's one real Kafka broker (tests/kafka_tools.Broker: 4.3.1 from Maven
    Central, KRaft, loopback ports), started on first use and stopped at the end; each test
    module creates topics of its own."""
    from tests import kafka_tools
    why = kafka_tools.unavailable()
    if why:
        pytest.skip(why)
    broker = kafka_tools.Broker(tmp_path_factory.mktemp("kafka-broker"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory):
    """Three KRaft brokers of the same Kafka (tests/kafka_cluster.py), each behind a fault proxy
    the tests drive; started for the module that asks for it (one does: tests/test_cluster_faults.py)
    and stopped after it, so three idle JVMs do not sit beside the rest of the suite."""
    from tests import kafka_cluster, kafka_tools
    why = kafka_tools.unavailable()
    if why:
        pytest.skip(why)
    pytest.importorskip("confluent_kafka", reason="the cluster's admin and checks are librdkafka's")
    cluster = kafka_cluster.KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"))
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=[2, 1], ids=["txn-v2", "txn-v1"])
def transaction_version(request, kafka_broker):
    """The session broker's finalized transaction.version for one test: 2 (KIP-890, Kafka 4.x's
    default) or 1 (an older cluster's protocol), set back to 2 after it."""
    from tests import kafka_tools
    kafka_tools.set_transaction_version(kafka_broker.bootstrap, request.param)
    try:
        yield request.param
    finally:
        kafka_tools.set_transaction_version(kafka_broker.bootstrap, 2)


@pytest.fixture(scope="session")
def secured_broker(kafka_broker):
    """The session broker with what its secured listeners' tests read (tests/test_live_security.py,
    test_live_produce_security.py): topic "secured" (three batches), and DENIED_TOPIC, whose ACL
    lets only User:admin use it."""
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType,
                                       ResourceType)
    from tests.kafka_tools import DENIED_TOPIC
    from tests.live_damage import create_topic, produce_batches
    create_topic(kafka_broker.bootstrap, "secured")
    create_topic(kafka_broker.bootstrap, DENIED_TOPIC)
    produce_batches(kafka_broker.bootstrap, "secured", 3)
    produce_batches(kafka_broker.bootstrap, DENIED_TOPIC, 1)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    acl = AclBinding(ResourceType.TOPIC, DENIED_TOPIC, ResourcePatternType.LITERAL, "User:admin", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
    for f in admin.create_acls([acl]).values():
        f.result(timeout=30)
    return kafka_broker


@pytest.fixture(scope="session")
def live_damaged(kafka_broker):
    """A topic of the session broker whose closed segments were damaged on disk while it was down
    (tests/live_damage.py: the plan, and what it leaves unreadable), for the live reader and the
    kafka-kbatch Spark source."""
    from tests import live_damage
    return live_damage.make_damaged_topic(kafka_broker)


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory):
    """The test session's one schema registry (tests/schema_registry.py: Apicurio Registry from
    Maven Central, in memory, Confluent-compatible API; basic auth required, HTTP and HTTPS)."""
    from tests import schema_registry as sr
    from tests import tls_certs
    why = sr.unavailable()
    if why:
        pytest.skip(why)
    where = tmp_path_factory.mktemp("schema-registry")
    registry = sr.Registry(where, tls_certs.make(where / "certs"))
    registry.start()
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def s3_server():
    """The test session's one S3-compatible endpoint on 127.0.0.1 (moto's server mode)."""
    from tests import s3_server as s3
    why = s3.unavailable()
    if why:
        pytest.skip(why)
    server = s3.S3Server()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spark():
    """The test session's one local Spark (2 cores), pykbatch registered; skipped without pyspark or Java."""
    import shutil
    import sys
    pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (JAVA_HOME or java on PATH)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from spark_udfs.session import quiet_session
    session = quiet_session("local[2]", "pykbatch-tests", **{
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "3"})  # several Arrow batches
    yield session
    session.stop()


@pytest.fixture(params=["python", "jvm"])
def spark_path(request, spark):
    """The test once with the Python functions and once with the JVM's (the C core called from
    Spark's JVM, spark_udfs.jvm); the session's default path is put back after it.  The JVM run
    skips, saying why, where pykbatch's jar cannot be had (no JDK); on CI it must run."""
    from spark_udfs.functions import register
    if request.param == "jvm":
        require_jvm_path(spark)
    register(spark, jvm=request.param == "jvm")
    yield request.param
    register(spark)


def require_jvm_path(spark) -> None:
    """Skips, saying why, where the session cannot have pykbatch's jar (no JDK); fails on CI."""
    from spark_udfs import jvm
    reason = jvm.unavailable_reason() or (None if jvm.loaded(spark) else "the jar is not on the session's classpath")
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the JVM path must run on CI: {reason}")
        pytest.skip(f"JVM path unavailable: {reason}")


@lru_cache(maxsize=None)
def wheel_builder():
    """.ci/build_wheels.py as a module (its ``interpreter(X.Y)`` finds a CPython on this machine)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_wheels", ROOT / ".ci" / "build_wheels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_WHEEL_BUILDS = pytest.StashKey()  # the session's tests/wheel_builds.WheelBuilds


def _wheel_tools_missing() -> str | None:
    import importlib.util
    for module in ("ziglang", "auditwheel"):
        if importlib.util.find_spec(module) is None:
            return f"needs {module} (the test extra) to build the manylinux wheel"
    return None


@pytest.hookimpl(trylast=True)  # after -k and -m deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    """The wheels the collected tests install start building now, in the background
    (tests/wheel_builds.py): the host's first, as tests/test_spark_shipping.py needs it first."""
    import platform
    import sys
    wanted = []
    this = "%d.%d" % sys.version_info[:2]
    for item in items:
        if "manylinux_wheel" in getattr(item, "fixturenames", ()):
            params = getattr(getattr(item, "callspec", None), "params", {})
            combo = (params.get("arch", platform.machine()), params.get("python", this))
            if combo not in wanted:
                wanted.append(combo)
    wanted.sort(key=lambda c: c != (platform.machine(), this))
    if wanted and _wheel_tools_missing() is None:
        from tests.wheel_builds import WheelBuilds
        config.stash[_WHEEL_BUILDS] = WheelBuilds([c for c in wanted if wheel_builder().interpreter(c[1])])


def pytest_unconfigure(config):
    builds = config.stash.get(_WHEEL_BUILDS, None)
    if builds is not None:
        builds.close()


@pytest.fixture(scope="session")
def manylinux_wheel(pytestconfig):
    """``wheel(arch, python=this one's X.Y)``: pykbatch's manylinux2014 wheel, built once per
    architecture and CPython by .ci/build_wheels.py (zig cc aimed at glibc 2.17; auditwheel checks
    the tag), in the background from the session's start; skips when that CPython is not on this
    machine."""
    import sys
    missing = _wheel_tools_missing()
    if missing:
        pytest.skip(missing)
    from tests.wheel_builds import WheelBuilds
    builds = pytestconfig.stash.get(_WHEEL_BUILDS, None)
    if builds is None:
        builds = pytestconfig.stash[_WHEEL_BUILDS] = WheelBuilds([])

    def wheel(arch: str, python: str = "%d.%d" % sys.version_info[:2]) -> Path:
        if wheel_builder().interpreter(python) is None:
            pytest.skip(f"CPython {python} is not on this machine")
        built, why = builds.get(arch, python)
        assert built is not None, why
        return built
    return wheel
