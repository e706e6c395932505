"""ISR changes sent to the controller (Kafka's AlterPartitionManager).

A leader proposes an ISR change (a follower caught up, or one fell behind) with the
leader and partition epochs it knows; the controller applies it only if those still hold
and answers with the new partition state, which reaches every broker as a
PartitionChangeRecord. Proposals are batched per round trip; a refused or unanswered one
is dropped so the leader can propose again from the state metadata brings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from moldau.metadata.image import MetadataImage
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    PartitionData,
    TopicData,
)
from moldau.replication.partition import IsrProposal
from moldau.replication.replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 1  # topics by name
RETRY_BACKOFF_S = 0.1

Send = Callable[[int, int, Any], Awaitable[Any]]


class AlterPartitionManager:
    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        send: Send,
        replica_manager: ReplicaManager,
        image: Callable[[], MetadataImage],
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.send = send
        self.replica_manager = replica_manager
        self.image = image
        self._pending: dict[TopicPartition, IsrProposal] = {}
        self._task: asyncio.Task[None] | None = None

    def submit(self, tp: TopicPartition, proposal: IsrProposal) -> None:
        self._pending[tp] = proposal
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, {}
            try:
                response = await self.send(
                    ApiKey.ALTER_PARTITION, ALTER_PARTITION_VERSION, self._request(batch)
                )
            except (KafkaError, ConnectionError, TimeoutError) as e:
                log.warning("AlterPartition for %d partition(s) failed: %s", len(batch), e)
                for tp in batch:
                    self.replica_manager.isr_change_failed(tp)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            self._handle(batch, response)

    def _request(self, batch: dict[TopicPartition, IsrProposal]) -> AlterPartitionRequest:
        topics: dict[str, list[PartitionData]] = {}
        for (topic, partition), proposal in batch.items():
            topics.setdefault(topic, []).append(
                PartitionData(
                    partition_index=partition,
                    leader_epoch=proposal.leader_epoch,
                    new_isr=list(proposal.new_isr),
                    partition_epoch=proposal.partition_epoch,
                )
            )
        image = self.image()
        return AlterPartitionRequest(
            broker_id=self.broker_id,
            broker_epoch=self.broker_epoch(),
            topics=[
                TopicData(
                    topic_name=name,
                    topic_id=image.topics[name].topic_id if name in image.topics else bytes(16),
                    partitions=parts,
                )
                for name, parts in topics.items()
            ],
        )

    def _handle(self, batch: dict[TopicPartition, IsrProposal], response: Any) -> None:
        if response.error_code != ErrorCode.NONE:
            log.warning("AlterPartition refused: %s", ErrorCode(response.error_code).name)
            for tp in batch:
                self.replica_manager.isr_change_failed(tp)
            return
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.topic_name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    log.info("%s-%d: ISR change refused: %s", *tp, ErrorCode(p.error_code).name)
                    self.replica_manager.isr_change_failed(tp)
                # On success the PartitionChangeRecord brings the new ISR to every broker.

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
