"""The live reader over the session broker's secured listeners (tests/kafka_tools.Broker):
SASL_SSL with PLAIN and SCRAM-SHA-256/512, TLS with a client certificate, certificates made at
test time.  Right credentials read; wrong ones, an untrusted certificate and an unauthorized topic
fail at once with a message naming what failed, and no secret reaches a log or a message."""
from __future__ import annotations

import logging
import time

import pytest

from pykbatch.live import AuthenticationError, AuthorizationError, Reader
from tests import kafka_tools
from tests.kafka_tools import DENIED_TOPIC, PLAIN_PASSWORD, PLAIN_USER, SCRAM_PASSWORD, SCRAM_USER
from tests.live_damage import BATCH

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))
TOPIC = "secured"


@pytest.fixture
def broker(secured_broker):
    """The session broker with the secured listeners' topics and ACL (tests/conftest.py)."""
    return secured_broker


def sasl(broker, mechanism="PLAIN", user=PLAIN_USER, password=PLAIN_PASSWORD, **extra):
    return {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(broker.certs.ca),
            "request.timeout.ms": 10_000, **extra}


def read(props, topic=TOPIC):
    with Reader(props, subscribe=topic, starting_offsets="earliest", ending_offsets="latest") as reader:
        return reader.read().column("offset").to_pylist()


