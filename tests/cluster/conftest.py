"""Real Moldau clusters for the cluster tests: ``moldau.testing.ClusterProcess``es of
combined KRaft nodes on loopback, forked from the fork server.

``new_cluster(nodes=3, racks=None, **configs)`` starts a cluster owned by one test (to kill,
pause or restart nodes); ``shared_cluster`` is one cluster per module for tests that leave
the nodes alone (they use their own topic names).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.testing import ClusterProcess
from moldau.testing.clients import kafka_configs
from moldau.testing.process import TEST_DEFAULTS

NewCluster = Callable[..., ClusterProcess]
_numbers = itertools.count()


def start_cluster(
    root: Path, nodes: int = 3, racks: list[str] | None = None, **configs: Any
) -> ClusterProcess:
    cluster = ClusterProcess(
        nodes,
        racks,
        {**TEST_DEFAULTS, **kafka_configs(configs)},
        data_dir=root / f"cluster{next(_numbers)}",
    )
    try:
        return cluster.start()
    except BaseException:
        cluster.close()
        raise


@pytest.fixture
def new_cluster(tmp_path: Path) -> Iterator[NewCluster]:
    started: list[ClusterProcess] = []

    def start(nodes: int = 3, racks: list[str] | None = None, **configs: Any) -> ClusterProcess:
        cluster = start_cluster(tmp_path, nodes, racks, **configs)
        started.append(cluster)
        return cluster

    yield start
    for cluster in started:
        cluster.close()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    cluster = start_cluster(tmp_path_factory.mktemp("shared"))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique within the session, readable in the nodes' logs."""
    name = request.node.name.replace("[", "-").replace("]", "").replace("|", "-")
    return f"{name[:200]}-{next(_numbers)}"
