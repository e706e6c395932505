"""The transaction coordinator as the handlers see it (Kafka's TransactionCoordinator).

Routes each transactional id to the shard of its ``__transaction_state`` partition
(Java's ``hashCode``, as for groups) and runs the pure :class:`TransactionCoordinator` of
that shard through the coordinator runtime, so state changes are committed before
answers leave. Around the pure core it does the IO Kafka's coordinator does: producer ids
from the controller's blocks, the markers of every committed PrepareCommit/PrepareAbort
(:class:`TxnMarkerChannel`), CompleteCommit/CompleteAbort once they are written, the
resumption of unfinished transactions when this node takes a partition over, and the
periodic abort of timed-out transactions and expiry of idle transactional ids.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moldau.clock import Scheduler
from moldau.config.broker import BrokerConfig
from moldau.coordinator.effects import Effects
from moldau.coordinator.group.partitioning import partition_for_group
from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.coordinator.runtime import CoordinatorRuntime
from moldau.metadata.image import MetadataImage
from moldau.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from moldau.protocol.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from moldau.replication.replica_manager import ReplicaManager

from .coordinator import (
    EndResult,
    InitResult,
    MarkerTask,
    TransactionCoordinator,
    TransactionLoader,
    TxnConfig,
)
from .marker_writer import Marker, write_markers
from .markers import TxnMarkerChannel, error_code
from .routing import LeaderRouter
from .state import TopicPartition, TransactionMetadata, TxnState

log = logging.getLogger(__name__)

COMPLETE_RETRY_BACKOFF_S = 0.1
VERIFY_VERSION = 4  # AddPartitionsToTxn's broker form


@dataclass(frozen=True)
class TxnServiceConfig:
    """The broker settings the service runs with (Kafka's names, in the broker config)."""

    coordinator: TxnConfig = TxnConfig()
    num_partitions: int = 50  # transaction.state.log.num.partitions
    abort_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup...
    expire_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup...
    marker_timeout_ms: int = 30_000  # request.timeout.ms: how long a marker may replicate

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TxnServiceConfig:
        return cls(
            TxnConfig(
                transaction_max_timeout_ms=config.int("transaction.max.timeout.ms"),
                transactional_id_expiration_ms=config.int("transactional.id.expiration.ms"),
            ),
            num_partitions=config.int("transaction.state.log.num.partitions"),
            abort_interval_ms=config.int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"
            ),
            expire_interval_ms=config.int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ),
        )


class _Loader(TransactionLoader):
    def __init__(self, config: TxnConfig, coordinator_epoch: int) -> None:
        super().__init__()
        self.config = config
        self.coordinator_epoch = coordinator_epoch

    def finish(self, now_ms: int) -> TransactionCoordinator:
        return TransactionCoordinator(self.config, self.coordinator_epoch, self.txns)


