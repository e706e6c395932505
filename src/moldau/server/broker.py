"""The broker part of a node: storage, replication, coordinators, and their lifecycle.

It owns the parts and nothing else: request handlers get a narrow
:class:`~moldau.server.services.Services` view, metadata changes reach the parts through
the publisher, the controller is reached through a channel, and every timer runs on the
node's scheduler. ``server/node.py`` assembles brokers and controllers into a node.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable

from moldau.clock import AsyncioScheduler, TimerHandle
from moldau.config.broker import BrokerConfig, Listener
from moldau.config.topic import LogConfig
from moldau.coordinator.effects import CoordinatorRecord, Effects
from moldau.coordinator.group.config import GroupConfig
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.coordinator.share.service import TICK_MS, ShareGroupService, ShareSettings
from moldau.coordinator.share_state.persister import ShareStatePersister
from moldau.coordinator.share_state.service import (
    SHARE_STATE_TOPIC,
    ShareCoordinatorConfig,
    ShareCoordinatorService,
)
from moldau.coordinator.txn.routing import LeaderRouter
from moldau.coordinator.txn.service import TransactionCoordinatorService, TxnServiceConfig
from moldau.ids import SYSTEM_IDS
from moldau.metadata.image import MetadataImage
from moldau.metadata.loader import MetadataLoader
from moldau.metadata.publisher import LocalChanges, MetadataPublisher
from moldau.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.alter_partition import AlterPartitionManager
from moldau.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from moldau.replication.replica_manager import ReplicaManager, ReplicationConfig
from moldau.replication.txn_verification import TransactionVerifier
from moldau.security.access import Access
from moldau.security.client import ClientSecurity
from moldau.security.quotas import ClientQuotaConfig, ClientQuotas
from moldau.server.broker_lifecycle import BrokerLifecycle
from moldau.server.deleted_topics import DeletedTopics
from moldau.server.dynamic_config import DynamicBrokerConfig
from moldau.server.fetch_session import FetchSessionCache
from moldau.server.log_dir_mover import ALTER_LOG_DIRS_INTERVAL_MS, LogDirMover
from moldau.server.node_to_controller import NodeToControllerChannel
from moldau.server.producer_ids import ProducerIdManager
from moldau.server.schema_validation import SchemaValidation
from moldau.server.services import Services
from moldau.server.share_session import ShareSessionCache
from moldau.server.tiered_storage import TieredStorage
from moldau.storage.cleaner import CLEANER_MAP_LOAD_FACTOR, offset_map_capacity
from moldau.storage.log_manager import LogManager
from moldau.storage.resources import DescriptorBudget

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0
LOG_DIR_FAILURE_CHECK_MS = 100  # how soon a failed log dir is taken offline
TOPIC_ID_SYNC_MS = 100  # how soon a new log's partition.metadata is fsynced
FETCH_SESSION_SLOTS = "max.incremental.fetch.session.cache.slots"


class Broker:
    """The broker part of a node. Metadata reaches it through ``loader`` (the batches Raft
    committed; a single node's quorum is of one); the controller through ``channel``."""

    def __init__(
        self,
        config: BrokerConfig,
        scheduler: AsyncioScheduler,
        channel: NodeToControllerChannel,
        cluster_id: str,
        quorum_high_watermark: Callable[[], int | None] | None = None,
    ) -> None:
        self.config, self.node_id = config, config.node_id
        self.scheduler, self.clock = scheduler, scheduler.clock
        self.channel, self.cluster_id = channel, cluster_id
        self.inter_broker_listener = config.get("inter.broker.listener.name")
        self.dynamic_config = DynamicBrokerConfig(config)
        self._log_configs: dict[tuple[tuple[str, str], ...], LogConfig] = {}
        self.serving = asyncio.Event()  # registered, unfenced, coordinators loaded
        self._background: list[TimerHandle] = []  # periodic tasks, cancelled at shutdown
        self.budget = DescriptorBudget.from_config(config)
        self.log_manager = self._log_manager()
        self.publisher = MetadataPublisher(self.node_id)
        self.log_opener = LogOpener(self.log_manager)
        self.replica_manager = ReplicaManager(
            self.node_id,
            self.log_manager,
            self.scheduler,
            self.topic_log_config,
            ReplicationConfig.from_config(config),
            # Both answered by parts built below, which need the replica manager themselves.
            propose_isr_change=lambda tp, proposal: self.isr_changes.submit(tp, proposal),
            transaction_verifier=self._transaction_verifier(),
        )
        self.groups = GroupCoordinatorService(
            GroupConfig.from_config(config),
            config.int("offsets.topic.num.partitions"),
            self.replica_manager,
            self.scheduler,
            self._ensure_offsets_topic,
        )
        self.shares, self.share_sessions = self._share_groups(), ShareSessionCache()
        self.fetchers = ReplicaFetcherManager(
            self.node_id,
            self.replica_manager,
            self._inter_broker_address,
            FetcherConfig.from_config(config),
        )
        self.tiered_storage = self._tiered_storage()
        self.transactions = self._transaction_coordinator()
        self.authorizer = Access.from_config(config)
        self.quotas = ClientQuotas(ClientQuotaConfig.from_config(config))
        self.schema_validation = SchemaValidation(self.topic_log_config)
        self._listen_to_metadata()
        self.dynamic_config.on_log_defaults_change(self._log_defaults_changed)
        self.fetch_sessions = FetchSessionCache(config.int(FETCH_SESSION_SLOTS))
        self.loader = MetadataLoader(self.publisher, quorum_high_watermark)
        self.lifecycle = lifecycle = BrokerLifecycle.from_config(
            config,
            cluster_id,
            channel,
            lambda: self.publisher.image.offset,
            lambda: self.log_manager.offline_dirs,
        )
        self.producer_ids = ProducerIdManager(self.node_id, channel, lambda: lifecycle.epoch)
        self.isr_changes = AlterPartitionManager(
            self.node_id,
            lambda: lifecycle.epoch,
            channel.call,
            self.replica_manager,
            lambda: self.publisher.image,
        )

    def _listen_to_metadata(self) -> None:
        """Every part that follows the cluster's metadata hears each published image, in
        this order (configs and logs first, then replicas, quotas and coordinators)."""
        for listener in (
            self.dynamic_config,
            self.log_opener,
            self.replica_manager,
            self.fetchers,
            self.replica_manager.leader_quota,
            self.fetchers.quota,
            self.groups.runtime,
            self.transactions.runtime,
            self.share_state.runtime,
            self.authorizer,
            self.quotas,
        ):
            self.publisher.add_listener(listener)

    def _log_manager(self) -> LogManager:
        config = self.config
        return LogManager(
            config.log_dirs,
            self.dynamic_config.log_defaults,
            clock=self.clock.time,
            budget=self.budget,
            recovery_threads=config.int("num.recovery.threads.per.data.dir"),
            remote_storage_system_enable=config.bool("remote.log.storage.system.enable"),
            cleaner_map_entries=offset_map_capacity(
                config.int("log.cleaner.dedupe.buffer.size"),
                config.int("log.cleaner.threads"),
                CLEANER_MAP_LOAD_FACTOR,
            ),
        )

    def _tiered_storage(self) -> TieredStorage | None:
        """The remote tier's parts, with ``remote.log.storage.system.enable`` only."""
        if not self.config.bool("remote.log.storage.system.enable"):
            return None
        return TieredStorage(
            self.config,
            self.replica_manager,
            self.publisher,
            self.channel,
            self._inter_broker_address,
        )

    # -- lifecycle ------------------------------------------------------------------
    def start(self, image: MetadataImage) -> None:
        """Publish the image this node starts from (empty until Raft delivers; the logs
        open with the first caught-up one, see :class:`LogOpener`)."""
        self.publisher.publish(image)

    async def register(self, listeners: list[Listener]) -> None:
        """Register where clients reach this broker (advertised listeners) and wait until
        the controller unfences it and its coordinators have loaded."""
        self.lifecycle.start([(li.name, li.host, li.port) for li in listeners])
        await self.lifecycle.unfenced.wait()  # bounded by server.max.startup.time.ms
        await self.groups.runtime.wait_loaded()
        await self.transactions.runtime.wait_loaded()
        await self.share_state.runtime.wait_loaded()
        self.serving.set()

    async def controlled_shutdown(self) -> None:
        """Move this broker's leaderships away before it stops (Kafka's controlled
        shutdown); gives up after ``controlled.shutdown.timeout`` and stops anyway. A
        fenced broker (a start cut short, say) leads nothing: it skips it, as Kafka's
        does while starting."""
        if not self.lifecycle.unfenced.is_set():
            self.lifecycle.close()
            return
        if self.config.bool(
            "controlled.shutdown.enable"
        ) and not await self.lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S):
            log.warning("controlled shutdown timed out; stopping anyway")

    def start_background(self) -> None:
        """Retention, flushes, checkpoints and cleaning run in worker threads (an fsync or
        a large compaction must not stall requests); a busy worker hands the GIL back to
        request handling within 0.5 ms instead of the interpreter's default 5 ms."""
        sys.setswitchinterval(0.0005)
        c = self.config

        def every(interval_ms: int, fn: Callable[[], object], *, in_thread: bool = False) -> None:
            self._background.append(self.scheduler.every(interval_ms, fn, in_thread=in_thread))

        every(c.int("log.retention.check.interval.ms"), self._retention)
        every(c.int("log.flush.scheduler.interval.ms"), self._flush, in_thread=True)
        every(TOPIC_ID_SYNC_MS, self.log_manager.sync_topic_ids, in_thread=True)
        every(
            c.int("log.flush.offset.checkpoint.interval.ms"),
            self.log_manager.checkpoint,
            in_thread=True,
        )
        every(
            c.int("replica.high.watermark.checkpoint.interval.ms"),
            self.replica_manager.checkpoint_high_watermarks,
        )
        every(c.int("replica.lag.time.max.ms") // 2, self.replica_manager.maybe_shrink_isr)
        if c.bool("log.cleaner.enable"):
            every(c.int("log.cleaner.backoff.ms"), self._clean)
        if self.tiered_storage is not None:
            self.tiered_storage.start(self.scheduler)
        mover = LogDirMover(self.log_manager, self.dynamic_config, self.clock)
        every(ALTER_LOG_DIRS_INTERVAL_MS, mover.step)
        every(LOG_DIR_FAILURE_CHECK_MS, self._handle_log_dir_failures)
        every(TICK_MS, self.shares.tick)
        self.transactions.start()

    async def _retention(self) -> None:
        now = self.clock.now_ms()
        hws = self.replica_manager.high_watermarks()
        await asyncio.to_thread(self.log_manager.run_retention, hws, now)
        self.log_manager.expire_producers(now, self.config.int("producer.id.expiration.ms"))

    async def _clean(self) -> None:
        # Up to the last stable offset: undecided transactions are never compacted.
        bounds = self.replica_manager.last_stable_offsets()
        await asyncio.to_thread(self.log_manager.run_cleaner, bounds, self.clock.now_ms())

    def _handle_log_dir_failures(self) -> None:
        if self.replica_manager.handle_log_dir_failures():
            self.lifecycle.heartbeat_now()  # report the offline dirs at once

    def _flush(self) -> None:
        self.log_manager.flush_due(self.clock.now_ms())

    def shutdown(self) -> None:
        """Flush everything and write checkpoints, so the next start needs no recovery.
        First nothing may reach the logs any more: metadata images committed from now on
        (the controlled shutdown's own may be decoded after it was allowed) and the
        periodic checkpoints, which would host partitions again or overwrite the
        checkpoints this stop writes."""
        self.publisher.close()
        for task in self._background:
            task.cancel()
        self._background.clear()
        self.lifecycle.close()
        self.transactions.close()
        self.txn_network.close()
        self.share_network.close()
        self.fetchers.close()
        if self.tiered_storage is not None:
            self.tiered_storage.shutdown()
        self.isr_changes.close()
        self.replica_manager.close()
        if self.log_opener.loaded:  # else the dirs stay as the last run left them
            self.replica_manager.checkpoint_high_watermarks()
            self.log_manager.shutdown()

    # -- what the parts need -------------------------------------------------------
    @property
    def services(self) -> Services:
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
            transactions=self.transactions,
            shares=self.shares,
            share_sessions=self.share_sessions,
            share_state=self.share_state,
            authorizer=self.authorizer,
            quotas=self.quotas,
            schema_validation=self.schema_validation,
        )

    def _share_groups(self) -> ShareGroupService:
        """Share groups (KIP-932): fetches waiting for records wake through the purgatory;
        share-partition state is durable through the share coordinators; a share group's
        membership comes back when its ``__consumer_offsets`` partition loads; deleted
        topics leave both, and the groups' committed offsets (DeletedTopics)."""
        c = self.config
        self.share_state = ShareCoordinatorService(
            ShareCoordinatorConfig.from_config(c),
            self.replica_manager,
            self.scheduler,
            self._ensure_share_state_topic,
        )
        self.groups.runtime.on_loaded = self._share_groups_loaded
        self.share_network = NetworkClient(
            f"moldau-share-{self.node_id}",
            security=ClientSecurity.inter_broker(c) if c.get("controller.quorum.voters") else None,
        )
        router = LeaderRouter(
            self.node_id,
            lambda: self.publisher.image,
            self.share_network,
            self.inter_broker_listener,
        )
        shares = ShareGroupService(
            ShareSettings.from_config(c),
            self.clock,
            SYSTEM_IDS,
            self.replica_manager.purgatory.notify,
            lambda group_id: self.publisher.image.group_configs.get(group_id, {}),
            ShareStatePersister(self.share_state, router, self.clock),
            self._write_share_group,
        )
        self.publisher.add_listener(DeletedTopics(self.groups, shares, self.share_state))
        return shares

    async def _write_share_group(
        self, group_id: str, records: list[CoordinatorRecord]
    ) -> ErrorCode:
        """Share-group membership records, to the group's ``__consumer_offsets`` partition."""
        try:
            await self.groups.runtime.write(
                self.groups.partition_for(group_id),
                lambda shard: (None, Effects(records=records)),
                [group_id],
            )
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    def _share_groups_loaded(self, partition: int, shard: GroupCoordinator) -> None:
        """A ``__consumer_offsets`` partition loaded: its share groups come back."""
        records, shard.loaded_share_group_records = shard.loaded_share_group_records, []
        self.shares.load_groups(
            records, lambda group_id: self.groups.partition_for(group_id) == partition
        )

    async def _ensure_share_state_topic(self) -> None:
        """``__share_group_state`` as Kafka's share coordinator creates it: compacted,
        its replication factor capped to the brokers there are."""
        if SHARE_STATE_TOPIC in self.publisher.image.topics:
            return
        c = self.config
        replication = max(
            1,
            min(
                self._internal_topic_replication(
                    "share.coordinator.state.topic.replication.factor"
                ),
                len(self.publisher.image.brokers),
            ),
        )
        await self.channel.create_internal_topic(
            SHARE_STATE_TOPIC,
            c.int("share.coordinator.state.topic.num.partitions"),
            replication,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(
                    min(c.int("share.coordinator.state.topic.min.isr"), replication)
                ),
                "segment.bytes": c.get("share.coordinator.state.topic.segment.bytes"),
            },
        )

    def topic_log_config(self, topic: str) -> LogConfig:
        """Partitions of a topic (and topics with the same overrides) share one parsed
        config: parsing per partition was a sixth of start-up with 10,000 partitions."""
        overrides = _topic_configs(self.publisher.image, topic)
        key = tuple(sorted(overrides.items()))
        config = self._log_configs.get(key)
        if config is None:
            config = LogConfig.from_props(overrides, self.dynamic_config.log_defaults)
            self._log_configs[key] = config
        return config

    def _log_defaults_changed(self) -> None:
        self._log_configs.clear()
        self.log_manager.default_props = dict(self.dynamic_config.log_defaults)
        for topic in {tp[0] for tp in self.log_manager.logs}:
            self.log_manager.update_config(topic, self.topic_log_config(topic))

    def _transaction_verifier(self) -> TransactionVerifier | None:
        """KIP-890's check of transactional appends, asked of the transaction coordinator."""
        if not self.config.bool("transaction.partition.verification.enable"):
            return None
        return TransactionVerifier(lambda *question: self.transactions.verify(*question))

    def _inter_broker_address(self, image: MetadataImage, broker_id: int) -> tuple[str, int] | None:
        broker = image.brokers.get(broker_id)
        return broker.address(self.inter_broker_listener) if broker is not None else None

    def _transaction_coordinator(self) -> TransactionCoordinatorService:
        """The transaction coordinator (it answers the KIP-890 checks of partition leaders); its
        markers and checks reach other brokers on their inter-broker listener."""
        c = self.config
        self.txn_network = NetworkClient(
            f"moldau-txn-{self.node_id}",
            # Only a cluster has other brokers to send markers to and verify with.
            security=ClientSecurity.inter_broker(c) if c.get("controller.quorum.voters") else None,
        )
        service = TransactionCoordinatorService(
            TxnServiceConfig.from_config(c),
            self.node_id,
            self.replica_manager,
            self.scheduler,
            lambda: self.producer_ids.next_id(),
            self._ensure_transaction_topic,
            self.groups,
            lambda: self.publisher.image,
            self.txn_network,
            self.inter_broker_listener,
        )
        return service

    async def _ensure_transaction_topic(self) -> None:
        if TRANSACTION_STATE_TOPIC in self.publisher.image.topics:
            return
        c = self.config
        replication = self._internal_topic_replication("transaction.state.log.replication.factor")
        await self.channel.create_internal_topic(
            TRANSACTION_STATE_TOPIC,
            c.int("transaction.state.log.num.partitions"),
            replication,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(
                    min(c.int("transaction.state.log.min.isr"), replication)
                ),
                "segment.bytes": c.get("transaction.state.log.segment.bytes"),
            },
        )

    def _internal_topic_replication(self, key: str) -> int:
        return self.config.internal_topic_replication(self.config.int(key))

    async def _ensure_offsets_topic(self) -> None:
        if OFFSETS_TOPIC in self.publisher.image.topics:
            return
        await self.channel.create_internal_topic(
            OFFSETS_TOPIC,
            self.config.int("offsets.topic.num.partitions"),
            self._internal_topic_replication("offsets.topic.replication.factor"),
            {
                "cleanup.policy": "compact",
                "segment.bytes": self.config.get("offsets.topic.segment.bytes"),
            },
        )


class LogOpener:
    """Opens (recovering) the logs with the first caught-up metadata image, before the
    replica manager hosts any, as Kafka's broker starts its LogManager on its first
    metadata update: a log opens with its topic's configs, never with defaults the image
    corrects later (a tiered log keeps its checkpointed log start offset below its local
    segments only if it opens as tiered: its remote tier is readable after a restart).
    It listens after the dynamic broker config, whose log defaults the logs open with."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self.loaded = False  # a broker stopped before leaves its checkpoints untouched

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        if not self.loaded and new.offset >= 0:
            self.log_manager.load_logs(lambda topic: _topic_configs(new, topic))
            self.loaded = True


def _topic_configs(image: MetadataImage, topic: str) -> dict[str, str]:
    t = image.topics.get(topic)
    return dict(t.configs) if t is not None else {}
