"""The producer over the session broker's secured listeners: SASL_SSL (PLAIN, SCRAM) and TLS
with a client certificate, certificates made at test time.  Right credentials produce (read back
by librdkafka); wrong ones, an untrusted CA and an unauthorized topic fail at once, naming what
failed, with nothing sent and no secret in the message."""
from __future__ import annotations

import time

import pytest

from pykbatch.live import AuthenticationError, AuthorizationError, Producer
from tests import kafka_tools
from tests.kafka_tools import DENIED_TOPIC, PLAIN_PASSWORD, PLAIN_USER, SCRAM_PASSWORD, SCRAM_USER
from tests.live_damage import create_topic
from tests.test_live_produce import consume_all
from tests.test_live_security import sasl

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
pytest.importorskip("confluent_kafka")


@pytest.fixture
def broker(secured_broker):
    return secured_broker


@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", PLAIN_USER, PLAIN_PASSWORD),
                                                     ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
                                                     ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)])
def test_produces_over_sasl_ssl(broker, mechanism, user, password):
    topic = f"secured-produce-{mechanism.lower()}"
    create_topic(broker.bootstrap, topic)
    with Producer(sasl(broker, mechanism, user, password)) as producer:
        report = producer.produce([{"key": b"k%d" % i, "value": b"secret-%d" % i} for i in range(100)], topic=topic)
    assert report.counts["delivered"] == 100
    assert [v for *_, v, _, _ in consume_all(broker.bootstrap, topic, 100)] == [b"secret-%d" % i for i in range(100)]


def test_a_producer_outlives_its_sasl_sessions(broker, caplog, monkeypatch):
    """KIP-368: the listener ends SCRAM-SHA-512 sessions every REAUTH_MS.  A producer sending
    16 KiB batches for over two lifetimes -- its answers read off the socket by pykbatch while
    only its own Produce requests are in flight (Cluster.pump) -- lets the connection layer
    re-authenticate on the same connection: every record lands once, no request fails, no
    reconnection."""
    import logging

    import pyarrow as pa
    monkeypatch.setenv("PYKBATCH_LOG_WIRE", "1")  # the connection layer's DEBUG lines say who authenticated
    caplog.set_level(logging.DEBUG, logger="kafka.net.connection")
    topic = "secured-produce-reauth"
    create_topic(broker.bootstrap, topic, partitions=3)
    props = sasl(broker, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD, **{"batch.size": 16384, "linger.ms": 5})
    sent = 0
    with Producer(props) as producer:
        until = time.monotonic() + 2.5 * kafka_tools.REAUTH_MS / 1000
        while time.monotonic() < until:
            rows = pa.table({"key": [b"%08d" % (sent + i) for i in range(5000)], "value": [b"v" * 100] * 5000})
            assert producer.produce_arrow(rows, topic=topic).counts["delivered"] == 5000
            sent += 5000
            time.sleep(0.2)
        metrics = producer.metrics_dict()
    assert metrics["network-errors"] == 0 and metrics["total-retries"] == 0, metrics
    auths = [line for line in caplog.text.splitlines()  # as written when logged: the connection's state then
             if "Authenticated as bob via SASL / SCRAM-SHA-512" in line and "node_id=1 " in line]
    assert sum("(connected)" in a for a in auths) >= 2, auths  # re-authentications on the live connection
    assert len({a.split("<-")[1].split("]")[0] for a in auths}) == 1, auths  # one client port: never reconnected
    assert len(consume_all(broker.bootstrap, topic, sent)) == sent


def test_produces_with_a_client_certificate(broker):
    topic = "secured-produce-mtls"
    create_topic(broker.bootstrap, topic)
    props = {"bootstrap.servers": broker.mtls_bootstrap, "security.protocol": "SSL",
             "ssl.ca.location": str(broker.certs.ca), "ssl.certificate.location": str(broker.certs.client_cert),
             "ssl.key.location": str(broker.certs.client_key)}
    with Producer(props) as producer:
        assert producer.produce([{"value": b"over mtls"}], topic=topic).counts["delivered"] == 1