class TransactionCoordinatorService:
    def __init__(
        self,
        config: TxnServiceConfig,
        node_id: int,
        replica_manager: ReplicaManager,
        scheduler: Scheduler,
        next_producer_id: Callable[[], Awaitable[int]],
        ensure_topic: Callable[[], Awaitable[None]],
        groups: GroupCoordinatorService,
        image: Callable[[], MetadataImage],
        network: NetworkClient,
        listener: str | None,
    ) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.clock = scheduler.clock
        self.next_producer_id = next_producer_id
        self.ensure_topic = ensure_topic
        self.groups = groups
        self.node_id = node_id
        self.image = image
        self.runtime: CoordinatorRuntime[TransactionCoordinator] = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC,
            replica_manager,
            scheduler,
            self._new_loader,
            on_loaded=self._loaded,
        )
        self.router = LeaderRouter(node_id, image, network, listener)
        self.markers = TxnMarkerChannel(
            self.router,
            self.write_markers,
            is_current=self._is_current,
            complete=self._complete,
        )
        self._tasks: set[asyncio.Task[None]] = set()

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_group(transactional_id, self.config.num_partitions)

    def _new_loader(self, partition: int) -> _Loader:
        return _Loader(self.config.coordinator, self.runtime.epoch(partition) or 0)

    async def write_markers(self, markers: list[Marker]) -> list[dict[TopicPartition, ErrorCode]]:
        """This node's side of WriteTxnMarkers (also what the handler calls)."""
        return await write_markers(
            self.replica_manager, self.groups, markers, self.config.marker_timeout_ms
        )

    # -- client APIs -------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> InitResult:
        expected = None if producer_id < 0 else (producer_id, producer_epoch)
        partition = self.partition_for(transactional_id)
        try:
            new_id = -1
            if self.runtime.read(
                partition,
                lambda c: c.needs_producer_id(
                    transactional_id, producer_epoch if expected else None
                ),
            ):
                new_id = await self.next_producer_id()
            now = self.clock.now_ms()
            result: InitResult = await self.runtime.write(
                partition,
                lambda c: c.init_producer_id(now, transactional_id, timeout_ms, expected, new_id),
                [transactional_id],
            )
        except KafkaError as e:
            return InitResult(e.code)
        if result.markers is not None:
            self.markers.send(result.markers)
        return result

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> ErrorCode:
        wanted = list(partitions)
        now = self.clock.now_ms()
        return await self._write_error(
            transactional_id,
            lambda c: c.add_partitions(now, transactional_id, producer_id, producer_epoch, wanted),
        )

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> ErrorCode:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins."""
        tp = (OFFSETS_TOPIC, self.groups.partition_for(group_id))
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """A partition leader's KIP-890 question (Kafka's AddPartitionsToTxnManager): asked
        of this node's shard, or with AddPartitionsToTxn v4 (verify only) of the
        coordinator's node."""
        image = self.image()
        part = image.partition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        if part is None or part.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)

        async def local() -> dict[TopicPartition, ErrorCode]:
            return self.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

        def request() -> tuple[AddPartitionsToTxnRequest, int]:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, p in partitions:
                by_topic[topic].append(p)
            topics = [AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
            transaction = AddPartitionsToTxnTransaction(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                verify_only=True,
                topics=topics,
            )
            return AddPartitionsToTxnRequest(transactions=[transaction]), VERIFY_VERSION

        def answer(response: AddPartitionsToTxnResponse) -> dict[TopicPartition, ErrorCode]:
            missing = error_code(response.error_code) or ErrorCode.INVALID_TXN_STATE
            answers = dict.fromkeys(partitions, missing)
            for result in response.results_by_transaction or []:
                for t in result.topic_results or []:
                    for r in t.results_by_partition or []:
                        answers[(t.name, r.partition_index)] = error_code(r.partition_error_code)
            return answers

        return await self.router.call(
            part.leader,
            local,
            request,
            answer,
            lambda: dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        wanted = list(partitions)
        try:
            return self.runtime.read(
                self.partition_for(transactional_id),
                lambda c: c.verify_partitions(
                    transactional_id, producer_id, producer_epoch, wanted
                ),
            )
        except KafkaError as e:
            return dict.fromkeys(wanted, e.code)

    async def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        now = self.clock.now_ms()

        def op(c: TransactionCoordinator) -> tuple[EndResult, Effects]:
            return c.end_transaction(now, transactional_id, producer_id, producer_epoch, commit)

        try:
            result: EndResult = await self.runtime.write(
                self.partition_for(transactional_id), op, [transactional_id]
            )
        except KafkaError as e:
            return e.code
        if result.markers is not None:
            self.markers.send(result.markers)
        return result.error

    async def _write_error(
        self, transactional_id: str, op: Callable[[TransactionCoordinator], tuple[Any, Effects]]
    ) -> ErrorCode:
        try:
            error: ErrorCode = await self.runtime.write(
                self.partition_for(transactional_id), op, [transactional_id]
            )
            return error
        except KafkaError as e:
            return e.code

    # -- admin APIs --------------------------------------------------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        try:
            found = self.runtime.read(
                self.partition_for(transactional_id), lambda c: c.describe(transactional_id)
            )
        except KafkaError as e:
            return e.code, None
        if found is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, found

    def list_transactions(
        self, state_names: Iterable[str], producer_ids: Iterable[int], min_duration_ms: int
    ) -> tuple[list[TransactionMetadata], list[str]]:
        """Transactions of every shard this node runs, and the unknown state filters."""
        states, unknown = set(), []
        for name in state_names:
            state = TxnState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        if unknown and not states:
            return [], unknown  # only unknown states asked for: nothing can match
        pids, now = set(producer_ids), self.clock.now_ms()
        found = [
            t
            for shard in self.runtime.active_shards()
            for t in shard.list_transactions(states, pids, min_duration_ms, now)
        ]
        return found, unknown

    # -- background work ---------------------------------------------------------------
    def start(self) -> None:
        self.scheduler.every(self.config.abort_interval_ms, self.abort_timed_out)
        self.scheduler.every(self.config.expire_interval_ms, self.expire_transactional_ids)

    async def abort_timed_out(self) -> None:
        """Abort every transaction open longer than its timeout (fencing its producer)."""
        now = self.clock.now_ms()
        for partition in self.runtime.active_partitions():
            try:
                ids: list[str] = self.runtime.read(partition, lambda c: c.timed_out(now))
                if not ids:
                    continue
                tasks: list[MarkerTask] = await self.runtime.write(
                    partition, functools.partial(_abort_timed_out, now=now, ids=ids), ids
                )
            except KafkaError as e:
                log.info(
                    "%s-%d: aborting timed-out transactions failed: %s",
                    TRANSACTION_STATE_TOPIC,
                    partition,
                    e,
                )
                continue
            for task in tasks:
                log.info(
                    "aborted transaction of %s (producer %d) after its timeout",
                    task.transactional_id,
                    task.producer_id,
                )
                self.markers.send(task)

    async def expire_transactional_ids(self) -> None:
        now = self.clock.now_ms()
        for partition in self.runtime.active_partitions():
            try:
                ids: list[str] = self.runtime.read(partition, lambda c: c.expired(now))
                if ids:
                    await self.runtime.write(
                        partition, functools.partial(_expire, now=now, ids=ids), ids
                    )
            except KafkaError as e:
                log.info(
                    "%s-%d: expiring transactional ids failed: %s",
                    TRANSACTION_STATE_TOPIC,
                    partition,
                    e,
                )

    def _loaded(self, partition: int, shard: TransactionCoordinator) -> None:
        """A shard this node now leads: finish what the previous coordinator left in
        PrepareCommit/PrepareAbort, once its records are committed here."""
        tasks = shard.pending_markers()
        if not tasks:
            return
        task = asyncio.get_running_loop().create_task(self._resume(partition, tasks))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resume(self, partition: int, tasks: list[MarkerTask]) -> None:
        tp = (TRANSACTION_STATE_TOPIC, partition)
        replica_log = self.replica_manager.local_log(tp)
        if replica_log is None:
            return
        end = replica_log.log_end_offset - 1
        epoch = tasks[0].coordinator_epoch
        while self.runtime.epoch(partition) == epoch:
            try:
                await self.replica_manager.await_high_watermark(
                    tp, end, self.config.marker_timeout_ms
                )
                break
            except KafkaError as e:
                if e.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    return
        for task in tasks:
            log.info(
                "resuming %s markers of %s (producer %d)",
                "COMMIT" if task.committed else "ABORT",
                task.transactional_id,
                task.producer_id,
            )
            self.markers.send(task)

    def _is_current(self, task: MarkerTask) -> bool:
        partition = self.partition_for(task.transactional_id)
        return (
            self.runtime.is_active(partition)
            and self.runtime.epoch(partition) == task.coordinator_epoch
        )

    async def _complete(self, task: MarkerTask) -> None:
        """All markers are written: CompleteCommit/CompleteAbort (retried while this
        node still coordinates the transaction and the write only timed out)."""
        partition = self.partition_for(task.transactional_id)
        while self._is_current(task):
            now = self.clock.now_ms()
            try:
                await self.runtime.write(
                    partition,
                    functools.partial(_complete, now=now, task=task),
                    [task.transactional_id],
                )
                return
            except KafkaError as e:
                if e.code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                    log.info("completing %s failed: %s", task.transactional_id, e)
                    return
            await asyncio.sleep(COMPLETE_RETRY_BACKOFF_S)

    def close(self) -> None:
        self.markers.close()
        for task in list(self._tasks):
            task.cancel()


def _abort_timed_out(
    c: TransactionCoordinator, *, now: int, ids: list[str]
) -> tuple[list[MarkerTask], Effects]:
    return c.abort_timed_out(now, ids)


def _expire(c: TransactionCoordinator, *, now: int, ids: list[str]) -> tuple[None, Effects]:
    return None, c.expire(now, ids)


def _complete(c: TransactionCoordinator, *, now: int, task: MarkerTask) -> tuple[bool, Effects]:
    return c.complete(now, task)
