"""The RemoteLogManager against real parts: a tiered UnifiedLog, the ``file`` remote
storage manager and the topic-based metadata manager, whose injected IO (the broker's
``__remote_log_metadata``) is an in-memory topic read back in order."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.clock import ManualClock
from moldau.config.broker import BrokerConfig, ConfigError
from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, OffsetMovedToTieredStorageError
from moldau.records.batch import scan_batches
from moldau.records.control import build_marker_batch
from moldau.records.record import Record, build_batch, decode_records
from moldau.replication.remote_log_manager import RemoteLogManager, RemoteLogManagerConfig
from moldau.replication.replica_manager import remote_error
from moldau.storage.remote.file_storage import FileRemoteStorageManager
from moldau.storage.remote.metadata_manager import TopicBasedRemoteLogMetadataManager
from moldau.storage.remote.metadata_records import deserialize
from moldau.storage.remote.segment import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import RemoteStorageError
from moldau.storage.unified_log import UnifiedLog

TP = TopicIdPartition(uuid.uuid4(), "orders", 0)
CONFIG = LogConfig(
    segment_bytes=600,
    index_interval_bytes=100,
    file_delete_delay_ms=0,
    remote_storage_enable=True,
    retention_ms=-1,
    local_retention_bytes=0,
)


class MetadataTopic:
    """``__remote_log_metadata`` as lists of values: what the broker's glue does with the
    real topic (append, then read back in order and say when caught up)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] = {}
        self.manager = TopicBasedRemoteLogMetadataManager(self.publish, num_partitions=3)

    async def publish(self, partition: int, value: bytes) -> int:
        values = self.partitions.setdefault(partition, [])
        values.append(value)
        asyncio.get_running_loop().call_soon(self.feed)
        return len(values) - 1

    def feed(self) -> None:
        for p in self.manager.needed_metadata_partitions():
            values = self.partitions.get(p, [])
            for offset in range(self.manager.position(p), len(values)):
                self.manager.on_record(p, offset, values[offset])
            self.manager.on_caught_up(p, len(values))


def produce(log: UnifiedLog, count: int) -> list[bytes]:
    """``count`` one-record batches; every fifth batch in an aborted transaction."""
    values = []
    for i in range(count):
        value = f"value-{i:04d}".encode() * 4
        txn = i % 5 == 4
        data = bytearray(
            build_batch(
                [Record(0, 1_000 + i, f"k{i}".encode(), value)],
                producer_id=7 if txn else -1,
                producer_epoch=0 if txn else -1,
                base_sequence=i // 5 if txn else -1,
                is_transactional=txn,
            )
        )
        log.append_as_leader(data, scan_batches(data), leader_epoch=0)
        if txn:
            marker = build_marker_batch(7, 0, committed=False, coordinator_epoch=0, timestamp=0)
            log.append_as_leader(marker, scan_batches(marker, strict=False), leader_epoch=0)
        else:
            values.append(value)
    return values


async def settle(rlm: RemoteLogManager, clock: ManualClock, rounds: int = 200) -> None:
    """Run passes until no copy or expiry is in flight and nothing is left to do."""
    for _ in range(rounds):
        rlm.run_once()
        await asyncio.sleep(0)
        while rlm._tasks:
            await asyncio.gather(*list(rlm._tasks))
        clock.advance(1)
        sizes = rlm.tier_sizes(("orders", 0))
        if sizes is not None and sizes.copy_lag_segments == 0:
            rlm.run_once()  # one expiry pass after the last copy
            while rlm._tasks:
                await asyncio.gather(*list(rlm._tasks))
            return
    raise AssertionError("copies did not finish")


