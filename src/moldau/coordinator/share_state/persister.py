"""The share-partition leader's side of durable share state (Kafka's
DefaultStatePersister and PersisterStateManager): ReadShareGroupState and
WriteShareGroupState sent to the share coordinator of each share-partition key.

The coordinator is the leader of the key's ``__share_group_state`` partition: in-process
when this node leads it, else a request to that broker's inter-broker listener. The
topic is created on first use. Errors that mean "the coordinator is elsewhere or not
ready" (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, a
broker not reachable) are retried with backoff until ``timeout_ms``; the others answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from moldau.clock import Clock
from moldau.coordinator.share_state.service import SHARE_STATE_TOPIC, ShareCoordinatorService
from moldau.coordinator.share_state.shard import ShareGroupOffset, ShareKey, StateBatch, WriteState
from moldau.coordinator.txn.routing import LeaderRouter
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import delete_share_group_state_request as dq
from moldau.protocol.messages import initialize_share_group_state_request as iq
from moldau.protocol.messages import read_share_group_state_request as rq
from moldau.protocol.messages import write_share_group_state_request as wq
from moldau.protocol.messages.read_share_group_state_response import (
    ReadShareGroupStateResponse,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_BACKOFF_S = 0.1
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)


class ShareStatePersister:
    def __init__(
        self,
        service: ShareCoordinatorService,
        router: LeaderRouter,
        clock: Clock,
        timeout_ms: int = 15_000,
    ) -> None:
        self.service = service
        self.router = router
        self.clock = clock
        self.timeout_ms = timeout_ms

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareGroupOffset]:
        group_id, topic_id, partition = key

        def request() -> tuple[Any, int]:
            return rq.ReadShareGroupStateRequest(
                group_id=group_id,
                topics=[rq.ReadStateData(topic_id, [rq.PartitionData(partition, leader_epoch)])],
            ), 0

        def answer(response: ReadShareGroupStateResponse) -> tuple[ErrorCode, ShareGroupOffset]:
            found = [p for r in response.results for p in r.partitions]
            if not found:
                return ErrorCode.UNKNOWN_SERVER_ERROR, ShareGroupOffset()
            result = found[0]
            return ErrorCode(result.error_code), ShareGroupOffset(
                state_epoch=result.state_epoch,
                start_offset=result.start_offset,
                batches=tuple(
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in result.state_batches
                ),
            )

        return await self._call(
            key,
            lambda: self.service.read(key, leader_epoch),
            request,
            answer,
            lambda code: (code, ShareGroupOffset()),
        )

    async def write(self, key: ShareKey, data: WriteState) -> ErrorCode:
        group_id, topic_id, partition = key

        def request() -> tuple[Any, int]:
            batches = [
                wq.StateBatch(b.first, b.last, b.state, b.delivery_count) for b in data.batches
            ]
            part = wq.PartitionData(
                partition, data.state_epoch, data.leader_epoch, data.start_offset, batches
            )
            return wq.WriteShareGroupStateRequest(
                group_id=group_id, topics=[wq.WriteStateData(topic_id, [part])]
            ), 0

        return await self._call(
            key, lambda: self.service.write(key, data), request, _first_error, lambda code: code
        )

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState: start over at ``start_offset`` in ``state_epoch``
        (AlterShareGroupOffsets); the leader's next write of the old epoch is fenced, and
        it reads the new state."""
        group_id, topic_id, partition = key

        def request() -> tuple[Any, int]:
            part = iq.PartitionData(partition, state_epoch, start_offset)
            return iq.InitializeShareGroupStateRequest(
                group_id=group_id, topics=[iq.InitializeStateData(topic_id, [part])]
            ), 0

        return await self._call(
            key,
            lambda: self.service.initialize(key, state_epoch, start_offset),
            request,
            _first_error,
            lambda code: code,
        )

    async def delete(self, key: ShareKey) -> ErrorCode:
        """DeleteShareGroupState: forget the share-partition's state."""
        group_id, topic_id, partition = key

        def request() -> tuple[Any, int]:
            part = dq.PartitionData(partition)
            return dq.DeleteShareGroupStateRequest(
                group_id=group_id, topics=[dq.DeleteStateData(topic_id, [part])]
            ), 0

        return await self._call(
            key, lambda: self.service.delete(key), request, _first_error, lambda code: code
        )

    async def _call(
        self,
        key: ShareKey,
        local: Callable[[], Awaitable[T]],
        request: Callable[[], tuple[Any, int]],
        answer: Callable[[Any], T],
        failed: Callable[[ErrorCode], T],
    ) -> T:
        """Find the key's coordinator and ask it, retrying while it moves or loads."""
        deadline = self.clock.now_ms() + self.timeout_ms
        partition = self.service.partition_for(key)
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        while True:
            topic = self.router.image().topics.get(SHARE_STATE_TOPIC)
            part = topic.partitions.get(partition) if topic is not None else None
            if topic is None:
                try:
                    await self.service.ensure_topic()
                except Exception as e:  # the controller may be electing: retried below
                    log.debug("creating %s failed: %s", SHARE_STATE_TOPIC, e)
            elif part is not None and part.leader >= 0:
                try:
                    result = await self.router.call(
                        part.leader,
                        local,
                        request,
                        answer,
                        lambda: failed(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                        timeout_ms=max(1, deadline - self.clock.now_ms()),
                    )
                except (ConnectionError, TimeoutError):
                    result = failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                error = _code(result)
                if error not in _RETRIABLE:
                    return result
            if self.clock.now_ms() >= deadline:
                return failed(error)
            await asyncio.sleep(RETRY_BACKOFF_S)


def _first_error(response: Any) -> ErrorCode:
    """The error of the one partition a Write/Initialize/Delete response answers."""
    codes = [p.error_code for r in response.results for p in r.partitions]
    return ErrorCode(codes[0]) if codes else ErrorCode.UNKNOWN_SERVER_ERROR


def _code(result: Any) -> ErrorCode:
    return result[0] if isinstance(result, tuple) else result
