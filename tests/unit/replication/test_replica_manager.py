"""The replica manager on real logs with a manual clock: appends, acks=all waits, reads
bounded by the high watermark, follower fetches that move it, leadership errors."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from moldau.clock import ManualScheduler
from moldau.config.topic import LogConfig
from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.publisher import MetadataPublisher
from moldau.protocol.errors import ErrorCode
from moldau.records.record import build_batch
from moldau.replication import replica_manager
from moldau.replication.replica_manager import (
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchParams,
    FetchRequestPartition,
    OffsetLookup,
    ReplicaManager,
)
from moldau.storage.epoch_cache import LeaderEpochFileCache
from moldau.storage.log_manager import LogManager
from moldau.storage.partition_metadata import read_topic_id

TP = ("t", 0)
T0 = 1_700_000_000_000


def image(
    replicas: tuple[int, ...] = (1,),
    isr: tuple[int, ...] | None = None,
    leader: int = 1,
    epoch: int = 0,
    min_isr: int = 1,
    topic: str = "t",
    topic_id: bytes = b"t" * 16,
) -> MetadataImage:
    part = PartitionImage(0, replicas, isr or replicas, leader, epoch, epoch)
    t = TopicImage(topic, topic_id, {0: part}, {"min.insync.replicas": str(min_isr)})
    return MetadataImage(topics={topic: t}, topics_by_id={t.topic_id: topic})


class Node:
    def __init__(self, data: Path) -> None:
        self.scheduler = ManualScheduler()
        self.scheduler.clock.advance(T0)
        self.publisher = MetadataPublisher(1)
        self.logs = LogManager([data], {})
        self.rm = ReplicaManager(1, self.logs, self.scheduler, self.config)
        self.publisher.add_listener(self.rm)

    def config(self, topic: str) -> LogConfig:
        t = self.publisher.image.topics.get(topic)
        return LogConfig.from_props(dict(t.configs) if t else {}, {})

    async def produce(self, n: int = 1, acks: int = -1, timeout_ms: int = 1_000) -> Any:
        batch = bytearray(build_batch([(b"k", b"v%d" % i) for i in range(n)]))
        results = await self.rm.append_records({TP: batch}, required_acks=acks)
        if acks == -1:
            await self.rm.await_replication(results, timeout_ms)
        return results[TP]

    async def fetch(self, offset: int, replica_id: int = -1, max_wait_ms: int = 0) -> Any:
        (result,) = await self.rm.fetch_messages(
            FetchParams(replica_id=replica_id, max_wait_ms=max_wait_ms),
            [FetchRequestPartition("t", 0, offset, 1 << 20)],
        )
        return result


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_single_replica_acks_all_answers_at_once(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image())
        result = await node.produce(3)
        assert (result.error, result.base_offset, result.last_offset) == (ErrorCode.NONE, 0, 2)
        assert node.rm.high_watermark(TP) == 3
        fetched = await node.fetch(0)
        assert fetched.error == ErrorCode.NONE and fetched.records.next_offset == 3

    run(test)


def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), min_isr=2))
        waiting = asyncio.ensure_future(node.produce(2))
        await settle()
        assert not waiting.done()
        # A consumer sees nothing yet: the HW is still 0.
        assert (await node.fetch(0)).size == 0
        # The follower fetches the data, then fetches again from its new end: the HW moves.
        assert (await node.fetch(0, replica_id=2)).size > 0
        await node.fetch(2, replica_id=2)
        result = await asyncio.wait_for(waiting, 1)
        assert (result.error, result.base_offset) == (ErrorCode.NONE, 0)
        assert node.rm.high_watermark(TP) == 2

    run(test)


def test_acks_all_is_answered_in_the_fetch_that_moves_the_hw(tmp_path: Path) -> None:
    """The produce's future is done by the follower fetch itself: no task to wake."""

    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), min_isr=2))
        batch = bytearray(build_batch([(b"k", b"v")]))
        results = await node.rm.append_records({TP: batch}, required_acks=-1)
        replicated = node.rm.replicated(results, 1_000)
        assert (await node.fetch(0, replica_id=2)).size > 0
        assert not replicated.done()
        await node.fetch(1, replica_id=2)
        assert replicated.done() and results[TP].error == ErrorCode.NONE
        assert node.rm.purgatory.watched() == 0

    run(test)


def test_an_abandoned_acks_all_wait_is_dropped_at_the_next_hw_move(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), min_isr=2))
        batch = bytearray(build_batch([(b"k", b"v")]))
        results = await node.rm.append_records({TP: batch}, required_acks=-1)
        node.rm.replicated(results, 1_000).cancel()  # e.g. its connection closed
        assert node.rm.purgatory.watched() == 1
        await node.fetch(0, replica_id=2)
        await node.fetch(1, replica_id=2)
        assert node.rm.purgatory.watched() == 0

    run(test)


