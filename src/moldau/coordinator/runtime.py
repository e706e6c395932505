"""The coordinator runtime: Kafka's CoordinatorRuntime for the group (and transaction)
coordinators.

A coordinator is sharded by the partitions of its internal topic (``__consumer_offsets``,
``__transaction_state``): this node runs the shards of the partitions it leads. A shard is
loaded from its partition's log when this node becomes leader (requests meanwhile get
COORDINATOR_LOAD_IN_PROGRESS) and dropped when it stops leading (NOT_COORDINATOR).

Every write operation runs against its shard's pure state machine and returns records
plus a response. The runtime appends the records through the replica manager right away
(so the log's order is the operations' order) and releases the response, and every
parked request the operation completed, only once the high watermark passes them. If the
append fails, the shard is restored to its state before the operation and every request
the operation touched gets the error; the connection stays open. Ops without records
still wait for the shard's last write: their answer may depend on it.

Records may also be written as a producer's transactional batch, or be a transaction
marker (``Effects.txn``): the group coordinator's TxnOffsetCommit and the markers that
end it. Loading replays transactional records and markers through the loader's
``replay(key, value, producer_id)`` and ``replay_marker(producer_id, committed)``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar, cast

from moldau.clock import Scheduler, TimerHandle
from moldau.coordinator.effects import Effects, RequestId
from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.records.batch import NO_SEQUENCE
from moldau.records.control import build_marker_batch, read_marker
from moldau.records.record import build_batch, decode_all
from moldau.replication.replica_manager import AppendOrigin, ReplicaManager

log = logging.getLogger(__name__)

_LOAD_CHUNK = 8 << 20
RETRY_BACKOFF_MS = 500  # a timer whose write failed (full disk) runs again after this

# Kafka's mapping of append/replication errors to what coordinator clients understand.
_CLIENT_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def client_error(code: ErrorCode) -> ErrorCode:
    return _CLIENT_ERRORS.get(code, code)


class Shard(Protocol):
    """A coordinator's pure state for one partition of its topic."""

    def next_timer_ms(self) -> int | None: ...

    def tick(self, now_ms: int) -> Effects: ...

    def snapshot(self, keys: Iterable[str] | None, /) -> Any: ...

    def restore(self, snapshot: Any, /) -> None: ...