def test_sasl_plain_over_tls(broker):
    assert read(sasl(broker)) == list(range(3 * BATCH))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_spark_style_options(broker, mechanism):
    """Spark's Kafka source passes the Java client's properties with a kafka. prefix."""
    props = {"kafka.bootstrap.servers": broker.sasl_bootstrap, "kafka.security.protocol": "SASL_SSL",
             "kafka.sasl.mechanism": mechanism,
             "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                       f'username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";',
             "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(broker.certs.ca)}
    assert read(props) == list(range(3 * BATCH))


def test_tls_with_a_client_certificate(broker):
    props = {"bootstrap.servers": broker.mtls_bootstrap, "security.protocol": "SSL",
             "ssl.ca.location": str(broker.certs.ca), "ssl.certificate.location": str(broker.certs.client_cert),
             "ssl.key.location": str(broker.certs.client_key)}
    assert read(props) == list(range(3 * BATCH))


def fails_fast(props, error, *words, within=8.0, topic=TOPIC):
    start = time.monotonic()
    with pytest.raises(error) as err:
        read(props, topic)
    assert time.monotonic() - start < within, "no retry loop"
    for w in words:
        assert w in str(err.value)
    return str(err.value)


def test_a_wrong_password_fails_at_once_naming_the_user_not_the_password(broker, caplog):
    caplog.set_level(logging.DEBUG)
    message = fails_fast(sasl(broker, password="not-" + PLAIN_PASSWORD), AuthenticationError,
                         "SASL PLAIN", f"'{PLAIN_USER}'")
    assert PLAIN_PASSWORD not in message and PLAIN_PASSWORD not in caplog.text
    fails_fast(sasl(broker, "SCRAM-SHA-512", SCRAM_USER, "wrong"), AuthenticationError, "SCRAM-SHA-512", "bob")


def test_an_untrusted_broker_certificate_fails_at_once(broker):
    fails_fast(sasl(broker, **{"ssl.ca.location": str(broker.certs.untrusted_ca)}), AuthenticationError,
               "TLS", "certificate")


def test_a_client_certificate_the_broker_does_not_trust_is_refused(broker):
    props = {"bootstrap.servers": broker.mtls_bootstrap, "security.protocol": "SSL",
             "ssl.ca.location": str(broker.certs.ca), "ssl.certificate.location": str(broker.certs.untrusted_client_cert),
             "ssl.key.location": str(broker.certs.untrusted_client_key), "request.timeout.ms": 5000}
    fails_fast(props, AuthenticationError, "refused the TLS session", "client certificate")


def test_an_unauthorized_topic_is_named(broker):
    fails_fast(sasl(broker), AuthorizationError, DENIED_TOPIC, "TOPIC_AUTHORIZATION_FAILED", topic=DENIED_TOPIC)


def test_no_record_bytes_or_secrets_in_the_logs(broker, caplog):
    caplog.set_level(logging.DEBUG)
    read(sasl(broker))
    assert PLAIN_PASSWORD not in caplog.text
    assert b"record 00000".decode() not in caplog.text  # the values' text (tests/live_damage.value_of)


def unsecured_token(subject: str, lifetime_s: int = 300):
    """An OAUTHBEARER token provider (kafka-python's AbstractTokenProvider) handing out Kafka's
    unsecured JWS tokens (alg none), which the broker's default validator accepts."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class UnsecuredToken(AbstractTokenProvider):
        def token(self) -> str:
            import base64
            import json

            def part(obj):
                return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
            now = int(time.time())
            return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + lifetime_s})}."
    return UnsecuredToken()


def test_oauthbearer_with_a_token_provider(broker):
    props = {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": "SASL_SSL",
             "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.provider": unsecured_token("carol"),
             "ssl.ca.location": str(broker.certs.ca)}
    assert read(props) == list(range(3 * BATCH))
    expired = dict(props, **{"sasl.oauthbearer.token.provider": unsecured_token("carol", lifetime_s=-60)})
    fails_fast(expired, AuthenticationError, "OAUTHBEARER")
    from pykbatch.live import SettingsError
    with pytest.raises(SettingsError, match="AbstractTokenProvider"):
        read(dict(props, **{"sasl.oauthbearer.token.provider": "a-token-string"}))


def test_wire_logs_asked_for_still_carry_no_secret(broker, caplog, monkeypatch):
    """PYKBATCH_LOG_WIRE=1 shows kafka-python's request bodies, yet the SASL exchange's bytes and
    the password are replaced in every log line, at every level (they were there in clear:
    ``SaslAuthenticateRequest(auth_bytes=b'alice\\x00alice\\x00<password>')``)."""
    monkeypatch.setenv("PYKBATCH_LOG_WIRE", "1")
    caplog.set_level(logging.DEBUG)
    for mechanism, user, password in (("PLAIN", PLAIN_USER, PLAIN_PASSWORD), ("SCRAM-SHA-512", SCRAM_USER,
                                                                              SCRAM_PASSWORD)):
        caplog.clear()
        assert read(sasl(broker, mechanism, user, password)) == list(range(3 * BATCH))
        assert "Request" in caplog.text  # the wire logs are on
        assert password not in caplog.text
        assert "auth_bytes=b" not in caplog.text


def test_a_plaintext_client_at_a_tls_port_is_told_at_once(broker, capsys):
    """Speaking PLAINTEXT to the SASL_SSL listener: the broker's first TLS record read as a length
    (352518912 = 0x15030300); failing within seconds and naming security.protocol, not after 30 s
    of retries with "Invalid frame length" -- for the Reader, the Producer and the command line."""
    from pykbatch.commands import main
    from pykbatch.live import Producer, SettingsError
    props = {"bootstrap.servers": broker.sasl_bootstrap}
    message = fails_fast(props, SettingsError, "speaks TLS", "security.protocol")
    assert "frame length" not in message
    start = time.monotonic()
    with pytest.raises(SettingsError, match="speaks TLS"):
        Producer(props)
    assert time.monotonic() - start < 8.0
    start = time.monotonic()
    assert main(["consume", "--bootstrap-server", broker.sasl_bootstrap, "--topic", TOPIC]) == 2
    assert "speaks TLS" in capsys.readouterr().err and time.monotonic() - start < 8.0


def test_a_wrong_password_reads_the_same_from_python_and_the_command_line(broker, capsys):
    """The Reader, the Producer and `pykbatch consume` say the same thing of a refused login:
    the mechanism, the user and the broker's own words (the command line said "closed the
    connection during authentication 3 times" where the classes said "Invalid username or
    password")."""
    from pykbatch.commands import main
    from pykbatch.live import Producer
    wrong = sasl(broker, password="not-" + PLAIN_PASSWORD)
    said = []
    with pytest.raises(AuthenticationError) as err:
        read(wrong)
    said.append(str(err.value))
    with pytest.raises(AuthenticationError) as err:
        Producer(wrong)
    said.append(str(err.value))
    props = [f"{k}={v}" for k, v in wrong.items() if k != "bootstrap.servers"]
    assert main(["consume", "--bootstrap-server", broker.sasl_bootstrap, "--topic", TOPIC,
                 *[x for p in props for x in ("--consumer-property", p)]]) == 2
    said.append(capsys.readouterr().err)
    for text in said:  # the broker's words, unless its answer came with the close (kafka-python drops it)
        assert f"SASL PLAIN authentication for user '{PLAIN_USER}' failed at" in text, said
        assert "Invalid username or password" in text or "closed the connection during authentication" in text
        assert PLAIN_PASSWORD not in text
