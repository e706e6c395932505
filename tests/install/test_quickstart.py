"""The README's quick start on a fresh clone of this checkout's HEAD.

`scripts/run.sh` makes the clone's `.venv` with the interpreter a new user has (Debian's
own `/usr/bin/python3` where there is one), installs the pinned versions and serves; real
clients produce and consume; a second start installs nothing and still has the records.
`scripts/setup.sh test` (what `scripts/test.sh` runs before the suite; running the suite
itself here would recurse) installs the test and lint tools into the same `.venv`.
Packages come from PyPI through pip's cache, so reruns download little.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "quickstart"
VALUES = [b"record-%d" % i for i in range(20)]
INSTALL_TIMEOUT_S = 900

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * INSTALL_TIMEOUT_S)]


def _python() -> str:
    """Debian's python3 if it is there and new enough, else the one running the tests."""
    system = "/usr/bin/python3"
    new_enough = "import sys; sys.exit(sys.version_info < (3, 11))"
    if os.path.exists(system) and subprocess.run([system, "-c", new_enough]).returncode == 0:
        return system
    return sys.executable


def _env() -> dict[str, str]:
    """A user's shell: nothing points into this checkout or its virtualenv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHON")
    }
    env["PYTHON"] = _python()
    return env


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    dest = tmp_path_factory.mktemp("clone") / "moldau"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "checkout", "-q", head], cwd=dest, check=True)
    return dest


class RunSh:
    """`scripts/run.sh` on a free port, its output in a file."""

    def __init__(self, checkout: Path, log: Path) -> None:
        self.log = log
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            ["scripts/run.sh", "-o", "listeners=PLAINTEXT://127.0.0.1:0"],
            cwd=checkout,
            stdin=subprocess.DEVNULL,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            env=_env(),
        )

    def output(self) -> str:
        return self.log.read_text()

    def wait_listening(self) -> str:
        """The bootstrap address, once the broker prints `listening on HOST:PORT`."""
        deadline = time.monotonic() + INSTALL_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.output().splitlines():
                if line.startswith("listening on "):
                    return line.removeprefix("listening on ").strip()
            if self.proc.poll() is not None:
                pytest.fail(f"run.sh exited with {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.2)
        pytest.fail(f"run.sh did not listen within {INSTALL_TIMEOUT_S} s:\n{self.output()}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)  # run.sh execs the broker
        assert self.proc.wait(60) == 0, self.output()
        assert "shut down cleanly" in self.output()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def run_sh(checkout: Path, tmp_path: Path) -> Iterator[list[RunSh]]:
    runs: list[RunSh] = []
    yield runs
    for run in runs:
        run.kill()


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed: list[object] = []
    for value in VALUES:
        producer.produce(TOPIC, value, on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(60) == 0
    assert failed == []


def _consume(bootstrap: str, group: str, count: int) -> list[bytes]:
    """`count` values from the start of the topic, as a new consumer group reads them."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_run_sh_installs_once_and_serves(checkout: Path, tmp_path: Path, run_sh: list[RunSh]):
    first = RunSh(checkout, tmp_path / "first.log")
    run_sh.append(first)
    bootstrap = first.wait_listening()
    cold_s = time.monotonic() - first.started
    assert re.search(r"^setup: installing -e \.\[[a-z,]+\] into \.venv$", first.output(), re.M)
    assert (checkout / ".venv" / "bin" / "python").exists()
    _produce(bootstrap)
    assert _consume(bootstrap, "first", len(VALUES)) == VALUES
    first.stop()

    second = RunSh(checkout, tmp_path / "second.log")
    run_sh.append(second)
    bootstrap = second.wait_listening()
    warm_s = time.monotonic() - second.started
    assert "setup:" not in second.output()  # no venv made, nothing installed
    _produce(bootstrap)
    assert _consume(bootstrap, "second", 2 * len(VALUES)) == VALUES + VALUES  # kept on disk
    second.stop()
    print(f"run.sh to `listening on`: {cold_s:.1f} s cold, {warm_s:.1f} s warm")


def test_setup_test_installs_the_test_and_lint_tools(checkout: Path):
    setup = subprocess.run(
        ["scripts/setup.sh", "test"],
        cwd=checkout,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=INSTALL_TIMEOUT_S,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    imports = (
        "import pytest, mypy, ruff, hypothesis, pyspark, playwright, moldau; print(moldau.__file__)"
    )
    where = subprocess.run(
        [checkout / ".venv/bin/python", "-c", imports],
        env=_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(checkout / "src")  # the clone's code, installed editable
    oldest = subprocess.run(
        [
            checkout / ".venv-spark-oldest/bin/python",
            "-c",
            "import pyspark, moldau.spark; print(pyspark.__version__)",
        ],
        env=_env(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert oldest.startswith("4.0.")
    again = subprocess.run(
        ["scripts/setup.sh", "run"], cwd=checkout, env=_env(), capture_output=True, text=True
    )
    assert again.returncode == 0 and "setup:" not in again.stdout  # the test install covers run
