"""KIP-73 replication quotas: which replicas a broker throttles, and when."""

from __future__ import annotations

from types import MappingProxyType

from moldau.metadata.image import MetadataImage, TopicImage
from moldau.metadata.publisher import LocalChanges
from moldau.replication.quota import (
    FOLLOWER,
    LEADER,
    UNBOUNDED,
    AlterLogDirsQuota,
    ReplicationQuota,
    throttled_partitions,
)


def test_throttled_replica_lists() -> None:
    assert throttled_partitions("*", 1) is None
    assert throttled_partitions("0:1,1:2,2:1", 1) == {0, 2}
    assert throttled_partitions("0:2", 1) == frozenset()
    assert throttled_partitions("", 1) == frozenset()


def image(
    topic_configs: dict[str, str], broker_configs: dict[str, dict[str, str]]
) -> MetadataImage:
    topic = TopicImage("t", b"t" * 16, {}, MappingProxyType(topic_configs))
    return MetadataImage(
        topics=MappingProxyType({"t": topic}),
        broker_configs=MappingProxyType(
            {k: MappingProxyType(v) for k, v in broker_configs.items()}
        ),
    )


def test_configs_from_metadata() -> None:
    leader, follower = ReplicationQuota(LEADER, 1), ReplicationQuota(FOLLOWER, 2)
    new = image(
        {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "*"},
        {"": {"leader.replication.throttled.rate": "100", "follower.replication.throttled.rate": "50"},
         "2": {"follower.replication.throttled.rate": "70"}},
    )  # fmt: skip
    for quota in (leader, follower):
        quota.on_metadata_update(MetadataImage(), new, LocalChanges())
    assert leader.is_throttled(("t", 0)) and not leader.is_throttled(("t", 1))
    assert follower.is_throttled(("t", 5)) and not follower.is_throttled(("u", 0))
    assert (leader.bound, follower.bound) == (100, 70)  # the broker's own over the default
    follower.on_metadata_update(new, image({}, {}), LocalChanges())
    assert follower.bound == UNBOUNDED and not follower.is_throttled(("t", 5))


def test_throttled_only_out_of_sync_and_over_the_rate() -> None:
    quota = ReplicationQuota(LEADER, 1, samples=2, window_ms=1000)
    quota.on_metadata_update(
        MetadataImage(),
        image(
            {"leader.replication.throttled.replicas": "*"},
            {"1": {"leader.replication.throttled.rate": "1000"}},
        ),
        LocalChanges(),
    )
    now = 10_000
    assert not quota.should_throttle(("t", 0), in_sync=False, now_ms=now)
    quota.record(1000, now)  # 1000 B over the one-window minimum: at the bound
    assert not quota.should_throttle(("t", 0), in_sync=False, now_ms=now)
    quota.record(1, now)
    assert quota.should_throttle(("t", 0), in_sync=False, now_ms=now)
    assert not quota.should_throttle(("t", 0), in_sync=True, now_ms=now)  # ISR never waits
    assert not quota.should_throttle(("u", 0), in_sync=False, now_ms=now)
    assert not quota.should_throttle(("t", 0), in_sync=False, now_ms=now + 2_500)  # aged out


def test_log_dir_moves_copy_a_share_of_the_bound_per_step() -> None:
    quota = AlterLogDirsQuota()
    assert quota.step_bytes(UNBOUNDED, 200, 8 << 20, 0) == 8 << 20
    assert quota.step_bytes(10_000, 200, 8 << 20, 0) == 2_000
    assert quota.step_bytes(1, 200, 8 << 20, 0) == 1  # whole batches still go one by one
    quota.record(50_000, 0)  # 50 kB over the 11 s window: under 10 kB/s
    assert quota.step_bytes(10_000, 200, 8 << 20, 100) == 2_000
    quota.record(100_000, 100)  # now over it: the next steps copy nothing
    assert quota.step_bytes(10_000, 200, 8 << 20, 200) == 0
    assert quota.step_bytes(10_000, 200, 8 << 20, 12_000) == 2_000  # the samples expired
