"""A loopback TCP proxy that forwards Kafka traffic unchanged and keeps every request frame.

Clients bootstrap at the proxy and the broker advertises the proxy's address, so every
connection a client opens (bootstrap, partition leaders, coordinators) passes through it.
``upstream`` may change while the proxy runs (a restarted broker has a new port).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

_SIZE = struct.Struct(">i")


class RecordingProxy:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.requests: list[bytes] = []  # request payloads (header + body), in arrival order
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.upstream is None:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket) -> None:
        """Client to broker: forward every byte and cut the stream into frames."""
        pending = bytearray()
        try:
            while chunk := src.recv(1 << 16):
                dst.sendall(chunk)
                pending += chunk
                while len(pending) >= 4:
                    (size,) = _SIZE.unpack_from(pending)
                    if len(pending) < 4 + size:
                        break
                    with self._lock:
                        self.requests.append(bytes(pending[4 : 4 + size]))
                    del pending[: 4 + size]
        except OSError:
            pass
        finally:
            self._shut(src, dst)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(1 << 16):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            self._shut(src, dst)

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()
