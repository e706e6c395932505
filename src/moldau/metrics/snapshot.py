"""A node's metrics as plain data, taken on the event loop when Prometheus scrapes.

The broker's state (replica manager, logs, group coordinator shards, controller image,
counters) is owned by the event loop; reading it from the HTTP server's thread could see
it mid-change. So :class:`SnapshotTaker` copies what the metrics need into frozen values
on the loop, in one pass of O(hosted partitions + committed offsets), and the families
are built from the copy in the scrape thread (:mod:`moldau.metrics.families`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from moldau.coordinator.share.partition import RecordState
from moldau.stats.counters import Histogram, HistogramSnapshot, RemoteStorageStats, TopicCounts
from moldau.stats.requests import RequestStats, RequestTypeSnapshot, merge_request_stats

if TYPE_CHECKING:
    from moldau.controller.quorum_controller import QuorumController
    from moldau.coordinator.group.service import GroupCoordinatorService
    from moldau.coordinator.share.service import ShareGroupService
    from moldau.metadata.image import MetadataImage
    from moldau.metadata.publisher import MetadataPublisher
    from moldau.raft.driver import RaftManager
    from moldau.replication.remote_log_manager import RemoteLogManager
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    """One partition replica hosted here: its log and, unless offline, its replication."""

    topic: str
    partition: int
    size: int
    segments: int
    log_start_offset: int
    log_end_offset: int
    hosted: bool  # has replication state (not offline)
    leader: bool
    replicas: int
    isr: int
    min_isr: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class RemoteStorageSnapshot:
    """Tiered storage on this broker: Kafka's remote storage meters and, per topic (the
    partitions led here), the remote log size and copy lag."""

    stats: RemoteStorageStats = field(default_factory=RemoteStorageStats)
    # topic -> (remote log size bytes, copy lag bytes, copy lag segments)
    topics: Mapping[str, tuple[int, int, int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    group_id: str
    state: str  # Kafka's classic state names: "Stable", "Empty", ...
    members: int
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, committed offset)


@dataclass(frozen=True, slots=True)
class SharePartitionSnapshot:
    """One share-partition of a partition led here (Kafka's SharePartitionMetrics)."""

    group_id: str
    topic: str
    partition: int
    in_flight: int  # SPSO..SPEO (InFlightMessageCount)
    batches: int  # InFlightBatchCount
    acquired: int  # records acquired by members, not yet acknowledged
    acknowledged: tuple[int, ...]  # records per acknowledgement type
    lock_timeouts: int
    batch_records: HistogramSnapshot


@dataclass(frozen=True, slots=True)
class ShareGroupsSnapshot:
    """The share groups coordinated here and the share-partitions led here."""

    states: Mapping[str, int] = field(default_factory=dict)  # "Empty"/"Stable" -> groups
    partitions: tuple[SharePartitionSnapshot, ...] = ()


@dataclass(frozen=True, slots=True)
class ControllerSnapshot:
    """What the active controller reports (Kafka's KafkaController gauges)."""

    active: bool = False
    offline_partitions: int = 0
    preferred_replica_imbalance: int = 0
    topics: int = 0
    partitions: int = 0
    active_brokers: int = 0
    fenced_brokers: int = 0
    last_applied_offset: int = -1  # includes records appended, not yet committed
    last_committed_offset: int = -1


@dataclass(frozen=True, slots=True)
class RaftSnapshot:
    """This node's view of the metadata quorum (Kafka's raft-metrics)."""

    leader: int  # -1: unknown
    epoch: int
    high_watermark: int  # -1: unknown


@dataclass(frozen=True)
class NodeSnapshot:
    node_id: int
    topics: Mapping[str, TopicCounts]
    all_topics: TopicCounts
    replication_bytes_in: int
    replication_bytes_out: int
    requests: Mapping[str, RequestTypeSnapshot]
    replicas: tuple[ReplicaSnapshot, ...]
    offline_replicas: int
    isr_shrinks: int
    isr_expands: int
    cleaner_last_run_end_ms: int
    cleaner_last_run_seconds: float
    uncleanable_partitions: int
    controller: ControllerSnapshot
    raft: RaftSnapshot | None
    last_applied_offset: int
    groups: tuple[GroupSnapshot, ...]
    completed_rebalances: int
    connections: Mapping[str, int]
    loop_lag: HistogramSnapshot
    remote: RemoteStorageSnapshot = field(default_factory=RemoteStorageSnapshot)
    offline_log_dirs: int = 0
    shares: ShareGroupsSnapshot = field(default_factory=ShareGroupsSnapshot)


@dataclass
class BrokerParts:
    """What the metrics read of a node's broker."""

    replica_manager: ReplicaManager
    log_manager: LogManager
    groups: GroupCoordinatorService
    publisher: MetadataPublisher
    shares: ShareGroupService | None = None


@dataclass
class NodeParts:
    """The parts of a running node the metrics read."""

    node_id: int
    broker: BrokerParts | None  # a controller-only node has none
    controller: Callable[[], QuorumController | None]  # the active controller here, if any
    raft: RaftManager | None  # a quorum of one has none
    requests: Callable[[], Iterable[RequestStats]]  # one per dispatcher
    connections: Callable[[], Mapping[str, int]]  # open connections per listener
    loop_lag: Histogram


class SnapshotTaker:
    """Takes a :class:`NodeSnapshot`; call it on the event loop only."""

    def __init__(self, parts: NodeParts) -> None:
        self.parts = parts
        self._controller_image: MetadataImage | None = None
        self._controller = ControllerSnapshot()

    def __call__(self) -> NodeSnapshot:
        p, b = self.parts, self.parts.broker
        topics: dict[str, TopicCounts] = {}
        all_topics, replication = TopicCounts(), (0, 0)
        if b is not None:
            topics, all_topics, replication = b.replica_manager.topic_stats.snapshot()
        isr = b.replica_manager.isr_stats if b is not None else None
        cleaner = b.log_manager.cleaner_stats if b is not None else None
        return NodeSnapshot(
            node_id=p.node_id,
            topics=topics,
            all_topics=all_topics,
            replication_bytes_in=replication[0],
            replication_bytes_out=replication[1],
            requests=merge_request_stats(p.requests()),
            replicas=self._replicas(b) if b is not None else (),
            offline_replicas=b.replica_manager.offline_replicas if b is not None else 0,
            isr_shrinks=isr.shrinks if isr is not None else 0,
            isr_expands=isr.expands if isr is not None else 0,
            cleaner_last_run_end_ms=cleaner.last_run_end_ms if cleaner is not None else 0,
            cleaner_last_run_seconds=cleaner.last_run_seconds if cleaner is not None else 0.0,
            uncleanable_partitions=cleaner.uncleanable_partitions if cleaner is not None else 0,
            controller=self._controller_counts(),
            raft=_raft(p.raft) if p.raft is not None else None,
            last_applied_offset=b.publisher.image.offset if b is not None else -1,
            groups=self._groups(b) if b is not None else (),
            completed_rebalances=b.groups.stats.completed_rebalances if b is not None else 0,
            connections=dict(p.connections()),
            loop_lag=p.loop_lag.snapshot(),
            remote=_remote(b.replica_manager.remote_log_manager if b is not None else None),
            offline_log_dirs=len(b.log_manager.offline_dirs) if b is not None else 0,
            shares=_shares(b) if b is not None else ShareGroupsSnapshot(),
        )

    @staticmethod
    def _replicas(b: BrokerParts) -> tuple[ReplicaSnapshot, ...]:
        rm = b.replica_manager
        out = []
        for (topic, index), log in b.log_manager.logs.items():
            partition = rm.partition((topic, index))
            out.append(
                ReplicaSnapshot(
                    topic,
                    index,
                    log.size_bytes,
                    log.segment_count,
                    log.log_start_offset,
                    log.log_end_offset,
                    partition is not None,
                    partition is not None and partition.is_leader,
                    len(partition.replicas) if partition is not None else 0,
                    len(partition.isr) if partition is not None else 0,
                    log.config.min_insync_replicas,
                    partition.high_watermark if partition is not None else -1,
                )
            )
        return tuple(out)

    @staticmethod
    def _groups(b: BrokerParts) -> tuple[GroupSnapshot, ...]:
        return tuple(
            GroupSnapshot(
                group.group_id,
                group.state.value,
                len(group.members),
                tuple((t, p, o.offset) for (t, p), o in group.offsets.items()),
            )
            for shard in b.groups.runtime.active_shards()
            for group in shard.groups.values()
        )

    def _controller_counts(self) -> ControllerSnapshot:
        """Counted once per committed image (images are immutable)."""
        controller = self.parts.controller()
        if controller is None:
            self._controller_image = None
            return ControllerSnapshot()
        image = controller.committed
        if image is not self._controller_image:
            self._controller_image = image
            self._controller = _controller_snapshot(image)
        return replace(self._controller, last_applied_offset=controller.latest.offset)


def _shares(b: BrokerParts) -> ShareGroupsSnapshot:
    """Share groups coordinated here; share-partitions of the partitions led here (a
    former leader may still hold one until it is asked again): O(runs) each."""
    if b.shares is None:
        return ShareGroupsSnapshot()
    groups = b.shares.coordinator.groups.values()
    partitions = []
    for (group_id, topic, index), sp in b.shares.partitions.items():
        partition = b.replica_manager.partition((topic, index))
        if partition is None or not partition.is_leader:
            continue
        m = sp.meters
        partitions.append(
            SharePartitionSnapshot(
                group_id,
                topic,
                index,
                sp.in_flight,
                sp.batch_count,
                sp.count(RecordState.ACQUIRED),
                tuple(m.acknowledged),
                m.lock_timeouts,
                m.batch_records.snapshot(),
            )
        )
    return ShareGroupsSnapshot(
        dict(Counter(g.state.value for g in groups)),
        tuple(partitions),
    )


def _remote(rlm: RemoteLogManager | None) -> RemoteStorageSnapshot:
    if rlm is None:
        return RemoteStorageSnapshot()
    topics: dict[str, tuple[int, int, int]] = {}
    for tp, sizes in rlm.leader_tier_sizes():
        size, lag_bytes, lag_segments = topics.get(tp[0], (0, 0, 0))
        topics[tp[0]] = (
            size + sizes.remote_log_size_bytes,
            lag_bytes + sizes.copy_lag_bytes,
            lag_segments + sizes.copy_lag_segments,
        )
    return RemoteStorageSnapshot(replace(rlm.stats), topics)


def _raft(raft: RaftManager) -> RaftSnapshot:
    leader, epoch = raft.leader()
    try:
        high_watermark = raft.client.high_watermark
    except RuntimeError:  # not started yet
        high_watermark = None
    return RaftSnapshot(
        -1 if leader is None else leader, epoch, -1 if high_watermark is None else high_watermark
    )


def _controller_snapshot(image: MetadataImage) -> ControllerSnapshot:
    partitions = offline = imbalance = 0
    for topic in image.topics.values():
        for part in topic.partitions.values():
            partitions += 1
            offline += part.leader < 0
            imbalance += bool(part.replicas) and part.leader != part.replicas[0]
    fenced = sum(b.fenced for b in image.brokers.values())
    return ControllerSnapshot(
        active=True,
        offline_partitions=offline,
        preferred_replica_imbalance=imbalance,
        topics=len(image.topics),
        partitions=partitions,
        active_brokers=len(image.brokers) - fenced,
        fenced_brokers=fenced,
        last_committed_offset=image.offset,
    )
