"""A schema registry client for the Confluent-compatible REST API (Confluent Schema Registry,
Apicurio's ``/apis/ccompat/v7``, Karapace, Redpanda): schemas by id, subjects' versions,
registration.

Schemas by id never change, so each is fetched once per process (``SchemaRegistry`` objects for
the same URL and credentials share one cache; a Spark executor's Python worker keeps it from task to task).  The
latest version of a subject is kept for ``latest.cache.ttl.sec``.  An id the registry does not
know is remembered for a minute, so a topic full of foreign values does not become a request per
batch.  Transient failures (connection refused or reset, 5xx, 429) are retried with backoff;
refused credentials fail at once.  TLS through Python's ``ssl`` (CA file, client certificate for
mutual TLS), basic auth or a bearer token; secrets never appear in a repr, a log or a message.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Mapping

from pykbatch.retry import retry_io

log = logging.getLogger("pykbatch.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_NOT_FOUND = (40403, 40401, 40402)  # schema / subject / version not found
SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")

# The Confluent clients' property names (Java serdes carry them with a "schema.registry." prefix)
_KNOWN = {"url", "basic.auth.user.info", "basic.auth.credentials.source", "bearer.auth.token", "ssl.ca.location",
          "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "request.timeout.ms",
          "latest.cache.ttl.sec", "max.retries"}
_SECRETS = ("basic.auth.user.info", "bearer.auth.token", "ssl.key.password")


class RegistryError(Exception):
    """The registry refused a request (not a transient failure, not the data's fault): its status,
    error code and message."""

    def __init__(self, message: str, status: int | None = None, error_code: int | None = None):
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class RegistryAuthError(RegistryError):
    """The registry refused the credentials (401) or the access (403)."""


class RegistryUnavailable(RegistryError):
    """The registry could not be reached or answered 5xx/429, after the retries."""


class _Transient(OSError):
    """A failure worth asking again (retry_io retries OSErrors)."""


@dataclass(frozen=True)
class SchemaReference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry holds it."""
    id: int | None
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    subject: str | None = None
    version: int | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any], id: int | None = None) -> RegisteredSchema:
        refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
        return cls(body.get("id", id), body["schema"], body.get("schemaType") or "AVRO", refs,
                   body.get("subject"), body.get("version"))


@dataclass
class _Shared:
    """What every client of one registry URL shares: schemas by id, not-found ids, latest versions."""
    by_id: dict[int, RegisteredSchema] = field(default_factory=dict)
    missing: dict[int, float] = field(default_factory=dict)
    latest: dict[str, tuple[float, RegisteredSchema]] = field(default_factory=dict)
    versions: dict[tuple[str, int], RegisteredSchema] = field(default_factory=dict)
    requests: int = 0


_SHARED: dict[str, _Shared] = {}
_LOCK = threading.Lock()
MISSING_TTL = 60.0
MAX_CACHED = 100_000


