"""The test process's side of the fork server: start it once, ask it for brokers."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from signal import SIGKILL, SIGTERM
from typing import Any

from moldau.testing.forkserver import Receiver, send


class ForkedProcess:
    """The part of :class:`subprocess.Popen` that brokers need, for a process forked by the
    fork server: ``pid``, ``returncode``, ``poll()``, ``wait()``, ``send_signal()``,
    ``terminate()``, ``kill()``. Signals go through the fork server, which reaps the
    process, so a signal never reaches a process that merely reuses the pid."""

    def __init__(self, launcher: Launcher, pid: int) -> None:
        self.launcher = launcher
        self.pid = pid
        self.returncode: int | None = None
        self._exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"broker pid {self.pid}", timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            self.launcher.signal(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(SIGTERM)

    def kill(self) -> None:
        self.send_signal(SIGKILL)

    def _exit(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()


class Launcher:
    """One fork server per test process, started on first use."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        ours, theirs = socket.socketpair()
        self.server = subprocess.Popen(
            [sys.executable, "-m", "moldau.testing.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        theirs.close()
        self.sock = ours
        self.output: deque[str] = deque(maxlen=200)  # the fork server's own (errors)
        self.ready: Future[None] = Future()
        self.dead: Exception | None = None
        self.spawning: dict[int, Future[ForkedProcess]] = {}
        self.children: dict[int, ForkedProcess] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.drain = threading.Thread(target=self._drain, name="moldau-forkserver-out", daemon=True)
        self.drain.start()
        threading.Thread(target=self._receive, name="moldau-forkserver", daemon=True).start()

    def spawn(
        self,
        overrides: list[str],
        output: int,
        timeout: float,
        open_files: int | None = None,
        network_namespace: str | None = None,
    ) -> ForkedProcess:
        """Fork a `moldau server -o ...` writing to the pipe end ``output`` (in the network
        namespace ``ip netns add NAME`` made, when given)."""
        self.ready.result(timeout)
        with self.lock:
            if self.dead is not None:
                raise self.dead
            request = next(self.ids)
            future: Future[ForkedProcess] = Future()
            self.spawning[request] = future
            message = {
                "op": "spawn",
                "id": request,
                "overrides": overrides,
                "cwd": os.getcwd(),
                "open_files": open_files,
                "network_namespace": network_namespace,
            }
            send(self.sock, message, [output])
        try:
            return future.result(timeout)
        except TimeoutError:
            with self.lock:
                self.spawning.pop(request, None)
            if future.done() and future.exception() is None:
                future.result().kill()
            raise

    def signal(self, pid: int, sig: int) -> None:
        with self.lock, contextlib.suppress(OSError):
            send(self.sock, {"op": "signal", "pid": pid, "signal": sig})

    def close(self) -> None:
        """Closing the socket makes the fork server stop what is left and exit (shutdown
        first: our reader thread, blocked in recv, keeps a closed socket open)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        try:
            self.server.wait(15)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()

    def _receive(self) -> None:
        receiver = Receiver(self.sock)
        try:
            while (messages := receiver.receive()) is not None:
                for message in messages:
                    self._handle(message)
        except OSError:
            pass
        self.server.wait()
        self.drain.join(5)
        self._fail(RuntimeError("the moldau fork server exited:\n" + "\n".join(self.output)))

    def _handle(self, message: dict[str, Any]) -> None:
        op = message["op"]
        if op == "ready":
            self.ready.set_result(None)
        elif op == "spawned":
            child = ForkedProcess(self, message["pid"])
            self.children[child.pid] = child
            with self.lock:
                future = self.spawning.pop(message["id"], None)
            if future is None:
                child.kill()  # its spawn() gave up waiting
            else:
                future.set_result(child)
        elif op == "exited":
            self.children.pop(message["pid"])._exit(message["returncode"])

    def _fail(self, error: Exception) -> None:
        """The fork server is gone, and with it its brokers (they die with their parent)."""
        with self.lock:
            self.dead = error
            if not self.ready.done():
                self.ready.set_exception(error)
            for future in self.spawning.values():
                if not future.done():
                    future.set_exception(error)
        for child in list(self.children.values()):
            child._exit(-SIGKILL)

    def _drain(self) -> None:
        assert self.server.stdout is not None
        for line in self.server.stdout:
            self.output.append(line.rstrip())


_launcher: Launcher | None = None
_launcher_lock = threading.Lock()


def launcher() -> Launcher:
    """This process's fork server (a new one after os.fork() or if it died)."""
    global _launcher
    with _launcher_lock:
        if _launcher is None or _launcher.owner != os.getpid() or _launcher.dead is not None:
            _launcher = Launcher()
            atexit.register(_launcher.close)
        return _launcher
