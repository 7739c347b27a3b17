"""One client's view of a live cluster: connections, metadata, offsets, requests.

The connection layer is kafka-python's (``kafka.net``: sockets, TLS, SASL, API-version
negotiation) and so are the request and response classes (generated from Kafka's JSON message
definitions); pykbatch reads and writes only the record batches they carry.  What this module adds:
a bootstrap that fails at once, naming what failed, on a refused credential or certificate (the
connection layer would retry those until its timeout), metadata for the topics a reader is
assigned, ListOffsets, and committed offsets for a group id.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pykbatch import errors as kb_errors
from pykbatch.live import frames, protocol, wire_logs
from pykbatch.live.settings import SettingsError, connection_kwargs, redacted

# NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: the coordinator is asked for again
COORDINATOR_MOVED = frozenset({kb_errors.CODE["NOT_COORDINATOR"], kb_errors.CODE["COORDINATOR_NOT_AVAILABLE"]})

log = logging.getLogger("pykbatch.live")

EARLIEST, LATEST = -2, -1  # ListOffsets' timestamps for the log start and the end (Spark's JSON too)
SASL_DROPS = 3  # closes in a row during SASL authentication taken as a refusal (see Cluster._ready)
UNREACHABLE_S = 3.0  # every bootstrap server refused or unknown for this long: nothing listens there
LIBRARY_EVERY_S = 0.05  # the library's own loop runs at least this often while pykbatch reads for it (pump)
_TLS_RECORD_TYPES = (0x15, 0x16)  # a TLS alert or handshake record, read as a response's length


def asked_until_answered(ask, timeout_s: float = 60):
    """``ask()``, asked again while it raises a retriable ``ClusterError`` (UNSTABLE_OFFSET_COMMIT
    while a transaction's markers are written, a coordinator loading or moving) for up to
    ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ask()
        except ClusterError as exc:
            if not exc.retriable or isinstance(exc, AuthorizationError) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class ClusterError(Exception):
    """A cluster refused or could not answer: ``code`` is Kafka's error code when it gave one."""

    def __init__(self, message: str, code: int | None = None, retriable: bool = False):
        super().__init__(message)
        self.code = code
        self.retriable = retriable


class AuthenticationError(ClusterError):
    """Wrong credentials, a refused SASL mechanism or a certificate that does not verify: retrying
    cannot help, so nothing retries it."""


class AuthorizationError(ClusterError):
    """The principal may not read (or describe) a topic or group."""


class UnknownTopicError(ClusterError):
    """A topic or partition the cluster does not have."""


class TopicPartition(NamedTuple):
    """A partition of a topic; a tuple, so hashing and comparing it (a producer does so for every
    batch in every answer) runs in C."""
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Leader:
    node: int
    epoch: int  # -1: unknown


def _errors():
    import kafka.errors as Errors
    return Errors


def _is_auth_failure(exc: BaseException) -> bool:
    Errors = _errors()
    if isinstance(exc, (Errors.SaslAuthenticationFailedError, Errors.UnsupportedSaslMechanismError,
                        Errors.IllegalSaslStateError)):
        return True
    text = str(exc)
    # TLS 1.3 finishes the client's handshake before the broker checks its certificate: the
    # broker's refusal arrives as an alert on the first read
    return "Handshake failed" in text or "CERTIFICATE" in text or "ALERT" in text or "SSL" in type(exc).__name__


def _speaks_tls(exc: BaseException) -> bool:
    """A plaintext client reading a TLS listener's answer: its first four bytes (record type 21
    or 22, version 3.x) taken for a Kafka response's length, e.g. 352518912 = 0x15030300."""
    text = str(exc)
    if "Invalid frame length" not in text:
        return False
    try:
        n = int(text.rsplit(":", 1)[-1].strip())
    except ValueError:
        return False
    return (n >> 24) in _TLS_RECORD_TYPES and (n >> 16) & 0xFF == 0x03


def _unreachable(exc: BaseException) -> str | None:
    """"connection refused" or "host not found" when that is what ``exc`` says, else None."""
    text = f"{type(exc).__name__}: {exc}"
    if "ECONNREFUSED" in text or "Connection refused" in text or isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if "DNS Resolution failure" in text or "Name or service not known" in text or "gaierror" in text:
        return "host not found"
    return None


def _user(props: Mapping[str, Any]) -> str:
    user = props.get("sasl_plain_username")
    return f" for user {user!r}" if user else ""


def _describe_auth_failure(exc: BaseException, where: str, props: Mapping[str, Any]) -> str:
    Errors = _errors()
    protocol = str(props.get("security_protocol"))
    if isinstance(exc, Errors.SaslAuthenticationFailedError):
        who = _user(props)
        said = str(exc).rsplit("SaslAuthenticationFailedError: ", 1)[-1]  # the broker's words, once
        return f"SASL {props.get('sasl_mechanism')} authentication{who} failed at {where}: {said}"
    if isinstance(exc, Errors.UnsupportedSaslMechanismError):
        return f"the broker at {where} does not offer SASL {props.get('sasl_mechanism')}: {exc}"
    if "CERTIFICATE_VERIFY_FAILED" in str(exc):
        return (f"TLS handshake with {where} failed: the broker's certificate does not verify against "
                f"ssl.ca.location ({exc})")
    if "ALERT" in str(exc):
        return (f"the broker at {where} refused the TLS session: its alert says {exc} (is the client "
                "certificate, ssl.certificate.location, signed by a CA the broker trusts?)")
    return f"{protocol} connection to {where} failed during the handshake: {exc}"


class Cluster:
    """A connection to a cluster (``props``: Kafka client properties, see ``pykbatch.live.settings``)."""

    def __init__(self, props: Mapping[str, Any], *, timeout_ms: int = 30_000, receive_max_bytes: int = 128 << 20):
        from kafka.net import KafkaNetClient
        wire_logs.guard()
        self.props = dict(props)
        self.timeout_ms = timeout_ms
        self._kwargs = connection_kwargs(props)
        self._kwargs.setdefault("request_timeout_ms", timeout_ms)
        self._kwargs["receive_message_max_bytes"] = receive_max_bytes
        self._client = KafkaNetClient(**self._kwargs)
        self._library_due = 0.0  # when the library's loop must run next (pump)
        self._leaders: dict[TopicPartition, Leader] = {}
        self._partitions: dict[str, list[int]] = {}
        self._coordinators: dict[tuple[str, str], int] = {}
        self._topic_names: dict[bytes, str] = {}  # topic id -> name (KIP-848 assigns by id)
        self._connected = False
        self._sasl_drops = 0

    def __repr__(self) -> str:
        return f"Cluster({redacted(self.props)})"

    # -- connecting ---------------------------------------------------------------------------
    def connect(self) -> Cluster:
        """Bootstraps, failing at once on a refused credential or certificate and after
        ``timeout_ms`` when no bootstrap server answers."""
        if self._connected:
            return self
        manager = self._client._manager
        start = time.monotonic()
        deadline = start + self.timeout_ms / 1000
        last: BaseException | None = None
        servers = self._kwargs["bootstrap_servers"]
        causes: dict[str, BaseException] = {}  # each server's latest answer (a back-off is none)
        while time.monotonic() < deadline:
            for broker in manager.cluster.bootstrap_brokers():
                where = f"{broker.host}:{broker.port}"
                try:
                    self._ready(broker.node_id, where, deadline)
                    response = self._client.send_and_receive(broker.node_id, self._metadata_request([]),
                                                             timeout_ms=self.timeout_ms)
                except (AuthenticationError, SettingsError):
                    self.close()
                    raise
                except Exception as exc:  # noqa: BLE001 (unreachable or refused: the next server, then again)
                    if not isinstance(exc, _errors().NodeNotReadyError):
                        last = causes[where] = exc
                    continue
                manager.cluster.update_metadata(response)
                self._connected = True
                return self
            said = {where: _unreachable(exc) for where, exc in causes.items()}
            if said and all(said.values()) and time.monotonic() - start >= UNREACHABLE_S:
                self.close()  # nothing listens there (or no such host): waiting out the timeout cannot help
                raise ClusterError("could not reach a broker of " + servers + ": "
                                   + "; ".join(f"{where}: {why}" for where, why in said.items()), retriable=True)
            time.sleep(0.2)
        self.close()
        raise ClusterError(f"could not reach a broker of {servers} within {self.timeout_ms} ms: {last}", retriable=True)

    def _ready(self, node_id, where: str, deadline: float) -> None:
        """A connection to ``node_id`` ready for requests; a refused credential or certificate
        raises ``AuthenticationError`` at once (the connection layer would only back off and retry)."""
        manager = self._client._manager
        if self._client.is_ready(node_id):
            frames.install(manager._conns.get(node_id))
            return
        manager.maybe_raise_auth_failure(node_id)
        # no metadata refresh on a failure: the connection layer would start its own bootstrap loop
        try:
            conn = manager.get_connection(node_id, refresh_metadata_on_err=False)  # NodeNotReadyError while backing off
        except _errors().UnknownBrokerIdError:
            # a broker the library's metadata lost (killed, then back): its list asked for again, once
            self._learn_brokers()
            conn = manager.get_connection(node_id, refresh_metadata_on_err=False)
        remaining = max(1, int((deadline - time.monotonic()) * 1000))
        if not conn.init_future.is_done:
            self._client._net.poll(timeout_ms=remaining, future=conn.init_future)
        if conn.init_future.is_done and conn.init_future.failed():
            cause = conn.init_future.exception
            if _is_auth_failure(cause):
                raise AuthenticationError(_describe_auth_failure(cause, where, self._kwargs)) from None
            if isinstance(cause, _errors().KafkaConfigurationError):  # asking again cannot help
                raise SettingsError(f"the connection layer refused the settings: {cause}") from None
            if _speaks_tls(cause) and not self._kwargs["security_protocol"].endswith("SSL"):
                raise SettingsError(f"the broker at {where} answered in TLS: this port speaks TLS, so "
                                    f"security.protocol {self._kwargs['security_protocol']} cannot talk to it "
                                    "(set security.protocol to SSL or SASL_SSL, as the listener is)") from None
            if self._kwargs["security_protocol"].startswith("SASL") and "disconnected" in str(cause):
                # kafka-python 3.0.12 drops a response that arrives with the connection's close,
                # which is how a broker answers a refused SASL login: the same close, again and
                # again, is that refusal
                self._sasl_drops += 1
                if self._sasl_drops >= SASL_DROPS:
                    raise AuthenticationError(  # worded as when the broker's answer arrives
                        f"SASL {self._kwargs.get('sasl_mechanism')} authentication{_user(self._kwargs)} failed "
                        f"at {where}: the broker closed the connection during authentication "
                        f"{self._sasl_drops} times (wrong credentials, or a mechanism the listener does not "
                        "accept)") from None
            raise ClusterError(f"connection to {where} failed: {cause}", retriable=True)
        self._sasl_drops = 0
        self._client.await_ready(node_id, timeout_ms=remaining)
        frames.install(manager._conns.get(node_id))

    def _learn_brokers(self) -> None:
        """The cluster's brokers asked for again (Metadata for no topic): a node a coordinator
        lookup named may be one the last metadata no longer listed (killed, then back).  Best
        effort: the caller's own retry says what remains."""
        try:
            self._client._manager.cluster.update_metadata(self._ask_any(self._metadata_request([])))
        except ClusterError:
            log.debug("asking for the brokers failed", exc_info=True)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # closing a half-open client must not hide the error that closed it
            log.debug("closing the connection failed", exc_info=True)

    def __enter__(self) -> Cluster:
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- requests -----------------------------------------------------------------------------
    def request(self, node: int, request, timeout_ms: int | None = None):
        """``request`` sent to ``node``; its response (connection errors raise ``ClusterError``)."""
        self.connect()
        timeout_ms = timeout_ms or self.timeout_ms
        try:
            self._ready(node, f"node {node}", time.monotonic() + timeout_ms / 1000)
            return self._client.send_and_receive(node, request, timeout_ms=timeout_ms)
        except AuthenticationError:
            raise
        except ClusterError:
            self.forget_node(node)  # what it led or coordinated is looked up again by the next ask
            raise
        except Exception as exc:  # noqa: BLE001 (the connection layer's errors, named with the request)
            self.forget_node(node)
            raise ClusterError(f"{type(request).__name__} to node {node} failed: {exc}", retriable=True) from exc

    def request_all(self, requests: Iterable[tuple[int, Any]], timeout_ms: int | None = None) -> list:
        """Several requests in flight at once (one per node, as a consumer fetches); each
        response, or the ``ClusterError`` its node gave, in order."""
        return self.collect([self.send(node, request, timeout_ms) for node, request in requests], timeout_ms)

    def send(self, node: int, request, timeout_ms: int | None = None):
        """``request`` on its way to ``node`` without waiting: a handle for ``collect`` (a
        consumer keeps its next fetch in flight while it reads the last answer)."""
        self.connect()
        timeout_ms = timeout_ms or self.timeout_ms
        try:
            self._ready(node, f"node {node}", time.monotonic() + timeout_ms / 1000)
            return self._client.send(node, request)  # onto the wire at once (pykbatch.live.frames)
        except AuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 (this node's turn fails; the others go on)
            return exc

    # -- a producer's network thread drives the connections itself ----------------------------
    def ready(self, node: int) -> bool:
        """Whether ``node`` takes a request now, without waiting (connecting starts when not).  A
        node the library's metadata no longer names (a broker killed or shut down, fenced out of
        the cluster's metadata) is not ready, and what it led is asked for again."""
        try:
            if not self._client.ready(node):
                return False
        except _errors().UnknownBrokerIdError:
            self.forget_node(node)
            return False
        frames.install(self._client._manager._conns.get(node))
        return True

    def send_now(self, node: int, request):
        """``request`` to ``node``, whose connection is ``ready``: a handle (a future)."""
        return self._client.send(node, request)

    def send_produce(self, node: int, batches: Mapping[str, list], *, acks: int, timeout_ms: int,
                     transactional_id: str | None = None, txn_version: int | None = None):
        """A Produce request to ``node``, whose connection is ``ready``: written by pykbatch on the
        library's connection when it can be (``frames.writable``; the answer read by
        ``protocol.read_produce_answer``), else the library's own request; a handle either way
        (its value: ``protocol.read_produce_answer``'s tuple, or the library's ProduceResponse).
        ``txn_version``: a transactional producer's transactions version (below 2: Produce v11
        at most)."""
        conn = self._client._manager._conns.get(node)
        receiver = frames.writable(conn) if acks != 0 else None
        if receiver is None:
            return self.send_now(node, protocol.produce(batches, acks=acks, timeout_ms=timeout_ms,
                                                       transactional_id=transactional_id, txn_version=txn_version))
        version = receiver.versions.get("Produce")
        if version is None:
            version = receiver.versions["Produce"] = protocol.produce_version(conn)
        version = min(version, protocol.produce_range(txn_version)[1])
        correlation_id = conn.parser._next_correlation_id()
        answer = frames.Answer(conn, lambda frame: protocol.read_produce_answer(frame, version))
        receiver.expect(correlation_id, answer)
        receiver.write(protocol.produce_frame(version, correlation_id, conn.parser._client_id, batches, acks=acks,
                                              timeout_ms=timeout_ms, transactional_id=transactional_id))
        return answer

    def pump(self, timeout_ms: int) -> None:
        """``poll`` for a producer's thread: while only pykbatch's own requests are in flight
        (``send_produce``), their answers are read straight off the sockets (``frames.pump``);
        the library's loop -- a task, a timer and a selector registration per answer -- runs
        when it has work of its own (``frames.library_busy``), and at least every LIBRARY_EVERY_S."""
        client = self._client
        now = time.monotonic()
        if now < self._library_due and frames.can_pump(client):
            conns = [c for c in client._manager._conns.values() if getattr(getattr(c, frames.MARK, None), "expected", None)]
            if conns and not frames.library_busy(client):
                with client._lock:
                    if frames.pump(conns, client._net._wakeup_r, timeout_ms / 1000):
                        return
                timeout_ms = 0  # the library's turn now (its wakeup, or a socket gone)
        self._library_due = now + LIBRARY_EVERY_S
        self.poll(timeout_ms)

    def poll(self, timeout_ms: int) -> None:
        """Moves every connection's bytes for up to ``timeout_ms`` (answers complete handles)."""
        self._client.poll(timeout_ms=timeout_ms)

    def wakeup(self) -> None:
        """Ends a ``poll`` waiting in another thread."""
        self._client.wakeup()

    def collect(self, pending: list, timeout_ms: int | None = None) -> list:
        """The answers to ``send``'s handles, in order: each response, or the ``ClusterError``."""
        timeout_ms = timeout_ms or self.timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        for f in pending:
            if isinstance(f, BaseException):
                continue
            while not f.is_done and time.monotonic() < deadline:
                self._client.poll(timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)), future=f)
        out = []
        for f in pending:
            if isinstance(f, BaseException):
                out.append(ClusterError(f"node not ready: {f}", retriable=True))
            elif not f.is_done:
                out.append(ClusterError(f"no answer within {timeout_ms} ms", retriable=True))
            elif f.failed():
                out.append(ClusterError(f"request failed: {f.exception}", retriable=True))
            else:
                out.append(f.value)
        return out

    # -- metadata -----------------------------------------------------------------------------
    @staticmethod
    def _metadata_request(topics: list[str]):
        return protocol.metadata(topics)

    def refresh(self, topics: Iterable[str]) -> None:
        """Partitions and leaders of ``topics`` (errors name the topic: unknown, not authorized)."""
        Errors = protocol.errors()
        self.connect()
        topics = sorted(set(topics))
        response = self._ask_any(self._metadata_request(topics))
        self._client._manager.cluster.update_metadata(response)
        for t in response.topics:
            if t.error_code:
                err = protocol.error_class(t.error_code)
                if err is Errors.TopicAuthorizationFailedError:
                    raise AuthorizationError(f"not authorized to describe topic {t.name!r}, which reading or writing "
                                             f"it needs ({err.message})", t.error_code)
                if err is Errors.UnknownTopicOrPartitionError:
                    raise UnknownTopicError(f"topic {t.name!r} does not exist on {self._kwargs['bootstrap_servers']}",
                                            t.error_code)
                raise ClusterError(f"metadata for topic {t.name!r}: {err.__name__}", t.error_code,
                                   retriable=getattr(err, "retriable", False))
            self._partitions[t.name] = sorted(p.partition_index for p in t.partitions)
            for p in t.partitions:
                self._leaders[TopicPartition(t.name, p.partition_index)] = Leader(p.leader_id, p.leader_epoch)

    def _ask_any(self, request):
        """``request`` to the least loaded node, else to each other broker the metadata knows,
        until one answers: with brokers down, the least loaded may be one of them (no request in
        flight to a broker that is gone)."""
        tried = self.any_node()
        try:
            return self.request(tried, request)
        except AuthenticationError:
            raise
        except ClusterError as exc:
            last = exc
        cluster = self._client._manager.cluster
        # the brokers the metadata knows, then the bootstrap servers: a metadata taken while brokers
        # were down lists only those that were up, which may all be gone now (KIP-899's rebootstrap)
        for broker in [*cluster.brokers(), *cluster.bootstrap_brokers()]:
            if broker.node_id == tried:
                continue
            try:
                return self.request(broker.node_id, request)
            except AuthenticationError:
                raise
            except ClusterError as exc:
                last = exc
        raise last

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     configs: Mapping[str, str] | None = None) -> bool:
        """Creates topic ``name`` (CreateTopics; -1: the broker's default); False when it exists."""
        request = protocol.create_topic(name, partitions, replication_factor, configs or {}, self.timeout_ms)
        (result,) = self.request(self.any_node(), request).topics
        if result.error_code == 36:  # TOPIC_ALREADY_EXISTS
            return False
        if result.error_code:
            err = protocol.error_class(result.error_code)
            text = f"could not create topic {name!r}: {err.__name__} {getattr(result, 'error_message', '') or ''}".rstrip()
            if result.error_code in (29, 31):  # TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED
                raise AuthorizationError(text, result.error_code)
            raise ClusterError(text, result.error_code, retriable=getattr(err, "retriable", False))
        return True

    def wait_for_topic(self, topic: str, timeout_s: float = 30) -> None:
        """A topic just created: until the metadata names a leader for each of its partitions (the
        broker's metadata lags a creation: UNKNOWN_TOPIC_OR_PARTITION meanwhile, asked again)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.refresh([topic])
                if self.known_partitions(topic):
                    for p in self.partitions(topic):
                        self.leader(TopicPartition(topic, p))
                    return
            except ClusterError as exc:
                if not (exc.retriable or isinstance(exc, UnknownTopicError)) or time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise ClusterError(f"topic {topic} has no partitions {timeout_s} s after it was created", retriable=True)
            time.sleep(0.1)

    def known_partitions(self, topic: str) -> list[int] | None:
        """``topic``'s partitions as the last metadata said, without asking (None: not asked yet)."""
        return self._partitions.get(topic)

    def partitions(self, topic: str) -> list[int]:
        if topic not in self._partitions:
            self.refresh([topic])
        return self._partitions[topic]

    def leader(self, tp: TopicPartition) -> Leader:
        if tp not in self._leaders:
            self.refresh([tp.topic])
            if tp not in self._leaders:
                raise UnknownTopicError(f"partition {tp} does not exist (topic {tp.topic!r} has "
                                        f"{len(self._partitions.get(tp.topic, []))} partitions)", 3)
        return self._leaders[tp]

    def forget_leader(self, tp: TopicPartition) -> None:
        """The leader moved (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH...): ask again next time."""
        self._leaders.pop(tp, None)

    def forget_node(self, node: int) -> None:
        """``node`` is gone or cannot be reached: every partition the last metadata said it leads,
        and every group or transaction it coordinates, is asked for again next time (as Kafka's
        clients ask for metadata, and FindCoordinator, after a disconnection)."""
        for tp in [tp for tp, leader in list(self._leaders.items()) if leader.node == node]:
            self._leaders.pop(tp, None)
        for key in [key for key, at in list(self._coordinators.items()) if at == node]:
            self._coordinators.pop(key, None)

    # -- offsets ------------------------------------------------------------------------------
    def list_offsets(self, wanted: Mapping[TopicPartition, int], isolation_level: int = 0) -> dict[TopicPartition, int]:
        """The offset for each partition's timestamp (``EARLIEST``, ``LATEST`` or epoch ms: the
        first offset whose timestamp is at or after it; ``LATEST`` when none is).  A retriable
        answer (a leader moving, an epoch the broker does not know yet, as right after a restart)
        is asked again after a metadata refresh, within the request timeout."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                return self._list_offsets(wanted, isolation_level)
            except ClusterError as exc:
                if not exc.retriable or time.monotonic() > deadline or isinstance(exc, AuthorizationError):
                    raise
                log.info("%s; asking again", exc)
                time.sleep(0.2)

    def _list_offsets(self, wanted: Mapping[TopicPartition, int], isolation_level: int) -> dict[TopicPartition, int]:
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in wanted.items():
            by_node.setdefault(self.leader(tp).node, {})[tp] = ts
        out: dict[TopicPartition, int] = {}
        unresolved: dict[TopicPartition, int] = {}
        for node, tps in by_node.items():
            topics: dict[str, list] = {}
            for tp, ts in tps.items():
                topics.setdefault(tp.topic, []).append((tp.partition, ts, self.leader(tp).epoch))
            response = self.request(node, protocol.list_offsets(isolation_level, topics))
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        self._raise_partition_error(tp, p.error_code, "ListOffsets")
                    if p.offset < 0:  # no record at or after the timestamp: the end
                        unresolved[tp] = LATEST
                    else:
                        out[tp] = p.offset
        if unresolved:
            out.update(self._list_offsets(unresolved, isolation_level))
        return out

    def _raise_partition_error(self, tp: TopicPartition, code: int, what: str):
        err = protocol.error_class(code)
        if issubclass(err, _errors().AuthorizationError):
            raise AuthorizationError(f"not authorized to use topic {tp.topic!r} ({err.message})", code)
        if err.invalid_metadata:  # the leader moved or its epoch is not the one we know
            self.forget_leader(tp)
        raise ClusterError(f"{what} for {tp}: {err.__name__}({code})", code, retriable=getattr(err, "retriable", False))

    # -- committed offsets of a group (OffsetFetch / OffsetCommit) ------------------------------
    def coordinator(self, key: str, kind: str = "group") -> int:
        """The node coordinating a consumer ``group`` or, with ``kind="transaction"``, a
        transactional id (FindCoordinator)."""
        key_type = {"group": 0, "transaction": 1}[kind]
        if (kind, key) in self._coordinators:
            return self._coordinators[(kind, key)]
        request = protocol.find_coordinator(key, key_type)
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:  # COORDINATOR_NOT_AVAILABLE while the internal topic is being created: ask again
            response = self.request(self.any_node(), request)
            c = (getattr(response, "coordinators", None) or [response])[0]
            if not c.error_code:
                break
            err = protocol.error_class(c.error_code)
            if issubclass(err, _errors().AuthorizationError):
                raise AuthorizationError(f"not authorized to use {kind} {key!r} ({err.message})", c.error_code)
            if not err.retriable or time.monotonic() > deadline:
                raise ClusterError(f"FindCoordinator for {kind} {key!r}: {err.message}", c.error_code,
                                   retriable=err.retriable)
            time.sleep(0.2)
        self._coordinators[(kind, key)] = c.node_id  # a broker the metadata already names
        return c.node_id

    def forget_coordinator(self, key: str, kind: str = "group") -> None:
        """The coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE): ask again next time."""
        self._coordinators.pop((kind, key), None)

    def any_node(self) -> int:
        """The least loaded broker (the bootstrap servers before metadata)."""
        self.connect()
        return self._client.least_loaded_node(bootstrap_fallback=True)

    def committed(self, group: str, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The offsets ``group`` committed for ``tps`` (None: nothing committed)."""
        return {tp: offset for tp, (offset, _) in self.committed_with_metadata(group, tps).items()}

    def committed_with_metadata(self, group: str, tps: Iterable[TopicPartition] | None) \
            -> dict[TopicPartition, tuple[int | None, str]]:
        """The offsets ``group`` committed for ``tps`` (None: nothing committed; ``tps`` None:
        every partition it committed) and the metadata committed with each (a consumer's note:
        "" when none)."""
        tps = None if tps is None else list(tps)
        topics: dict[str, list[int]] | None = None
        for tp in tps or ():
            topics = topics or {}
            topics.setdefault(tp.topic, []).append(tp.partition)
        if tps is not None and topics is None:
            return {}
        response = self.request(self.coordinator(group), protocol.offset_fetch(group, topics))
        code = getattr(response, "error_code", 0)
        if code:
            err = protocol.error_class(code)
            if code in COORDINATOR_MOVED:  # asked again
                self.forget_coordinator(group, "group")
            raise ClusterError(f"OffsetFetch for group {group!r}: {err.__name__}({code})", code,
                               retriable=getattr(err, "retriable", False))
        out: dict[TopicPartition, tuple[int | None, str]] = {tp: (None, "") for tp in tps or ()}
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    self._raise_partition_error(TopicPartition(t.name, p.partition_index), p.error_code, "OffsetFetch")
                out[TopicPartition(t.name, p.partition_index)] = (p.committed_offset if p.committed_offset >= 0
                                                                  else None, p.metadata or "")
        return out

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], metadata: str | Mapping[TopicPartition, str] = "",
               *, member: tuple[str, int, str | None] | None = None) -> None:
        """Commits ``offsets`` (the next offset to read, as Kafka's consumers commit) for
        ``group`` as a standalone committer (no membership, generation -1) or, with ``member``
        (member id, epoch, instance id), as a member of its KIP-848 group; ``metadata``: one
        note for every partition, or one per partition."""
        request = self._commit_request(group, offsets, metadata, member)
        self.check_commit(group, self.request(self.coordinator(group), request))

    def commit_async(self, group: str, offsets: Mapping[TopicPartition, int],
                     metadata: str | Mapping[TopicPartition, str] = "", *,
                     member: tuple[str, int, str | None] | None = None):
        """``commit`` sent without waiting: a handle (``is_done``, ``value``, ``exception``; or
        the exception sending met) whose answer ``check_commit`` reads."""
        return self.send(self.coordinator(group), self._commit_request(group, offsets, metadata, member))

    @staticmethod
    def _commit_request(group, offsets, metadata, member):
        topics: dict[str, list] = {}
        for tp, offset in offsets.items():
            note = metadata if isinstance(metadata, str) else metadata.get(tp, "")
            topics.setdefault(tp.topic, []).append((tp.partition, offset, note))
        return protocol.offset_commit(group, topics, member=member)

    def check_commit(self, group: str, response) -> None:
        """An OffsetCommit answer's first refusal raised (a moved coordinator asked for again next time)."""
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    if p.error_code in COORDINATOR_MOVED:
                        self.forget_coordinator(group, "group")
                    self._raise_partition_error(TopicPartition(t.name, p.partition_index), p.error_code, "OffsetCommit")

    # -- KIP-848's group protocol ------------------------------------------------------------------
    def heartbeat(self, group: str, request):
        """A KIP-848 heartbeat (``protocol.consumer_group_heartbeat``) to ``group``'s coordinator:
        its answer (a moved coordinator is asked for again next time)."""
        response = self.request(self.coordinator(group), request)
        if response.error_code in COORDINATOR_MOVED:
            self.forget_coordinator(group, "group")
        return response

    def topic_names(self, ids: Iterable[bytes]) -> dict[bytes, str]:
        """Topic names of topic ids (16 bytes), as the metadata names them (every topic's
        metadata asked again for an id not known yet: a topic just created)."""
        ids = set(ids)
        if ids - set(self._topic_names):
            self._learn_topic_ids(self.request(self.any_node(), protocol.metadata(None)))
        return {i: self._topic_names[i] for i in ids if i in self._topic_names}

    def topic_ids(self, names: Iterable[str]) -> dict[str, bytes]:
        """Topic ids (16 bytes) of topic names that exist, from the metadata."""
        names = set(names)
        if names - set(self._topic_names.values()):
            self._learn_topic_ids(self.request(self.any_node(), protocol.metadata(sorted(names))))
        return {n: i for i, n in self._topic_names.items() if n in names}

    def _learn_topic_ids(self, response) -> None:
        for t in response.topics:
            if not t.error_code and getattr(t, "topic_id", None) is not None and t.topic_id.int:
                self._topic_names[t.topic_id.bytes] = t.name
