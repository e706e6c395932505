"""A broker starts and stops safely whatever happens: SIGTERM at any moment of its start
stops what had started, cleanly; a clean stop after a kill -9 restart leaves the logs not
opened since to the next start's recovery and loses nothing; a start longer than
``server.max.startup.time.ms`` ends in a clean stop and exit code 1. Each test checks
every acknowledged record comes back, in order per partition, exactly once."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.storage.checkpoint import RECOVERY_POINT_CHECKPOINT, read_checkpoint
from moldau.storage.log_manager import CLEAN_SHUTDOWN_FILE
from moldau.testing import BrokerProcess, Record
from moldau.testing.process import TEST_DEFAULTS

TIMEOUT_S = 60
PROMPT_S = 30  # a stop during the start, on a loaded machine
TOPIC = "start-stop"
PARTITIONS = 6


def new_lines(broker: BrokerProcess, seen: int) -> list[str]:
    """The broker's output lines since it had printed ``seen`` lines."""
    count = broker.lines_seen - seen
    return list(broker.output)[-count:] if count > 0 else []


def launch_and_sigterm_at(broker: BrokerProcess, marker: str) -> tuple[int | None, float, str]:
    """Start the broker, send SIGTERM as soon as it printed a line containing ``marker``;
    returns its exit code, the seconds from the signal to its exit, and its output."""
    seen = broker.lines_seen
    broker.launch()
    deadline = time.monotonic() + TIMEOUT_S
    while not any(marker in line for line in new_lines(broker, seen)):
        assert broker.running, "exited before: " + "\n".join(new_lines(broker, seen))
        assert time.monotonic() < deadline, f"no {marker!r} line within {TIMEOUT_S} s"
        time.sleep(0.002)
    signalled = time.monotonic()
    code = broker.stop(timeout=TIMEOUT_S)
    return code, time.monotonic() - signalled, "\n".join(new_lines(broker, seen))


def produce(broker: BrokerProcess, tag: str, partitions: range) -> list[Record]:
    records = [Record(f"{tag}-{i}".encode(), partition=p) for i in range(20) for p in partitions]
    return broker.produce(TOPIC, *records)


def assert_all_back(broker: BrokerProcess, acked: list[Record]) -> None:
    got = [(r.partition, r.offset, r.value) for r in broker.consume(TOPIC, len(acked))]
    want = sorted((r.partition, r.offset, r.value) for r in acked)
    assert got == want


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", TEST_DEFAULTS, startup_timeout=TIMEOUT_S)
    yield b
    b.close()


def test_a_stop_after_a_kill9_restart_keeps_every_record(broker: BrokerProcess) -> None:
    """kill -9, start, produce to half the partitions, clean stop, start: every record is
    back. The logs written since the restart are closed with their recovery point at
    their end (whether the dir is marked clean depends on every log having been opened;
    tests/unit/storage/test_lazy_log.py covers a dir left unclean by unopened logs)."""
    broker.start()
    broker.create_topic(TOPIC, PARTITIONS)
    acked = produce(broker, "before", range(PARTITIONS))
    broker.kill()
    broker.start()
    acked += produce(broker, "after", range(PARTITIONS // 2))
    assert broker.stop(timeout=TIMEOUT_S) == 0
    ends = {p: 1 + max(r.offset or 0 for r in acked if r.partition == p) for p in range(3)}
    points = read_checkpoint(broker.data_dir / RECOVERY_POINT_CHECKPOINT)
    assert {p: points[(TOPIC, p)] for p in ends} == ends
    broker.start()
    assert_all_back(broker, acked)
    assert broker.stop(timeout=TIMEOUT_S) == 0
    assert (broker.data_dir / CLEAN_SHUTDOWN_FILE).exists(), "every log was opened: clean"
    broker.start()
    assert_all_back(broker, acked)


@pytest.mark.parametrize(
    ("moment", "marker"),
    [
        ("before the node starts", "open-files limit"),
        ("as the logs load after kill -9", "(unclean shutdown"),
        ("right after serving", "listening on"),
    ],
)
def test_sigterm_during_the_start_stops_cleanly(
    broker: BrokerProcess, moment: str, marker: str
) -> None:
    broker.start()
    broker.create_topic(TOPIC, 1)
    acked = produce(broker, "before", range(1))
    broker.kill()  # the next start recovers
    code, seconds, output = launch_and_sigterm_at(broker, marker)
    assert code == 0, output
    assert seconds < PROMPT_S, f"{moment}: {seconds:.1f} s to stop"
    assert "shut down cleanly" in output, output
    assert "Traceback" not in output, output
    started = "listening on" in output
    assert ("SIGTERM during the start" in output) != started, output
    broker.start()
    assert_all_back(broker, acked)
    acked += produce(broker, "after", range(1))
    assert broker.stop(timeout=TIMEOUT_S) == 0
    broker.start()
    assert_all_back(broker, acked)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fenced_broker(data: Path, configs: dict[str, str]) -> BrokerProcess:
    """A broker-only node whose controller quorum is unreachable: never unfenced."""
    return BrokerProcess(
        data,
        {
            **TEST_DEFAULTS,
            "process.roles": "broker",
            "node.id": "2",
            "controller.quorum.voters": f"1@127.0.0.1:{free_port()}",
            "controller.listener.names": "CONTROLLER",
            **configs,
        },
        startup_timeout=TIMEOUT_S,
    )


def test_server_max_startup_time_ends_a_start_that_cannot_finish(tmp_path: Path) -> None:
    broker = fenced_broker(tmp_path, {"server.max.startup.time.ms": "3000"})
    broker.launch()
    launched = time.monotonic()
    deadline = launched + TIMEOUT_S
    while broker.running:
        assert time.monotonic() < deadline, "still running"
        time.sleep(0.05)
    took = time.monotonic() - launched
    output = "\n".join(broker.output)
    assert broker.stop() == 1, output
    assert 3 <= took < 3 + PROMPT_S, output
    [line] = [line for line in output.splitlines() if "moldau server:" in line]
    assert line == (
        "moldau server: not started within server.max.startup.time.ms (3000 ms): "
        "still waiting for the broker to be registered and unfenced by the controller"
    )
    assert "Traceback" not in output, output


def test_by_default_a_start_waits_and_sigterm_ends_it(tmp_path: Path) -> None:
    """No limit by default (Kafka's Long.MAX_VALUE): the fenced broker still waits; a
    SIGTERM stops it cleanly."""
    broker = fenced_broker(tmp_path, {})
    seen = broker.lines_seen
    broker.launch()
    time.sleep(5)
    assert broker.running, "\n".join(new_lines(broker, seen))
    signalled = time.monotonic()
    assert broker.stop(timeout=TIMEOUT_S) == 0
    assert time.monotonic() - signalled < PROMPT_S
    output = "\n".join(new_lines(broker, seen))
    assert (
        "SIGTERM during the start (waiting for the broker to be registered and unfenced "
        "by the controller): stopping what had started" in output
    ), output
