"""A node that was down while the metadata log was snapshotted and cut comes back through
FetchSnapshot (WE-25 with real processes): the records it missed are gone from every
other node's log, so only the snapshot can give it the topics created meanwhile."""

from __future__ import annotations

from pathlib import Path

from moldau.raft.driver import METADATA_DIR
from moldau.raft.file_log import SNAPSHOT_SUFFIX
from moldau.testing import ClusterProcess
from tests.cluster.conftest import NewCluster

SNAPSHOT_EVERY_BYTES = 2048  # metadata.log.max.record.bytes.between.snapshots
SEGMENT_BYTES = 4096  # metadata.log.segment.bytes: the log can be cut at small steps


def metadata_dir(cluster: ClusterProcess, node: int) -> Path:
    return cluster.node(node).data_dir / METADATA_DIR


def log_start(cluster: ClusterProcess, node: int) -> int:
    """Base offset of the node's first metadata log segment."""
    return min(int(p.name.split(".")[0]) for p in metadata_dir(cluster, node).glob("*.log"))


def snapshots(cluster: ClusterProcess, node: int) -> list[int]:
    """End offsets of the node's metadata snapshots."""
    return sorted(
        int(p.name.split("-")[0]) for p in metadata_dir(cluster, node).glob("*" + SNAPSHOT_SUFFIX)
    )


def topics_on(cluster: ClusterProcess, node: int) -> set[str]:
    return set(cluster.describe(node)["topics"])


def test_a_node_back_after_the_log_was_snapshotted_catches_up_from_the_snapshot(
    new_cluster: NewCluster, topic: str
) -> None:
    cluster = new_cluster(
        metadata_log_max_record_bytes_between_snapshots=SNAPSHOT_EVERY_BYTES,
        metadata_log_segment_bytes=SEGMENT_BYTES,
    )
    cluster.create_topic(f"{topic}-before")
    lagging = next(n for n in cluster.nodes if n != cluster.controller())
    cluster.stop(lagging)
    quorum = cluster.describe()["quorum"]
    stopped_at = next(v for v in quorum["voters"] if v["id"] == lagging)["log_end_offset"]
    assert stopped_at > 0, quorum

    created = {f"{topic}-{i}" for i in range(40)}
    for name in sorted(created):
        cluster.create_topic(name, partitions=2, replication_factor=2)
    others = cluster.running()
    cluster.wait_until(lambda: all(log_start(cluster, n) > stopped_at for n in others))

    cluster.start_node(lagging)
    expected = created | {f"{topic}-before"}
    cluster.wait_until(lambda: expected <= topics_on(cluster, lagging), 60)
    loaded = [s for s in snapshots(cluster, lagging) if s > stopped_at]
    assert loaded, f"node {lagging} has no snapshot past offset {stopped_at}"
    assert log_start(cluster, lagging) >= loaded[0] > stopped_at, (
        "the node's log restarted at the snapshot it fetched"
    )
    # It follows the log normally from there: a topic created now reaches it, and the
    # partition it leads serves data.
    after = cluster.create_topic(f"{topic}-after", partitions=3)
    assert lagging in {p["leader"] for p in cluster.describe(lagging)["topics"][after]}
    values = [f"v{i}".encode() for i in range(30)]
    cluster.produce(after, *values)
    assert sorted(r.value for r in cluster.consume(after, 30)) == sorted(values)