async def read_all(rlm: RemoteLogManager, log: UnifiedLog, *, committed: bool) -> list[bytes]:
    """Every record from the log start, remote tier first, as a consumer would fetch."""
    offset, values = log.log_start_offset, []
    hw = log.log_end_offset
    while offset < hw:
        try:
            data = log.read(offset, 300, max_offset=hw).to_bytes()
            aborted = log.collect_aborted_transactions(offset, hw) if committed else []
        except OffsetMovedToTieredStorageError:
            result, found = await rlm.read(
                TP, log, offset, 300, max_offset=hw, min_one_batch=True, committed=committed
            )
            data, aborted = result.to_bytes(), found or []
        assert data, f"nothing read at {offset}"
        for info in scan_batches(data, strict=False):
            offset = info.next_offset
            if info.is_control:
                continue
            if committed and any(
                t.producer_id == info.producer_id and t.first_offset <= info.base_offset
                for t in aborted
            ):
                continue
            start = info.position
            values += [r.value for r in decode_records(data[start : start + info.size])]
    return values


@pytest.fixture
def env(tmp_path: Path):
    clock = ManualClock(10_000)
    rsm = FileRemoteStorageManager()
    rsm.configure({"dir": str(tmp_path / "remote")})
    metadata = MetadataTopic()
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, clock=clock.time, remote_log_enabled=True)
    return clock, rsm, metadata, log, tmp_path / "remote"


def test_copies_then_local_retention_then_reads_from_offset_zero(env) -> None:
    clock, rsm, metadata, log, root = env

    async def main() -> None:
        rlm = RemoteLogManager(
            1,
            RemoteLogManagerConfig(thread_pool_size=2, reader_threads=2, index_cache_bytes=4096),
            rsm,
            metadata.manager,
            clock,
        )
        committed_values = produce(log, 60)
        hw = log.log_end_offset
        rlm.on_leader(TP, log, 0, lambda: hw)
        metadata.feed()  # the glue reads the (empty) metadata partition: loaded
        await settle(rlm, clock)
        segments = metadata.manager.segments(TP)
        assert len(segments) == len(log.segments) - 1  # every closed segment, once
        starts = [s.start_offset for s in segments]
        assert starts == sorted(set(starts))
        assert log.highest_offset_in_remote_storage == segments[-1].end_offset
        assert rlm.stats.copy_requests == len(segments)
        assert log.enforce_retention(hw) == len(segments)
        assert log.local_log_start_offset == segments[-1].end_offset + 1
        assert log.log_start_offset == 0
        everything = await read_all(rlm, log, committed=False)
        assert len(everything) == 60
        committed = await read_all(rlm, log, committed=True)
        assert committed == committed_values
        # ListOffsets by timestamp finds the record in the remote tier
        assert await rlm.offset_for_timestamp(TP, log, 1_003) == (3, 1_003)
        await rlm.close()

    asyncio.run(main())


def test_a_restarted_leader_answers_retriably_until_its_remote_metadata_is_loaded(env) -> None:
    """A restarted broker reads the remote tier's metadata back from its topic before it
    can serve it: meanwhile a read below the local log start is REPLICA_NOT_AVAILABLE
    (clients retry), never OFFSET_OUT_OF_RANGE (a consumer would skip the remote tier)."""
    clock, rsm, metadata, log, _ = env
    config = RemoteLogManagerConfig(thread_pool_size=2, reader_threads=2, index_cache_bytes=4096)

    async def main() -> None:
        rlm = RemoteLogManager(1, config, rsm, metadata.manager, clock)
        values = produce(log, 60)
        hw = log.log_end_offset
        rlm.on_leader(TP, log, 0, lambda: hw)
        metadata.feed()
        await settle(rlm, clock)
        assert log.enforce_retention(hw) > 0
        await rlm.close()

        restarted = MetadataTopic()
        restarted.partitions = metadata.partitions
        rlm2 = RemoteLogManager(1, config, rsm, restarted.manager, clock)
        rlm2.on_leader(TP, log, 1, lambda: hw)
        with pytest.raises(RemoteStorageError) as loading:
            await rlm2.read(TP, log, 0, 300, max_offset=hw, min_one_batch=True, committed=False)
        assert remote_error(loading.value, "reading") == ErrorCode.REPLICA_NOT_AVAILABLE
        restarted.feed()  # loaded
        assert await read_all(rlm2, log, committed=True) == values
        assert remote_error(RemoteStorageError("down"), "reading") == ErrorCode.UNKNOWN_SERVER_ERROR
        await rlm2.close()

    asyncio.run(main())


