"""Brokers for the robustness suite. They keep all their output (a traceback must not
scroll out of a bounded buffer during thousands of requests); failing tests get it
attached by the moldau pytest plugin, as every BrokerProcess's."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from moldau.testing import BrokerProcess
from tests.integration.conftest import topic  # noqa: F401

Start = Callable[..., "Broker"]
_TRACEBACK = re.compile(r"Traceback|Exception in callback|exception was never retrieved")


class Broker(BrokerProcess):
    """A broker subprocess whose output is kept whole."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        super().__init__(data_dir, overrides)
        self.output: deque[str] = deque()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tracebacks(self) -> list[str]:
        """Each unhandled exception in the output, with the lines around it."""
        lines = list(self.output)
        return [
            "\n".join(lines[max(0, i - 2) : i + 30])
            for i, line in enumerate(lines)
            if _TRACEBACK.search(line)
        ]


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[Start]:
    """``start_broker(overrides, data_dir=None)``: brokers owned (and stopped) by one test."""
    started: list[Broker] = []

    def start(overrides: dict[str, str] | None = None, data_dir: Path | None = None) -> Broker:
        b = Broker(data_dir or tmp_path / f"broker{len(started)}", overrides)
        b.start()
        started.append(b)
        return b

    yield start
    for b in started:
        b.close()
