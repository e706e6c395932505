"""Fixtures of the fault tests: a started three-node :class:`~moldau.testing.ClusterProcess`
with Kafka's timeouts scaled down (``FAST``), torn down in an order that leaves nothing
behind: the workloads' clients first, then the nodes (kill -9), then any network
namespaces. Each node's output is saved next to the history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.testing import ClusterProcess
from tests.faults.nemesis import FAST, kill_all
from tests.faults.netns import Topology, unavailable
from tests.faults.workload import abort_all


@pytest.fixture
def fault_cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    c = ClusterProcess(3, configs=FAST, data_dir=tmp_path / "cluster")
    try:
        yield c.start()
    finally:
        _teardown(c, tmp_path)


@pytest.fixture
def netns_cluster(tmp_path: Path) -> Iterator[tuple[ClusterProcess, Topology]]:
    """Three nodes, each in a network namespace of its own (see ``netns.py``); skipped
    with the reason where namespaces cannot be made."""
    why = unavailable()
    if why is not None:
        pytest.skip(f"network partitions need network namespaces: {why}")
    topology = Topology(3)
    topology.create()
    try:
        c = ClusterProcess(
            3,
            configs=FAST,
            data_dir=tmp_path / "cluster",
            hosts=[topology.address(i) for i in (1, 2, 3)],
            network_namespaces=topology.namespaces,
        )
        try:
            yield c.start(), topology
        finally:
            _teardown(c, tmp_path)
    finally:
        topology.destroy()  # only once no client of ours can send to its addresses


def _teardown(c: ClusterProcess, tmp_path: Path) -> None:
    abort_all()
    kill_all(c)
    for node_id, node in c.nodes.items():
        (tmp_path / f"node{node_id}.out").write_text("\n".join(node.output) + "\n")
    c.close()
