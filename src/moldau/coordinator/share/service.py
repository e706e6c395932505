"""The share-group service of a node: share-group membership for the groups it
coordinates and the share-partitions of the partitions it leads (Kafka's
GroupCoordinator share half plus SharePartitionManager), driven by the node's clock.

State lives in the pure :class:`ShareGroupCoordinator` and :class:`SharePartition`
objects; this layer picks the settings (broker configs, per-group overrides), runs the
timer that expires sessions and acquisition locks, and wakes share fetches waiting for
records (``notify`` on :func:`wake_key`) when records become available again.

Durable state (KIP-932's persister): with a :class:`StateStore` (the share coordinator,
through ``__share_group_state``), a share-partition is read from it on first use, and
again whenever this node leads the partition in another leader epoch; a share-partition
never written starts at ``share.auto.offset.reset`` and that start is written at once.
Each change of delivery state (acknowledgement, release, lock expiry, a member leaving,
the start offset moving) is written; writes of one share-partition never overlap and the
changes made while one is under way go together in the next. An acknowledgement is
answered only once its write is committed. A write that fails drops the share-partition
from memory, so it is read again from what is durable: the acknowledgements that were not
written get the error and their records are delivered again (at least once, never lost).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Hashable,
    Iterable,
    Mapping,
)
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from moldau.clock import Clock
from moldau.coordinator.effects import CoordinatorRecord
from moldau.coordinator.share import group_records
from moldau.coordinator.share.group import (
    Heartbeat,
    HeartbeatResult,
    ShareGroupCoordinator,
    TopicPartitions,
    add_partitions,
    common_partitions,
    remove_partitions,
)
from moldau.coordinator.share.partition import RecordState, ShareLimits, SharePartition
from moldau.coordinator.share_state.shard import (
    UNINITIALIZED,
    ShareGroupOffset,
    ShareKey,
    StateBatch,
    WriteState,
)
from moldau.ids import IdSource
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig

log = logging.getLogger(__name__)

TICK_MS = 100  # how often the node runs tick(): sessions and acquisition locks
EARLIEST, LATEST = "earliest", "latest"
READ_COMMITTED = "read_committed"


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """Broker-wide share-group settings (``group.share.*``); groups may override some."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ShareSettings:
        return cls(*(config.int(key) for key in _SHARE_KEYS))


_SHARE_KEYS = (  # ShareSettings' fields, in order
    "group.share.record.lock.duration.ms",
    "group.share.delivery.count.limit",
    "group.share.partition.max.record.locks",
    "group.share.session.timeout.ms",
    "group.share.heartbeat.interval.ms",
    "group.share.max.size",
)


class StateStore(Protocol):
    """Where share-partition state is durable (the share coordinator's persister)."""

    async def read(
        self, key: ShareKey, leader_epoch: int
    ) -> tuple[ErrorCode, ShareGroupOffset]: ...

    async def write(self, key: ShareKey, data: WriteState) -> ErrorCode: ...

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """Start over at ``start_offset`` in a new state epoch (AlterShareGroupOffsets)."""

    async def delete(self, key: ShareKey) -> ErrorCode:
        """Forget the state (DeleteShareGroupOffsets, a deleted group)."""


@dataclass(slots=True)
class _Durable:
    """Where a share-partition's in-memory state came from."""

    topic_id: bytes
    leader_epoch: int
    state_epoch: int = 0


PartitionKey = tuple[str, str, int]  # group id, topic name, partition
# What a share fetch answers when its share-partition's state cannot be read (Kafka's
# SharePartition initialisation): a deposed leader tells the client to look again.
_READ_ERRORS = {
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    # No state yet: the group coordinator has not initialized it (the member's
    # assignment is newer than this fetch's view, or the topic was just created again).
    ErrorCode.INVALID_REQUEST: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}
GroupWriter = Callable[[str, list[CoordinatorRecord]], Awaitable[ErrorCode]]


