"""The controller part of a node: the quorum controller, its APIs and its upkeep.

It decides metadata changes only while this node leads the controller quorum (always, for
a quorum of one); otherwise its requests answer NOT_CONTROLLER and it just follows the
committed log. While active it fences brokers whose heartbeats stopped and, with
``auto.leader.rebalance.enable``, moves leaders back to their preferred replicas.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from moldau.clock import AsyncioScheduler, TimerHandle
from moldau.config.broker import BrokerConfig
from moldau.controller.apis import ControllerApis
from moldau.controller.cluster_control import ClusterControl
from moldau.controller.context import ControllerContext
from moldau.controller.feature_apis import bootstrap_metadata_version
from moldau.controller.quorum_controller import MetadataLogWriter, QuorumController
from moldau.controller.replication_control import ReplicationControl
from moldau.controller.topic_control import TopicControl
from moldau.metadata.features import LATEST_LEVEL, LEVELS, METADATA_VERSION, SUPPORTED, level_of
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.server.dynamic_config import DynamicBrokerConfig
from moldau.storage.resources import DescriptorBudget

log = logging.getLogger(__name__)

SESSION_CHECK_INTERVAL_MS = 1_000


class ControllerServer:
    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        log_writer: MetadataLogWriter,
        image: MetadataImage,
        scheduler: AsyncioScheduler,
        *,
        active: bool,
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self.quorum = QuorumController(log_writer, image, active=False)
        topics = TopicControl(
            config.node_id,
            config.log_defaults,
            config.int("num.partitions"),
            DynamicBrokerConfig.check,
            config.int("default.replication.factor"),
            DescriptorBudget.from_config(config).max_partitions,
            remote_storage_system_enable=config.bool("remote.log.storage.system.enable"),
            group_bounds={k: v for k, v in config.props.items() if k.startswith("group.")},
        )
        cluster = ClusterControl(
            cluster_id,
            ReplicationControl(config.bool("unclean.leader.election.enable")),
            config.int("broker.session.timeout.ms"),
        )
        self.apis = ControllerApis(
            ControllerContext(
                self.quorum,
                topics,
                cluster,
                scheduler.clock,
                delete_topic_enable=config.bool("delete.topic.enable"),
            )
        )
        self._timers: list[TimerHandle] = []
        self._tasks: set[asyncio.Task[None]] = set()
        if active:
            self.activate()

    # -- following the log ---------------------------------------------------------------
    def handle_commit(
        self, records: Sequence[MetadataRecord], offset: int, image: MetadataImage
    ) -> None:
        self.quorum.handle_commit(records, offset, image)

    def load_snapshot(self, image: MetadataImage) -> None:
        self.quorum.load_snapshot(image)

    # -- leading -------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.quorum.active

    def activate(self, leader_contact: tuple[int, int] | None = None) -> None:
        """This node leads the quorum: decide, and give every broker a full session but the
        previous leader, silent since ``leader_contact`` (its id, when it last answered)."""
        if self.quorum.active:
            return
        log.info("node %d is the active controller", self.config.node_id)
        self.quorum.activate()
        last_heard = dict([leader_contact]) if leader_contact is not None else None
        self.apis.context.cluster.activate(
            self.quorum.committed, self.scheduler.clock.now_ms(), last_heard
        )
        if METADATA_VERSION not in self.quorum.committed.features:
            task = asyncio.get_running_loop().create_task(
                bootstrap_metadata_version(self.apis.context, bootstrap_level(self.config))
            )
            self._tasks.add(task)
            task.add_done_callback(self._bootstrapped)
        every, c, apis = self.scheduler.every, self.config, self.apis
        self._timers.append(every(SESSION_CHECK_INTERVAL_MS, apis.expire_broker_sessions))
        if c.bool("auto.leader.rebalance.enable"):
            percent = c.int("leader.imbalance.per.broker.percentage")
            self._timers.append(
                every(
                    1000 * c.int("leader.imbalance.check.interval.seconds"),
                    lambda: apis.balance_leaders(percent),
                )
            )

    def _bootstrapped(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("metadata.version not finalized: %s", task.exception())

    def deactivate(self) -> None:
        if not self.quorum.active:
            return
        log.info("node %d is no longer the active controller", self.config.node_id)
        self.quorum.deactivate()
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()


def bootstrap_level(config: BrokerConfig) -> int:
    """The metadata.version a new cluster starts at: ``inter.broker.protocol.version`` if
    set and supported (as ``kafka-storage format`` reads it), else the latest Moldau has."""
    raw = config.props.get("inter.broker.protocol.version")
    level = level_of(raw) if raw else None
    low, high = SUPPORTED[METADATA_VERSION]
    if level is not None and low <= level <= high:
        return level
    if raw:
        log.warning(
            "inter.broker.protocol.version %s is not a metadata.version Moldau supports "
            "(%s to %s): starting at %s",
            raw,
            LEVELS[low][0],
            LEVELS[high][0],
            LEVELS[LATEST_LEVEL][0],
        )
    return LATEST_LEVEL
