"""A client's connection settings under Kafka's own names, translated for the connection layer.

Users hand pykbatch the properties they already give Kafka's Java client (and Spark's Kafka source
as ``kafka.*`` options) or librdkafka: ``bootstrap.servers``, ``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config`` or ``sasl.username`` / ``sasl.password``, the TLS files.
Connections, TLS and SASL are kafka-python's (``kafka.net``); pykbatch writes no security code.
An unknown or unsupported property is refused by name (a typo in a security setting must not
quietly connect in plaintext), and secrets never appear in a repr or a message.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from pykbatch.live import wire_logs

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
SECRETS = ("sasl.password", "sasl.jaas.config", "ssl.key.password", "ssl.keystore.password",
           "ssl.truststore.password")

# Kafka property -> (kafka-python setting, converter); None: read by a rule below
_PLAIN: dict[str, tuple[str, Any]] = {
    "bootstrap.servers": ("bootstrap_servers", str),
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", int),
    "socket.connection.setup.timeout.ms": ("socket_connection_setup_timeout_ms", int),
    "socket.connection.setup.timeout.max.ms": ("socket_connection_setup_timeout_max_ms", int),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", int),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", int),
    "connections.max.idle.ms": ("connections_max_idle_ms", int),
    "metadata.max.age.ms": ("metadata_max_age_ms", int),
    "security.protocol": ("security_protocol", str),
    "sasl.mechanism": ("sasl_mechanism", str),
    "sasl.username": ("sasl_plain_username", str),
    "sasl.password": ("sasl_plain_password", str),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", str),
    "sasl.oauthbearer.token.provider": ("sasl_oauth_token_provider", None),  # an object, from Python
    "ssl.ca.location": ("ssl_cafile", str),
    "ssl.certificate.location": ("ssl_certfile", str),
    "ssl.key.location": ("ssl_keyfile", str),
    "ssl.key.password": ("ssl_password", str),
    "ssl.crl.location": ("ssl_crlfile", str),
    "ssl.context": ("ssl_context", None),  # an ssl.SSLContext, from Python
}
# Java's names for the same files, PEM only (ssl.*.type=PEM, KIP-651): Python's TLS reads PEM
_JAVA_PEM = {"ssl.truststore.location": "ssl.ca.location", "ssl.keystore.location": "ssl.certificate.location"}
_OTHER = {"sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type", "ssl.keystore.password", "ssl.truststore.password",
          "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification"}
KNOWN = frozenset(_PLAIN) | frozenset(_JAVA_PEM) | _OTHER


# The Java consumer's own properties the Reader honours: its keyword, and the value's conversion
def _flag(value) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise SettingsError(f"expected true or false, not {value!r}")
    return text == "true"


CONSUMER: dict[str, tuple[str, Any]] = {
    "group.id": ("group_id", str),
    "isolation.level": ("isolation_level", str),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "fetch.max.wait.ms": ("max_wait_ms", int),
    "auto.offset.reset": ("auto_offset_reset", str),
    # a group's member (group.id with subscribe: pykbatch.live.membership)
    "group.protocol": ("group_protocol", str),
    "group.instance.id": ("group_instance_id", str),
    "group.remote.assignor": ("group_remote_assignor", str),
    "enable.auto.commit": ("enable_auto_commit", _flag),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
    "client.rack": ("client_rack", str),
    # the classic protocol's own (group.protocol=classic); KIP-848 sets them at the coordinator
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "partition.assignment.strategy": ("partition_assignment_strategy", str),
}
GROUP_KEYWORDS = ("group_protocol", "group_instance_id", "group_remote_assignor", "enable_auto_commit",
                  "auto_commit_interval_ms", "max_poll_interval_ms", "client_rack", "session_timeout_ms",
                  "heartbeat_interval_ms", "partition_assignment_strategy")
"""The Reader keywords of a group's member's properties (no use to a reader outside a group)."""
BROKER_SIDE = ("under KIP-848's group protocol (group.protocol=consumer) the coordinator sets it (the broker's "
               "group.consumer.{}); Kafka's Java consumer refuses it there too (group.protocol=classic takes it)")
# ... and those a reader of this kind has no use for: what does it instead
CONSUMER_REFUSED = {
    "key.deserializer": "keys and values come as bytes (an Arrow table's columns); pykbatch.values decodes them",
    "value.deserializer": "keys and values come as bytes (an Arrow table's columns); pykbatch.values decodes them",
    "max.poll.records": "a poll returns what one fetch brought; Reader.polls() yields them one by one",
}


class SettingsError(ValueError):
    """A connection setting pykbatch cannot honour, named (never with its value when it is a secret)."""


def _jaas_credentials(jaas: str) -> tuple[str, str]:
    """``username`` and ``password`` of a PLAIN or SCRAM ``sasl.jaas.config`` line."""
    found = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
    if "username" not in found or "password" not in found:
        raise SettingsError("sasl.jaas.config: expected a login module line with username=\"...\" and "
                            "password=\"...\" (PLAIN or SCRAM)")
    return found["username"], found["password"]


def connection_kwargs(props: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python's settings for Kafka client ``props`` (``kafka.`` prefixes, as Spark options
    carry them, are dropped)."""
    props = {k[6:] if k.startswith("kafka.") else k: v for k, v in props.items()}
    for key in SECRETS:  # kept out of every log line, wire logs included
        if key in props:
            wire_logs.hide(props[key])
    unknown = sorted(set(props) - KNOWN)
    if unknown:
        raise SettingsError(f"unknown connection setting(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOWN))})")
    if "bootstrap.servers" not in props:
        raise SettingsError("bootstrap.servers is required")
    out: dict[str, Any] = {}
    for java, rdkafka in _JAVA_PEM.items():
        if java in props:
            kind = java.replace(".location", ".type")
            if str(props.get(kind, "")).upper() != "PEM":
                raise SettingsError(f"{java} is read as PEM: set {kind}=PEM (convert a JKS or PKCS12 store "
                                    f"with keytool/openssl), or use {rdkafka}")
            props.setdefault(rdkafka, props[java])
            if java == "ssl.keystore.location":  # Java's PEM keystore holds the key with the certificate
                props.setdefault("ssl.key.location", props[java])
                if "ssl.keystore.password" in props:
                    props.setdefault("ssl.key.password", props["ssl.keystore.password"])
    for name, (target, convert) in _PLAIN.items():
        if name in props and props[name] is not None:
            out[target] = convert(props[name]) if convert else props[name]
    protocol = out.setdefault("security_protocol", "PLAINTEXT").upper()
    out["security_protocol"] = protocol
    if protocol not in SECURITY_PROTOCOLS:
        raise SettingsError(f"security.protocol is one of {', '.join(SECURITY_PROTOCOLS)}, not {protocol!r}")
    if protocol.startswith("SASL"):
        mechanism = out.setdefault("sasl_mechanism", "GSSAPI").upper()
        out["sasl_mechanism"] = mechanism
        if mechanism not in SASL_MECHANISMS:
            raise SettingsError(f"sasl.mechanism is one of {', '.join(SASL_MECHANISMS)}, not {mechanism!r}")
        if "sasl.jaas.config" in props and mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            user, password = _jaas_credentials(str(props["sasl.jaas.config"]))
            out.setdefault("sasl_plain_username", user)
            out.setdefault("sasl_plain_password", password)
            wire_logs.hide(password)
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not out.get("sasl_plain_username"):
            raise SettingsError(f"SASL {mechanism} needs credentials: sasl.username and sasl.password, "
                                "or sasl.jaas.config")
        if mechanism == "OAUTHBEARER":
            from pykbatch.live.protocol import is_oauth_token_provider
            if not is_oauth_token_provider(out.get("sasl_oauth_token_provider")):
                raise SettingsError("SASL OAUTHBEARER needs sasl.oauthbearer.token.provider: an instance of "
                                    "kafka.net.sasl.oauth.AbstractTokenProvider (its token() gives the bearer token)")
    elif "sasl.mechanism" in props:
        raise SettingsError(f"sasl.mechanism is set but security.protocol is {protocol}: use SASL_SSL or "
                            "SASL_PLAINTEXT")
    if protocol.endswith("SSL"):
        identify = str(props.get("ssl.endpoint.identification.algorithm", "https")).lower()
        out["ssl_check_hostname"] = identify == "https"
        if str(props.get("enable.ssl.certificate.verification", "true")).lower() == "false":
            raise SettingsError("enable.ssl.certificate.verification=false: pykbatch always verifies the "
                                "broker's certificate (give its CA with ssl.ca.location)")
    elif any(k.startswith("ssl.") for k in props):
        raise SettingsError(f"TLS settings are given but security.protocol is {protocol}: use SSL or SASL_SSL")
    return out


