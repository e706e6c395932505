"""The KRaft RPCs on the wire: the core's singleton messages <-> Kafka's generated classes.

One :class:`RaftRpc` per API in :data:`RPCS` holds its four conversions (request and
response, in and out); the driver's calls look the RPC up by API key or message type.

Every KRaft RPC names topics and partitions; KRaft only ever uses `__cluster_metadata-0`
(with the fixed topic id Kafka gives it where a version carries topic ids). A request
for any other partition gets INVALID_REQUEST at the top level, as KafkaRaftClient
answers, and so does INCONSISTENT_CLUSTER_ID. A response that does not carry the
partition, carries a top-level error or records that do not validate is a failed request
for the core (it backs off and retries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
from moldau.raft import messages as core
from moldau.raft.log import OffsetAndEpoch
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


def _partition(topics: list[Any], is_metadata: Any, index: str = "partition_index") -> Any:
    """The single `__cluster_metadata-0` entry of a request or response, else WireError."""
    if len(topics) != 1 or not is_metadata(topics[0]):
        raise WireError(f"expected exactly the topic {METADATA_TOPIC}")
    parts = topics[0].partitions
    if len(parts) != 1 or getattr(parts[0], index) != METADATA_PARTITION:
        raise WireError(f"expected exactly the partition {METADATA_TOPIC}-0")
    return parts[0]


def _by_name(topic: Any) -> bool:
    return getattr(topic, "topic_name", getattr(topic, "name", None)) == METADATA_TOPIC


def _fields(source: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields a core message and a wire partition share, by name."""
    return {name: getattr(source, name) for name in names}


_VOTE_FIELDS = ("replica_epoch", "replica_id", "last_offset_epoch", "last_offset", "pre_vote")
_FETCH_PARTITION_FIELDS = (
    "current_leader_epoch",
    "fetch_offset",
    "last_fetched_epoch",
    "log_start_offset",
)


def _optional(offset_and_epoch: Any) -> OffsetAndEpoch | None:
    """A wire (end offset, epoch) pair; (-1, -1) means absent."""
    end_offset, epoch = offset_and_epoch.end_offset, offset_and_epoch.epoch
    return OffsetAndEpoch(end_offset, epoch) if epoch >= 0 or end_offset >= 0 else None


# ---------------------------------------------------------------------- Vote


def _vote_request_in(version: int, request: Any) -> tuple[int, core.RaftRequest]:
    p = _partition(request.topics, _by_name)
    return p.replica_id, core.VoteRequest(
        request.cluster_id, request.voter_id, **_fields(p, _VOTE_FIELDS)
    )


def _vote_request_out(request: Any) -> Any:
    partition = v_req.PartitionData(
        partition_index=METADATA_PARTITION, **_fields(request, _VOTE_FIELDS)
    )
    return v_req.VoteRequest(
        cluster_id=request.cluster_id,
        voter_id=request.voter_id,
        topics=[v_req.TopicData(METADATA_TOPIC, [partition])],
    )


def _vote_response_out(version: int, response: Any) -> Any:
    partition = v_resp.PartitionData(
        METADATA_PARTITION,
        response.error_code,
        response.leader_id,
        response.leader_epoch,
        response.vote_granted,
    )
    return v_resp.VoteResponse(topics=[v_resp.TopicData(METADATA_TOPIC, [partition])])


def _vote_response_in(response: Any) -> core.RaftResponse:
    p = _partition(response.topics, _by_name)
    return core.VoteResponse(p.error_code, p.leader_id, p.leader_epoch, p.vote_granted)


# ---------------------------------------------------------------------- Begin/EndQuorumEpoch


def _begin_request_in(version: int, request: Any) -> tuple[int, core.RaftRequest]:
    p = _partition(request.topics, _by_name)
    return p.leader_id, core.BeginQuorumEpochRequest(
        request.cluster_id, request.voter_id, p.leader_id, p.leader_epoch
    )


def _begin_request_out(request: Any) -> Any:
    partition = bqe_req.PartitionData(
        partition_index=METADATA_PARTITION,
        leader_id=request.leader_id,
        leader_epoch=request.leader_epoch,
    )
    return bqe_req.BeginQuorumEpochRequest(
        cluster_id=request.cluster_id,
        voter_id=request.voter_id,
        topics=[bqe_req.TopicData(METADATA_TOPIC, [partition])],
    )


def _end_request_in(version: int, request: Any) -> tuple[int, core.RaftRequest]:
    p = _partition(request.topics, _by_name)
    successors = p.preferred_successors or [c.candidate_id for c in p.preferred_candidates]
    return p.leader_id, core.EndQuorumEpochRequest(
        request.cluster_id, p.leader_id, p.leader_epoch, tuple(successors)
    )


def _end_request_out(request: Any) -> Any:
    partition = eqe_req.PartitionData(
        partition_index=METADATA_PARTITION,
        leader_id=request.leader_id,
        leader_epoch=request.leader_epoch,
        preferred_successors=list(request.preferred_successors),
        preferred_candidates=[
            eqe_req.ReplicaInfo(candidate_id=c) for c in request.preferred_successors
        ],
    )
    return eqe_req.EndQuorumEpochRequest(
        cluster_id=request.cluster_id, topics=[eqe_req.TopicData(METADATA_TOPIC, [partition])]
    )


