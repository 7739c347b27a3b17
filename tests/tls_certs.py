"""Certificates made at test time for the session broker's secured listeners: a CA, the broker's
certificate (for 127.0.0.1 and localhost), a client certificate, and a second CA nobody trusts."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Certificates:
    ca: Path              # the CA that signed the broker's and the client's certificates
    broker: Path          # the broker's key (PKCS#8) and certificate chain, one PEM file
    client_cert: Path
    client_key: Path
    untrusted_ca: Path    # a CA that signed nothing the broker presents
    untrusted_client_cert: Path
    untrusted_client_key: Path


def _name(cn: str):
    from cryptography.x509.oid import NameOID
    from cryptography import x509
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject, key, issuer, issuer_key, *, ca: bool, sans=()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization
    return cert.public_bytes(serialization.Encoding.PEM)


def make(directory: Path) -> Certificates:
    from cryptography import x509
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca = _cert(_name("pykbatch test CA"), ca_key, _name("pykbatch test CA"), ca_key, ca=True)
    other = _cert(_name("untrusted CA"), other_key, _name("untrusted CA"), other_key, ca=True)
    broker_key = _key()
    broker = _cert(_name("localhost"), broker_key, ca.subject, ca_key, ca=False,
                   sans=(x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))))
    client_key, rogue_key = _key(), _key()
    client = _cert(_name("alice"), client_key, ca.subject, ca_key, ca=False)
    rogue = _cert(_name("mallory"), rogue_key, other.subject, other_key, ca=False)
    files = {
        "ca.pem": _pem_cert(ca), "broker.pem": _pem_key(broker_key) + _pem_cert(broker) + _pem_cert(ca),
        "client.pem": _pem_cert(client), "client.key": _pem_key(client_key), "untrusted-ca.pem": _pem_cert(other),
        "rogue.pem": _pem_cert(rogue), "rogue.key": _pem_key(rogue_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    d = directory
    return Certificates(d / "ca.pem", d / "broker.pem", d / "client.pem", d / "client.key", d / "untrusted-ca.pem",
                        d / "rogue.pem", d / "rogue.key")