def test_wrong_password_fails_fast_and_names_the_user(broker):
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        Producer(sasl(broker, password="not-the-password"))
    assert time.monotonic() - started < 10
    text = str(caught.value)
    assert "SASL PLAIN" in text and PLAIN_USER in text and "not-the-password" not in text


def test_untrusted_ca_fails_fast(broker):
    with pytest.raises(AuthenticationError, match="does not verify"):
        Producer({**sasl(broker), "ssl.ca.location": str(broker.certs.untrusted_ca)})


def test_unauthorized_topic_refused_before_anything_is_sent(broker):
    for preflight in (True, False):
        with Producer({**sasl(broker), "preflight": preflight}) as producer:
            with pytest.raises(AuthorizationError, match=DENIED_TOPIC):
                producer.produce([{"value": b"nope"}], topic=DENIED_TOPIC)
            assert producer.metrics["produce-requests"] == 0


def test_produces_over_oauthbearer(broker):
    from tests.test_live_security import unsecured_token
    topic = "secured-produce-oauth"
    create_topic(broker.bootstrap, topic)
    props = {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_SSL",
             "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.provider": unsecured_token("carol"),
             "ssl.ca.location": str(broker.certs.ca)}
    with Producer(props) as producer:
        assert producer.produce([{"value": b"with a token"}], topic=topic).counts["delivered"] == 1
    with pytest.raises(AuthenticationError, match="OAUTHBEARER"):
        Producer({**props, "sasl.oauthbearer.token.provider": unsecured_token("carol", lifetime_s=-60)})


def test_the_copy_command_over_sasl_ssl_with_sessions_that_end(broker, tmp_path):
    """``pykbatch copy --follow`` through the SCRAM-SHA-512 listener, whose sessions end every
    REAUTH_MS, with its properties in a --command-config file, as an operator runs it against a
    secured cluster: records arriving over longer than a session are copied once each (the offset map
    and the group written over the same listener), SIGTERM ends it cleanly, and the password
    reaches neither its output nor its report.  A wrong password ends it at once with exit 2
    naming the user."""
    import json
    import signal
    import subprocess
    import sys

    from pykbatch.live import Producer
    source, dest = "secured-copy-a", "secured-copy-b"
    create_topic(broker.bootstrap, source, partitions=2)
    config = tmp_path / "client.properties"

    def write_config(password):
        config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                          f'username="{SCRAM_USER}" password="{password}";\n'
                          f"ssl.truststore.type=PEM\nssl.truststore.location={broker.certs.ca}\n")

    def copy(*extra):
        return [sys.executable, "-c", "import sys; from pykbatch.commands import main; sys.exit(main())", "copy",
                "--bootstrap-server", broker.sasl_bootstrap, "--from-topic", source, "--to-topic", dest,
                "--command-config", str(config), "--commit-interval-ms", "300", *extra]
    write_config(SCRAM_PASSWORD)
    follower = subprocess.Popen(copy("--follow", "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
            for round_ in range(3):  # over REAUTH_MS: the copy's connections re-authenticate meanwhile
                producer.produce([{"key": b"k%d" % i, "value": b"v%d-%d" % (round_, i), "partition": i % 2}
                                  for i in range(200)], topic=source)
                time.sleep(kafka_tools.REAUTH_MS / 2000)
        got = consume_all(broker.bootstrap, dest, 600, read_committed=True)
    finally:
        follower.send_signal(signal.SIGTERM)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err[-3000:]
    report = json.loads(out)
    assert report["ok"] and sum(p["copied"] for p in report["partitions"]) == 600
    assert SCRAM_PASSWORD not in out + err
    want = consume_all(broker.bootstrap, source, 600)
    assert [(p, k, v) for p, _, k, v, _, _ in got] == [(p, k, v) for p, _, k, v, _, _ in want]
    write_config("not-" + SCRAM_PASSWORD)
    started = time.monotonic()
    refused = subprocess.run(copy("--name", "secured-copy-wrong"), capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and time.monotonic() - started < 30, refused.stderr[-2000:]
    assert SCRAM_USER in refused.stderr and "Traceback" not in refused.stderr
    assert "not-" + SCRAM_PASSWORD not in refused.stdout + refused.stderr