def test_acks_all_times_out(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2)))
        waiting = asyncio.ensure_future(node.produce(1, timeout_ms=500))
        await settle()
        node.scheduler.advance(499)
        await settle()
        assert not waiting.done()
        node.scheduler.advance(1)
        assert (await asyncio.wait_for(waiting, 1)).error == ErrorCode.REQUEST_TIMED_OUT

    run(test)


def test_min_insync_replicas(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), isr=(1,), min_isr=2))
        assert (await node.produce(1)).error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert (await node.produce(1, acks=1)).error == ErrorCode.NONE
        # The ISR shrinks while an acks=all write waits: the write was appended but is
        # answered NOT_ENOUGH_REPLICAS_AFTER_APPEND once the HW passes it.
        node.publisher.publish(image(replicas=(1, 2), min_isr=2, epoch=1))
        await node.fetch(1, replica_id=2)
        waiting = asyncio.ensure_future(node.produce(1, timeout_ms=60_000))
        await settle()
        node.scheduler.advance(30_001)  # the follower lags past replica.lag.time.max.ms
        node.publisher.publish(image(replicas=(1, 2), isr=(1,), min_isr=2, epoch=1))
        result = await asyncio.wait_for(waiting, 1)
        assert result.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    run(test)


def test_a_follower_long_poll_is_answered_in_the_append_it_waits_for(tmp_path: Path) -> None:
    """A caught-up follower's fetch is a purgatory watch: the leader's append sets its
    future in a callback right after (no task parked), with the new records, and the
    follower's next fetch moves the HW."""

    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), min_isr=2))
        params = FetchParams(replica_id=2, max_wait_ms=500)
        caught_up = [FetchRequestPartition("t", 0, 0, 1 << 20)]
        poll = node.rm.follower_fetch(params, caught_up)
        assert isinstance(poll, asyncio.Future) and not poll.done()
        batch = bytearray(build_batch([(b"k", b"v0"), (b"k", b"v1")]))
        await node.rm.append_records({TP: batch}, required_acks=-1)
        await asyncio.sleep(0)  # one turn of the loop: the callback, no task
        assert poll.done()
        (result,) = poll.result()
        assert result.error == ErrorCode.NONE and result.records.next_offset == 2
        assert node.rm.high_watermark(TP) == 0
        again = node.rm.follower_fetch(params, [FetchRequestPartition("t", 0, 2, 1 << 20)])
        assert node.rm.high_watermark(TP) == 2  # reported by the fetch itself
        assert isinstance(again, asyncio.Future) and not again.done()
        node.scheduler.advance(500)  # replica.fetch.wait.max.ms: answered empty
        (empty,) = again.result()
        assert empty.size == 0 and empty.high_watermark == 2
        assert node.rm.purgatory.watched() == 0

    run(test)


def test_a_follower_fetch_with_records_or_an_error_is_answered_at_once(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), min_isr=1))
        await node.produce(1, acks=1)
        params = FetchParams(replica_id=2, max_wait_ms=500)
        (behind,) = node.rm.follower_fetch(params, [FetchRequestPartition("t", 0, 0, 1 << 20)])
        assert behind.size > 0
        stranger = FetchParams(replica_id=7, max_wait_ms=500)
        (refused,) = node.rm.follower_fetch(stranger, [FetchRequestPartition("t", 0, 1, 1 << 20)])
        assert refused.error == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run(test)


def test_consumer_long_poll_is_woken_by_the_hw_not_the_append(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2)))
        await node.fetch(0, replica_id=2)
        poll = asyncio.ensure_future(node.fetch(0, max_wait_ms=10_000))
        await settle()
        await node.produce(1, acks=1)
        await settle()
        assert not poll.done()  # appended, but not yet replicated
        await node.fetch(1, replica_id=2)
        result = await asyncio.wait_for(poll, 1)
        assert result.high_watermark == 1 and result.size > 0

    run(test)


def test_a_fetch_of_no_partitions_does_not_wait(tmp_path: Path) -> None:
    """Java consumers close their fetch session with such a fetch (max wait 500 ms)."""

    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image())
        fetch = node.rm.fetch_messages(FetchParams(max_wait_ms=10_000), [])
        assert await asyncio.wait_for(fetch, 1) == []  # the manual clock never moves

    run(test)


