"""A TCP proxy between Kafka clients and a broker listener that loses answers on purpose: after
every ``drop_every``-th Produce request has reached the broker, the connection is cut before the
broker's answer gets back, so the client cannot know whether its batch was appended -- the case
idempotent retries exist for."""
from __future__ import annotations

import socket
import struct
import threading
import time

PRODUCE = 0  # Kafka's api key of a Produce request


class DroppingProxy:
    def __init__(self, listen_port: int, target_port: int, drop_every: int = 0):
        self.target_port = target_port
        self.drop_every = drop_every
        self.produce_requests = 0
        self.dropped = 0
        self._server = socket.create_server(("127.0.0.1", listen_port))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        try:  # wakes the accepting thread: a listening socket closed under accept() stays listening
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                backend = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            cut = threading.Event()
            threading.Thread(target=self._requests, args=(client, backend, cut), daemon=True).start()
            threading.Thread(target=self._answers, args=(backend, client, cut), daemon=True).start()

    def _requests(self, client: socket.socket, backend: socket.socket, cut: threading.Event) -> None:
        """Client -> broker, a request frame at a time (size-prefixed), counting Produce requests."""
        try:
            while not cut.is_set():
                head = _read(client, 4)
                (size,) = struct.unpack(">i", head)
                body = _read(client, size)
                (api_key,) = struct.unpack(">h", body[:2])
                drop = False
                if api_key == PRODUCE and self.drop_every:
                    with self._lock:
                        self.produce_requests += 1
                        drop = self.produce_requests % self.drop_every == 0
                if drop:
                    cut.set()  # set before the request leaves: its answer must not get through
                backend.sendall(head + body)
                if drop:
                    time.sleep(0.3)  # the broker has it (and appends it) before the cut
                    self.dropped += 1
                    break
        except OSError:
            pass
        finally:
            cut.set()
            _close(client, backend)

    def _answers(self, backend: socket.socket, client: socket.socket, cut: threading.Event) -> None:
        try:
            while not cut.is_set():
                data = backend.recv(65536)
                if not data or cut.is_set():
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            cut.set()
            _close(client, backend)


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise OSError("closed")
        out += chunk
    return bytes(out)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
