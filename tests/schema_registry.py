"""A real schema registry for the tests: Apicurio Registry 2.4.2 (its Confluent-compatible API at
``/apis/ccompat/v7``), built from Maven Central by tests/kafka_harness/registry -- the app jar is a
thin Quarkus application, so the harness assembles the runnable jar with the Quarkus Maven
plugin -- and run in memory (H2) on 127.0.0.1.

One registry a test session (the ``schema_registry`` fixture): plain HTTP and HTTPS (a
certificate from tests/tls_certs.py) on two ports, and HTTP basic auth required on every path
(Quarkus' own, users from configuration), so every client test goes through authentication and
the TLS tests through a certificate check.
"""
from __future__ import annotations

import base64
import functools
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.kafka_broker import unavailable  # noqa: F401  (same requirements: Java 17 and Maven)

HARNESS = Path(__file__).parent / "kafka_harness" / "registry"
CCOMPAT = "/apis/ccompat/v7"
USER, PASSWORD = "pykbatch", "registry-secret"


@functools.cache
def runner_jar() -> Path:
    """Builds the registry (Maven fetches it and Quarkus assembles it on first use)."""
    jars = sorted(HARNESS.glob("target/registry-*-runner.jar"))
    if jars and (HARNESS / "target" / "lib").is_dir():
        return jars[-1]
    proc = subprocess.run(["mvn", "-q", "-B", "package", "-DskipTests", "-Dcheckstyle.skip", "-Denforcer.skip",
                           "-Dlicense.skip", "-Dmaven.javadoc.skip"], cwd=HARNESS, capture_output=True, text=True,
                          timeout=1500)
    jars = sorted(HARNESS.glob("target/registry-*-runner.jar"))
    if proc.returncode != 0 or not jars:
        raise RuntimeError(f"building tests/kafka_harness/registry failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return jars[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _split_pem(bundle: Path, directory: Path) -> tuple[Path, Path]:
    """tls_certs' server bundle (key + chain in one PEM) as Quarkus wants it: key file, cert file."""
    text = bundle.read_text()
    blocks = re.findall(r"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----\n?", text, re.S)
    key = "".join(m.group(0) for m in re.finditer(r"-----BEGIN ([A-Z ]*PRIVATE KEY)-----.*?-----END \1-----\n?", text, re.S))
    certs = "".join(m.group(0) for m in re.finditer(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", text, re.S))
    assert blocks and key and certs
    (directory / "registry.key").write_text(key)
    (directory / "registry.crt").write_text(certs)
    return directory / "registry.key", directory / "registry.crt"


class Registry:
    def __init__(self, workdir: Path, certificates):
        self.workdir = workdir
        self.certificates = certificates
        self.port = _free_port()
        self.tls_port = _free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CCOMPAT}"

    @property
    def tls_url(self) -> str:
        return f"https://localhost:{self.tls_port}{CCOMPAT}"

    @property
    def config(self) -> dict:
        """confluent-kafka's SchemaRegistryClient settings (pykbatch's SchemaRegistry.from_config reads the same)."""
        return {"url": self.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"}

    def start(self) -> None:
        key, cert = _split_pem(self.certificates.broker, self.workdir)
        settings = {
            "quarkus.profile": "prod",
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": self.port,
            "quarkus.http.ssl-port": self.tls_port,
            "quarkus.http.ssl.certificate.files": cert,
            "quarkus.http.ssl.certificate.key-files": key,
            f"quarkus.security.users.embedded.users.{USER}": PASSWORD,  # basic auth: see the harness's pom
            "quarkus.oidc.tenant-enabled": "false",  # no identity provider: basic auth only
            "quarkus.log.level": "WARN",
            "quarkus.log.console.level": "WARN",
        }
        args = ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", *(f"-D{k}={v}" for k, v in settings.items()),
                "-jar", str(runner_jar())]
        self.log = open(self.workdir / "registry.log", "wb")
        self.proc = subprocess.Popen(args, cwd=self.workdir, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "JAVA_TOOL_OPTIONS": ""})
        deadline = time.monotonic() + 180
        auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the registry exited: {(self.workdir / 'registry.log').read_text()[-3000:]}")
            try:
                req = urllib.request.Request(self.url + "/subjects", headers={"Authorization": auth})
                with urllib.request.urlopen(req, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the registry did not answer in 180 s: {(self.workdir / 'registry.log').read_text()[-3000:]}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if getattr(self, "log", None):
            self.log.close()