def test_total_retention_and_topic_deletion_delete_remote_objects(env) -> None:
    clock, rsm, metadata, log, root = env

    async def main() -> None:
        rlm = RemoteLogManager(
            1,
            RemoteLogManagerConfig(thread_pool_size=2, reader_threads=2, index_cache_bytes=4096),
            rsm,
            metadata.manager,
            clock,
        )
        produce(log, 60)
        hw = log.log_end_offset
        rlm.on_leader(TP, log, 0, lambda: hw)
        metadata.feed()  # the glue reads the (empty) metadata partition: loaded
        await settle(rlm, clock)
        log.enforce_retention(hw)
        copied = metadata.manager.segments(TP)
        # total retention: keep about the last two remote segments' bytes plus the local
        keep = sum(s.segment_size_bytes for s in copied[-2:]) + log.size_bytes
        log.update_config(CONFIG.__class__(**{**CONFIG.__dict__, "retention_bytes": keep}))
        rlm.run_once()
        while rlm._tasks:
            await asyncio.gather(*list(rlm._tasks))
        left = metadata.manager.segments(TP)
        assert [s.segment_id for s in left] == [s.segment_id for s in copied[-2:]]
        assert log.log_start_offset == left[0].start_offset
        assert rlm.stats.delete_requests == len(copied) - 2
        files = sorted(p.name for p in root.rglob("*") if p.is_file())
        assert all(str(s.segment_id.id) not in " ".join(files) for s in copied[:-2])
        rlm.stop_partition(("orders", 0), delete_remote=True)  # the topic is deleted
        await drain(rlm)
        assert delete_states(metadata) == [RemotePartitionDeleteState.DELETE_PARTITION_MARKED]
        assert rlm.remove_partition(TP)  # the remover of its metadata partition
        assert not rlm.remove_partition(TP)  # already under way
        metadata.feed()  # its metadata partition is read again for it
        await drain(rlm)
        assert [p for p in root.rglob("*") if p.is_file()] == []
        assert delete_states(metadata) == list(RemotePartitionDeleteState)
        assert not metadata.manager.is_ready(TP)  # forgotten once deleted
        await rlm.close()

    asyncio.run(main())


# Quick passes and retries: a failed copy is tried again within 2 s of the manual clock.
RETRYING = {
    "task_interval_ms": 100,
    "reader_threads": 1,
    "retry_backoff_ms": 100,
    "retry_backoff_max_ms": 2_000,
}


def leading(
    log: UnifiedLog,
    rsm: FileRemoteStorageManager,
    metadata: MetadataTopic,
    clock: ManualClock,
    **config: int,
) -> RemoteLogManager:
    """Broker 1's remote log manager, leading ``log`` at epoch 0 with its HW at its end."""
    rlm = RemoteLogManager(1, RemoteLogManagerConfig(**config), rsm, metadata.manager, clock)
    hw = log.log_end_offset
    rlm.on_leader(TP, log, 0, lambda: hw)
    return rlm


async def drain(rlm: RemoteLogManager) -> None:
    while rlm._tasks:
        await asyncio.gather(*list(rlm._tasks))


def delete_states(metadata: MetadataTopic) -> list[RemotePartitionDeleteState]:
    events = [deserialize(v) for values in metadata.partitions.values() for v in values]
    return [e.state for e in events if isinstance(e, RemotePartitionDeleteMetadata)]


class FailingDeletes(FileRemoteStorageManager):
    """The ``file`` store, going down after ``allowed`` segment deletions."""

    def __init__(self, allowed: int) -> None:
        super().__init__()
        self.allowed = allowed

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if self.allowed <= 0:
            raise RemoteStorageError("the store is down")
        self.allowed -= 1
        super().delete_log_segment_data(metadata)


