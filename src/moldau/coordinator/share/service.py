"""The share-group service of a node: share-group membership for the groups it
coordinates and the share-partitions of the partitions it leads (Kafka's
GroupCoordinator share half plus SharePartitionManager), driven by the node's clock.

State lives in the pure :class:`ShareGroupCoordinator` and :class:`SharePartition`
objects; this layer picks the settings (broker configs, per-group overrides), runs the
timer that expires sessions and acquisition locks, and wakes share fetches waiting for
records (``notify`` on :func:`wake_key`) when records become available again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.clock import Clock
from moldau.coordinator.share.group import (
    Heartbeat,
    HeartbeatResult,
    ShareGroupCoordinator,
)
from moldau.coordinator.share.partition import ShareLimits, SharePartition
from moldau.ids import IdSource
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig

TICK_MS = 100  # how often the node runs tick(): sessions and acquisition locks
EARLIEST, LATEST = "earliest", "latest"
READ_COMMITTED = "read_committed"


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """Broker-wide share-group settings (``group.share.*``); groups may override some."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ShareSettings:
        return cls(*(config.int(key) for key in _SHARE_KEYS))


_SHARE_KEYS = (  # ShareSettings' fields, in order
    "group.share.record.lock.duration.ms",
    "group.share.delivery.count.limit",
    "group.share.partition.max.record.locks",
    "group.share.session.timeout.ms",
    "group.share.heartbeat.interval.ms",
    "group.share.max.size",
)


def wake_key(group_id: str, topic: str, partition: int) -> Hashable:
    """The purgatory key share fetches of a group on a partition wait on."""
    return ("share", group_id, topic, partition)


class ShareGroupService:
    def __init__(
        self,
        settings: ShareSettings,
        clock: Clock,
        ids: IdSource,
        notify: Callable[[Hashable], None],
        group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {},
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.notify = notify
        self.group_configs = group_configs
        self.coordinator = ShareGroupCoordinator(ids, settings.max_size)
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self._topic_ids: dict[tuple[str, str, int], bytes] = {}  # a recreated topic starts over

    # -- settings ------------------------------------------------------------------
    def _group_int(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs(group_id).get(key)
        return int(value) if value is not None else default

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(
            group_id, "share.heartbeat.interval.ms", self.settings.heartbeat_interval_ms
        )

    def limits(self, group_id: str) -> ShareLimits:
        s = self.settings
        return ShareLimits(
            self._group_int(group_id, "share.record.lock.duration.ms", s.record_lock_duration_ms),
            s.delivery_count_limit,
            s.max_record_locks,
        )

    def auto_offset_reset(self, group_id: str) -> str:
        return self.group_configs(group_id).get("share.auto.offset.reset", LATEST)

    def read_committed(self, group_id: str) -> bool:
        """``share.isolation.level``: read_committed members get records below the last
        stable offset only, and never those of aborted transactions."""
        return self.group_configs(group_id).get("share.isolation.level") == READ_COMMITTED

    # -- membership ----------------------------------------------------------------
    def heartbeat(
        self, hb: Heartbeat, topics: Callable[[Iterable[str]], Mapping[str, tuple[bytes, int]]]
    ) -> HeartbeatResult:
        session = self._group_int(
            hb.group_id, "share.session.timeout.ms", self.settings.session_timeout_ms
        )
        return self.coordinator.heartbeat(hb, self.clock.now_ms(), session, topics)

    # -- share-partitions ----------------------------------------------------------
    def share_partition(
        self,
        group_id: str,
        topic: str,
        partition: int,
        log_start: int,
        high_watermark: int,
        topic_id: bytes = b"",
    ) -> SharePartition:
        """The share-partition, initialised at ``share.auto.offset.reset`` on first use
        (and when the topic was deleted and created again: another topic id)."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        limits = self.limits(group_id)
        if sp is None or self._topic_ids.get(key, topic_id) != topic_id:
            self._topic_ids[key] = topic_id
            start = log_start if self.auto_offset_reset(group_id) == EARLIEST else high_watermark
            sp = self.partitions[key] = SharePartition(start, limits)
        else:
            sp.limits = limits
        return sp

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: Iterable[tuple[int, int, list[int]]],
        topic_id: bytes = b"",
    ) -> ErrorCode:
        """Apply acknowledgement batches (first, last, types); the first error wins."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None or self._topic_ids.get(key, topic_id) != topic_id:
            return ErrorCode.INVALID_RECORD_STATE
        error = ErrorCode.NONE
        released = False
        for first, last, types in batches:
            code = sp.acknowledge(member_id, first, last, types)
            error = error or code
            released = released or 2 in types
        if released:
            self.notify(wake_key(group_id, topic, partition))
        return error

    # -- administration (Describe/Alter/DeleteShareGroupOffsets) -------------------
    def group_partitions(self, group_id: str) -> dict[tuple[str, int], SharePartition]:
        """The share-partitions of ``group_id`` held on this node, by (topic, partition)."""
        return {(t, p): sp for (g, t, p), sp in self.partitions.items() if g == group_id}

    def alter_start_offset(
        self, group_id: str, topic: str, partition: int, offset: int, topic_id: bytes = b""
    ) -> None:
        """AlterShareGroupOffsets: the share-partition starts over at ``offset`` (the group
        is empty, so no record is acquired and nothing in flight is lost)."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is None or self._topic_ids.get(key, topic_id) != topic_id:
            self._topic_ids[key] = topic_id
            self.partitions[key] = SharePartition(offset, self.limits(group_id))
        else:
            sp.reset(offset)

    def delete_offsets(self, group_id: str, topic: str) -> bool:
        """DeleteShareGroupOffsets: forget the group's share-partitions of ``topic`` (the
        next fetch starts again at ``share.auto.offset.reset``); False if there were none."""
        keys = [k for k in self.partitions if k[0] == group_id and k[1] == topic]
        for key in keys:
            del self.partitions[key]
            self._topic_ids.pop(key, None)
        return bool(keys)

    def release_member(self, group_id: str, member_id: str) -> None:
        """Give back what a member holds everywhere (it left, or its session closed)."""
        for (group, topic, partition), sp in self.partitions.items():
            if group == group_id and sp.release_member(member_id):
                self.notify(wake_key(group, topic, partition))

    def tick(self) -> None:
        """Remove members past their session timeout, release expired locks."""
        now = self.clock.now_ms()
        for group_id, member_id in self.coordinator.expire(now):
            self.release_member(group_id, member_id)
        for (group, topic, partition), sp in self.partitions.items():
            deadline = sp.next_deadline_ms()
            if deadline is not None and deadline <= now and sp.expire_locks(now):
                self.notify(wake_key(group, topic, partition))
