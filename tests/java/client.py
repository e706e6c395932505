"""Drive ``MoldauClient.java`` (the Apache Kafka Java client) from Python tests.

:class:`JavaClient` runs one command in a JVM and parses its JSON-line events;
:meth:`JavaClient.start` keeps one running (a group member) and streams its events.
``produce`` and ``consume`` have the shape of the other clients' helpers in
``tests/integration/helpers.py`` (:class:`Rec` in, :data:`Acked` / :data:`Consumed` out), so
the same :func:`assert_log_matches` judges them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from tests.integration.helpers import DEADLINE_S, Acked, Consumed, Got, Rec
from tests.java.jars import ClientBuild, build, find_javac

Event = dict[str, Any]
# A JVM that outlives its own timeouts by this much is hung, not slow.
_GRACE_S = 30.0


def java_client() -> JavaClient | None:
    """The client, compiled if needed; None when no JDK is installed at all."""
    javac = find_javac()
    if javac is None:
        return None
    return JavaClient(build(javac))


@dataclass
class JavaResult:
    """What one run printed: its events in order, its stderr (the client's log), its status."""

    args: list[str]
    returncode: int
    events: list[Event]
    stderr: str
    seconds: float

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e["event"] == kind]

    def one(self, kind: str) -> Event:
        found = self.of(kind)
        assert len(found) == 1, f"expected one {kind!r} event, got {len(found)}:\n{self}"
        return found[0]

    @property
    def errors(self) -> list[Event]:
        return self.of("error")

    def check(self) -> JavaResult:
        """Assert the run succeeded; the message shows what the client said."""
        assert self.returncode == 0 and not self.errors, f"Java client failed:\n{self}"
        return self

    def __str__(self) -> str:
        events = "\n".join(json.dumps(e)[:500] for e in self.events[-40:])
        log = "\n".join(self.stderr.splitlines()[-60:])
        return (
            f"$ MoldauClient {' '.join(self.args)}\nexit {self.returncode} after "
            f"{self.seconds:.1f}s\n--- events (last 40)\n{events}\n--- stderr (last 60)\n{log}"
        )