def _quorum_epoch_response(module: Any, wire_type: Any, core_type: Any) -> tuple[Any, Any]:
    """(to wire, from wire) for Begin/EndQuorumEpoch responses: the same fields."""

    def out(version: int, response: Any) -> Any:
        data = module.PartitionData(
            METADATA_PARTITION, response.error_code, response.leader_id, response.leader_epoch
        )
        return wire_type(topics=[module.TopicData(METADATA_TOPIC, [data])])

    def into(response: Any) -> core.RaftResponse:
        p = _partition(response.topics, _by_name)
        return core_type(p.error_code, p.leader_id, p.leader_epoch)

    return out, into


# ---------------------------------------------------------------------- Fetch


def _fetch_request_in(version: int, request: Any) -> tuple[int, core.RaftRequest]:
    def is_metadata(topic: Any) -> bool:
        if version >= FETCH_TOPIC_ID_VERSION:
            return bool(topic.topic_id == METADATA_TOPIC_ID)
        return bool(topic.topic == METADATA_TOPIC)

    p = _partition(request.topics, is_metadata, "partition")
    replica_id = (
        request.replica_state.replica_id
        if version >= FETCH_REPLICA_STATE_VERSION
        else request.replica_id
    )
    max_bytes = request.max_bytes
    if p.partition_max_bytes > 0:
        max_bytes = min(max_bytes, p.partition_max_bytes)
    return replica_id, core.FetchRequest(
        request.cluster_id,
        replica_id,
        request.max_wait_ms,
        max_bytes,
        **_fields(p, _FETCH_PARTITION_FIELDS),
    )


def _fetch_request_out(request: Any) -> Any:
    partition = f_req.FetchPartition(
        partition=METADATA_PARTITION,
        partition_max_bytes=request.max_bytes,
        **_fields(request, _FETCH_PARTITION_FIELDS),
    )
    return f_req.FetchRequest(
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        replica_state=f_req.ReplicaState(replica_id=request.replica_id),
        max_wait_ms=request.max_wait_ms,
        max_bytes=request.max_bytes,
        topics=[
            f_req.FetchTopic(
                topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[partition]
            )
        ],
    )


def _fetch_response_out(version: int, response: Any) -> Any:
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


def _fetch_response_in(response: Any) -> core.RaftResponse:
    p = _partition(
        response.responses, lambda t: t.topic_id == METADATA_TOPIC_ID or t.topic == METADATA_TOPIC
    )
    return core.FetchResponse(
        p.error_code,
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
        p.high_watermark,
        p.log_start_offset,
        Batches.parse(p.records) if p.records else None,
        diverging_epoch=_optional(p.diverging_epoch),
        snapshot_id=_optional(p.snapshot_id),
    )


# ---------------------------------------------------------------------- FetchSnapshot


def _fetch_snapshot_request_in(version: int, request: Any) -> tuple[int, core.RaftRequest]:
    p = _partition(request.topics, _by_name, "partition")
    return request.replica_id, core.FetchSnapshotRequest(
        request.cluster_id,
        request.replica_id,
        request.max_bytes,
        p.current_leader_epoch,
        OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        p.position,
    )


def _fetch_snapshot_request_out(request: Any) -> Any:
    partition = fs_req.PartitionSnapshot(
        partition=METADATA_PARTITION,
        current_leader_epoch=request.current_leader_epoch,
        snapshot_id=fs_req.SnapshotId(request.snapshot_id.offset, request.snapshot_id.epoch),
        position=request.position,
    )
    return fs_req.FetchSnapshotRequest(
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        max_bytes=request.max_bytes,
        topics=[fs_req.TopicSnapshot(METADATA_TOPIC, [partition])],
    )


def _fetch_snapshot_response_out(version: int, response: Any) -> Any:
    snapshot = response.snapshot_id
    partition = fs_resp.PartitionSnapshot(
        index=METADATA_PARTITION,
        error_code=response.error_code,
        snapshot_id=fs_resp.SnapshotId(snapshot.offset, snapshot.epoch)
        if snapshot is not None
        else fs_resp.SnapshotId(-1, -1),
        current_leader=fs_resp.LeaderIdAndEpoch(response.leader_id, response.leader_epoch),
        size=response.size,
        position=response.position,
        unaligned_records=response.unaligned_records,
    )
    return fs_resp.FetchSnapshotResponse(
        topics=[fs_resp.TopicSnapshot(METADATA_TOPIC, [partition])]
    )


def _fetch_snapshot_response_in(response: Any) -> core.RaftResponse:
    p = _partition(response.topics, _by_name, "index")
    snapshot = p.snapshot_id
    return core.FetchSnapshotResponse(
        p.error_code,
        p.current_leader.leader_id,
        p.current_leader.leader_epoch,
        OffsetAndEpoch(snapshot.end_offset, snapshot.epoch) if p.error_code == 0 else None,
        p.size,
        p.position,
        bytes(p.unaligned_records or b""),
    )


