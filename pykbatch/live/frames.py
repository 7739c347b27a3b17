"""Response frames received straight into their own buffer: the receive half of the wire seam.

kafka-python 3.0.12 (pinned) reads a socket 4 KiB at a time, joins the pieces, copies them into
the frame's buffer, copies the frame out again to decode it and once more for each bytes field:
five copies of every fetched record in Python and a system call per 4 KiB, most of a consumer's
time at a few million records a second.  ``install`` gives one of the Cluster's connections a
receiver that reads each frame's size, then ``recv_into`` the frame's own buffer until it is
full, and hands the connection's protocol parser that buffer to decode (a memoryview of it, so
the decoder's copy of a bytes field is the only one).  The socket, TLS, SASL, correlation ids and
futures stay the library's; only where the bytes land changes.

Installed on a connection only when it is between frames and the library looks as this was
written against (``ACCELERATED`` says whether it was); otherwise the library's own path serves.
"""
from __future__ import annotations

import logging
import select
import ssl
import threading
import time

log = logging.getLogger(__name__)

SCRATCH = 64 << 10  # bytes read at once between frames (sizes, small answers)
WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
MARK = "_pykbatch_frames"


def _frame_class():
    from kafka.protocol.frame import KafkaBytes

    class Frame(KafkaBytes):
        """A response frame as the parser reads it; the rest of it (the body) as a view, not a copy."""

        def read(self, nbytes=None):
            if nbytes is None:
                start, self._idx = self._idx, len(self)
                return memoryview(self)[start:]
            return super().read(nbytes)
    return Frame


class Receiver:
    """One connection's frames: ``recv`` replaces its transport's socket read, ``receive_bytes``
    its parser's (the frames completed since, decoded by the parser's own ``_process_response``)."""

    def __init__(self, transport, parser):
        self.transport, self.parser = transport, parser
        self.frame_class = _frame_class()
        self.scratch = bytearray(SCRATCH)
        self.head = bytearray(4)
        self.head_filled = 0
        self.frame = None
        self.filled = 0
        self.done: list = []
        self.writing = threading.Lock()
        self.expected: dict[int, Answer] = {}  # correlation id -> a request pykbatch wrote itself
        self.versions: dict[str, int] = {}     # API versions agreed on this connection, by name

    # -- the transport's side ------------------------------------------------------------------
    def recv(self):
        """Everything the socket has now, into frames; ``(b"", error)`` as the transport expects
        (the frames reach the parser through ``receive_bytes``)."""
        import kafka.errors as Errors
        sock = self.transport._sock
        try:
            while True:
                if self.frame is not None and len(self.frame) - self.filled >= SCRATCH:
                    n = sock.recv_into(memoryview(self.frame)[self.filled:])  # the kernel copies, nobody else
                    if n:
                        self._grow(n)
                else:
                    n = sock.recv_into(self.scratch)
                    if n:
                        self._take(memoryview(self.scratch)[:n])
                if not n:
                    log.error("%s: socket disconnected", self.transport)
                    return b"", Errors.KafkaConnectionError("socket disconnected")
        except WOULD_BLOCK:
            return b"", None
        except Errors.KafkaError as exc:  # a frame size out of bounds
            return b"", exc
        except BaseException as exc:  # noqa: BLE001 (as the library: the connection closes with the cause)
            log.exception("%s: error receiving network data, closing socket", self.transport)
            return b"", Errors.KafkaConnectionError(exc)

    def _take(self, chunk: memoryview) -> None:
        while chunk:
            if self.frame is None:
                k = min(4 - self.head_filled, len(chunk))
                self.head[self.head_filled:self.head_filled + k] = chunk[:k]
                self.head_filled += k
                chunk = chunk[k:]
                if self.head_filled < 4:
                    return
                size = int.from_bytes(self.head, "big", signed=True)
                self.parser._validate_frame_size(size)
                self.frame, self.filled, self.head_filled = self.frame_class(size), 0, 0
            k = min(len(self.frame) - self.filled, len(chunk))
            self.frame[self.filled:self.filled + k] = chunk[:k]
            chunk = chunk[k:]
            self._grow(k)

    def _grow(self, n: int) -> None:
        self.filled += n
        if self.filled == len(self.frame):
            self.done.append(self.frame)
            self.frame = None

    def write(self, data) -> None:
        """The transport's write, first straight to the socket: the library queues every write
        for its event loop, so a request sent before a long piece of work (a consumer's next
        fetch, sent before it reads the last answer) would leave only when the work is done."""
        t = self.transport
        with self.writing:  # threads sharing the connection: one request's bytes never split by another's
            if data and t._write and not t._closed and not t._write_buffer and not t._writing and t._sock is not None:
                try:
                    sent = t._sock.send(data)
                except WOULD_BLOCK:
                    sent = 0
                except OSError:
                    sent = 0  # the library's own write meets the error and closes the connection
                if sent:
                    t.last_write = time.monotonic()
                data = memoryview(data)[sent:]
                if not data:
                    return
            self.library_write(data)

    def expect(self, correlation_id: int, answer: Answer) -> None:
        """The response to ``correlation_id`` (a request written with ``write``, its id taken from
        the parser's own sequence) goes to ``answer``, not to the library's parser."""
        self.expected[correlation_id] = answer

    # -- the parser's side ---------------------------------------------------------------------
    def receive_bytes(self, data) -> list:
        if data:
            self._take(memoryview(data))
        done, self.done = self.done, []
        out = []
        for frame in done:
            answer = self.expected.pop(int.from_bytes(frame[:4], "big", signed=True), None) if self.expected else None
            if answer is not None:
                answer.frame = frame
            else:
                out.append(self.parser._process_response(frame))
        return out