def test_an_interrupted_partition_deletion_resumes_after_a_restart_once_loaded(env) -> None:
    """The deletion stops with the store down after one segment; a restarted broker
    (a new manager reading the same metadata topic) resumes it from STARTED, waiting
    for the partition's metadata to load first."""
    clock, _, metadata, log, root = env
    config = RemoteLogManagerConfig(
        thread_pool_size=2, reader_threads=2, index_cache_bytes=4096, retry_backoff_ms=10
    )

    async def main() -> None:
        failing = FailingDeletes(allowed=1)
        failing.configure({"dir": str(root)})
        rlm = RemoteLogManager(1, config, failing, metadata.manager, clock)
        produce(log, 60)
        hw = log.log_end_offset
        rlm.on_leader(TP, log, 0, lambda: hw)
        metadata.feed()
        await settle(rlm, clock)
        copied = metadata.manager.segments(TP)
        assert len(copied) >= 3
        rlm.stop_partition(("orders", 0), delete_remote=True)
        await drain(rlm)  # marked
        rlm.remove_partition(TP)
        metadata.feed()
        while len(list(root.rglob("*.log"))) != len(copied) - 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # retrying against the store that is down
        rlm.shutdown()  # the broker dies mid-deletion
        assert delete_states(metadata) == list(RemotePartitionDeleteState)[:2]

        restarted = MetadataTopic()
        restarted.partitions = metadata.partitions
        store = FileRemoteStorageManager()
        store.configure({"dir": str(root)})
        rlm2 = RemoteLogManager(1, config, store, restarted.manager, clock)
        assert rlm2.remove_partition(TP)
        await asyncio.sleep(0.2)  # the metadata is loading: deferred, nothing deleted
        assert len(list(root.rglob("*.log"))) == len(copied) - 1
        restarted.feed()  # loaded
        await drain(rlm2)
        assert [p for p in root.rglob("*") if p.is_file()] == []
        assert delete_states(restarted) == list(RemotePartitionDeleteState)
        await rlm2.close()

    asyncio.run(main())


