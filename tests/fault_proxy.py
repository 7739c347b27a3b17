"""A TCP proxy in front of one broker whose faults a test switches on and off while clients run:
every broker of tests/kafka_cluster.py advertises its client listener through one, so every byte
between a client and a broker passes a proxy the tests own.

Faults (``FaultProxy.fault``):
- ``"pass"``: bytes go through.
- ``"drop"``: every open connection is cut and new ones are closed at once (a broker that
  resets connections, a client's network down).
- ``"blackhole"``: connections stay open and nothing passes either way (a partition of the
  network: the client only learns from its own timeouts); what was sent meanwhile waits in the
  sockets' buffers and arrives when the fault heals, as TCP retransmits it -- a request the client
  gave up on may still reach the broker late.
- ``"answers_lost"``: requests reach the broker and its answers are held back (one direction
  only: the broker acts, the client never learns it did, and gives up on the connection).
- ``"delay"``: each chunk waits ``delay_s`` before it is passed on, both ways.
"""
from __future__ import annotations

import select
import socket
import threading
import time

from tests.tcp_proxy import _close

FAULTS = ("pass", "drop", "blackhole", "answers_lost", "delay")


class FaultProxy:
    def __init__(self, listen_port: int, target_port: int):
        self.target_port = target_port
        self.fault = "pass"
        self.delay_s = 0.0
        self._server = socket.create_server(("127.0.0.1", listen_port))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[tuple[socket.socket, socket.socket]] = set()
        threading.Thread(target=self._accept, daemon=True, name=f"proxy-{listen_port}").start()

    def set(self, fault: str, delay_s: float = 0.0) -> None:
        assert fault in FAULTS, fault
        self.delay_s = delay_s
        self.fault = fault
        if fault == "drop":
            self._cut_all()

    def heal(self) -> None:
        self.set("pass")

    def close(self) -> None:
        self._stop.set()
        try:  # wakes the accepting thread
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        self._cut_all()

    def _cut_all(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for pair in conns:
            _close(*pair)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self.fault == "drop":
                _close(client)
                continue
            try:
                backend = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                backend.settimeout(None)
            except OSError:  # the broker is down: the client sees a refused connection
                _close(client)
                continue
            pair = (client, backend)
            with self._lock:
                self._conns.add(pair)
            threading.Thread(target=self._pump, args=(pair, client, backend, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, backend, client, True), daemon=True).start()

    def _pump(self, pair, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while not self._stop.is_set():
                fault = self.fault
                if fault == "blackhole" or (fault == "answers_lost" and answers):
                    time.sleep(0.05)  # held where TCP holds it: in the buffers
                    continue
                readable, _, _ = select.select([src], [], [], 0.05)
                if not readable:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                if fault == "delay" and self.delay_s:
                    time.sleep(self.delay_s)
                dst.sendall(data)
        except (OSError, ValueError):  # ValueError: the other pump closed the socket under select
            pass
        finally:
            with self._lock:
                self._conns.discard(pair)
            _close(*pair)
