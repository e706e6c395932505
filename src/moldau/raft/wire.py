"""The KRaft RPCs on the wire: the core's singleton messages <-> Kafka's generated classes.

Every KRaft RPC names topics and partitions; KRaft only ever uses `__cluster_metadata-0`
(with the fixed topic id Kafka gives it where a version carries topic ids). A request
for any other partition gets INVALID_REQUEST at the top level, as KafkaRaftClient
answers, and so does INCONSISTENT_CLUSTER_ID. A response that does not carry the
partition, carries a top-level error or records that do not validate is a failed request
for the core (it backs off and retries).
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.topics import METADATA_TOPIC
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import begin_quorum_epoch_request as bqe_req
from moldau.protocol.messages import begin_quorum_epoch_response as bqe_resp
from moldau.protocol.messages import describe_quorum_request as dq_req
from moldau.protocol.messages import describe_quorum_response as dq_resp
from moldau.protocol.messages import end_quorum_epoch_request as eqe_req
from moldau.protocol.messages import end_quorum_epoch_response as eqe_resp
from moldau.protocol.messages import fetch_request as f_req
from moldau.protocol.messages import fetch_response as f_resp
from moldau.protocol.messages import fetch_snapshot_request as fs_req
from moldau.protocol.messages import fetch_snapshot_response as fs_resp
from moldau.protocol.messages import vote_request as v_req
from moldau.protocol.messages import vote_response as v_resp
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumInfo,
    RaftRequest,
    RaftResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.records import Batches

METADATA_PARTITION = 0
METADATA_TOPIC_ID = bytes(15) + b"\x01"  # Kafka's Uuid.METADATA_TOPIC_ID (0, 1)

# Versions this node serves for the raft RPCs (what a CONTROLLER listener advertises).
RAFT_API_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.VOTE: (0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKey.END_QUORUM_EPOCH: (0, 1),
    ApiKey.FETCH: (12, 17),  # flexible versions: diverging epoch, snapshot id, leader
    ApiKey.FETCH_SNAPSHOT: (0, 1),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
}
# What this node sends (Vote v2 carries pre_vote, KIP-996).
SEND_VERSIONS: dict[ApiKey, int] = {key: high for key, (_, high) in RAFT_API_VERSIONS.items()}
FETCH_TOPIC_ID_VERSION = 13
FETCH_REPLICA_STATE_VERSION = 15


class WireError(KafkaError):
    """A raft request that names something other than `__cluster_metadata-0`."""

    code = ErrorCode.INVALID_REQUEST


def _partition(topics: list[Any], name_of: Any, partitions_of: Any, index_of: Any) -> Any:
    """The single `__cluster_metadata-0` entry of a request or response, else WireError."""
    if len(topics) != 1 or not name_of(topics[0]):
        raise WireError(f"expected exactly the topic {METADATA_TOPIC}")
    parts = partitions_of(topics[0])
    if len(parts) != 1 or index_of(parts[0]) != METADATA_PARTITION:
        raise WireError(f"expected exactly the partition {METADATA_TOPIC}-0")
    return parts[0]


def _by_name(topic: Any) -> bool:
    return getattr(topic, "topic_name", getattr(topic, "name", None)) == METADATA_TOPIC


# ---------------------------------------------------------------------- inbound requests


def request_from_wire(api_key: int, version: int, request: Any) -> tuple[int, RaftRequest]:
    """(source node id, core request) of an inbound raft request; raises WireError."""
    if api_key == ApiKey.VOTE:
        p = _partition(
            request.topics, _by_name, lambda t: t.partitions, lambda p: p.partition_index
        )
        return p.replica_id, VoteRequest(
            request.cluster_id,
            request.voter_id,
            p.replica_epoch,
            p.replica_id,
            p.last_offset_epoch,
            p.last_offset,
            p.pre_vote,
        )
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        p = _partition(
            request.topics, _by_name, lambda t: t.partitions, lambda p: p.partition_index
        )
        return p.leader_id, BeginQuorumEpochRequest(
            request.cluster_id, request.voter_id, p.leader_id, p.leader_epoch
        )
    if api_key == ApiKey.END_QUORUM_EPOCH:
        p = _partition(
            request.topics, _by_name, lambda t: t.partitions, lambda p: p.partition_index
        )
        successors = p.preferred_successors or [c.candidate_id for c in p.preferred_candidates]
        return p.leader_id, EndQuorumEpochRequest(
            request.cluster_id, p.leader_id, p.leader_epoch, tuple(successors)
        )
    if api_key == ApiKey.FETCH:

        def is_metadata(topic: Any) -> bool:
            if version >= FETCH_TOPIC_ID_VERSION:
                return bool(topic.topic_id == METADATA_TOPIC_ID)
            return bool(topic.topic == METADATA_TOPIC)

        p = _partition(request.topics, is_metadata, lambda t: t.partitions, lambda p: p.partition)
        replica_id = (
            request.replica_state.replica_id
            if version >= FETCH_REPLICA_STATE_VERSION
            else request.replica_id
        )
        max_bytes = request.max_bytes
        if p.partition_max_bytes > 0:
            max_bytes = min(max_bytes, p.partition_max_bytes)
        return replica_id, FetchRequest(
            request.cluster_id,
            replica_id,
            request.max_wait_ms,
            max_bytes,
            p.current_leader_epoch,
            p.fetch_offset,
            p.last_fetched_epoch,
            p.log_start_offset,
        )
    if api_key == ApiKey.FETCH_SNAPSHOT:
        p = _partition(request.topics, _by_name, lambda t: t.partitions, lambda p: p.partition)
        return request.replica_id, FetchSnapshotRequest(
            request.cluster_id,
            request.replica_id,
            request.max_bytes,
            p.current_leader_epoch,
            OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            p.position,
        )
    raise WireError(f"API {api_key} is not a raft request")


def check_describe_quorum(request: dq_req.DescribeQuorumRequest) -> None:
    _partition(request.topics, _by_name, lambda t: t.partitions, lambda p: p.partition_index)


# ---------------------------------------------------------------------- outbound responses


def error_response(api_key: int, version: int, error: ErrorCode) -> Any:
    """A top-level error answer (INVALID_REQUEST, INCONSISTENT_CLUSTER_ID, not ready)."""
    if api_key == ApiKey.VOTE:
        return v_resp.VoteResponse(error_code=error)
    if api_key == ApiKey.BEGIN_QUORUM_EPOCH:
        return bqe_resp.BeginQuorumEpochResponse(error_code=error)
    if api_key == ApiKey.END_QUORUM_EPOCH:
        return eqe_resp.EndQuorumEpochResponse(error_code=error)
    if api_key == ApiKey.FETCH:
        return f_resp.FetchResponse(error_code=error)
    if api_key == ApiKey.FETCH_SNAPSHOT:
        return fs_resp.FetchSnapshotResponse(error_code=error)
    if api_key == ApiKey.DESCRIBE_QUORUM:
        return dq_resp.DescribeQuorumResponse(error_code=error, error_message=error.name)
    raise WireError(f"API {api_key} is not a raft request")


def response_to_wire(api_key: int, version: int, response: RaftResponse) -> Any:
    if response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
        return error_response(api_key, version, ErrorCode.INCONSISTENT_CLUSTER_ID)
    if isinstance(response, VoteResponse):
        return v_resp.VoteResponse(
            topics=[
                v_resp.TopicData(
                    METADATA_TOPIC,
                    [
                        v_resp.PartitionData(
                            METADATA_PARTITION,
                            response.error_code,
                            response.leader_id,
                            response.leader_epoch,
                            response.vote_granted,
                        )
                    ],
                )
            ]
        )
    if isinstance(response, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        module: Any = bqe_resp if isinstance(response, BeginQuorumEpochResponse) else eqe_resp
        data = module.PartitionData(
            METADATA_PARTITION, response.error_code, response.leader_id, response.leader_epoch
        )
        cls = (
            module.BeginQuorumEpochResponse
            if isinstance(response, BeginQuorumEpochResponse)
            else module.EndQuorumEpochResponse
        )
        return cls(topics=[module.TopicData(METADATA_TOPIC, [data])])
    if isinstance(response, FetchResponse):
        return _fetch_response_to_wire(version, response)
    if isinstance(response, FetchSnapshotResponse):
        snapshot = response.snapshot_id
        return fs_resp.FetchSnapshotResponse(
            topics=[
                fs_resp.TopicSnapshot(
                    METADATA_TOPIC,
                    [
                        fs_resp.PartitionSnapshot(
                            index=METADATA_PARTITION,
                            error_code=response.error_code,
                            snapshot_id=fs_resp.SnapshotId(snapshot.offset, snapshot.epoch)
                            if snapshot is not None
                            else fs_resp.SnapshotId(-1, -1),
                            current_leader=fs_resp.LeaderIdAndEpoch(
                                response.leader_id, response.leader_epoch
                            ),
                            size=response.size,
                            position=response.position,
                            unaligned_records=response.unaligned_records,
                        )
                    ],
                )
            ]
        )
    raise WireError(f"{type(response).__name__} is not a raft response")


def _fetch_response_to_wire(version: int, response: FetchResponse) -> f_resp.FetchResponse:
    records = response.records
    data = records.data if isinstance(records, Batches) else records
    diverging, snapshot = response.diverging_epoch, response.snapshot_id
    partition = f_resp.PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=response.error_code,
        high_watermark=response.high_watermark,
        log_start_offset=response.log_start_offset,
        current_leader=f_resp.LeaderIdAndEpoch(response.leader_id, response.leader_epoch),
        records=data if data is not None else b"",
    )
    if diverging is not None:
        partition.diverging_epoch = f_resp.EpochEndOffset(diverging.epoch, diverging.offset)
    if snapshot is not None:
        partition.snapshot_id = f_resp.SnapshotId(snapshot.offset, snapshot.epoch)
    topic = f_resp.FetchableTopicResponse(partitions=[partition])
    if version >= FETCH_TOPIC_ID_VERSION:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.topic = METADATA_TOPIC
    return f_resp.FetchResponse(responses=[topic])


def describe_quorum_to_wire(info: QuorumInfo | None, error: ErrorCode) -> Any:
    """DescribeQuorum's answer: the leader's view, or a partition-level error."""

    def replicas(states: tuple[ReplicaState, ...]) -> list[dq_resp.ReplicaState]:
        return [
            dq_resp.ReplicaState(
                replica_id=s.replica_id,
                log_end_offset=s.log_end_offset,
                last_fetch_timestamp=s.last_fetch_timestamp,
                last_caught_up_timestamp=s.last_caught_up_timestamp,
            )
            for s in states
        ]

    if info is None:
        partition = dq_resp.PartitionData(
            partition_index=METADATA_PARTITION, error_code=error, error_message=error.name
        )
    else:
        partition = dq_resp.PartitionData(
            partition_index=METADATA_PARTITION,
            leader_id=info.leader_id,
            leader_epoch=info.leader_epoch,
            high_watermark=info.high_watermark,
            current_voters=replicas(info.current_voters),
            observers=replicas(info.observers),
            error_message=None,
        )
    return dq_resp.DescribeQuorumResponse(
        error_message=None, topics=[dq_resp.TopicData(METADATA_TOPIC, [partition])]
    )


# ---------------------------------------------------------------------- outbound requests


def request_to_wire(request: RaftRequest) -> tuple[ApiKey, Any]:
    if isinstance(request, VoteRequest):
        return ApiKey.VOTE, v_req.VoteRequest(
            cluster_id=request.cluster_id,
            voter_id=request.voter_id,
            topics=[
                v_req.TopicData(
                    METADATA_TOPIC,
                    [
                        v_req.PartitionData(
                            partition_index=METADATA_PARTITION,
                            replica_epoch=request.replica_epoch,
                            replica_id=request.replica_id,
                            last_offset_epoch=request.last_offset_epoch,
                            last_offset=request.last_offset,
                            pre_vote=request.pre_vote,
                        )
                    ],
                )
            ],
        )
    if isinstance(request, BeginQuorumEpochRequest):
        return ApiKey.BEGIN_QUORUM_EPOCH, bqe_req.BeginQuorumEpochRequest(
            cluster_id=request.cluster_id,
            voter_id=request.voter_id,
            topics=[
                bqe_req.TopicData(
                    METADATA_TOPIC,
                    [
                        bqe_req.PartitionData(
                            partition_index=METADATA_PARTITION,
                            leader_id=request.leader_id,
                            leader_epoch=request.leader_epoch,
                        )
                    ],
                )
            ],
        )
    if isinstance(request, EndQuorumEpochRequest):
        return ApiKey.END_QUORUM_EPOCH, eqe_req.EndQuorumEpochRequest(
            cluster_id=request.cluster_id,
            topics=[
                eqe_req.TopicData(
                    METADATA_TOPIC,
                    [
                        eqe_req.PartitionData(
                            partition_index=METADATA_PARTITION,
                            leader_id=request.leader_id,
                            leader_epoch=request.leader_epoch,
                            preferred_successors=list(request.preferred_successors),
                            preferred_candidates=[
                                eqe_req.ReplicaInfo(candidate_id=c)
                                for c in request.preferred_successors
                            ],
                        )
                    ],
                )
            ],
        )
    if isinstance(request, FetchRequest):
        return ApiKey.FETCH, f_req.FetchRequest(
            cluster_id=request.cluster_id,
            replica_id=request.replica_id,
            replica_state=f_req.ReplicaState(replica_id=request.replica_id),
            max_wait_ms=request.max_wait_ms,
            max_bytes=request.max_bytes,
            topics=[
                f_req.FetchTopic(
                    topic=METADATA_TOPIC,
                    topic_id=METADATA_TOPIC_ID,
                    partitions=[
                        f_req.FetchPartition(
                            partition=METADATA_PARTITION,
                            current_leader_epoch=request.current_leader_epoch,
                            fetch_offset=request.fetch_offset,
                            last_fetched_epoch=request.last_fetched_epoch,
                            log_start_offset=request.log_start_offset,
                            partition_max_bytes=request.max_bytes,
                        )
                    ],
                )
            ],
        )
    return ApiKey.FETCH_SNAPSHOT, fs_req.FetchSnapshotRequest(
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        max_bytes=request.max_bytes,
        topics=[
            fs_req.TopicSnapshot(
                METADATA_TOPIC,
                [
                    fs_req.PartitionSnapshot(
                        partition=METADATA_PARTITION,
                        current_leader_epoch=request.current_leader_epoch,
                        snapshot_id=fs_req.SnapshotId(
                            request.snapshot_id.offset, request.snapshot_id.epoch
                        ),
                        position=request.position,
                    )
                ],
            )
        ],
    )


# ---------------------------------------------------------------------- inbound responses


def response_from_wire(api_key: int, response: Any) -> RaftResponse:
    """The core's view of a response to our request; raises KafkaError for a top-level
    error, a missing partition or records that do not validate (a failed request)."""
    if response.error_code:
        raise KafkaError(
            f"{ApiKey(api_key).name} failed: {ErrorCode(response.error_code).name}",
            ErrorCode(response.error_code),
        )
    if api_key == ApiKey.VOTE:
        p = _partition(
            response.topics, _by_name, lambda t: t.partitions, lambda p: p.partition_index
        )
        return VoteResponse(p.error_code, p.leader_id, p.leader_epoch, p.vote_granted)
    if api_key in (ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH):
        p = _partition(
            response.topics, _by_name, lambda t: t.partitions, lambda p: p.partition_index
        )
        cls: Any = (
            BeginQuorumEpochResponse
            if api_key == ApiKey.BEGIN_QUORUM_EPOCH
            else EndQuorumEpochResponse
        )
        return cls(p.error_code, p.leader_id, p.leader_epoch)
    if api_key == ApiKey.FETCH:
        p = _partition(
            response.responses,
            lambda t: t.topic_id == METADATA_TOPIC_ID or t.topic == METADATA_TOPIC,
            lambda t: t.partitions,
            lambda p: p.partition_index,
        )
        diverging = p.diverging_epoch
        snapshot = p.snapshot_id
        records = Batches.parse(p.records) if p.records else None
        return FetchResponse(
            p.error_code,
            p.current_leader.leader_id,
            p.current_leader.leader_epoch,
            p.high_watermark,
            p.log_start_offset,
            records,
            diverging_epoch=OffsetAndEpoch(diverging.end_offset, diverging.epoch)
            if diverging.epoch >= 0 or diverging.end_offset >= 0
            else None,
            snapshot_id=OffsetAndEpoch(snapshot.end_offset, snapshot.epoch)
            if snapshot.epoch >= 0 or snapshot.end_offset >= 0
            else None,
        )
    if api_key == ApiKey.FETCH_SNAPSHOT:
        p = _partition(response.topics, _by_name, lambda t: t.partitions, lambda p: p.index)
        snapshot = p.snapshot_id
        return FetchSnapshotResponse(
            p.error_code,
            p.current_leader.leader_id,
            p.current_leader.leader_epoch,
            OffsetAndEpoch(snapshot.end_offset, snapshot.epoch) if p.error_code == 0 else None,
            p.size,
            p.position,
            bytes(p.unaligned_records or b""),
        )
    raise WireError(f"API {api_key} is not a raft response")
