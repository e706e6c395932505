"""Brokers for the end-to-end tests: one per module (fast), or fresh ones to kill/restart."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.broker import BrokerProcess
from tests.integration.helpers import RUNNING_BROKERS

_topic_numbers = itertools.count()


# The list lives in helpers: pytest imports this file as `conftest`, test modules that
# import it get a second copy, and both must see the same brokers.
_running = RUNNING_BROKERS


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Attach the brokers' recent output (and whether they died) to a failing test."""
    report = yield
    if report.failed:
        for b in _running:
            state = "running" if b.proc is not None and b.proc.poll() is None else "NOT RUNNING"
            lines = [line for line in b.output if not line.startswith("%")]
            report.sections.append((f"broker {b.data_dir.name} ({state})", "\n".join(lines[-60:])))
    return report


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a whole test module: tests use their own topic names."""
    with BrokerProcess(
        tmp_path_factory.mktemp("broker"),
        {"num.partitions": "3", "log.retention.check.interval.ms": "200"},
    ) as running:
        _running.append(running)
        yield running
        _running.remove(running)


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """A factory of brokers owned by one test (to kill, restart or configure them):
    ``fresh_broker({"key": "value"})`` starts one on its own data dir under ``tmp_path``."""
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str] | None = None) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"broker{len(started)}", overrides).start()
        started.append(b)
        _running.append(b)
        return b

    yield start
    for b in started:
        b.stop()
        _running.remove(b)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique within the session, readable in broker logs."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("|", "-")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return f"{safe[:150]}-{next(_topic_numbers)}"
