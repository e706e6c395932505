"""A broker's stop leaves its logs as it closed them, whatever the metadata log commits
during the stop: the controlled shutdown's own records (every partition leaderless) may
be decoded and published after the broker was allowed to stop and closed its logs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from moldau.clock import AsyncioScheduler
from moldau.config.broker import BrokerConfig
from moldau.metadata.records import BrokerRegistrationChangeRecord, PartitionRecord, TopicRecord
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch
from moldau.server.broker import Broker
from moldau.server.node_to_controller import NodeToControllerChannel
from moldau.storage.checkpoint import read_checkpoint
from moldau.storage.log_manager import LogManager

TOPIC_ID = b"t" * 16
PARTITIONS = 3


class NoController(NodeToControllerChannel):
    async def call(self, api_key: int, version: int, request: object) -> object:
        raise AssertionError("nothing here calls the controller")


def partitions(leader: int, epoch: int) -> list[PartitionRecord]:
    return [
        PartitionRecord(
            partition_id=p,
            topic_id=TOPIC_ID,
            replicas=[1],
            isr=[1],
            leader=leader,
            leader_epoch=epoch,
            partition_epoch=epoch,
        )
        for p in range(PARTITIONS)
    ]


def test_an_image_committed_during_the_stop_reaches_no_log(tmp_path: Path) -> None:
    records = bytearray(build_batch([(b"k", b"acknowledged")]))

    async def run_and_stop() -> None:
        config = BrokerConfig({"node.id": "1", "log.dirs": str(tmp_path)})
        broker = Broker(config, AsyncioScheduler(), NoController(), "cluster")
        broker.loader.handle_commit(
            [TopicRecord(name="t", topic_id=TOPIC_ID), *partitions(1, 0)], 1
        )
        log = broker.replica_manager.local_log(("t", 0))
        assert log is not None
        log.append_as_leader(records, scan_batches(records), leader_epoch=0)
        broker.shutdown()
        broker.loader.handle_commit(
            [BrokerRegistrationChangeRecord(broker_id=1, fenced=1), *partitions(-1, 1)], 2
        )
        partition = broker.replica_manager.partition(("t", 0))
        assert partition is not None and partition.leader_epoch == 0  # never applied

    asyncio.run(run_and_stop())
    assert read_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        ("t", p): int(p == 0) for p in range(PARTITIONS)
    }
    reopened = LogManager([tmp_path], {})
    reopened.load_logs()
    log = reopened.get_log("t", 0)
    assert log is not None and log.read_bytes(0, 1 << 20) == records
    reopened.shutdown()