# ---------------------------------------------------------------------- the table


@dataclass(frozen=True, slots=True)
class RaftRpc:
    """How one raft RPC maps between the core's messages and the generated classes."""

    api_key: ApiKey
    request_type: type
    response_type: type
    wire_response: Callable[..., Any]  # the generated response class
    request_in: Callable[[int, Any], tuple[int, core.RaftRequest]]  # -> (source node, request)
    request_out: Callable[[Any], Any]
    response_out: Callable[[int, Any], Any]  # (version, core response) -> wire
    response_in: Callable[[Any], core.RaftResponse]


_begin_out, _begin_in = _quorum_epoch_response(
    bqe_resp, bqe_resp.BeginQuorumEpochResponse, core.BeginQuorumEpochResponse
)
_end_out, _end_in = _quorum_epoch_response(
    eqe_resp, eqe_resp.EndQuorumEpochResponse, core.EndQuorumEpochResponse
)
RPCS: dict[int, RaftRpc] = {
    rpc.api_key: rpc
    for rpc in (
        RaftRpc(
            ApiKey.VOTE,
            core.VoteRequest,
            core.VoteResponse,
            v_resp.VoteResponse,
            _vote_request_in,
            _vote_request_out,
            _vote_response_out,
            _vote_response_in,
        ),
        RaftRpc(
            ApiKey.BEGIN_QUORUM_EPOCH,
            core.BeginQuorumEpochRequest,
            core.BeginQuorumEpochResponse,
            bqe_resp.BeginQuorumEpochResponse,
            _begin_request_in,
            _begin_request_out,
            _begin_out,
            _begin_in,
        ),
        RaftRpc(
            ApiKey.END_QUORUM_EPOCH,
            core.EndQuorumEpochRequest,
            core.EndQuorumEpochResponse,
            eqe_resp.EndQuorumEpochResponse,
            _end_request_in,
            _end_request_out,
            _end_out,
            _end_in,
        ),
        RaftRpc(
            ApiKey.FETCH,
            core.FetchRequest,
            core.FetchResponse,
            f_resp.FetchResponse,
            _fetch_request_in,
            _fetch_request_out,
            _fetch_response_out,
            _fetch_response_in,
        ),
        RaftRpc(
            ApiKey.FETCH_SNAPSHOT,
            core.FetchSnapshotRequest,
            core.FetchSnapshotResponse,
            fs_resp.FetchSnapshotResponse,
            _fetch_snapshot_request_in,
            _fetch_snapshot_request_out,
            _fetch_snapshot_response_out,
            _fetch_snapshot_response_in,
        ),
    )
}
_BY_MESSAGE: dict[type, RaftRpc] = {
    t: rpc for rpc in RPCS.values() for t in (rpc.request_type, rpc.response_type)
}


def _rpc(api_key: int) -> RaftRpc:
    rpc = RPCS.get(api_key)
    if rpc is None:
        raise WireError(f"API {api_key} is not a raft RPC")
    return rpc


# ---------------------------------------------------------------------- the driver's calls


def request_from_wire(api_key: int, version: int, request: Any) -> tuple[int, core.RaftRequest]:
    """(source node id, core request) of an inbound raft request; raises WireError."""
    return _rpc(api_key).request_in(version, request)


def check_describe_quorum(request: dq_req.DescribeQuorumRequest) -> None:
    _partition(request.topics, _by_name)


def error_response(api_key: int, version: int, error: ErrorCode) -> Any:
    """A top-level error answer (INVALID_REQUEST, INCONSISTENT_CLUSTER_ID, not ready)."""
    if api_key == ApiKey.DESCRIBE_QUORUM:
        return dq_resp.DescribeQuorumResponse(error_code=error, error_message=error.name)
    return _rpc(api_key).wire_response(error_code=error)


def response_to_wire(api_key: int, version: int, response: core.RaftResponse) -> Any:
    if response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
        return error_response(api_key, version, ErrorCode.INCONSISTENT_CLUSTER_ID)
    rpc = _BY_MESSAGE.get(type(response))
    if rpc is None or rpc.response_type is not type(response):
        raise WireError(f"{type(response).__name__} is not a raft response")
    return rpc.response_out(version, response)


def describe_quorum_to_wire(info: core.QuorumInfo | None, error: ErrorCode) -> Any:
    """DescribeQuorum's answer: the leader's view, or a partition-level error."""

    def replicas(states: tuple[core.ReplicaState, ...]) -> list[dq_resp.ReplicaState]:
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


def request_to_wire(request: core.RaftRequest) -> tuple[ApiKey, Any]:
    rpc = _BY_MESSAGE[type(request)]
    return rpc.api_key, rpc.request_out(request)


def response_from_wire(api_key: int, response: Any) -> core.RaftResponse:
    """The core's view of a response to our request; raises KafkaError for a top-level
    error, a missing partition or records that do not validate (a failed request)."""
    if response.error_code:
        raise KafkaError(
            f"{ApiKey(api_key).name} failed: {ErrorCode(response.error_code).name}",
            ErrorCode(response.error_code),
        )
    return _rpc(api_key).response_in(response)