class ShardLoader(Protocol):
    def replay(self, key: bytes, value: bytes | None, producer_id: int = -1) -> None:
        """One record; ``producer_id`` >= 0 for a transaction's (not decided yet)."""

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction ended."""

    def finish(self, now_ms: int) -> Shard: ...


S = TypeVar("S", bound=Shard)
R = TypeVar("R")


class ShardState(Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass
class _Hosted(Generic[S]):
    epoch: int
    state: ShardState = ShardState.LOADING
    shard: S | None = None
    last_written: int = -1  # offset of the shard's last record
    timer: TimerHandle | None = None
    parked: set[RequestId] = field(default_factory=set)  # answered by a later operation


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        topic: str,
        replica_manager: ReplicaManager,
        scheduler: Scheduler,
        new_loader: Callable[[int], ShardLoader],
        *,
        write_timeout_ms: int = 5_000,
        on_loaded: Callable[[int, S], None] | None = None,
    ) -> None:
        self.topic = topic
        self.replica_manager = replica_manager
        self.scheduler = scheduler
        self.clock = scheduler.clock
        self.new_loader = new_loader
        self.write_timeout_ms = write_timeout_ms
        self.on_loaded = on_loaded  # called with (partition, shard) once a shard is active
        self._shards: dict[int, _Hosted[S]] = {}
        self._waiters: dict[RequestId, asyncio.Future[Any]] = {}
        self._ids = itertools.count()
        self._loads: set[asyncio.Task[None]] = set()

    # -- leadership ----------------------------------------------------------------
    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        """Load the shards of partitions this node now leads; drop the others."""
        for (topic, p), part in changes.leaders.items():
            if topic == self.topic:
                hosted = self._shards.get(p)
                if hosted is None or hosted.epoch != part.leader_epoch:
                    self._unload(p)
                    self._load(p, part.leader_epoch)
        for topic, p in (*changes.followers, *changes.deletes):
            if topic == self.topic:
                self._unload(p)

    def _load(self, partition: int, epoch: int) -> None:
        hosted: _Hosted[S] = _Hosted(epoch)
        self._shards[partition] = hosted
        task = asyncio.get_running_loop().create_task(self._run_load(partition, hosted))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _run_load(self, partition: int, hosted: _Hosted[S]) -> None:
        """Replay the partition's log; a record that does not decode is skipped with a
        warning naming its offset, so the broker always starts on its own data."""
        tp = (self.topic, partition)
        replica_log = self.replica_manager.local_log(tp)
        loader = self.new_loader(partition)
        started = self.clock.now_ms()
        skipped = 0
        if replica_log is not None:
            offset, end = replica_log.log_start_offset, replica_log.log_end_offset
            while offset < end and self._shards.get(partition) is hosted:
                data = replica_log.read_bytes(offset, _LOAD_CHUNK, max_offset=end)
                if not data:
                    break
                for info, records in decode_all(data):
                    if info.is_control:
                        marker = read_marker(data[info.position : info.end_position])
                        if marker is not None:
                            loader.replay_marker(info.producer_id, marker.committed)
                        offset = info.next_offset
                        continue
                    pid = info.producer_id if info.is_transactional else -1
                    for index, record in enumerate(records):
                        if record.key is None:
                            continue
                        try:
                            loader.replay(record.key, record.value, pid)
                        except ValueError as e:
                            skipped += 1
                            log.warning(
                                "%s-%d: skipping undecodable record at offset %d: %s",
                                *tp,
                                info.base_offset + index,
                                e,
                            )
                    offset = info.next_offset
                await asyncio.sleep(0)  # loading never starves request handling
            hosted.last_written = end - 1
        if self._shards.get(partition) is not hosted:
            return
        shard = cast(S, loader.finish(self.clock.now_ms()))  # the loader builds an S
        hosted.shard = shard
        hosted.state = ShardState.ACTIVE
        self._arm(partition, hosted)
        if self.on_loaded is not None:
            self.on_loaded(partition, shard)
        if hosted.last_written >= 0:
            log.info(
                "%s-%d: loaded in %d ms%s",
                *tp,
                self.clock.now_ms() - started,
                f" ({skipped} undecodable record(s) skipped)" if skipped else "",
            )

    def _unload(self, partition: int) -> None:
        """Drop the shard; its parked requests (a JoinGroup waiting for the rebalance to
        end) get NOT_COORDINATOR now, as in Kafka, so their clients look for the new
        coordinator instead of waiting out their rebalance timeout."""
        hosted = self._shards.pop(partition, None)
        if hosted is None:
            return
        if hosted.timer is not None:
            hosted.timer.cancel()
        for request_id in hosted.parked:
            fut = self._waiters.pop(request_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(
                    KafkaError(
                        f"this node no longer coordinates {self.topic}-{partition}",
                        ErrorCode.NOT_COORDINATOR,
                    )
                )

    def is_active(self, partition: int) -> bool:
        hosted = self._shards.get(partition)
        return hosted is not None and hosted.state is ShardState.ACTIVE

    def epoch(self, partition: int) -> int | None:
        """The leader epoch this node leads the shard's partition in (the coordinator
        epoch of the transaction coordinator); None if it does not."""
        hosted = self._shards.get(partition)
        return hosted.epoch if hosted is not None else None

    def active_partitions(self) -> list[int]:
        return [p for p, h in self._shards.items() if h.state is ShardState.ACTIVE]

    def active_shards(self) -> list[S]:
        return [
            h.shard
            for h in self._shards.values()
            if h.state is ShardState.ACTIVE and h.shard is not None
        ]

    async def wait_loaded(self) -> None:
        """Wait for the loads under way (tests and start-up)."""
        while self._loads:
            await asyncio.gather(*list(self._loads))

    # -- operations ----------------------------------------------------------------
    def _active(self, partition: int) -> _Hosted[S]:
        hosted = self._shards.get(partition)
        if hosted is None:
            raise KafkaError(
                f"this node does not coordinate {self.topic}-{partition}",
                ErrorCode.NOT_COORDINATOR,
            )
        if hosted.state is ShardState.LOADING:
            raise KafkaError(
                f"{self.topic}-{partition} is loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
        return hosted

    def read(self, partition: int, op: Callable[[S], R]) -> R:
        """Run a read-only ``op`` on the shard now."""
        hosted = self._active(partition)
        assert hosted.shard is not None
        return op(hosted.shard)

    def park(self, partition: int) -> tuple[RequestId, asyncio.Future[Any]]:
        """A request id and the future its completion will resolve (an operation on the
        shard of ``partition``; NOT_COORDINATOR if that shard is dropped first)."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = fut
        hosted = self._shards.get(partition)
        if hosted is not None:
            hosted.parked.add(request_id)
        return request_id, fut

    def forget(self, request_id: RequestId) -> None:
        self._waiters.pop(request_id, None)
        for hosted in self._shards.values():
            hosted.parked.discard(request_id)

    async def write(
        self,
        partition: int,
        op: Callable[[S], tuple[R, Effects]],
        keys: Iterable[str] | None = None,
    ) -> R:
        """Run ``op`` on the shard, write its records, answer once they are committed.

        ``keys`` names the state ``op`` may change (group ids; None: anything), so only
        that is copied for an undo. Raises KafkaError with the client-facing error code."""
        hosted = self._active(partition)
        shard = hosted.shard
        assert shard is not None
        undo = shard.snapshot(keys)
        result, effects = op(shard)
        if effects.records or effects.txn is not None:
            try:
                hosted.last_written = self._append(partition, effects)
            except KafkaError as e:
                shard.restore(undo)
                error = client_error(e.code)
                self._fail(effects, error)
                self._arm(partition, hosted)
                raise KafkaError(str(e), error) from None
        self._arm(partition, hosted)
        await self._committed(partition, hosted, effects)
        return result

    def _append(self, partition: int, effects: Effects) -> int:
        txn = effects.txn
        if txn is None:
            batch = bytearray(build_batch(effects.records))
        elif txn.marker is not None:
            batch = build_marker_batch(
                txn.producer_id,
                txn.producer_epoch,
                committed=txn.marker,
                coordinator_epoch=txn.coordinator_epoch,
            )
        else:
            batch = bytearray(
                build_batch(
                    effects.records,
                    producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch,
                    base_sequence=NO_SEQUENCE,
                    is_transactional=True,
                )
            )
        appended = self.replica_manager.append_to_leader(
            (self.topic, partition), batch, origin=AppendOrigin.COORDINATOR, required_acks=-1
        )
        if appended.error != ErrorCode.NONE:
            raise KafkaError(appended.message or appended.error.name, appended.error)
        return appended.last_offset

    async def _committed(self, partition: int, hosted: _Hosted[S], effects: Effects) -> None:
        """Release ``effects`` once the shard's last write is below the HW."""
        try:
            if hosted.last_written >= 0:
                await self.replica_manager.await_high_watermark(
                    (self.topic, partition), hosted.last_written, self.write_timeout_ms
                )
        except KafkaError as e:
            error = client_error(e.code)
            self._fail(effects, error)
            raise KafkaError(str(e), error) from None
        for request_id, result in effects.completions:
            hosted.parked.discard(request_id)
            fut = self._waiters.pop(request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(result)

    def _fail(self, effects: Effects, error: ErrorCode) -> None:
        for request_id, _ in effects.completions:
            for hosted in self._shards.values():
                hosted.parked.discard(request_id)
            fut = self._waiters.pop(request_id, None)
            if fut is not None and not fut.done():
                fut.set_exception(KafkaError("coordinator write failed", error))

    # -- timers --------------------------------------------------------------------
    def _arm(self, partition: int, hosted: _Hosted[S], not_before: int = 0) -> None:
        if hosted.timer is not None:
            hosted.timer.cancel()
            hosted.timer = None
        if hosted.shard is None or self._shards.get(partition) is not hosted:
            return
        deadline = hosted.shard.next_timer_ms()
        if deadline is not None:
            hosted.timer = self.scheduler.call_at(
                max(deadline, not_before), lambda: self._fire(partition, hosted)
            )

    def _fire(self, partition: int, hosted: _Hosted[S]) -> None:
        hosted.timer = None
        if self._shards.get(partition) is not hosted:
            return
        task = asyncio.get_running_loop().create_task(self._tick(partition))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _tick(self, partition: int) -> None:
        now = self.clock.now_ms()
        try:
            await self.write(partition, lambda shard: (None, shard.tick(now)))
        except KafkaError as e:
            log.warning("%s-%d: timer work failed: %s", self.topic, partition, e)
            hosted = self._shards.get(partition)
            if hosted is not None:
                self._arm(partition, hosted, self.clock.now_ms() + RETRY_BACKOFF_MS)