def test_leadership_and_epoch_errors(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), leader=2, epoch=3))
        assert (await node.produce(1, acks=1)).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (await node.fetch(0)).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        node.publisher.publish(image(replicas=(1, 2), leader=1, epoch=4))
        (old,) = await node.rm.fetch_messages(
            FetchParams(), [FetchRequestPartition("t", 0, 0, 100, current_leader_epoch=3)]
        )
        (new,) = await node.rm.fetch_messages(
            FetchParams(), [FetchRequestPartition("t", 0, 0, 100, current_leader_epoch=5)]
        )
        assert (old.error, new.error) == (
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.UNKNOWN_LEADER_EPOCH,
        )
        assert (await node.fetch(0, replica_id=7)).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        missing = await node.rm.append_records(
            {("nope", 0): bytearray(build_batch([(b"k", b"v")]))}, required_acks=1
        )
        assert missing[("nope", 0)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(test)


def test_new_leader_answers_offset_not_available_until_its_hw_catches_up(
    tmp_path: Path,
) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), leader=2))
        # A follower holds two records whose HW it has not learned yet...
        node.rm.append_as_follower(TP, build_batch([(b"k", b"v0"), (b"k", b"v1")]), 0)
        assert node.rm.high_watermark(TP) == 0
        # ... when it becomes the leader.
        node.publisher.publish(image(replicas=(1, 2), epoch=1))
        lookup = node.rm.offset_for_timestamp(TP, LATEST_TIMESTAMP)
        assert lookup.error == ErrorCode.OFFSET_NOT_AVAILABLE
        await node.fetch(2, replica_id=2)
        assert node.rm.offset_for_timestamp(TP, LATEST_TIMESTAMP).offset == 2

    run(test)


def test_offset_lookups_that_find_nothing_carry_no_leader_epoch(tmp_path: Path) -> None:
    """Kafka answers -1 for offset, timestamp and leader epoch alike (Java's Admin then
    reports no epoch), not the current epoch with no offset."""

    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(epoch=3))
        assert node.rm.offset_for_timestamp(TP, MAX_TIMESTAMP) == OffsetLookup()
        await node.produce(2, acks=1)
        newest = node.rm.offset_for_timestamp(TP, MAX_TIMESTAMP)
        assert newest.offset >= 0 and newest.leader_epoch == 3
        assert node.rm.offset_for_timestamp(TP, newest.timestamp + 1) == OffsetLookup()

    run(test)


def test_clients_cannot_produce_to_internal_topics(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(topic="__transaction_state"))
        batch = bytearray(build_batch([(b"k", b"v")]))
        tp = ("__transaction_state", 0)
        client = node.rm.append_to_leader(tp, batch, origin=AppendOrigin.CLIENT)
        assert client.error == ErrorCode.INVALID_TOPIC_EXCEPTION
        own = node.rm.append_to_leader(tp, batch, origin=AppendOrigin.COORDINATOR)
        assert own.error == ErrorCode.NONE

    run(test)


