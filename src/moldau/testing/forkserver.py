"""The fork server: imports the broker once, then forks a broker per start.

A new interpreter spends most of a broker's start-up importing (0.5-1 s); a fork of a
process that has already imported everything listens in ~20 ms. ``moldau.testing`` starts
one fork server per test process (``python -m moldau.testing.forkserver FD``) and asks it,
over the Unix socket FD, for brokers.

Messages are a 4-byte length and a JSON object.

- client -> server: ``{"op": "spawn", "id": n, "overrides": [...], "cwd": dir}`` (and
  optionally ``"open_files"``, ``"network_namespace"``) with the broker's output pipe
  attached (SCM_RIGHTS); ``{"op": "signal", "pid": p, "signal": s}``.
- server -> client: ``{"op": "ready"}`` once imported; ``{"op": "spawned", "id": n,
  "pid": p}``; ``{"op": "exited", "pid": p, "returncode": c}`` (Popen's convention).

The server reaps its children itself, so a pid it signals is never a reused one. When the
client goes away it stops the brokers that are left (SIGTERM, then SIGKILL) and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import logging
import os
import pkgutil
import resource
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
from typing import Any, NoReturn

_LENGTH = struct.Struct(">I")
_MAX_FDS = 4
_STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    frame = _LENGTH.pack(len(data)) + data
    sent = socket.send_fds(sock, [frame], fds) if fds else 0
    sock.sendall(frame[sent:])


class Receiver:
    """Reassembles messages from a stream socket; file descriptors queue up in arrival
    order (one travels with each spawn request, at its first byte)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.fds: list[int] = []

    def receive(self) -> list[dict[str, Any]] | None:
        """The messages completed by one read; None at end of stream."""
        data, fds, _, _ = socket.recv_fds(self.sock, 65536, _MAX_FDS)
        self.fds += fds
        if not data:
            return None
        self.buffer += data
        messages = []
        while len(self.buffer) >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self.buffer)
            if len(self.buffer) < _LENGTH.size + size:
                break
            messages.append(json.loads(self.buffer[_LENGTH.size : _LENGTH.size + size]))
            self.buffer = self.buffer[_LENGTH.size + size :]
        return messages


def preload() -> None:
    """Import what a broker runs: the `moldau server` command and every server module."""
    import uvloop  # noqa: F401

    import moldau.cli.server  # noqa: F401
    import moldau.server

    for module in pkgutil.walk_packages(moldau.server.__path__, "moldau.server."):
        importlib.import_module(module.name)


def die_with_parent(parent: int) -> None:
    """Linux: SIGTERM this broker if the fork server dies, even by kill -9."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the fork server's clean exit must do
        return
    if os.getppid() != parent:  # died before prctl
        os.kill(os.getpid(), signal.SIGTERM)


def enter_network_namespace(name: str) -> None:
    """Linux: move this (single-threaded) process into the network namespace that
    ``ip netns add NAME`` made, as ``ip netns exec`` would."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into network namespace {name}: {os.strerror(errno)}")
    finally:
        os.close(fd)


def run_broker(
    overrides: list[str],
    output: int,
    cwd: str,
    inherited: list[int],
    open_files: int | None = None,
    network_namespace: str | None = None,
) -> NoReturn:
    """In the forked child: become `moldau server -o ...` writing to ``output`` (with
    RLIMIT_NOFILE set to ``open_files``, soft and hard, when given; inside the named
    network namespace, when given)."""
    code = 1
    try:
        if open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
        parent = os.getppid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        die_with_parent(parent)
        for fd in inherited:
            os.close(fd)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        os.chdir(cwd)
        if network_namespace is not None:
            enter_network_namespace(network_namespace)
        from moldau.cli.server import server

        try:
            server(config=None, override=overrides)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except Exception as e:
            exit_code = getattr(e, "exit_code", None)  # typer.Exit
            if isinstance(exit_code, int):
                code = exit_code
            else:
                traceback.print_exc()
    except BaseException:
        traceback.print_exc()
    finally:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class ForkServer:
    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.receiver = Receiver(control)
        self.children: set[int] = set()
        self.wakeup_r, self.wakeup_w = socket.socketpair()
        for s in (self.wakeup_r, self.wakeup_w):
            s.setblocking(False)
        signal.set_wakeup_fd(self.wakeup_w.fileno())
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select() through the fd
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.control, selectors.EVENT_READ)
        self.selector.register(self.wakeup_r, selectors.EVENT_READ)

    def serve(self) -> None:
        send(self.control, {"op": "ready"})
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.wakeup_r:
                    with contextlib.suppress(BlockingIOError):
                        while self.wakeup_r.recv(4096):
                            pass
                    self.reap()
                    continue
                messages = self.receiver.receive()
                if messages is None:
                    self.stop_all()
                    return
                for message in messages:
                    self.handle(message)

    def handle(self, message: dict[str, Any]) -> None:
        if message["op"] == "spawn":
            output = self.receiver.fds.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                ours = [self.control, self.wakeup_r, self.wakeup_w]
                inherited = [s.fileno() for s in ours] + [self.selector.fileno()]
                inherited += self.receiver.fds  # other brokers' output pipes
                run_broker(
                    message["overrides"],
                    output,
                    message["cwd"],
                    inherited,
                    message.get("open_files"),
                    message.get("network_namespace"),
                )
            os.close(output)
            self.children.add(pid)
            send(self.control, {"op": "spawned", "id": message["id"], "pid": pid})
        elif message["op"] == "signal" and message["pid"] in self.children:
            os.kill(message["pid"], message["signal"])

    def reap(self) -> None:
        while self.children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            self.children.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):  # the client may be gone already
                send(self.control, {"op": "exited", "pid": pid, "returncode": code})

    def stop_all(self) -> None:
        """The client is gone: its brokers must not outlive it."""
        for pid in self.children:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        while self.children and time.monotonic() < deadline:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid:
                self.children.discard(pid)
            else:
                time.sleep(0.02)
        for pid in self.children:
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the test run, not for us
    control = socket.socket(fileno=int(sys.argv[1]))
    preload()
    gc.freeze()  # the imported modules stay shared with every broker, never scanned by its GC
    ForkServer(control).serve()
    sys.stdout.flush()
    os._exit(0)  # nothing to finalize; the test run is waiting for us


if __name__ == "__main__":
    main()
