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
