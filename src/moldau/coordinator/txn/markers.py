"""Delivery of a transaction's markers to the leaders of its partitions
(Kafka's TransactionMarkerChannelManager).

Each committed PrepareCommit/PrepareAbort becomes a delivery: its partitions are grouped
by current leader (from the metadata image), the partitions this node leads are written
in-process, the others with WriteTxnMarkers to the leader's inter-broker listener. A
partition is done when its leader answers NONE; a partition of a deleted topic needs no
marker; leader changes and replication timeouts are retried after a backoff with the
leaders of the newest image. Once every partition is done, ``complete`` writes
CompleteCommit/CompleteAbort. A delivery stops when the coordinator moved (another
coordinator epoch now owns the transaction, and resumes it from the log) or a leader says
the producer or coordinator epoch is fenced.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from moldau.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

from .coordinator import MarkerTask
from .marker_writer import Marker
from .routing import LeaderRouter
from .state import TopicPartition

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_MS = 100

# The leader is moving, behind, or busy: the same marker is sent again.
_RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    }
)
# The transaction moved on under another epoch: this delivery is obsolete.
_OBSOLETE = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})

WriteLocal = Callable[[list[Marker]], Awaitable[list[dict[TopicPartition, ErrorCode]]]]


class TxnMarkerChannel:
    def __init__(
        self,
        router: LeaderRouter,
        write_local: WriteLocal,
        *,
        is_current: Callable[[MarkerTask], bool],
        complete: Callable[[MarkerTask], Awaitable[None]],
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.router = router
        self.image = router.image
        self.write_local = write_local
        self.is_current = is_current
        self.complete = complete
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._deliveries: dict[tuple[str, int, int, int], asyncio.Task[None]] = {}

    def send(self, task: MarkerTask) -> None:
        """Start delivering ``task``'s markers (once per transaction and epochs)."""
        key = (task.transactional_id, task.producer_id, task.producer_epoch, task.coordinator_epoch)
        if key in self._deliveries:
            return
        delivery = asyncio.get_running_loop().create_task(self._deliver(task))
        self._deliveries[key] = delivery
        delivery.add_done_callback(lambda _: self._deliveries.pop(key, None))

    @property
    def in_flight(self) -> int:
        return len(self._deliveries)

    async def _deliver(self, task: MarkerTask) -> None:
        remaining = set(task.partitions)
        while remaining:
            if not self.is_current(task):
                return
            by_leader, gone = self._leaders(remaining)
            remaining -= gone
            answers = await asyncio.gather(
                *(self._send(leader, task, tps) for leader, tps in by_leader.items())
            )
            for results in answers:
                for tp, error in results.items():
                    if error in _OBSOLETE:
                        log.info(
                            "markers of %s (producer %d epoch %d) are obsolete: %s",
                            task.transactional_id,
                            task.producer_id,
                            task.producer_epoch,
                            error.name,
                        )
                        return
                    if error not in _RETRIABLE:
                        remaining.discard(tp)  # NONE, or a partition that can take no marker
            if remaining:
                await asyncio.sleep(self.retry_backoff_ms / 1000)
        if self.is_current(task):
            await self.complete(task)

    def _leaders(
        self, partitions: set[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], set[TopicPartition]]:
        """Partitions by leader (those without one wait), and those of deleted topics."""
        image = self.image()
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        gone = set()
        for tp in partitions:
            topic = image.topics.get(tp[0])
            part = topic.partitions.get(tp[1]) if topic is not None else None
            if part is None:
                gone.add(tp)
            elif part.leader >= 0:
                by_leader[part.leader].append(tp)
        return by_leader, gone

    async def _send(
        self, leader: int, task: MarkerTask, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        async def local() -> dict[TopicPartition, ErrorCode]:
            marker = Marker(
                task.producer_id,
                task.producer_epoch,
                task.committed,
                task.coordinator_epoch,
                tuple(partitions),
            )
            return (await self.write_local([marker]))[0]

        def answer(response: WriteTxnMarkersResponse) -> dict[TopicPartition, ErrorCode]:
            results = dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            for m in response.markers or []:
                for t in m.topics or []:
                    for p in t.partitions or []:
                        results[(t.name, p.partition_index)] = error_code(p.error_code)
            return results

        try:
            return await self.router.call(
                leader,
                local,
                lambda: (_marker_request(task, partitions), WRITE_TXN_MARKERS_VERSION),
                answer,
                lambda: dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                timeout_ms=self.request_timeout_ms,
            )
        except (ConnectionError, TimeoutError) as e:
            log.debug("WriteTxnMarkers to broker %d failed: %s", leader, e)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)

    def close(self) -> None:
        for delivery in list(self._deliveries.values()):
            delivery.cancel()


def _marker_request(task: MarkerTask, partitions: list[TopicPartition]) -> WriteTxnMarkersRequest:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, p in partitions:
        by_topic[topic].append(p)
    return WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=task.producer_id,
                producer_epoch=task.producer_epoch,
                transaction_result=task.committed,
                topics=[
                    WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ],
                coordinator_epoch=task.coordinator_epoch,
            )
        ]
    )


def error_code(value: int) -> ErrorCode:
    """A peer's error code (one this build does not know is an unknown server error)."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