def consumer_settings(props: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``props`` split into the connection's and the Reader's keywords for the Java consumer's
    properties (``CONSUMER``; ``kafka.`` prefixes dropped); a consumer property with no use here
    is refused with what does it instead."""
    connection, reader = {}, {}
    for key, value in props.items():
        name = key[6:] if key.startswith("kafka.") else key
        if name in CONSUMER:
            keyword, convert = CONSUMER[name]
            try:
                reader[keyword] = convert(value)
            except (TypeError, ValueError) as exc:
                raise SettingsError(f"{name}: {exc}") from None
        elif name in CONSUMER_REFUSED:
            raise SettingsError(f"{name}: {CONSUMER_REFUSED[name]}")
        else:
            connection[key] = value
    reset = reader.get("auto_offset_reset")
    if reset is not None and reset not in ("earliest", "latest"):
        raise SettingsError(f"auto.offset.reset is earliest or latest, not {reset!r} (none: give starting_offsets)")
    return connection, reader


def outside_group(reader: Mapping[str, Any]) -> dict[str, Any]:
    """``consumer_settings``' Reader keywords for a reader outside a group: a member's settings
    left out (no use there), ``enable.auto.commit=true`` refused (such a reader commits when asked)."""
    if reader.get("enable_auto_commit"):
        raise SettingsError("enable.auto.commit=true: a reader outside a group commits when asked "
                            "(Reader.commit(); consume --commit); group.id with subscribe joins the group "
                            "(consume --group)")
    return {k: v for k, v in reader.items() if k not in GROUP_KEYWORDS}


def redacted(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` with every secret replaced, for messages and logs."""
    def hidden(key: str) -> bool:
        return key.removeprefix("kafka.") in SECRETS
    return {k: ("[hidden]" if hidden(k) else v) for k, v in props.items()}
