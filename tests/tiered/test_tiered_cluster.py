"""Three nodes, RF 3, tiering to a shared ``file`` store: the leader is killed (-9) while
it copies; a new leader continues the copies from the remote log metadata, and every
acknowledged record is read back from offset 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.testing.cluster import ClusterProcess
from tests.tiered.test_tiered_broker import TIERED, file_tier_configs, read_confluent, wait_for
from tests.tiered.test_tiered_s3 import produce_batches

pytestmark = pytest.mark.slow


def remote_logs(root: Path, topic: str) -> set[str]:
    return {p.name for p in root.glob(f"{topic}-*/0/*.log")}


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("remote")


@pytest.fixture(scope="module")
def cluster(remote_dir: Path) -> Iterator[ClusterProcess]:
    with ClusterProcess(3, configs=file_tier_configs(remote_dir, 3)) as c:
        yield c


def test_a_new_leader_continues_the_copies(cluster: ClusterProcess, remote_dir: Path) -> None:
    c = cluster
    topic = "replicated"
    c.create_topic(
        topic,
        1,
        replication_factor=3,
        min_insync_replicas="2",
        **{k.replace(".", "_"): v for k, v in TIERED.items()},
    )
    acked = produce_batches(c, topic, "first", 10)
    wait_for(lambda: len(remote_logs(remote_dir, topic)) >= 3, "the first leader's copies")
    old = c.leader(topic)
    c.kill(old)
    wait_for(lambda: c.leader(topic) not in (-1, old), "a new leader")
    copied_before = remote_logs(remote_dir, topic)
    acked += produce_batches(c, topic, "second", 10)
    # the new leader copies what its predecessor left (a copy cut by the kill is redone)
    wait_for(
        lambda: len(remote_logs(remote_dir, topic)) >= len(copied_before) + 5,
        "the new leader's copies",
    )
    c.start_node(old)
    assert read_confluent(c, topic, "read_committed") == acked