def test_a_large_change_opens_its_replicas_a_slice_at_a_time(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(replica_manager, "HOST_BATCH", 10)

    def many(partitions: int, deleted: str | None = None) -> MetadataImage:
        topics = {}
        for name in ("t", "gone", "__consumer_offsets"):
            if name == deleted:
                continue
            parts = {p: PartitionImage(p, (1,), (1,), 1, 0, 0) for p in range(partitions)}
            topics[name] = TopicImage(name, name.encode().ljust(16, b"."), parts, {})
        return MetadataImage(topics=topics, topics_by_id={t.topic_id: n for n, t in topics.items()})

    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(many(12))
        opened = {tp for tp in node.logs.logs}
        # Internal topics' replicas open at once; the others wait for the scheduler.
        assert {("__consumer_offsets", p) for p in range(12)} <= opened
        assert len(opened) < 36
        waiting = next(("t", p) for p in range(12) if ("t", p) not in opened)
        batch = bytearray(build_batch([(b"k", b"v")]))
        results = await node.rm.append_records({waiting: batch}, required_acks=1)
        assert results[waiting].error == ErrorCode.NONE  # a request opens its replica at once
        assert waiting in node.logs.logs
        node.publisher.publish(many(12, deleted="gone"))
        node.scheduler.advance(0)
        assert {tp[0] for tp in node.logs.logs} == {"t", "__consumer_offsets"}
        assert len(node.logs.logs) == 24
        result = await node.produce(2)  # ("t", 0), written once already if it waited
        assert (result.error, result.last_offset) == (ErrorCode.NONE, 2 if waiting == TP else 1)

    run(test)


def test_a_hw_checkpoint_keeps_the_replicas_still_waiting_to_open(
    tmp_path: Path, monkeypatch
) -> None:
    """After a restart, a checkpoint taken while a large change is still opening replicas
    must not drop the HWs of those not opened yet."""
    monkeypatch.setattr(replica_manager, "HOST_BATCH", 10)
    parts = {p: PartitionImage(p, (1,), (1,), 1, 0, 0) for p in range(12)}
    t = TopicImage("t", b"t" * 16, parts, {})
    many = MetadataImage(topics={"t": t}, topics_by_id={t.topic_id: "t"})

    async def test() -> None:
        first = Node(tmp_path)
        first.publisher.publish(many)
        first.scheduler.advance(0)
        for p in range(12):
            batch = bytearray(build_batch([(b"k", b"v")] * (p + 1)))
            results = await first.rm.append_records({("t", p): batch}, required_acks=1)
            assert results[("t", p)].error == ErrorCode.NONE
        first.rm.checkpoint_high_watermarks()
        first.logs.shutdown()
        expected = {("t", p): p + 1 for p in range(12)}
        assert first.logs.read_replication_checkpoint() == expected

        restarted = Node(tmp_path)
        restarted.logs.load_logs()
        restarted.publisher.publish(many)
        # some replicas are still waiting for the scheduler
        assert any(restarted.rm.partition(("t", p)) is None for p in range(12))
        restarted.rm.checkpoint_high_watermarks()
        assert restarted.logs.read_replication_checkpoint() == expected

    run(test)


def test_a_replayed_delete_of_an_old_topic_keeps_the_log_of_the_new_one(tmp_path: Path) -> None:
    """A node replaying its metadata log image by image meets the old topic's creation and
    deletion after the new topic (same name) has its log on disk: that log is not the old
    topic's (partition.metadata says so), so neither is hosted as nor deleted with it."""
    old, new = image(topic_id=b"o" * 16), image(topic_id=b"n" * 16)

    async def test() -> None:
        first = Node(tmp_path)
        first.publisher.publish(new)
        assert (await first.produce(3)).error == ErrorCode.NONE
        first.logs.shutdown()

        restarted = Node(tmp_path)
        restarted.logs.load_logs()
        restarted.publisher.publish(old)
        assert restarted.rm.partition(TP) is None
        restarted.publisher.publish(MetadataImage())  # the old topic's deletion
        replayed_log = restarted.rm.local_log(TP)
        assert replayed_log is not None and replayed_log.log_end_offset == 3
        restarted.publisher.publish(new)
        assert restarted.rm.partition(TP) is not None
        assert restarted.rm.local_log(TP) is replayed_log
        fetched = await restarted.fetch(0)
        assert fetched.error == ErrorCode.NONE and fetched.records.next_offset == 3
        restarted.publisher.publish(MetadataImage())  # the new topic's deletion
        assert restarted.rm.local_log(TP) is None

    run(test)


def test_a_stray_log_of_an_earlier_topic_id_is_replaced_at_the_first_image(
    tmp_path: Path,
) -> None:
    """A node back after its topic was deleted and created again (it loaded a snapshot, it
    never replayed the deletion): its first, caught-up image names another topic id than
    the log on disk, which is deleted and replaced by an empty one."""
    old = image(topic_id=b"o" * 16)
    new = dataclasses.replace(image(topic_id=b"n" * 16), offset=7)

    async def test() -> None:
        first = Node(tmp_path)
        first.publisher.publish(old)
        assert (await first.produce(3)).error == ErrorCode.NONE
        first.logs.shutdown()

        restarted = Node(tmp_path)
        restarted.logs.load_logs()
        restarted.publisher.publish(new)
        replica_log = restarted.rm.local_log(TP)
        assert replica_log is not None and replica_log.log_end_offset == 0
        assert read_topic_id(replica_log.dir) == b"n" * 16
        assert restarted.rm.partition(TP) is not None

    run(test)


def test_a_new_leader_records_its_epoch_at_its_log_end_before_any_append(tmp_path: Path) -> None:
    """Kafka's Partition.makeLeader assigns the new leader epoch at the log end offset,
    so a follower holding entries of an epoch this leader never wrote (successive
    elections) learns where to truncate, and the current epoch has an end offset."""

    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(image(replicas=(1, 2), isr=(1,), epoch=5))
        await node.produce(3, acks=1)
        node.publisher.publish(image(replicas=(1, 2), isr=(1,), epoch=7))
        replica_log = node.logs.get_log(*TP)
        assert replica_log is not None
        assert replica_log.epoch_cache.entries == [(5, 0), (7, 3)]
        assert node.rm.end_offset_for_epoch(TP, 7) == (ErrorCode.NONE, 7, 3)
        # A follower whose last batch is of epoch 6 (written by another leader, never
        # replicated here) diverges where this leader's epoch 5 ends.
        (result,) = await node.rm.fetch_messages(
            FetchParams(replica_id=2, max_wait_ms=0),
            [FetchRequestPartition("t", 0, 5, 1 << 20, 7, 0, last_fetched_epoch=6)],
        )
        assert result.diverging_epoch == (5, 3)
        await node.produce(2, acks=1)  # appends in epoch 7 change nothing in the cache
        assert replica_log.epoch_cache.entries == [(5, 0), (7, 3)]
        assert LeaderEpochFileCache.load(replica_log.epoch_cache.path).entries == [(5, 0), (7, 3)]

    run(test)
