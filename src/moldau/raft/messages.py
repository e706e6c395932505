"""The KRaft RPCs as the core sees them: Kafka's field names (snake_case), only what KRaft uses.

Each message concerns the single `__cluster_metadata-0` partition, so the driver adds the
topic/partition nesting when it maps these onto the generated wire classes
(`moldau.protocol.messages.vote_request` and friends). `error_code` is the partition-level
code; INCONSISTENT_CLUSTER_ID goes to the top-level field on the wire.
VoteRequest's `replica_epoch`/`replica_id` are called CandidateEpoch/CandidateId before
version 2, which adds `pre_vote` (KIP-996).
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft.log import OffsetAndEpoch

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    voter_id: int
    replica_epoch: int
    replica_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class QuorumResponse:
    """What every KRaft response carries: the error and the leader as the responder
    knows it, so that any answer tells a replica of a newer epoch."""

    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class VoteResponse(QuorumResponse):
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    voter_id: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse(QuorumResponse):
    pass


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse(QuorumResponse):
    pass


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    max_wait_ms: int
    max_bytes: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse(QuorumResponse):
    """`records` is what the leader's `RaftLog.read` returned; None with an error, a
    diverging epoch or a snapshot id (the wire then carries empty records)."""

    high_watermark: int
    log_start_offset: int
    records: object
    diverging_epoch: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str | None
    replica_id: int
    max_bytes: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse(QuorumResponse):
    snapshot_id: OffsetAndEpoch | None
    size: int
    position: int
    unaligned_records: bytes


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One line of DescribeQuorum (timestamps -1 when unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """DescribeQuorum's partition data, answered by the leader."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]


RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