class UnevenUploads(FileRemoteStorageManager):
    """The ``file`` store where earlier segments upload slower (later ones finish first)
    and the upload of the segment at ``fail_at`` fails once, after writing part of it."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at

    def copy_log_segment_data(self, metadata, data):  # type: ignore[no-untyped-def]
        time.sleep(max(0.0, 0.2 - metadata.start_offset / 200))
        if metadata.start_offset == self.fail_at:
            self.fail_at = -1
            super().copy_log_segment_data(metadata, data)  # whole in the store, yet failed
            raise RemoteStorageError("connection reset")
        return super().copy_log_segment_data(metadata, data)


def test_concurrent_uploads_finish_in_offset_order_and_a_failed_one_is_cleaned(
    tmp_path: Path,
) -> None:
    clock = ManualClock(10_000)
    metadata = MetadataTopic()
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, clock=clock.time, remote_log_enabled=True)

    async def main() -> None:
        produce(log, 60)
        bases = [s.base_offset for s in log.segments]
        rsm = UnevenUploads(fail_at=bases[2])
        rsm.configure({"dir": str(tmp_path / "remote")})
        rlm = leading(
            log,
            rsm,
            metadata,
            clock,
            thread_pool_size=1,
            reader_threads=1,
            copier_thread_pool_size=4,
        )
        metadata.feed()
        for _ in range(10):  # past the retry backoff: the copy again, then its cleanup
            rlm.run_once()
            await drain(rlm)
            clock.advance(5_000)
        events = [deserialize(v) for values in metadata.partitions.values() for v in values]
        finished = [
            e.segment_id
            for e in events
            if isinstance(e, RemoteLogSegmentMetadataUpdate)
            and e.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]
        segments = metadata.manager.segments(TP)
        assert [s.segment_id for s in segments] == finished  # published in offset order
        assert [s.start_offset for s in segments] == bases[:-1]  # each closed one, once
        # nothing but the finished segments is left in the store
        stored = {p.name.split(".")[0] for p in (tmp_path / "remote").rglob("*") if p.is_file()}
        ids = {str(s.segment_id.id) for s in segments}
        assert {name.split("-", 1)[1] for name in stored} == ids
        assert rlm.stats.failed_copy_requests == 1
        await rlm.close()

    asyncio.run(main())


def test_copier_pool_size_falls_back_to_the_thread_pool_size() -> None:
    def copiers(**props: str) -> int:
        return RemoteLogManagerConfig.from_broker(BrokerConfig(props)).copier_threads

    assert copiers() == 10
    assert copiers(**{"remote.log.manager.thread.pool.size": "4"}) == 4
    assert copiers(**{"remote.log.manager.copier.thread.pool.size": "3"}) == 3
    with pytest.raises(ConfigError, match="copier.thread.pool.size must be -1 or at least 1"):
        copiers(**{"remote.log.manager.copier.thread.pool.size": "0"})


def test_an_isr_change_while_copies_run_copies_nothing_twice(tmp_path: Path) -> None:
    """The broker tells the manager it leads the partition again on every change of the
    partition (an ISR shrink when a follower dies, say): the copies in flight go on, none
    is started again by a fresh copy state."""
    clock = ManualClock(10_000)
    metadata = MetadataTopic()
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, clock=clock.time, remote_log_enabled=True)

    async def main() -> None:
        produce(log, 60)
        rsm = UnevenUploads(fail_at=-1)  # slow uploads: the change comes while they run
        rsm.configure({"dir": str(tmp_path / "remote")})
        rlm = leading(
            log,
            rsm,
            metadata,
            clock,
            thread_pool_size=1,
            reader_threads=1,
            copier_thread_pool_size=4,
        )
        metadata.feed()
        rlm.run_once()
        await asyncio.sleep(0.05)
        rlm.on_leader(TP, log, 0, lambda: log.log_end_offset)  # same epoch: an ISR change
        for _ in range(5):
            rlm.run_once()
            await drain(rlm)
            clock.advance(1_000)
        started = [
            e.start_offset
            for values in metadata.partitions.values()
            for e in map(deserialize, values)
            if isinstance(e, RemoteLogSegmentMetadata)
        ]
        assert started == [s.base_offset for s in log.segments[:-1]]  # each once, in order
        assert rlm.stats.failed_copy_requests == 0
        await rlm.close()

    asyncio.run(main())


class LateWrites(FileRemoteStorageManager):
    """The ``file`` store down until ``up_at_ms`` (every call fails, as timed out on the
    client) while it keeps the uploads it was sent and applies them ``delay_ms`` after it
    is up again, as a restarted S3 server applies requests whose clients gave up."""

    def __init__(self, clock: ManualClock, up_at_ms: int, delay_ms: int) -> None:
        super().__init__()
        self.clock, self.up_at_ms, self.delay_ms = clock, up_at_ms, delay_ms
        self.pending: list[tuple[RemoteLogSegmentMetadata, Any]] = []

    def land(self) -> None:
        if self.clock.now_ms() >= self.up_at_ms + self.delay_ms:
            for md, data in self.pending:
                super().copy_log_segment_data(md, data)
            self.pending.clear()

    def copy_log_segment_data(self, metadata, data):  # type: ignore[no-untyped-def]
        if self.clock.now_ms() < self.up_at_ms:
            self.pending.append((metadata, data))
            raise RemoteStorageError("read timeout")
        return super().copy_log_segment_data(metadata, data)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if self.clock.now_ms() < self.up_at_ms:
            raise RemoteStorageError("read timeout")
        super().delete_log_segment_data(metadata)


def test_copies_cut_short_are_deleted_after_their_late_writes_land(tmp_path: Path) -> None:
    """Copies fail while the store is down, yet the store applies them once it is up
    again: their segments are deleted only after the store has gone the longest retry
    backoff without a failure, so nothing is left in it but the finished segments."""
    clock = ManualClock(10_000)
    metadata = MetadataTopic()
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, clock=clock.time, remote_log_enabled=True)

    async def main() -> None:
        produce(log, 60)
        rsm = LateWrites(clock, up_at_ms=15_000, delay_ms=1_000)
        rsm.configure({"dir": str(tmp_path / "remote")})
        rlm = leading(
            log,
            rsm,
            metadata,
            clock,
            thread_pool_size=2,
            **RETRYING,
        )
        metadata.feed()
        for _ in range(40):
            rlm.run_once()
            await drain(rlm)
            rsm.land()
            clock.advance(250)
        assert not rsm.pending and rlm.stats.failed_copy_requests > 0
        events = [deserialize(v) for values in metadata.partitions.values() for v in values]
        last = {
            e.segment_id: e.state
            for e in events
            if not isinstance(e, RemotePartitionDeleteMetadata)
        }
        finished = {
            s for s, state in last.items() if state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        }
        assert [s.start_offset for s in metadata.manager.segments(TP)] == [
            s.base_offset for s in log.segments[:-1]
        ]
        assert set(last.values()) == {
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            RemoteLogSegmentState.DELETE_SEGMENT_FINISHED,
        }
        stored = {
            p.name.split(".")[0].split("-", 1)[1]
            for p in (tmp_path / "remote").rglob("*")
            if p.is_file()
        }
        assert stored == {str(s.id) for s in finished}
        await rlm.close()

    asyncio.run(main())


class Gated(FileRemoteStorageManager):
    """The ``file`` store where the first copy of ``fail_at`` fails and the copy of
    ``hold_at`` and the first delete wait until released."""

    def __init__(self, fail_at: int, hold_at: int, remote: Path) -> None:
        super().__init__()
        self.configure({"dir": str(remote)})
        self.fail_at, self.hold_at = fail_at, hold_at
        self.copy_held, self.copy_go = threading.Event(), threading.Event()
        self.delete_held, self.delete_go = threading.Event(), threading.Event()

    def copy_log_segment_data(self, metadata, data):  # type: ignore[no-untyped-def]
        if metadata.start_offset == self.fail_at:
            self.fail_at = -1
            raise RemoteStorageError("connection reset")
        if metadata.start_offset == self.hold_at:
            self.copy_held.set()
            self.copy_go.wait(10)
        return super().copy_log_segment_data(metadata, data)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        if not self.delete_held.is_set():
            self.delete_held.set()
            self.delete_go.wait(10)
        super().delete_log_segment_data(metadata)


def test_a_copy_finishing_while_the_expiry_pass_deletes_another_is_kept(
    tmp_path: Path,
) -> None:
    """The expiry pass deletes a failed copy's segment while a later copy, started long
    enough ago to look dangling, finishes: the pass sees it finished and keeps it."""
    clock = ManualClock(10_000)
    metadata = MetadataTopic()
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, clock=clock.time, remote_log_enabled=True)

    async def until(event: threading.Event) -> None:
        while not event.is_set():
            await asyncio.sleep(0.01)

    async def main() -> None:
        produce(log, 60)
        bases = [s.base_offset for s in log.segments]
        rsm = Gated(fail_at=bases[0], hold_at=bases[1], remote=tmp_path / "remote")
        rlm = leading(log, rsm, metadata, clock, thread_pool_size=1, **RETRYING)
        metadata.feed()
        rlm.run_once()  # the copy of bases[0] fails: its segment is garbage
        await drain(rlm)
        clock.advance(200)
        rlm.run_once()  # bases[0] again, then bases[1], held
        await until(rsm.copy_held)
        clock.advance(3_000)  # the garbage is settled; the held copy looks dangling
        rlm.run_once()
        await until(rsm.delete_held)  # the pass deletes the garbage
        rsm.copy_go.set()
        while [s.start_offset for s in metadata.manager.segments(TP)][:2] != bases[:2]:
            await asyncio.sleep(0.01)  # the held copy finished meanwhile
        rsm.delete_go.set()
        await drain(rlm)
        assert rlm.stats.delete_requests == 1
        kept = metadata.manager.segments(TP)[1]
        assert kept.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        assert list((tmp_path / "remote").rglob(f"*{kept.segment_id.id}.log"))
        await rlm.close()

    asyncio.run(main())


def test_a_retried_copy_finishes_after_the_slow_copy_before_it(tmp_path: Path) -> None:
    """Copies of three segments run at once: the first is slow, the second fails, the
    third is abandoned. The retry of the second must wait for the first (still running),
    not for the abandoned third: the remote tier grows in offset order."""
    clock = ManualClock(10_000)
    metadata = MetadataTopic()
    log = UnifiedLog.open(tmp_path / "orders-0", CONFIG, clock=clock.time, remote_log_enabled=True)

    async def main() -> None:
        produce(log, 80)
        bases = [s.base_offset for s in log.segments]
        rsm = Gated(fail_at=bases[1], hold_at=bases[0], remote=tmp_path / "remote")
        rlm = leading(
            log, rsm, metadata, clock, thread_pool_size=1, copier_thread_pool_size=3, **RETRYING
        )
        metadata.feed()
        rlm.run_once()  # bases[0] held, bases[1] fails, bases[2] abandoned
        while len(rlm._tasks) > 1:
            await asyncio.sleep(0.01)
        clock.advance(200)
        rlm.run_once()  # bases[1] and bases[2] again, behind the held bases[0]
        await asyncio.sleep(0.2)
        assert [s.start_offset for s in metadata.manager.segments(TP)] == []
        rsm.copy_go.set()
        await drain(rlm)  # a copy finishing out of order would raise here
        await settle(rlm, clock)
        copied = [s.start_offset for s in metadata.manager.segments(TP)]
        assert copied == bases[: len(copied)] and len(copied) >= 3, (copied, bases)
        await rlm.close()

    asyncio.run(main())


def test_a_copy_left_started_by_a_killed_broker_is_deleted_after_its_restart(env) -> None:
    """A broker killed mid-copy leaves COPY_SEGMENT_STARTED and part of the segment in the
    store; restarted, its expiry pass deletes that dangling segment (not at once: the
    margin for late writes), while a copy started by another broker is left alone."""
    clock, rsm, metadata, log, root = env

    async def main() -> None:
        produce(log, 60)
        segment = log.segments[0]

        async def started_by(broker_id: int) -> RemoteLogSegmentMetadata:
            md = RemoteLogSegmentMetadata(
                RemoteLogSegmentId.generate(TP),
                segment.base_offset,
                log.segments[1].base_offset - 1,
                -1,
                broker_id,
                clock.now_ms(),
                segment.size,
                {0: segment.base_offset},
            )
            await metadata.manager.add_remote_log_segment_metadata(md)
            partial = LogSegmentData(
                segment.path, segment.offset_index.path, segment.time_index.path, None, None, b""
            )
            rsm.copy_log_segment_data(md, partial)  # whole, yet never finished
            return md

        metadata.manager.on_partition_assigned(TP)
        metadata.feed()
        mine, theirs = await started_by(1), await started_by(2)
        # restarted
        rlm = leading(
            log,
            rsm,
            metadata,
            clock,
            thread_pool_size=2,
            reader_threads=2,
            retry_backoff_max_ms=2_000,
        )
        metadata.feed()

        def stored(md: RemoteLogSegmentMetadata) -> bool:
            return any(root.rglob(f"*{md.segment_id.id}.log"))

        await settle(rlm, clock)
        assert stored(mine) and stored(theirs)  # within the margin
        clock.advance(2_000)
        rlm.run_once()
        await drain(rlm)
        assert not stored(mine) and stored(theirs)
        cache = metadata.manager.cache(TP)
        assert cache.segment(mine.segment_id) is None  # DELETE_SEGMENT_FINISHED
        assert cache.segment(theirs.segment_id).state is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        assert [s.start_offset for s in metadata.manager.segments(TP)] == [
            s.base_offset for s in log.segments[:-1]
        ]
        await rlm.close()

    asyncio.run(main())
