"""Fixtures of the fault tests: a started three-node cluster, stopped (and its nodes'
output saved next to the history) at the end of each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.cli.cluster import LocalCluster
from tests.faults.cluster import FAST, FaultCluster


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.when == "call":
        item.stash[_failed] = report.failed
    return report


_failed = pytest.StashKey[bool]()


@pytest.fixture
def fault_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[FaultCluster]:
    fc = FaultCluster(LocalCluster(3, tmp_path / "cluster", overrides=dict(FAST)))
    fc.start()
    try:
        yield fc
    finally:
        fc.stop()
        paths = fc.dump_logs(tmp_path)
        if request.node.stash.get(_failed, False):
            print("node output:", *paths)
