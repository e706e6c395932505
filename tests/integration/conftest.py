"""Brokers for the end-to-end tests: one per module (fast), or fresh ones to kill/restart.

They are `moldau.testing.BrokerProcess`es, so the moldau pytest plugin attaches what they
wrote during a failing test to its report.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.testing import BrokerProcess
from tests.integration.helpers import FreshBroker

_topic_numbers = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a whole test module: tests use their own topic names."""
    with BrokerProcess(
        tmp_path_factory.mktemp("broker"),
        {"num.partitions": "3", "log.retention.check.interval.ms": "200"},
    ) as running:
        yield running


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[FreshBroker]:
    """A factory of brokers owned by one test (to kill, restart or configure them):
    ``fresh_broker({"key": "value"})`` starts one on its own data dir under ``tmp_path``."""
    started: list[BrokerProcess] = []

    def start(overrides: dict[str, str] | None = None) -> BrokerProcess:
        b = BrokerProcess(tmp_path / f"broker{len(started)}", overrides).start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique within the session, readable in broker logs."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("|", "-")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return f"{safe[:150]}-{next(_topic_numbers)}"
