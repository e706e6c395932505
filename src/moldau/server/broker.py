"""A broker node: wires storage, replication, metadata, the controller and coordinators.

It owns the parts and their lifecycle and nothing else: request handlers get a narrow
:class:`~moldau.server.services.Services` view, metadata changes reach the parts through
the publisher, and every timer runs on the node's scheduler. A node with no quorum
configured is a controller quorum of one: its metadata log commits locally.
"""

from __future__ import annotations

import logging

from moldau.clock import AsyncioScheduler
from moldau.controller.apis import ControllerApis
from moldau.controller.cluster_control import ClusterControl
from moldau.controller.controller import Controller
from moldau.controller.metadata_log import MetadataLog
from moldau.controller.quorum_controller import QuorumController
from moldau.controller.replication_control import ReplicationControl
from moldau.coordinator.group.config import GroupConfig
from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.metadata.image import MetadataImage
from moldau.metadata.loader import MetadataLoader, replay
from moldau.metadata.publisher import MetadataPublisher
from moldau.metadata.topics import OFFSETS_TOPIC
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager, ReplicationConfig
from moldau.security.access import Access
from moldau.security.quotas import ClientQuotaConfig, ClientQuotas
from moldau.server.broker_lifecycle import BrokerLifecycle
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

UNFENCE_TIMEOUT_S = 60.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
SESSION_CHECK_INTERVAL_MS = 1_000


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
        self.authorizer = Access.from_config(config)
        self.quotas = ClientQuotas(ClientQuotaConfig.from_config(config))
        self.publisher.add_listener(self.authorizer)
        self.publisher.add_listener(self.quotas)
        self.dynamic_config.on_log_defaults_change(self._log_defaults_changed)
        self.fetch_sessions = FetchSessionCache(
            config.int("max.incremental.fetch.session.cache.slots")
        )
        self.metadata_log: MetadataLog | None = None
        self.controller: QuorumController | None = None
        self.channel: LocalControllerChannel | None = None
        self.controller_apis: ControllerApis | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.lifecycle: BrokerLifecycle | None = None

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
        c = self.config
        decisions = Controller(
            self.node_id,
            c.log_defaults,
            c.int("num.partitions"),
            self.dynamic_config.check,
            c.int("default.replication.factor"),
            c.int("max.broker.partitions"),
        )
        cluster = ClusterControl(
            cluster_id,
            ReplicationControl(c.bool("unclean.leader.election.enable")),
            c.int("broker.session.timeout.ms"),
        )
        cluster.activate(image, self.clock.now_ms())
        self.controller_apis = ControllerApis(
            self.controller,
            decisions,
            cluster=cluster,
            clock=self.clock,
            delete_topic_enable=c.bool("delete.topic.enable"),
        )
        self.channel = LocalControllerChannel(self.controller_apis)
        self.producer_ids = ProducerIdManager(self.node_id, self.channel)
        self.lifecycle = BrokerLifecycle(
            self.node_id,
            cluster_id,
            self.channel,
            lambda: self.publisher.image.offset,
            rack=c.get("broker.rack") or None,
            heartbeat_interval_ms=c.int("broker.heartbeat.interval.ms"),
        )
        self.publisher.publish(image)

    async def register(self, listeners: list[Listener]) -> None:
        """Register where clients reach this broker (advertised listeners) and wait until
        the controller unfences it and its coordinators have loaded."""
        assert self.lifecycle is not None
        self.lifecycle.start([(li.name, li.host, li.port) for li in listeners])
        if not await self.lifecycle.wait_unfenced(UNFENCE_TIMEOUT_S):
            raise KafkaError(
                f"broker {self.node_id} was not unfenced within {UNFENCE_TIMEOUT_S:.0f} s",
                ErrorCode.BROKER_NOT_AVAILABLE,
            )
        await self.groups.runtime.wait_loaded()

    async def controlled_shutdown(self) -> None:
        """Move this broker's leaderships away before it stops (Kafka's controlled
        shutdown); gives up after ``controlled.shutdown.timeout`` and stops anyway."""
        if (
            self.lifecycle is not None
            and self.config.bool("controlled.shutdown.enable")
            and not await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S)
        ):
            log.warning("controlled shutdown timed out; stopping anyway")

    def start_background(self) -> None:
        c, every = self.config, self.scheduler.every
        every(c.int("log.retention.check.interval.ms"), self._retention)
        every(c.int("log.flush.scheduler.interval.ms"), self._flush, in_thread=True)
        every(c.int("log.flush.offset.checkpoint.interval.ms"), self.log_manager.checkpoint)
        if c.bool("log.cleaner.enable"):
            every(c.int("log.cleaner.backoff.ms"), self._clean)
        apis = self.controller_apis
        if apis is not None:
            every(SESSION_CHECK_INTERVAL_MS, apis.expire_broker_sessions)
            if c.bool("auto.leader.rebalance.enable"):
                every(
                    1000 * c.int("leader.imbalance.check.interval.seconds"),
                    lambda: apis.balance_leaders(c.int("leader.imbalance.per.broker.percentage")),
                )

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
        if self.lifecycle is not None:
            self.lifecycle.close()
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
            authorizer=self.authorizer,
            quotas=self.quotas,
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