def wake_key(group_id: str, topic: str, partition: int) -> Hashable:
    """The purgatory key share fetches of a group on a partition wait on."""
    return ("share", group_id, topic, partition)


class ShareGroupService:
    def __init__(
        self,
        settings: ShareSettings,
        clock: Clock,
        ids: IdSource,
        notify: Callable[[Hashable], None],
        group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {},
        store: StateStore | None = None,
        write_group: GroupWriter | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.notify = notify
        self.group_configs = group_configs
        self.coordinator = ShareGroupCoordinator(ids, settings.max_size)
        self.store = store
        self.write_group = write_group  # membership records to __consumer_offsets
        self.partitions: dict[PartitionKey, SharePartition] = {}
        self._durable: dict[PartitionKey, _Durable] = {}  # a recreated topic starts over
        self._loading: dict[PartitionKey, asyncio.Future[ErrorCode]] = {}
        self._pending: dict[PartitionKey, asyncio.Future[ErrorCode]] = {}  # the next write
        self._writing: set[PartitionKey] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._initializing: dict[str, set[asyncio.Task[None]]] = {}  # by group

    # -- settings ------------------------------------------------------------------
    def _group_int(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs(group_id).get(key)
        return int(value) if value is not None else default

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(
            group_id, "share.heartbeat.interval.ms", self.settings.heartbeat_interval_ms
        )

    def limits(self, group_id: str) -> ShareLimits:
        s = self.settings
        return ShareLimits(
            self._group_int(group_id, "share.record.lock.duration.ms", s.record_lock_duration_ms),
            s.delivery_count_limit,
            s.max_record_locks,
        )

    def auto_offset_reset(self, group_id: str) -> str:
        return self.group_configs(group_id).get("share.auto.offset.reset", LATEST)

    def read_committed(self, group_id: str) -> bool:
        """``share.isolation.level``: read_committed members get records below the last
        stable offset only, and never those of aborted transactions."""
        return self.group_configs(group_id).get("share.isolation.level") == READ_COMMITTED

    # -- membership ----------------------------------------------------------------
    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(
            group_id, "share.session.timeout.ms", self.settings.session_timeout_ms
        )

    async def heartbeat(
        self, hb: Heartbeat, topics: Callable[[Iterable[str]], Mapping[str, tuple[bytes, int]]]
    ) -> HeartbeatResult:
        """One heartbeat; answered once the membership it changed is written and the
        share state of the partitions the group gained is initialized (Kafka 4.1: a
        leader never creates share state, so a deleted one cannot come back)."""
        groups = self.coordinator.groups
        before = group_records.view(groups.get(hb.group_id))
        result = self.coordinator.heartbeat(
            hb, self.clock.now_ms(), self.session_timeout_ms(hb.group_id), topics
        )
        group = groups.get(hb.group_id)
        initializing: TopicPartitions = {}
        if not result.error and group is not None and self.store is not None:
            initializing = group.uninitialized()
            add_partitions(group.initializing, initializing)
        error = await self._write_group(hb.group_id, before)
        if error:
            if group is not None:
                remove_partitions(group.initializing, initializing)
            return HeartbeatResult(error, result.member_id)
        if initializing:
            task = asyncio.get_running_loop().create_task(
                self._initialize_state(hb.group_id, initializing)
            )
            running = self._initializing.setdefault(hb.group_id, set())
            running.add(task)
            task.add_done_callback(running.discard)
        if running := self._initializing.get(hb.group_id, set()):
            await asyncio.wait(set(running))  # so no member fetches state not there yet
        return result

    async def _write_group(
        self, group_id: str, before: group_records.GroupView | None
    ) -> ErrorCode:
        """Write what changed in the group since ``before``."""
        after = group_records.view(self.coordinator.groups.get(group_id))
        records = group_records.changes(group_id, before, after)
        if records and self.write_group is not None:
            return await self.write_group(group_id, records)
        return ErrorCode.NONE

    async def _initialize_state(self, group_id: str, initializing: TopicPartitions) -> None:
        """InitializeShareGroupState for share-partitions with no state yet (start offset
        -1: their leader starts at ``share.auto.offset.reset``) in the group epoch, then
        record them initialized. Those that fail are tried again at the next heartbeat."""
        assert self.store is not None
        store = self.store
        group = self.coordinator.groups[group_id]
        epoch = group.group_epoch

        async def initialize(topic_id: bytes, partition: int) -> ErrorCode:
            key = (group_id, topic_id, partition)
            error, state = await self._read_if_any(key)
            if not error and state.start_offset == UNINITIALIZED:
                error = await store.initialize(key, max(epoch, state.state_epoch), UNINITIALIZED)
            return error

        wanted = [(t, name, p) for t, (name, ps) in initializing.items() for p in sorted(ps)]
        errors = await asyncio.gather(*(initialize(t, p) for t, _, p in wanted))
        done: TopicPartitions = {}
        for (topic_id, name, partition), error in zip(wanted, errors, strict=True):
            if error:
                key = (group_id, name, partition)
                log.info("initializing share-partition %s failed: %s", key, error.name)
            else:
                add_partitions(done, {topic_id: (name, frozenset({partition}))})
        if self.coordinator.groups.get(group_id) is not group:
            return
        before = group_records.view(group)
        # A topic deleted meanwhile is no longer initializing: it is not recorded.
        add_partitions(group.initialized, common_partitions(done, group.initializing))
        remove_partitions(group.initializing, initializing)
        error = await self._write_group(group_id, before)
        if error:
            log.info("recording share group %s's state partitions failed: %s", group_id, error.name)

    async def on_topics_deleted(self, topic_ids: Collection[bytes]) -> None:
        """Topics were deleted (Kafka's maybeCleanupShareGroupState): the share groups
        this node coordinates forget them, so a topic created again under the same name
        is initialized afresh at ``share.auto.offset.reset``; the share-partitions this
        node held of them are dropped."""
        for key in [k for k, d in self._durable.items() if d.topic_id in topic_ids]:
            self._forget(key)
        for group in list(self.coordinator.groups.values()):
            before = group_records.view(group)
            for held in (group.initialized, group.initializing, group.deleting):
                for topic_id in topic_ids:
                    held.pop(topic_id, None)
            error = await self._write_group(group.group_id, before)
            if error:
                log.info(
                    "recording share group %s's deleted topics failed: %s",
                    group.group_id,
                    error.name,
                )

    def load_groups(
        self, records: Iterable[tuple[bytes, bytes | None]], owned: Callable[[str], bool]
    ) -> None:
        """This node now coordinates the groups for which ``owned`` holds: they are the
        ones in ``records`` (their ``__consumer_offsets`` records, oldest first)."""
        groups = self.coordinator.groups
        for group_id in [g for g in groups if owned(g)]:
            del groups[group_id]
        groups.update(group_records.restore(records, self.clock.now_ms(), self.session_timeout_ms))

    # -- share-partitions ----------------------------------------------------------
    async def share_partition(
        self,
        group_id: str,
        topic: str,
        partition: int,
        log_start: int,
        high_watermark: int,
        topic_id: bytes = b"",
        leader_epoch: int = 0,
    ) -> tuple[ErrorCode, SharePartition | None]:
        """The share-partition, read from the store on first use (and when the topic was
        deleted and created again, or this node leads it in another epoch); a new one
        starts at ``share.auto.offset.reset``."""
        key = (group_id, topic, partition)
        if self.store is None:  # in memory only: nothing to wait for
            self._start(key, topic_id, leader_epoch, log_start, high_watermark)
            return ErrorCode.NONE, self.partitions[key]
        while True:
            sp, durable = self.partitions.get(key), self._durable.get(key)
            if (
                sp is not None
                and durable is not None
                and (durable.topic_id, durable.leader_epoch) == (topic_id, leader_epoch)
            ):
                sp.limits = self.limits(group_id)
                return ErrorCode.NONE, sp
            loading = self._loading.get(key)
            if loading is None:
                break
            error = await asyncio.shield(loading)
            if error:
                return error, None
        done: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._loading[key] = done
        try:
            error = await self._load(key, topic_id, leader_epoch, log_start, high_watermark)
        except Exception:
            log.exception("loading share-partition %s failed", key)
            error = ErrorCode.UNKNOWN_SERVER_ERROR
        finally:
            del self._loading[key]
        done.set_result(error)
        return error, self.partitions.get(key) if not error else None

    def _start(
        self,
        key: PartitionKey,
        topic_id: bytes,
        leader_epoch: int,
        log_start: int,
        high_watermark: int,
    ) -> None:
        """Without a store: a share-partition lives as long as this node leads it."""
        sp, durable = self.partitions.get(key), self._durable.get(key)
        group_id = key[0]
        if sp is None or durable is None or durable.topic_id != topic_id:
            start = log_start if self.auto_offset_reset(group_id) == EARLIEST else high_watermark
            self.partitions[key] = SharePartition(start, self.limits(group_id))
            self._durable[key] = _Durable(topic_id, leader_epoch)
        else:
            sp.limits = self.limits(group_id)

    async def _load(
        self,
        key: PartitionKey,
        topic_id: bytes,
        leader_epoch: int,
        log_start: int,
        high_watermark: int,
    ) -> ErrorCode:
        assert self.store is not None
        group_id = key[0]
        self.partitions.pop(key, None)
        reset = log_start if self.auto_offset_reset(group_id) == EARLIEST else high_watermark
        error, state = await self.store.read((group_id, topic_id, key[2]), leader_epoch)
        if error:
            log.info("reading the state of share-partition %s failed: %s", key, error.name)
            return _READ_ERRORS.get(error, error)
        start = reset if state.start_offset == UNINITIALIZED else state.start_offset
        self.partitions[key] = self._restored(group_id, state, start)
        self._durable[key] = _Durable(topic_id, leader_epoch, state.state_epoch)
        # Written at once: the start is fixed, and older leaders are fenced from now on.
        # State the group coordinator has not initialized (yet) is not written: the
        # member is told to try again.
        error = await self.persist(key)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if error == ErrorCode.INVALID_REQUEST else error

    async def persist(self, key: PartitionKey) -> ErrorCode:
        """Write the share-partition's state; the error of the write that carried it."""
        if self.store is None or key not in self.partitions:
            return ErrorCode.NONE
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.get_running_loop().create_future()
            if key not in self._writing:
                self._spawn(self._flush(key))
        return await asyncio.shield(pending)

    async def _write_group_quietly(self, group_id: str, records: list[CoordinatorRecord]) -> None:
        assert self.write_group is not None
        error = await self.write_group(group_id, records)
        if error:
            log.info("writing share group %s's membership failed: %s", group_id, error.name)

    def persist_later(self, key: PartitionKey) -> None:
        """Write without waiting (lock expiry, a member leaving): failures are logged."""
        if self.store is not None:
            self._spawn(self._persist_quietly(key))

    async def _persist_quietly(self, key: PartitionKey) -> None:
        await self.persist(key)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush(self, key: PartitionKey) -> None:
        """Write a share-partition's state until no change is waiting; one at a time.
        Each write carries the whole in-flight window from the start offset, so the
        latest ShareUpdate alone (all a compacted ``__share_group_state`` keeps of the
        updates) restores the share-partition."""
        assert self.store is not None
        self._writing.add(key)
        try:
            while (waiting := self._pending.pop(key, None)) is not None:
                sp, durable = self.partitions.get(key), self._durable.get(key)
                if sp is None or durable is None:
                    waiting.set_result(ErrorCode.NONE)  # reloaded from what is durable
                    continue
                data = WriteState(
                    durable.state_epoch,
                    durable.leader_epoch,
                    sp.start_offset,
                    tuple(StateBatch(*b) for b in sp.state_batches()),
                )
                try:
                    error = await self.store.write((key[0], durable.topic_id, key[2]), data)
                except Exception:
                    log.exception("writing share-partition %s failed", key)
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
                if error and self.partitions.get(key) is sp:
                    log.warning(
                        "writing the state of share-partition %s failed (%s): it is read "
                        "again from the share coordinator",
                        key,
                        error.name,
                    )
                    del self.partitions[key]
                waiting.set_result(error)
        finally:
            self._writing.discard(key)

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: Iterable[tuple[int, int, list[int]]],
        topic_id: bytes = b"",
    ) -> ErrorCode:
        """Apply acknowledgement batches (first, last, types); the first error wins.
        Answers once the new state is durable."""
        key = (group_id, topic, partition)
        sp, durable = self.partitions.get(key), self._durable.get(key)
        if sp is None or durable is None or durable.topic_id != topic_id:
            return ErrorCode.INVALID_RECORD_STATE
        error = ErrorCode.NONE
        released = False
        changed = False
        for first, last, types in batches:
            code = sp.acknowledge(member_id, first, last, types)
            error = error or code
            changed = changed or not code
            released = released or 2 in types
        if released:
            self.notify(wake_key(group_id, topic, partition))
        if changed:
            error = await self.persist(key) or error
        return error

    def reset(self, key: PartitionKey, start_offset: int) -> None:
        """Start a share-partition over at ``start_offset`` (its records were deleted)."""
        sp = self.partitions.get(key)
        if sp is not None:
            sp.reset(start_offset)
            self.persist_later(key)

    def _forget(self, key: PartitionKey) -> bool:
        """Drop a share-partition from memory (it is read from the store on next use);
        whether this node held it."""
        self._durable.pop(key, None)
        return self.partitions.pop(key, None) is not None

    def refresh(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """A member opened a share session on this leader: the group's share-partitions
        with no record acquired and no write under way are read again from the store on
        next use, so offsets altered or deleted on the coordinator while the group was
        empty take effect here too (this node's old state would only be fenced at its
        next write)."""
        if self.store is None:
            return
        for topic, partition in partitions:
            key = (group_id, topic, partition)
            sp = self.partitions.get(key)
            busy = key in self._writing or key in self._pending
            if sp is not None and not busy and not sp.count(RecordState.ACQUIRED):
                self._forget(key)

    # -- administration (Describe/Alter/DeleteShareGroupOffsets) -------------------
    def group_partitions(self, group_id: str) -> dict[tuple[str, int], SharePartition]:
        """The share-partitions of ``group_id`` held on this node, by (topic, partition)."""
        return {(t, p): sp for (g, t, p), sp in self.partitions.items() if g == group_id}

    async def read_offset(
        self, group_id: str, topic: str, partition: int, topic_id: bytes = b""
    ) -> tuple[ErrorCode, SharePartition | None]:
        """DescribeShareGroupOffsets: the share-partition as the share coordinator holds
        it, whichever node leads the partition (None: never initialised); without a
        store, as this node holds it."""
        if self.store is None:
            return ErrorCode.NONE, self.partitions.get((group_id, topic, partition))
        error, state = await self._read_if_any((group_id, topic_id, partition))
        if error or state.start_offset == UNINITIALIZED:
            return error, None
        return ErrorCode.NONE, self._restored(group_id, state, state.start_offset)

    async def _read_if_any(self, key: ShareKey) -> tuple[ErrorCode, ShareGroupOffset]:
        """The state of ``key`` with no leader epoch, or an uninitialized one where none
        exists (the share coordinator answers INVALID_REQUEST for that)."""
        assert self.store is not None
        error, state = await self.store.read(key, UNINITIALIZED)
        if error == ErrorCode.INVALID_REQUEST:
            return ErrorCode.NONE, ShareGroupOffset()
        return error, state

    def _restored(self, group_id: str, state: ShareGroupOffset, start: int) -> SharePartition:
        batches = [(b.first, b.last, b.state, b.delivery_count) for b in state.batches]
        return SharePartition.restore(start, batches, self.limits(group_id))

    async def alter_start_offset(
        self, group_id: str, topic: str, partition: int, offset: int, topic_id: bytes = b""
    ) -> ErrorCode:
        """AlterShareGroupOffsets: the share-partition starts over at ``offset`` in a new
        state epoch (the group is empty: nothing in flight is lost). A leader elsewhere
        holding the old state is fenced at its next write and reads the new one."""
        key = (group_id, topic, partition)
        self._forget(key)
        if self.store is None:
            self.partitions[key] = SharePartition(offset, self.limits(group_id))
            self._durable[key] = _Durable(topic_id, 0)
            return ErrorCode.NONE
        store_key = (group_id, topic_id, partition)
        error, state = await self._read_if_any(store_key)
        if not error:
            error = await self.store.initialize(store_key, state.state_epoch + 1, offset)
        self._forget(key)  # a fetch may have read the old state meanwhile
        group = self.coordinator.groups.get(group_id)
        if error or group is None:
            return error
        before = group_records.view(group)
        add_partitions(group.initialized, {topic_id: (topic, frozenset({partition}))})
        return await self._write_group(group_id, before)

    async def delete_offsets(
        self, group_id: str, topic: str, partitions: Iterable[int], topic_id: bytes = b""
    ) -> tuple[ErrorCode, bool]:
        """DeleteShareGroupOffsets: forget the group's state of ``topic`` (the next fetch
        starts again at ``share.auto.offset.reset``); whether there was any.

        As Kafka's GroupMetadataManager: only a topic whose state the group initialized
        (or whose deletion did not finish) has any; it is recorded deleting before its
        state is deleted and forgotten once that is done, and a topic deleting is not
        initialized again. A leader still holding the old state cannot write it back:
        the share coordinator refuses writes to state that does not exist."""
        held = [self._forget((group_id, topic, p)) for p in partitions]
        if self.store is None:
            return ErrorCode.NONE, any(held)
        group = self.coordinator.groups.get(group_id)
        if group is None or (topic_id not in group.initialized and topic_id not in group.deleting):
            return ErrorCode.NONE, False
        entry = group.initialized.get(topic_id)
        parts = sorted(entry[1] if entry is not None else partitions)
        before = group_records.view(group)
        group.initialized.pop(topic_id, None)
        group.deleting[topic_id] = topic
        error = await self._write_group(group_id, before)
        for partition in parts:
            if not error:
                error = await self.store.delete((group_id, topic_id, partition))
        if error:
            return error, True
        before = group_records.view(group)
        group.deleting.pop(topic_id, None)
        return await self._write_group(group_id, before), True

    def release_member(self, group_id: str, member_id: str) -> None:
        """Give back what a member holds everywhere (it left, or its session closed)."""
        for key, sp in list(self.partitions.items()):
            if key[0] == group_id and sp.release_member(member_id):
                self.notify(wake_key(*key))
                self.persist_later(key)

    def tick(self) -> None:
        """Remove members past their session timeout (and write that), release expired
        locks."""
        now = self.clock.now_ms()
        expiring = {
            g.group_id: group_records.view(g)
            for g in self.coordinator.groups.values()
            if any(m.deadline_ms <= now for m in g.members.values())
        }
        for group_id, member_id in self.coordinator.expire(now):
            self.release_member(group_id, member_id)
        for group_id, before in expiring.items():
            after = group_records.view(self.coordinator.groups.get(group_id))
            records = group_records.changes(group_id, before, after)
            if records and self.write_group is not None:
                self._spawn(self._write_group_quietly(group_id, records))
        for key, sp in list(self.partitions.items()):
            deadline = sp.next_deadline_ms()
            if deadline is not None and deadline <= now and sp.expire_locks(now):
                self.notify(wake_key(*key))
                self.persist_later(key)
