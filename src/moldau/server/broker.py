"""A broker node: wires storage, replication, metadata, the controller and coordinators.

It owns the parts and their lifecycle and nothing else: request handlers get a narrow
:class:`~moldau.server.services.Services` view, metadata changes reach the parts through
the publisher, and every timer runs on the node's scheduler. A node with no quorum
configured is a controller quorum of one: its metadata log commits locally.
"""

from __future__ import annotations

import logging
import uuid

from moldau.clock import AsyncioScheduler
from moldau.controller.apis import ControllerApis
from moldau.controller.controller import Controller
from moldau.controller.metadata_log import MetadataLog
from moldau.controller.quorum_controller import QuorumController
from moldau.coordinator.group.config import GroupConfig
from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.metadata.image import MetadataImage
from moldau.metadata.loader import MetadataLoader, replay
from moldau.metadata.publisher import MetadataPublisher
from moldau.metadata.records import BrokerEndpoint, RegisterBrokerRecord
from moldau.metadata.topics import OFFSETS_TOPIC
from moldau.replication.replica_manager import ReplicaManager, ReplicationConfig
from moldau.server.config import BrokerConfig, Listener
from moldau.server.controller_channel import LocalControllerChannel
from moldau.server.dynamic_config import DynamicBrokerConfig
from moldau.server.fetch_session import FetchSessionCache
from moldau.server.producer_ids import ProducerIdManager
from moldau.server.services import Services
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager
from moldau.storage.meta_properties import ensure_formatted

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig, scheduler: AsyncioScheduler | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.scheduler = scheduler or AsyncioScheduler()
        self.clock = self.scheduler.clock
        self.dynamic_config = DynamicBrokerConfig(config)
        self.log_manager = LogManager(
            config.log_dirs, self.dynamic_config.log_defaults, clock=self.clock.time
        )
        self.publisher = MetadataPublisher(self.node_id)
        self.replica_manager = ReplicaManager(
            self.node_id,
            self.log_manager,
            self.scheduler,
            self.topic_log_config,
            ReplicationConfig(replica_lag_time_max_ms=config.int("replica.lag.time.max.ms")),
        )
        self.groups = GroupCoordinatorService(
            GroupConfig(
                group_min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
                group_max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
                group_initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
                offsets_retention_minutes=config.int("offsets.retention.minutes"),
                offsets_retention_check_interval_ms=config.int(
                    "offsets.retention.check.interval.ms"
                ),
                offset_metadata_max_bytes=config.int("offset.metadata.max.bytes"),
            ),
            config.int("offsets.topic.num.partitions"),
            self.replica_manager,
            self.scheduler,
            self._ensure_offsets_topic,
        )
        self.publisher.add_listener(self.dynamic_config)
        self.publisher.add_listener(self.replica_manager)
        self.publisher.add_listener(self.groups.runtime)
        self.dynamic_config.on_log_defaults_change(self._log_defaults_changed)
        self.fetch_sessions = FetchSessionCache(
            config.int("max.incremental.fetch.session.cache.slots")
        )
        self.metadata_log: MetadataLog | None = None
        self.controller: QuorumController | None = None
        self.channel: LocalControllerChannel | None = None
        self.producer_ids: ProducerIdManager | None = None

    # -- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Replay metadata, open (recovering if needed) the logs, publish the image (which
        makes this node leader of its partitions) and load the coordinators."""
        for d in self.config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        cluster_id = ensure_formatted(
            self.config.log_dirs, self.node_id, self.config.get("cluster.id") or None
        )
        self.metadata_log = MetadataLog.open(self.config.log_dirs[0])
        image = replay(self.metadata_log.batches()).with_cluster_id(cluster_id)
        self.log_manager.load_logs(lambda topic: _topic_configs(image, topic))
        self.controller = QuorumController(self.metadata_log, image)
        self.controller.add_commit_listener(MetadataLoader(self.publisher).handle_commit)
        decisions = Controller(
            self.node_id,
            self.config.log_defaults,
            self.config.int("num.partitions"),
            self.dynamic_config.check,
        )
        apis = ControllerApis(
            self.controller, decisions, delete_topic_enable=self.config.bool("delete.topic.enable")
        )
        self.channel = LocalControllerChannel(apis)
        self.producer_ids = ProducerIdManager(self.node_id, self.channel)
        self.publisher.publish(image)
        await self.groups.runtime.wait_loaded()

    async def register(self, listeners: list[Listener]) -> None:
        """Record where clients reach this broker (advertised listeners)."""
        assert self.channel is not None
        endpoints = [BrokerEndpoint(name=li.name, host=li.host, port=li.port) for li in listeners]
        record = RegisterBrokerRecord(
            broker_id=self.node_id,
            incarnation_id=uuid.uuid4().bytes,
            end_points=endpoints,
            fenced=False,
        )
        await self.channel.commit([record])

    def start_background(self) -> None:
        c, every = self.config, self.scheduler.every
        every(c.int("log.retention.check.interval.ms"), self._retention)
        every(c.int("log.flush.scheduler.interval.ms"), self._flush, in_thread=True)
        every(c.int("log.flush.offset.checkpoint.interval.ms"), self.log_manager.checkpoint)
        if c.bool("log.cleaner.enable"):
            every(c.int("log.cleaner.backoff.ms"), self._clean)

    def _retention(self) -> None:
        now = self.clock.now_ms()
        self.log_manager.run_retention(now)
        self.log_manager.expire_producers(now, self.config.int("producer.id.expiration.ms"))

    def _clean(self) -> None:
        self.log_manager.run_cleaner(self.clock.now_ms())

    def _flush(self) -> None:
        self.log_manager.flush_due(self.clock.now_ms())

    def shutdown(self) -> None:
        """Flush everything and write checkpoints, so the next start needs no recovery."""
        self.scheduler.close()
        self.log_manager.shutdown()
        if self.metadata_log is not None:
            self.metadata_log.close()

    # -- what the parts need -------------------------------------------------------
    @property
    def services(self) -> Services:
        assert self.channel is not None and self.producer_ids is not None
        return Services(
            config=self.config,
            node_id=self.node_id,
            clock=self.clock,
            metadata=self.publisher,
            dynamic_config=self.dynamic_config,
            replica_manager=self.replica_manager,
            controller=self.channel,
            groups=self.groups,
            producer_ids=self.producer_ids,
            fetch_sessions=self.fetch_sessions,
        )

    def topic_log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_props(
            _topic_configs(self.publisher.image, topic), self.dynamic_config.log_defaults
        )

    def _log_defaults_changed(self) -> None:
        self.log_manager.default_props = dict(self.dynamic_config.log_defaults)
        for topic in {tp[0] for tp in self.log_manager.logs}:
            self.log_manager.update_config(topic, self.topic_log_config(topic))

    async def _ensure_offsets_topic(self) -> None:
        assert self.channel is not None
        await self.channel.create_internal_topic(
            OFFSETS_TOPIC,
            self.config.int("offsets.topic.num.partitions"),
            {
                "cleanup.policy": "compact",
                "segment.bytes": self.config.get("offsets.topic.segment.bytes"),
            },
        )


def _topic_configs(image: MetadataImage, topic: str) -> dict[str, str]:
    t = image.topics.get(topic)
    return dict(t.configs) if t is not None else {}