def registry_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` under the Confluent clients' names, a ``schema.registry.`` prefix dropped; unknown
    names refused (a typo in a TLS or auth setting must not quietly go without)."""
    out = {}
    for k, v in props.items():
        key = k[len("schema.registry."):] if k.startswith("schema.registry.") else k
        if key not in _KNOWN:
            raise ValueError(f"unknown schema registry setting {k!r} (known: {', '.join(sorted(_KNOWN))})")
        out[key] = v
    if "url" not in out:
        raise ValueError("the schema registry's url is required (url or schema.registry.url)")
    return out


class SchemaRegistry:
    """``SchemaRegistry("https://registry:8081", basic_auth="user:secret", ca="ca.pem")``, or
    ``SchemaRegistry.from_config({"schema.registry.url": ..., "basic.auth.user.info": ...})``."""

    def __init__(self, url: str, *, basic_auth: str | None = None, bearer_token: str | None = None,
                 ca: str | None = None, certificate: str | None = None, key: str | None = None,
                 key_password: str | None = None, timeout: float = 30.0, latest_ttl: float = 300.0,
                 retries: int = 4):
        url = url.split(",")[0].strip().rstrip("/")  # the clients take a list; the first answers
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a schema registry URL is http(s)://host[:port][/path], not {url!r}")
        if parts.username is not None:  # basic.auth.credentials.source=URL
            basic_auth = basic_auth or f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            url = urllib.parse.urlunsplit((parts.scheme, parts.hostname + (f":{parts.port}" if parts.port else ""),
                                           parts.path, parts.query, parts.fragment))
        self.url = url
        self._headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        if basic_auth:
            self._headers["Authorization"] = "Basic " + base64.b64encode(basic_auth.encode()).decode()
        elif bearer_token:
            self._headers["Authorization"] = "Bearer " + bearer_token
        self._context = None
        self.ca, self.client_certificate = ca, certificate  # paths, for a host that asks it itself (the JVM)
        if parts.scheme == "https":
            self._context = ssl.create_default_context(cafile=ca)
            if certificate:
                self._context.load_cert_chain(certificate, key, key_password)
        elif ca or certificate:
            raise ValueError("TLS settings were given for an http:// registry URL: use https://")
        self.timeout = timeout
        self.latest_ttl = latest_ttl
        self.retries = retries
        # one cache per URL and identity: a client with other credentials asks the registry itself
        identity = hashlib.sha256(self._headers.get("Authorization", "").encode()).hexdigest()[:16]
        with _LOCK:
            self._shared = _SHARED.setdefault(f"{self.url}#{identity}", _Shared())

    @classmethod
    def from_config(cls, props: Mapping[str, Any]) -> SchemaRegistry:
        c = registry_config(props)
        source = str(c.get("basic.auth.credentials.source", "USER_INFO")).upper()
        if source not in ("USER_INFO", "URL", "SASL_INHERIT"):
            raise ValueError(f"basic.auth.credentials.source {source!r}: USER_INFO or URL")
        return cls(c["url"], basic_auth=c.get("basic.auth.user.info") if source == "USER_INFO" else None,
                   bearer_token=c.get("bearer.auth.token"), ca=c.get("ssl.ca.location"),
                   certificate=c.get("ssl.certificate.location"), key=c.get("ssl.key.location"),
                   key_password=c.get("ssl.key.password"),
                   timeout=float(c.get("request.timeout.ms", 30000)) / 1000,
                   latest_ttl=float(c.get("latest.cache.ttl.sec", 300)), retries=int(c.get("max.retries", 4)))

    @property
    def authorization(self) -> str | None:
        """The Authorization header this client sends (a secret: for a host that asks the registry itself)."""
        return self._headers.get("Authorization")

    def __repr__(self) -> str:
        auth = self._headers.get("Authorization", "").split(" ")[0] or "none"
        return f"SchemaRegistry({self.url!r}, auth={auth})"

    @property
    def requests_made(self) -> int:
        """HTTP requests this process made to this registry (the caches' measure)."""
        return self._shared.requests

    # -- the REST calls --

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None

        def once():
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=self._headers)
            self._shared.requests += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    err = json.loads(raw)
                except ValueError:
                    err = {}
                err = err if isinstance(err, dict) else {}
                message = f"{method} {path}: HTTP {e.code} {err.get('message') or e.reason}"
                if e.code >= 500 or e.code == 429:
                    raise _Transient(message) from None
                cls = RegistryAuthError if e.code in (401, 403) else RegistryError
                raise cls(message, e.code, err.get("error_code")) from None
            except ssl.SSLError as e:  # a certificate the client does not trust: asking again will not help
                raise RegistryAuthError(f"{method} {path}: TLS failed: {e.reason or e}") from None
            except urllib.error.URLError as e:
                if isinstance(e.reason, ssl.SSLError):
                    raise RegistryAuthError(f"{method} {path}: TLS failed: {e.reason.reason or e.reason}") from None
                raise _Transient(f"{method} {self.url}{path}: {e.reason}") from None
            except (ConnectionError, TimeoutError) as e:
                raise _Transient(f"{method} {self.url}{path}: {e}") from None

        try:
            return retry_io(once, attempts=self.retries + 1, timeout=max(self.timeout * (self.retries + 1), 1.0))
        except _Transient as e:
            raise RegistryUnavailable(f"{e} (after {self.retries + 1} attempts)") from None

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        """The schema registered as ``schema_id``, or None when the registry has no such id."""
        schema_id = int(schema_id)
        shared = self._shared
        found = shared.by_id.get(schema_id)
        if found is not None:
            return found
        if time.monotonic() < shared.missing.get(schema_id, 0.0):
            return None
        try:
            body = self._call("GET", f"/schemas/ids/{schema_id}")
        except RegistryError as e:
            if e.status == 404:
                shared.missing[schema_id] = time.monotonic() + MISSING_TTL
                return None
            raise
        found = RegisteredSchema.from_json(body, schema_id)
        found = RegisteredSchema(schema_id, found.schema, found.schema_type, found.references)
        with _LOCK:
            if len(shared.by_id) >= MAX_CACHED:
                shared.by_id.clear()
            shared.by_id[schema_id] = found
        return found

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema | None:
        """A subject's version (``"latest"``: kept for ``latest_ttl`` seconds), or None."""
        shared = self._shared
        now = time.monotonic()
        if version == "latest":
            hit = shared.latest.get(subject)
            if hit and now < hit[0]:
                return hit[1]
        elif (subject, int(version)) in shared.versions:
            return shared.versions[(subject, int(version))]
        try:
            body = self._call("GET", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}")
        except RegistryError as e:
            if e.status == 404:
                return None
            raise
        found = RegisteredSchema.from_json(body)
        with _LOCK:
            if version == "latest":
                shared.latest[subject] = (now + self.latest_ttl, found)
            shared.versions[(subject, int(found.version or 0))] = found
            if found.id is not None:
                shared.by_id.setdefault(found.id, RegisteredSchema(found.id, found.schema, found.schema_type,
                                                                   found.references))
        return found

    def latest(self, subject: str) -> RegisteredSchema | None:
        return self.version(subject, "latest")

    def versions(self, subject: str) -> list[int]:
        """A subject's version numbers (none: an empty list)."""
        try:
            return [int(v) for v in self._call("GET", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions")]
        except RegistryError as e:
            if e.status == 404:
                return []
            raise

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: tuple[SchemaReference, ...] = ()) -> int:
        """Registers ``schema`` under ``subject`` (or finds it there): its id."""
        if schema_type not in SCHEMA_TYPES:
            raise ValueError(f"schema_type is one of {SCHEMA_TYPES}")
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in references]
        answer = self._call("POST", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions", body)
        return int(answer["id"])

    def subjects(self) -> list[str]:
        return list(self._call("GET", "/subjects"))

    def referenced(self, schema: RegisteredSchema) -> list[tuple[str, RegisteredSchema]]:
        """Every schema ``schema`` refers to, transitively, each before those that refer to it:
        ``(reference name, schema)``."""
        out: list[tuple[str, RegisteredSchema]] = []
        seen: set[tuple[str, int]] = set()

        def walk(s: RegisteredSchema, depth: int) -> None:
            if depth > 32:
                raise RegistryError("schema references nest deeper than 32")
            for ref in s.references:
                key = (ref.subject, ref.version)
                if key in seen:
                    continue
                seen.add(key)
                target = self.version(ref.subject, ref.version)
                if target is None:
                    raise RegistryError(f"reference {ref.name}: {ref.subject} version {ref.version} not found", 404)
                walk(target, depth + 1)
                out.append((ref.name, target))

        walk(schema, 0)
        return out


class SchemaMap:
    """Schemas by id without a registry (exported, or pinned): ``SchemaMap({1: avro_json, ...})``,
    values a schema text or a ``RegisteredSchema``."""

    def __init__(self, schemas: Mapping[int, Any]):
        self._by_id = {int(k): v if isinstance(v, RegisteredSchema) else RegisteredSchema(int(k), _text(v))
                       for k, v in schemas.items()}
        self.url = "memory"

    def schema(self, schema_id: int) -> RegisteredSchema | None:
        return self._by_id.get(int(schema_id))

    def latest(self, subject: str) -> RegisteredSchema | None:
        return None

    def referenced(self, schema: RegisteredSchema) -> list[tuple[str, RegisteredSchema]]:
        if schema.references:
            raise RegistryError("a SchemaMap cannot follow schema references: use a SchemaRegistry")
        return []


def _text(schema: Any) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


def as_registry(registry: Any):
    """A registry from what a user hands over: a client, a URL, a config mapping, or schemas by id."""
    if registry is None or isinstance(registry, (SchemaRegistry, SchemaMap)):
        return registry
    if isinstance(registry, str):
        return SchemaRegistry(registry)
    if isinstance(registry, Mapping):
        if all(isinstance(k, int) for k in registry):
            return SchemaMap(registry)
        return SchemaRegistry.from_config(registry)
    if hasattr(registry, "schema"):
        return registry
    raise TypeError(f"a registry is a SchemaRegistry, a URL, a config mapping or {{id: schema}}, not {type(registry).__name__}")
