"""KIP-392 in the replica manager: the leader points a consumer at an in-sync follower of
its rack, and followers serve consumers (Fetch v11+) up to their high watermark."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from moldau.metadata.image import BrokerImage
from moldau.protocol.errors import ErrorCode
from moldau.records.record import build_batch
from moldau.replication.replica_manager import (
    FetchParams,
    FetchRequestPartition,
    FetchResult,
    ReplicationConfig,
)
from tests.unit.replication.test_replica_manager import TP, Node, image, run

RACKS = {1: "r1", 2: "r1", 3: "r2"}


def racked_image(isr: tuple[int, ...] = (1, 2, 3), leader: int = 1) -> object:
    brokers = {i: BrokerImage(i, (), rack=rack) for i, rack in RACKS.items()}
    return dataclasses.replace(image(replicas=(1, 2, 3), isr=isr, leader=leader), brokers=brokers)


async def consumer_fetch(
    node: Node, offset: int, rack_id: str | None, max_wait_ms: int = 0
) -> FetchResult:
    (result,) = await node.rm.fetch_messages(
        FetchParams(rack_id=rack_id, max_wait_ms=max_wait_ms),
        [FetchRequestPartition(*TP, offset, 1 << 20)],
    )
    return result


def test_leader_names_the_in_sync_follower_of_the_clients_rack(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.rm.config = ReplicationConfig(rack_aware=True)
        node.publisher.publish(racked_image())
        await node.produce(3, acks=1)
        await node.fetch(3, replica_id=3)  # the r2 follower has it all
        await node.fetch(3, replica_id=2)
        redirected = await consumer_fetch(node, 0, "r2", max_wait_ms=60_000)
        assert (redirected.preferred_read_replica, redirected.size) == (3, 0)
        assert redirected.high_watermark == 3
        # The leader's own rack, no rack, and pre-v11 fetches read from the leader.
        for rack in ("r1", "", None):
            local = await consumer_fetch(node, 0, rack)
            assert (local.preferred_read_replica, local.error) == (-1, ErrorCode.NONE)
            assert local.size > 0
        # A follower out of the ISR, or one whose log lacks the offset, is not chosen.
        node.publisher.publish(racked_image(isr=(1, 2)))
        assert (await consumer_fetch(node, 0, "r2")).preferred_read_replica == -1
        node.publisher.publish(racked_image())
        await node.produce(2, acks=1)
        assert (await consumer_fetch(node, 4, "r2")).preferred_read_replica == -1

    run(test)


def test_without_a_selector_consumers_read_from_the_leader(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(racked_image())
        await node.produce(3, acks=1)
        await node.fetch(3, replica_id=3)
        assert (await consumer_fetch(node, 0, "r2")).preferred_read_replica == -1

    run(test)


def test_follower_serves_consumers_up_to_its_high_watermark(tmp_path: Path) -> None:
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(racked_image(leader=2))
        batches = build_batch([(b"k", b"v0"), (b"k", b"v1")]) + build_batch(
            [(b"k", b"v2")], base_offset=2
        )
        node.rm.append_as_follower(TP, batches, 2)  # LEO 3, the leader's HW 2
        served = await consumer_fetch(node, 0, "r1")
        assert (served.error, served.high_watermark, served.records.next_offset) == (
            ErrorCode.NONE,
            2,
            2,
        )
        # Between the HW and the log end: nothing yet, no error (the client retries).
        ahead = await consumer_fetch(node, 2, "r1")
        assert (ahead.error, ahead.size) == (ErrorCode.NONE, 0)
        # Past the log end: OFFSET_OUT_OF_RANGE (clients then go back to the leader).
        assert (await consumer_fetch(node, 4, "r1")).error == ErrorCode.OFFSET_OUT_OF_RANGE
        # Before v11 consumers only read from leaders.
        assert (await consumer_fetch(node, 0, None)).error == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run(test)
