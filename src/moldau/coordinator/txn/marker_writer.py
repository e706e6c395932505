"""The partition leader's side of WriteTxnMarkers: append COMMIT/ABORT markers.

A data partition gets a control batch appended through the replica manager (origin
TXN_MARKER: the log checks the producer epoch and the coordinator epoch, and the
KIP-890 guard of the producer on that partition is dropped) and the answer waits, as
Kafka's, until every in-sync replica has it. A ``__consumer_offsets`` partition gets its
marker through the group coordinator, which makes the transaction's offsets visible (or
drops them) in the same step. The transaction coordinator calls this directly for the
partitions its own node leads, and over WriteTxnMarkers for the others.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.metadata.topics import OFFSETS_TOPIC
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.records.control import build_marker_batch
from moldau.replication.replica_manager import AppendOrigin, AppendResult, ReplicaManager

from .state import TopicPartition

# What the transaction coordinator retries a marker on, as Kafka's handler maps the group
# coordinator's answers.
_GROUP_ERRORS = {
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


@dataclass(frozen=True)
class Marker:
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


async def write_markers(
    replica_manager: ReplicaManager,
    groups: GroupCoordinatorService,
    markers: list[Marker],
    timeout_ms: int,
) -> list[dict[TopicPartition, ErrorCode]]:
    """Write every marker; per marker, each partition's error (NONE when written)."""
    return list(
        await asyncio.gather(*(_write(replica_manager, groups, m, timeout_ms) for m in markers))
    )


async def _write(
    replica_manager: ReplicaManager,
    groups: GroupCoordinatorService,
    m: Marker,
    timeout_ms: int,
) -> dict[TopicPartition, ErrorCode]:
    appended: dict[TopicPartition, AppendResult] = {}
    offsets: list[TopicPartition] = []
    for tp in m.partitions:
        if tp[0] == OFFSETS_TOPIC:
            offsets.append(tp)
            continue
        batch = build_marker_batch(
            m.producer_id,
            m.producer_epoch,
            committed=m.committed,
            coordinator_epoch=m.coordinator_epoch,
        )
        appended[tp] = replica_manager.append_to_leader(
            tp, batch, origin=AppendOrigin.TXN_MARKER, required_acks=-1
        )
    group_results, _ = await asyncio.gather(
        asyncio.gather(*(_offsets_marker(groups, tp[1], m) for tp in offsets)),
        replica_manager.await_replication(appended, timeout_ms),
    )
    results = {tp: r.error for tp, r in appended.items()}
    results.update(zip(offsets, group_results, strict=True))
    return results


async def _offsets_marker(groups: GroupCoordinatorService, partition: int, m: Marker) -> ErrorCode:
    try:
        await groups.complete_transaction(
            partition, m.producer_id, m.producer_epoch, m.committed, m.coordinator_epoch
        )
    except KafkaError as e:
        return _GROUP_ERRORS.get(e.code, e.code)
    return ErrorCode.NONE
