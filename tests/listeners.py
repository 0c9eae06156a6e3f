"""Servers outside the sandbox that the network tests probe: each answers every connection with its bytes, on a
thread of its own, until closed. Closing wakes and joins that thread before the socket's descriptor is freed:
a thread still blocked in accept() on a closed socket keeps it listening, and one that retries the call after
an interruption accepts on whatever socket the number names next (the following test's server), where it
answered with its own test's token (CI of 2aabb94, once)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class Answering:
    """A listening socket and the thread that answers on it; `sock` for its address."""

    def __init__(self, sock: socket.socket, answer: bytes | Callable[[socket.socket], None], read_first=False):
        self.sock = sock
        self._answer = answer
        self._read_first = read_first
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with contextlib.suppress(OSError), c:
                if callable(self._answer):
                    self._answer(c)
                    continue
                if self._read_first:
                    c.settimeout(5)
                    c.recv(4096)
                c.sendall(self._answer)

    def getsockname(self):  # noqa: ANN201  (what socket.getsockname returns)
        return self.sock.getsockname()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() in progress
        self._thread.join(10)
        assert not self._thread.is_alive(), f"the server on {self.sock.getsockname()} did not stop"
        self.sock.close()


def listening(family: int, addr, answer: bytes | Callable[[socket.socket], None], read_first=False) -> Answering:
    s = socket.socket(family, socket.SOCK_STREAM)
    if family != socket.AF_UNIX:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(addr)
    s.listen(16)
    return Answering(s, answer, read_first)