class JavaClient:
    def __init__(self, program: ClientBuild, log_level: str = "WARN") -> None:
        self.program = program
        self.log_level = log_level

    def command(self, args: Sequence[str]) -> list[str]:
        return self.program.command(args, self.log_level)

    def run(
        self, *args: str, stdin: bytes | None = None, timeout: float = DEADLINE_S
    ) -> JavaResult:
        """Run to completion; a JVM still running after ``timeout`` is killed and fails."""
        start = time.monotonic()
        try:
            done = subprocess.run(
                self.command(args), input=stdin, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            err = (e.stderr or b"").decode(errors="replace")
            raise AssertionError(
                f"Java client hung: still running after {timeout}s: {' '.join(args)}\n"
                f"--- stdout\n{out[-5000:]}\n--- stderr\n{err[-5000:]}"
            ) from None
        return JavaResult(
            list(args),
            done.returncode,
            _parse(done.stdout.decode()),
            done.stderr.decode(errors="replace"),
            time.monotonic() - start,
        )

    def start(self, *args: str, stdin: bytes | None = None) -> JavaProcess:
        """Start one in the background; ``stdin`` is written (then closed) for it."""
        process = JavaProcess(list(args), self.command(args))
        if stdin is not None:
            process.feed(stdin)
        return process

    # --- the shapes of tests/integration/helpers.py --------------------------------------

    def produce(
        self, bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none", *options: str
    ) -> Acked:
        """Produce ``records`` (from stdin) and return what the broker acknowledged; every
        record must be acknowledged."""
        result = self.run(
            "produce", "--bootstrap", bootstrap, "--topic", topic, "--stdin",
            "--compression", codec, *options,
            stdin=b"".join(map(encode_record, records)),
        ).check()  # fmt: skip
        acks = result.of("ack")
        assert len(acks) == len(records), f"{len(acks)} of {len(records)} acked:\n{result}"
        return {records[a["index"]].value: (a["partition"], a["offset"]) for a in acks}

    def consume(self, bootstrap: str, topic: str, *options: str) -> Consumed:
        """Every partition from its log start to its end offset as of the start (assign)."""
        result = self.run(
            "consume", "--bootstrap", bootstrap, "--topic", topic, "--from-earliest",
            "--until-end", "--timeout-ms", str(int(DEADLINE_S * 1000)), *options,
        ).check()  # fmt: skip
        assert result.one("done")["reason"] == "end", f"did not reach the end:\n{result}"
        return consumed(result.events)

    def admin(self, bootstrap: str, *operations: Sequence[str]) -> JavaResult:
        """Several admin operations in one JVM, in order; one event each (or an error)."""
        args = ["admin", operations[0][0], "--bootstrap", bootstrap, *operations[0][1:]]
        for op in operations[1:]:
            args += ["+", *op]
        return self.run(*args)


class JavaProcess:
    """A long-running MoldauClient (e.g. a group member); its events arrive as they are
    printed. ``stop()`` asks it to finish (stdin says ``stop``), ``kill()`` does not ask."""

    def __init__(self, args: list[str], command: list[str]) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.started = time.monotonic()
        self.events: list[Event] = []
        self.stderr: list[str] = []
        self._new: queue.Queue[Event | None] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def feed(self, data: bytes) -> None:
        """Write ``data`` to its stdin and close it, from a thread: the pipe is small."""

        def write() -> None:
            assert self.proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.write(data)
                self.proc.stdin.close()

        threading.Thread(target=write, daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        for line in stream:
            for event in _parse(line.decode()):
                self.events.append(event)
                self._new.put(event)
        self._new.put(None)

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.stderr.append(line.decode(errors="replace").rstrip())

    def wait_for(
        self, condition: Callable[[Event], bool], what: str, timeout: float = DEADLINE_S
    ) -> Event:
        """The next event (from now on) for which ``condition`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out waiting for {what}:\n{self}"
            try:
                event = self._new.get(timeout=remaining)
            except queue.Empty:
                continue
            assert event is not None, f"exited while waiting for {what}:\n{self}"
            assert event["event"] != "error", f"error while waiting for {what}:\n{self}"
            if condition(event):
                return event

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e["event"] == kind]

    def result(self, timeout: float = DEADLINE_S) -> JavaResult:
        """Wait for it to finish on its own (e.g. at ``--max-records``)."""
        code = self._finish(timeout)
        return JavaResult(
            self.args, code, self.events, "\n".join(self.stderr), time.monotonic() - self.started
        )

    def stop(self, timeout: float = DEADLINE_S) -> int:
        """Ask it to finish cleanly (a consumer commits and leaves its group); its status."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(BrokenPipeError, ValueError):  # ValueError: closed
                self.proc.stdin.write(b"stop\n")
                self.proc.stdin.close()
        return self._finish(timeout)

    def _finish(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"Java client hung: still running after {timeout}s:\n{self}"
            ) from None
        for reader in self._readers:
            reader.join(10)  # its last lines may still be in the pipe
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __str__(self) -> str:
        events = "\n".join(json.dumps(e)[:300] for e in self.events[-30:])
        log = "\n".join(self.stderr[-60:])
        return (
            f"$ MoldauClient {' '.join(self.args)} (exit {self.proc.poll()})\n"
            f"--- events (last 30)\n{events}\n--- stderr (last 60)\n{log}"
        )


def consumed(events: Sequence[Event]) -> Consumed:
    """The records of a consume run by partition (every assigned partition is a key)."""
    out: Consumed = {}
    for e in events:
        if e["event"] == "assigned":
            for tp in e["partitions"]:
                out.setdefault(int(tp.rsplit(":", 1)[1]), [])
        elif e["event"] == "record":
            out.setdefault(e["partition"], []).append(decode_record(e))
    return out


def encode_record(r: Rec) -> bytes:
    """A stdin line for ``produce --stdin`` (the format is in MoldauClient.java)."""
    fields = [
        "-" if r.partition is None else str(r.partition),
        "-" if r.timestamp is None else str(r.timestamp),
        _b64(r.key),
        _b64(r.value),
    ]
    for name, value in r.headers:
        fields += [_b64(name.encode()), _b64(value)]
    return "\t".join(fields).encode() + b"\n"


def decode_record(e: Event) -> Got:
    return Got(
        e["partition"],
        e["offset"],
        _unb64(e["key"]),
        _unb64(e["value"]),
        tuple((name, _unb64(value)) for name, value in e["headers"]),
        e["timestamp"],
    )


def _b64(data: bytes | None) -> str:
    return "-" if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _parse(text: str) -> list[Event]:
    """JSON lines; anything else on stdout would be a bug in MoldauClient, so it fails."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]
