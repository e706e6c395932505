"""Replicas moving between log dirs (AlterReplicaLogDirs), driven on a timer: each step
copies into the future logs in a worker thread, within this broker's
``replica.alter.log.dirs.io.max.bytes.per.second``, then swaps the ones that caught up on
the event loop, between appends (as Kafka's ReplicaAlterLogDirsThread)."""

from __future__ import annotations

import asyncio
import logging

from moldau.clock import Clock
from moldau.protocol.errors import KafkaError
from moldau.replication.quota import UNBOUNDED, AlterLogDirsQuota
from moldau.server.dynamic_config import DynamicBrokerConfig
from moldau.storage.alter_log_dirs import COPY_BYTES_PER_STEP
from moldau.storage.log_manager import LogManager

log = logging.getLogger(__name__)

ALTER_LOG_DIRS_INTERVAL_MS = 200  # how often future logs copy from their current ones
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


class LogDirMover:
    def __init__(self, logs: LogManager, config: DynamicBrokerConfig, clock: Clock) -> None:
        self.logs = logs
        self.config = config
        self.clock = clock
        self.quota = AlterLogDirsQuota()

    async def step(self) -> None:
        if not self.logs.moving:
            return
        now = self.clock.now_ms()
        bound = int(self.config.get(ALTER_LOG_DIRS_RATE) or UNBOUNDED)
        budget = self.quota.step_bytes(bound, ALTER_LOG_DIRS_INTERVAL_MS, COPY_BYTES_PER_STEP, now)
        if not budget:
            return
        caught_up, copied = await asyncio.to_thread(self.logs.copy_future_logs, budget)
        self.quota.record(copied, now)
        for tp in caught_up:
            try:
                self.logs.replace_current_with_future(tp)
            except (OSError, KafkaError):
                log.exception("%s-%d: swapping in the moved log failed", *tp)
