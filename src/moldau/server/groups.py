"""Runs the pure group coordinator on the event loop.

It parks JoinGroup/SyncGroup requests as futures, writes the coordinator's records to
``__consumer_offsets`` before any response leaves, and arms one timer at the
coordinator's next deadline. Everything it decides, the coordinator decided.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from moldau.coordinator.group.config import GroupConfig
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.offsets_records import decode_key
from moldau.coordinator.group.partitioning import partition_for_group
from moldau.coordinator.group.results import Effects, JoinGroupResult, SyncGroupResult
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch, decode_all

if TYPE_CHECKING:
    from moldau.server.broker import Broker

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_READ_CHUNK = 8 << 20


class GroupService:
    def __init__(self, broker: Broker) -> None:
        c = broker.config
        self.broker = broker
        self.num_partitions = c.int("offsets.topic.num.partitions")
        self.coordinator = GroupCoordinator(
            GroupConfig(
                group_min_session_timeout_ms=c.int("group.min.session.timeout.ms"),
                group_max_session_timeout_ms=c.int("group.max.session.timeout.ms"),
                group_initial_rebalance_delay_ms=c.int("group.initial.rebalance.delay.ms"),
                offsets_retention_minutes=c.int("offsets.retention.minutes"),
                offsets_retention_check_interval_ms=c.int("offsets.retention.check.interval.ms"),
                offset_metadata_max_bytes=c.int("offset.metadata.max.bytes"),
            ),
            now_ms=broker.now_ms(),
        )
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    # -- lifecycle ------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild every group from ``__consumer_offsets`` (all partitions lead here)."""
        topic = self.broker.image.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return
        records: list[tuple[bytes, bytes | None]] = []
        for p in sorted(topic.partitions):
            partition_log = self.broker.get_log(OFFSETS_TOPIC, p)
            if partition_log is None:
                continue
            offset = partition_log.log_start_offset
            while offset < partition_log.log_end_offset:
                for info, batch in decode_all(partition_log.read_bytes(offset, _READ_CHUNK)):
                    records += [(r.key, r.value) for r in batch if r.key is not None]
                    offset = info.next_offset
        self.coordinator.load(records, self.broker.now_ms())
        log.info("loaded %d group(s) from %s", len(self.coordinator.groups), OFFSETS_TOPIC)

    def start(self) -> None:
        self._arm()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    async def ensure_offsets_topic(self) -> None:
        await self.broker.ensure_internal_topic(
            OFFSETS_TOPIC,
            self.num_partitions,
            {
                "cleanup.policy": "compact",
                "segment.bytes": self.broker.config.get("offsets.topic.segment.bytes"),
            },
        )

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    # -- driving the coordinator --------------------------------------------------------
    def park(self) -> tuple[int, asyncio.Future[Any]]:
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = fut
        return request_id, fut

    def apply(self, effects: Effects) -> None:
        """Persist the records, then release the responses that depended on them."""
        if effects.records:
            self._append(effects.records)
        for request_id, result in effects.completions:
            fut = self._waiters.pop(request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(result)
        self._arm()

    async def join(self, **kwargs: Any) -> JoinGroupResult:
        request_id, fut = self.park()
        self.apply(self.coordinator.join_group(request_id, self.broker.now_ms(), **kwargs))
        return await fut

    async def sync(self, **kwargs: Any) -> SyncGroupResult:
        request_id, fut = self.park()
        self.apply(self.coordinator.sync_group(request_id, self.broker.now_ms(), **kwargs))
        return await fut

    def _append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        by_partition: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        for key, value in records:
            by_partition[self.partition_for(decode_key(key).group)].append((key, value))
        for p, items in by_partition.items():
            partition_log = self.broker.get_log(OFFSETS_TOPIC, p)
            if partition_log is None:  # never acknowledge what could not be written
                raise KafkaError(
                    f"{OFFSETS_TOPIC}-{p} is missing", ErrorCode.COORDINATOR_NOT_AVAILABLE
                )
            batch = bytearray(build_batch(items))
            partition_log.append_as_leader(batch, scan_batches(batch, strict=False), leader_epoch=0)
            self.broker.high_watermarks[(OFFSETS_TOPIC, p)] = partition_log.log_end_offset

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        delay = max(0.0, (self.coordinator.next_timer_ms() - self.broker.now_ms()) / 1000)
        self._timer = loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        try:
            self.apply(self.coordinator.tick(self.broker.now_ms()))
        except Exception:
            log.exception("group coordinator tick failed")
            self._arm()
