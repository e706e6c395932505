"""A real Moldau broker in a subprocess, for integration tests and benchmarks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path

_LISTENING = re.compile(r"listening on (\S+):(\d+)")


class BrokerProcess:
    """Start `python -m moldau server` on port 0 and learn its address from stdout.

    Usable as a context manager; `restart()` keeps the data dir, `kill()` is kill -9.
    """

    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        *,
        startup_timeout: float = 30.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.overrides = dict(overrides or {})
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.host = "127.0.0.1"
        self.port = 0
        self.output: deque[str] = deque(maxlen=500)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerProcess:
        props = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "moldau", "server"]
        for key, value in props.items():
            cmd += ["-o", f"{key}={value}"]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        found = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line.rstrip())
                match = _LISTENING.search(line)
                if match and not found.is_set():
                    self.host, self.port = match.group(1), int(match.group(2))
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout
        while not found.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("broker did not start:\n" + "\n".join(self.output))
        return self

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        """kill -9: an unclean stop."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
