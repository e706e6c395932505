"""Replication quotas (KIP-73): the throttles ``kafka-reassign-partitions --throttle`` sets
and ``--verify`` clears, applied to replica fetches as Kafka's ReplicationQuotaManager.

Each broker has two quotas. The leader side bounds the bytes it sends to followers for
the replicas listed in the topic config ``leader.replication.throttled.replicas`` at
``leader.replication.throttled.rate``; the follower side bounds the bytes it fetches for
``follower.replication.throttled.replicas`` at ``follower.replication.throttled.rate``.
The lists name ``partition:broker`` pairs (or ``*``: every replica of the topic); a
broker throttles the pairs that name itself. Rates are dynamic broker configs (per
broker, else the cluster default; unbounded when unset). A throttled replica that is not
in sync is left out of the fetch (the leader answers it without records; the follower
does not ask for it) while the measured rate is over the bound; the bytes of every
throttled replica are counted. The rate is Kafka's sampled rate over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``.
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.stats.rate import Rate

UNBOUNDED = 2**63 - 1
LEADER, FOLLOWER = "leader", "follower"
ALL = None  # every partition of the topic ("*")
TopicPartition = tuple[str, int]


def throttled_partitions(value: str, node_id: int) -> frozenset[int] | None:
    """Partitions of ``partition:broker,...`` naming ``node_id``; None for ``*``."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if items == ["*"]:
        return ALL
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if broker.strip() == str(node_id):
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One side's quota: the throttled replicas of this broker and their byte rate."""

    def __init__(self, side: str, node_id: int, samples: int = 11, window_ms: int = 1000) -> None:
        self.side = side
        self.node_id = node_id
        self.bound = UNBOUNDED
        self.rate = Rate(samples, window_ms)
        self._throttled: dict[str, frozenset[int] | None] = {}

    @property
    def throttles_any(self) -> bool:
        return bool(self._throttled)

    def is_throttled(self, tp: TopicPartition) -> bool:
        if tp[0] not in self._throttled:
            return False
        partitions = self._throttled[tp[0]]
        return partitions is ALL or tp[1] in partitions

    def is_quota_exceeded(self, now_ms: int) -> bool:
        return self.bound < UNBOUNDED and self.rate.per_second(now_ms) > self.bound

    def should_throttle(self, tp: TopicPartition, in_sync: bool, now_ms: int) -> bool:
        """Leave ``tp`` out of this fetch (Kafka's shouldLeaderThrottle/FollowerThrottle)."""
        return not in_sync and self.is_throttled(tp) and self.is_quota_exceeded(now_ms)

    def record(self, size: int, now_ms: int) -> None:
        if size:
            self.rate.record(size, now_ms)

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        key = f"{self.side}.replication.throttled"
        if old.topics is not new.topics:
            self._throttled = {
                name: throttled_partitions(topic.configs[f"{key}.replicas"], self.node_id)
                for name, topic in new.topics.items()
                if topic.configs.get(f"{key}.replicas")
            }
        if old.broker_configs is not new.broker_configs:
            self.bound = _rate(new.broker_configs, str(self.node_id), f"{key}.rate")


def _rate(configs: Mapping[str, Mapping[str, str]], node: str, key: str) -> int:
    """This broker's value, else the cluster default (""), else unbounded."""
    for name in (node, ""):
        value = configs.get(name, {}).get(key)
        if value is not None:
            return int(value)
    return UNBOUNDED


class AlterLogDirsQuota:
    """``replica.alter.log.dirs.io.max.bytes.per.second``: Kafka's AlterLogDirs quota, one
    bound over the copying of every future replica of this broker (its
    ReplicaAlterLogDirsThread), measured with the replication quotas' sampled rate."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.rate = Rate(samples, window_ms)

    def step_bytes(self, bound: int, interval_ms: int, step_max: int, now_ms: int) -> int:
        """What one copy step every ``interval_ms`` may copy: nothing while the measured
        rate is over ``bound``, else the step's share of it (a whole batch at least)."""
        if bound >= UNBOUNDED:
            return step_max
        if self.rate.per_second(now_ms) > bound:
            return 0
        return max(1, min(step_max, bound * interval_ms // 1000))

    def record(self, size: int, now_ms: int) -> None:
        if size:
            self.rate.record(size, now_ms)