class Answer:
    """The response to a request pykbatch wrote on a library connection, read as the library's
    futures are (``is_done``, ``failed()``, ``value``, ``exception``): ``read`` decodes the frame
    (a ValueError when it does not decode); a connection that closed first fails it."""
    __slots__ = ("conn", "read", "frame", "_value", "_error")

    def __init__(self, conn, read):
        self.conn, self.read = conn, read
        self.frame = self._value = self._error = None

    @property
    def is_done(self) -> bool:
        if self.frame is None and self._error is None and self.conn.closed:
            import kafka.errors as Errors
            self._error = Errors.KafkaConnectionError("the connection closed before the answer came")
        return self.frame is not None or self._error is not None

    def failed(self) -> bool:
        if self.frame is not None and self._value is None and self._error is None:
            try:
                self._value = self.read(memoryview(self.frame))
            except ValueError as exc:
                self._error = exc
        return self._error is not None

    @property
    def value(self):
        return None if self.failed() else self._value

    @property
    def exception(self):
        return self._error if self.failed() else None


def can_pump(client) -> bool:
    """Whether ``pump`` may stand in for the library's loop on ``client``'s connections (the
    parts of kafka-python 3.0.12 it reads are there)."""
    net = getattr(client, "_net", None)
    return (ACCELERATED and net is not None and all(hasattr(net, a) for a in ("_wakeup_r", "_ready", "_scheduled"))
            and hasattr(client, "_lock") and hasattr(getattr(client, "_manager", None), "_conns"))


def library_busy(client) -> bool:
    """Whether the library's loop has work of its own: a task ready or a timer due (a request of
    its own timing out, a re-authentication), a request of its own in flight, a connection being
    made, or bytes it holds to write."""
    net = client._net
    if net._ready or (net._scheduled and net._scheduled[0][0] <= time.monotonic()):
        return True
    for conn in client._manager._conns.values():
        transport = getattr(conn, "transport", None)
        if (getattr(conn, "in_flight_requests", None) or getattr(conn, "initializing", True) or transport is None
                or getattr(transport, "_write_buffer", True) or getattr(transport, "_writing", True)):
            return True
    return False


def pump(conns: list, wakeup, timeout: float) -> bool:
    """Waits up to ``timeout`` seconds for ``conns``' sockets (connections with answers pykbatch
    expects), reads what they have into frames, and hands the frames on as the library's read
    loop would (``data_received``: pykbatch's answers to their ``Answer``, the library's to its
    futures); a socket that failed is aborted as that loop aborts it.  False, having read
    nothing, when the library's loop must run instead (its wakeup was signalled, a socket is
    gone)."""
    socks = {}
    for conn in conns:
        sock = getattr(conn.transport, "_sock", None)
        if sock is None:
            return False
        socks[sock] = conn
    try:
        readable, _, _ = select.select([*socks, wakeup], [], [], max(timeout, 0))
    except (OSError, ValueError):  # a socket closed meanwhile
        return False
    if wakeup in readable:
        return False
    for sock in readable:
        conn = socks[sock]
        receiver = getattr(conn, MARK)
        _, error = receiver.recv()
        if receiver.done:
            conn.data_received(b"")
        if error is not None:
            conn.transport.abort(error)
    return True


def writable(conn) -> Receiver | None:
    """``conn``'s receiver when pykbatch may write a request of its own on it now: connected, not
    (re-)authenticating, not paused (a throttle); else None (the library's path serves)."""
    receiver = getattr(conn, MARK, None) if conn is not None else None
    if receiver is None or not conn.connected or conn.initializing or getattr(conn, "paused", True):
        return None
    reauth = getattr(conn, "_reauth", None)
    if reauth is None or reauth.is_reauthenticating:
        return None
    return receiver


def install(conn) -> bool:
    """Gives ``conn`` (a kafka-python connection) the receiver; False when it cannot have it
    (not connected yet, inside a frame, or a library that does not look as expected).  Called by
    the thread that drives the connection (a Cluster is used by one thread at a time: the
    producer runs its cluster calls on its sender thread), so no frame is half read meanwhile."""
    if conn is None or getattr(conn, MARK, None) is not None:
        return conn is not None
    transport, parser = getattr(conn, "transport", None), getattr(conn, "parser", None)
    if transport is None or parser is None or not ACCELERATED:
        return False
    if getattr(parser, "_receiving", True) or parser._header.tell() != 0 or not hasattr(transport, "_sock"):
        return False  # a frame is partly read by the library's parser: the next time
    receiver = Receiver(transport, parser)
    receiver.library_write = transport.write
    transport._sock_recv = receiver.recv
    transport.write = receiver.write
    parser.receive_bytes = receiver.receive_bytes
    setattr(conn, MARK, receiver)
    return True


def _looks_as_expected() -> bool:
    try:
        import kafka
        from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport
        from kafka.protocol.frame import KafkaBytes
        from kafka.protocol.parser import KafkaProtocol
    except ImportError:
        return False
    needed = (all(hasattr(t, a) for t in (KafkaTCPTransport, KafkaSSLTransport) for a in ("_sock_recv", "write"))
              and all(hasattr(KafkaProtocol, a) for a in ("receive_bytes", "_process_response", "_validate_frame_size"))
              and hasattr(KafkaBytes, "read"))
    if not needed:
        log.info("kafka-python %s: responses received by the library's own path", kafka.__version__)
    return needed


ACCELERATED = _looks_as_expected()
