"""Tiered storage on a broker (KIP-405): the remote storage manager, the
``__remote_log_metadata`` glue and the RemoteLogManager, assembled when
``remote.log.storage.system.enable`` is true.

Leadership reaches the RemoteLogManager through the ReplicaManager; this object only
builds the parts, runs the RemoteLogManager's and the RemotePartitionRemover's passes on a
timer (a finished copy starts the
next at once; the timer finds new segments and retries after failures) and stops them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from moldau.clock import AsyncioScheduler
from moldau.config.broker import BrokerConfig, ConfigError
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import MetadataPublisher
from moldau.protocol.client import Address, NetworkClient
from moldau.replication.remote_log_manager import RemoteLogManager, RemoteLogManagerConfig
from moldau.replication.replica_manager import ReplicaManager
from moldau.security.client import ClientSecurity
from moldau.server.node_to_controller import NodeToControllerChannel
from moldau.server.remote_log_metadata import RemoteLogMetadataTopic
from moldau.server.remote_partition_remover import RemotePartitionRemover
from moldau.storage.remote.storage_manager import load_remote_storage_manager

log = logging.getLogger(__name__)

# The RemoteLogManager's pass runs at least this often: copies wait at most this long after
# a segment closes (remote.log.manager.task.interval.ms bounds each partition's scan).
MAX_PASS_INTERVAL_MS = 1000


class TieredStorage:
    def __init__(
        self,
        config: BrokerConfig,
        replica_manager: ReplicaManager,
        publisher: MetadataPublisher,
        channel: NodeToControllerChannel,
        endpoint: Callable[[MetadataImage, int], Address | None],
    ) -> None:
        node_id = config.node_id
        class_name = config.get("remote.log.storage.manager.class.name")
        if not class_name:
            raise ConfigError(
                "remote.log.storage.system.enable needs remote.log.storage.manager.class.name "
                "(file, s3 or package.module:Class)"
            )
        try:
            rsm = load_remote_storage_manager(class_name, config.remote_storage_manager_configs())
        except ValueError as e:
            raise ConfigError(str(e)) from e
        self.network = NetworkClient(
            f"moldau-rlmm-{node_id}",
            security=ClientSecurity.inter_broker(config)
            if config.get("controller.quorum.voters")
            else None,
        )
        self.metadata_topic = RemoteLogMetadataTopic(
            node_id,
            replica_manager,
            self.network,
            channel.create_internal_topic,
            lambda: publisher.image,
            endpoint,
            num_partitions=config.remote_log_metadata_int(
                "remote.log.metadata.topic.num.partitions"
            ),
            replication_factor=config.internal_topic_replication(
                config.remote_log_metadata_int("remote.log.metadata.topic.replication.factor")
            ),
            retention_ms=config.remote_log_metadata_int("remote.log.metadata.topic.retention.ms"),
        )
        self.config = RemoteLogManagerConfig.from_broker(config)
        self.remote_log_manager = RemoteLogManager(
            node_id, self.config, rsm, self.metadata_topic.manager, replica_manager.clock
        )
        replica_manager.remote_log_manager = self.remote_log_manager
        self.remover = RemotePartitionRemover(
            replica_manager,
            self.remote_log_manager,
            lambda: publisher.image,
            self.metadata_topic.num_partitions,
            # an image lagging longer than this fences its broker: a topic absent so
            # long is deleted, not created elsewhere and unseen yet
            orphan_grace_ms=config.int("broker.session.timeout.ms"),
        )

    def start(self, scheduler: AsyncioScheduler) -> None:
        interval = min(self.config.task_interval_ms, MAX_PASS_INTERVAL_MS)
        scheduler.every(interval, self.remote_log_manager.run_once)
        scheduler.every(interval, self.remover.run_once)
        # __remote_log_metadata exists before any tiered partition needs it: its readers
        # load the partitions' metadata from it before their first copy.
        self.metadata_topic.start()

    def shutdown(self) -> None:
        self.remote_log_manager.shutdown()
        self.metadata_topic.close()
        self.network.close()
