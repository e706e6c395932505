"""A real single-node Moldau broker in its own process, on a free loopback port."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import tempfile
import termios
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from moldau.testing.clients import ClientHelpers, kafka_configs
from moldau.testing.launcher import ForkedProcess, launcher

_LISTENING = re.compile(r"listening on (\S+):(\d+)")

# What broker() and the moldau_broker fixture change from Kafka's defaults, as Kafka's own
# test harnesses do: a lone consumer joins at once, and the first consumer group (share
# group) does not create 50 partitions of __consumer_offsets (__share_group_state).
TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
}

_running: list[BrokerProcess] = []  # started and not yet closed, for failure reports


def running_brokers() -> list[BrokerProcess]:
    """Brokers started in this process and not closed yet (running or not)."""
    return list(_running)


class BrokerProcess(ClientHelpers):
    """`moldau server` in a process of its own, on 127.0.0.1.

    The first start binds a free port; later starts (``restart()``, ``start()`` after
    ``kill()``) bind the same one, so clients reconnect as to a restarted Kafka broker.
    Without ``data_dir`` the data lives in a temporary directory that ``close()`` (or the
    end of a ``with`` block) removes; ``stop()`` and ``kill()`` keep the data for a restart.
    ``configs`` are server properties (``{"num.partitions": "3"}``).

    Brokers are forked from a helper process that imported the broker once (see
    ``moldau.testing.forkserver``), so a start takes milliseconds after the first; they run
    with the environment the test process had when it started its first broker.
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        startup_timeout: float = 30.0,
        open_files_limit: int | None = None,
        network_namespace: str | None = None,
    ) -> None:
        """``open_files_limit`` starts the broker with RLIMIT_NOFILE at that (soft and hard),
        for tests of what it does with few descriptors; ``network_namespace`` runs it in a
        network namespace made with ``ip netns add`` (Linux, root: network partitions)."""
        self.open_files_limit = open_files_limit
        self.network_namespace = network_namespace
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="moldau-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.configs = {k: str(v) for k, v in (configs or {}).items()}
        self.startup_timeout = startup_timeout
        self.proc: ForkedProcess | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.output: deque[str] = deque(maxlen=2000)
        self.lines_seen = 0  # lines ever appended to output (which keeps the last ones)
        self._pump: threading.Thread | None = None
        self._output_fd = -1

    # -- addresses -------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        if not self.port:
            raise RuntimeError("the broker has not been started (use `with broker() as b:`)")
        return f"{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        """Short for :attr:`bootstrap_servers`."""
        return self.bootstrap_servers

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> BrokerProcess:
        """Start and return once the broker listens; raise with its output if it cannot."""
        self.wait_listening(self.launch())
        return self

    def launch(self) -> threading.Event:
        """Fork the broker and return at once; the event is set once it listens. A cluster
        launches every node first: a KRaft node listens only once a quorum elected a
        leader and registered it."""
        if self.running:
            raise RuntimeError(f"broker at {self.bootstrap_servers} is already running")
        props = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.configs,
        }
        read_end, write_end = os.pipe()
        try:
            proc = launcher().spawn(
                [f"{k}={v}" for k, v in props.items()],
                write_end,
                self.startup_timeout,
                self.open_files_limit,
                self.network_namespace,
            )
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.proc = proc
        listening = threading.Event()
        self._pump = threading.Thread(
            target=self._read_output, args=(read_end, listening), daemon=True
        )
        self._pump.start()
        return listening

    def wait_listening(self, listening: threading.Event) -> None:
        """Wait for :meth:`launch`'s event; kill the broker and raise with its output if it
        exits or does not listen within ``startup_timeout``."""
        proc = self.proc
        deadline = time.monotonic() + self.startup_timeout
        while not listening.wait(0.01):
            if proc is None or proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("broker did not start:\n" + "\n".join(self.output))
        if self not in _running:
            _running.append(self)

    def _read_output(self, fd: int, listening: threading.Event) -> None:
        self._output_fd = fd
        with open(fd, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                self.output.append(line.rstrip())
                self.lines_seen += 1
                if not listening.is_set() and (match := _LISTENING.search(line)):
                    self.host, self.port = match.group(1), int(match.group(2))
                    listening.set()
            self._output_fd = -1

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait: a clean shutdown (kill -9 after ``timeout``). Returns the exit
        code, None if it was not started."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self._ended()

    def kill(self) -> None:
        """kill -9: an unclean stop."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._ended()

    def _ended(self) -> int | None:
        assert self.proc is not None
        code = self.proc.returncode
        self.proc = None
        if self._pump is not None:
            self._pump.join(5)  # all of its output is in self.output
        return code

    def restart(self) -> BrokerProcess:
        """Clean stop, then start on the same port and data."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the data if it lives in a temporary directory of ours."""
        self.stop()
        if self in _running:
            _running.remove(self)
        if self._tmp is not None:
            self._tmp.cleanup()

    def settle_output(self, quiet: float = 0.05, limit: float = 1.0) -> None:
        """Wait until what the broker wrote so far is in :attr:`output`: its pipe is empty
        and no line came for ``quiet`` seconds (at most ``limit``)."""
        deadline = time.monotonic() + limit
        seen = -1
        while time.monotonic() < deadline and (seen != self.lines_seen or self._unread()):
            seen = self.lines_seen
            time.sleep(quiet)

    def _unread(self) -> int:
        if self._output_fd < 0:  # never started, or closed: nothing left to read
            return 0
        try:
            return struct.unpack("i", fcntl.ioctl(self._output_fd, termios.FIONREAD, b"\0" * 4))[0]
        except OSError:  # closed: everything was read
            return 0

    def output_since(self, mark: int) -> list[str]:
        """The output lines after ``lines_seen`` was ``mark`` (those still kept)."""
        return list(self.output)[max(0, len(self.output) - (self.lines_seen - mark)) :]

    def state(self) -> str:
        if self.proc is None:
            return "stopped"
        code = self.proc.poll()
        return "running" if code is None else f"exited with code {code}"

    def __repr__(self) -> str:
        where = f"{self.host}:{self.port}" if self.port else "not started"
        return f"<BrokerProcess {where} {self.state()} data_dir={str(self.data_dir)!r}>"

    # -- context managers ------------------------------------------------------------
    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> BrokerProcess:
        import asyncio

        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        import asyncio

        await asyncio.to_thread(self.close)


def broker(**configs: Any) -> BrokerProcess:
    """A broker to use as ``with broker() as b:`` or ``async with broker() as b:``.

    Keywords are server properties with dots as underscores (``num_partitions=3``,
    ``auto_create_topics_enable=False``); pass ``**{"log.retention.ms": 1000}`` for any
    other spelling. They apply on top of :data:`TEST_DEFAULTS`. The data lives in a
    temporary directory removed on exit.
    """
    return BrokerProcess(configs={**TEST_DEFAULTS, **kafka_configs(configs)})
