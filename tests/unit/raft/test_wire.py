"""The raft RPCs through Kafka's wire format and back, at every version a node serves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages import REQUESTS, RESPONSES
from moldau.protocol.messages import fetch_request as f_req
from moldau.protocol.messages import vote_request as v_req
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
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.records import Batches, data_batch
from moldau.raft.wire import (
    METADATA_TOPIC_ID,
    RAFT_API_VERSIONS,
    WireError,
    describe_quorum_to_wire,
    error_response,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)


def through_the_wire(table: dict[int, Any], api_key: int, message: Any, version: int) -> Any:
    data = b"".join(bytes(p) for p in message.encode(version))
    decoded, end = table[api_key].decode(memoryview(data), version)
    assert end == len(data)
    return decoded


def versions(api_key: ApiKey) -> list[int]:
    low, high = RAFT_API_VERSIONS[api_key]
    return list(range(low, high + 1))


REQUEST_CASES = [
    VoteRequest("c", 2, 7, 1, 6, 120, True),
    BeginQuorumEpochRequest("c", 3, 1, 7),
    EndQuorumEpochRequest("c", 1, 7, (3, 2)),
    FetchRequest("c", 2, 500, 1 << 20, 7, 120, 6, 40),
    FetchSnapshotRequest("c", 3, 4096, 7, OffsetAndEpoch(100, 6), 8192),
]


@pytest.mark.parametrize("request_", REQUEST_CASES, ids=lambda r: type(r).__name__)
def test_requests_round_trip_at_every_version(request_: Any) -> None:
    api_key, wire = request_to_wire(request_)
    for version in versions(api_key):
        decoded = through_the_wire(REQUESTS, api_key, wire, version)
        source, back = request_from_wire(api_key, version, decoded)
        expected = request_
        if isinstance(request_, VoteRequest):
            assert source == request_.replica_id
            if version < 2:  # pre_vote arrived in v2 (KIP-996), voter_id in v1
                expected = VoteRequest(
                    "c", request_.voter_id if version else -1, 7, 1, 6, 120, False
                )
        elif isinstance(request_, BeginQuorumEpochRequest | EndQuorumEpochRequest):
            assert source == request_.leader_id
            if isinstance(request_, BeginQuorumEpochRequest) and version == 0:
                expected = BeginQuorumEpochRequest("c", -1, 1, 7)
        else:
            assert source == request_.replica_id
        assert back == expected, version


def fetch_response(**kwargs: Any) -> FetchResponse:
    fields: dict[str, Any] = {
        "error_code": 0,
        "leader_id": 1,
        "leader_epoch": 7,
        "high_watermark": 90,
        "log_start_offset": 10,
        "records": None,
    }
    fields.update(kwargs)
    return FetchResponse(**fields)


RESPONSE_CASES = [
    (ApiKey.VOTE, VoteResponse(0, 3, 8, True)),
    (ApiKey.VOTE, VoteResponse(ErrorCode.FENCED_LEADER_EPOCH, -1, 9, False)),
    (ApiKey.BEGIN_QUORUM_EPOCH, BeginQuorumEpochResponse(0, 1, 7)),
    (ApiKey.END_QUORUM_EPOCH, EndQuorumEpochResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 8)),
    (ApiKey.FETCH, fetch_response(records=Batches.parse(data_batch([b"a", b"b"], 7, 88)))),
    (ApiKey.FETCH, fetch_response(diverging_epoch=OffsetAndEpoch(50, 5))),
    (ApiKey.FETCH, fetch_response(snapshot_id=OffsetAndEpoch(60, 6))),
    (ApiKey.FETCH, fetch_response(error_code=ErrorCode.UNKNOWN_LEADER_EPOCH, high_watermark=-1)),
    (
        ApiKey.FETCH_SNAPSHOT,
        FetchSnapshotResponse(0, 1, 7, OffsetAndEpoch(60, 6), 1000, 512, b"chunk"),
    ),
    (
        ApiKey.FETCH_SNAPSHOT,
        FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, 1, 7, None, -1, -1, b""),
    ),
]


@pytest.mark.parametrize(("api_key", "response"), RESPONSE_CASES, ids=lambda c: str(c)[:40])
def test_responses_round_trip_at_every_version(api_key: ApiKey, response: Any) -> None:
    for version in versions(api_key):
        wire = response_to_wire(api_key, version, response)
        back = response_from_wire(api_key, through_the_wire(RESPONSES, api_key, wire, version))
        if isinstance(response, FetchResponse) and isinstance(response.records, Batches):
            assert isinstance(back, FetchResponse) and isinstance(back.records, Batches)
            assert back.records.data == response.records.data
            assert back == replace(response, records=back.records)
        else:
            assert back == response, version


def test_fetch_names_the_metadata_topic_by_id_from_v13() -> None:
    _, wire = request_to_wire(REQUEST_CASES[3])
    for version, by_id in ((12, False), (13, True), (17, True)):
        decoded = through_the_wire(REQUESTS, ApiKey.FETCH, wire, version)
        topic = decoded.topics[0]
        assert (topic.topic_id == METADATA_TOPIC_ID) is by_id
        assert decoded.replica_state.replica_id == (2 if version >= 15 else -1)
    other = f_req.FetchRequest(
        replica_state=f_req.ReplicaState(replica_id=2),
        topics=[f_req.FetchTopic(topic_id=b"\x07" * 16, partitions=[f_req.FetchPartition()])],
    )
    with pytest.raises(WireError):
        request_from_wire(ApiKey.FETCH, 17, other)


def test_requests_for_other_partitions_are_refused() -> None:
    vote = v_req.VoteRequest(topics=[v_req.TopicData("orders", [v_req.PartitionData()])])
    with pytest.raises(WireError):
        request_from_wire(ApiKey.VOTE, 2, vote)
    second = v_req.VoteRequest(
        topics=[v_req.TopicData("__cluster_metadata", [v_req.PartitionData(partition_index=1)])]
    )
    with pytest.raises(WireError):
        request_from_wire(ApiKey.VOTE, 2, second)


def test_inconsistent_cluster_id_and_top_level_errors() -> None:
    response = response_to_wire(
        ApiKey.FETCH, 17, fetch_response(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    )
    assert response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID and response.responses == []
    with pytest.raises(KafkaError) as info:
        response_from_wire(ApiKey.FETCH, response)
    assert info.value.code == ErrorCode.INCONSISTENT_CLUSTER_ID
    for api_key in RAFT_API_VERSIONS:
        assert error_response(api_key, 0, ErrorCode.INVALID_REQUEST).error_code == 42


def test_corrupt_fetched_records_fail_the_request() -> None:
    batch = bytearray(data_batch([b"x"], 1))
    batch[-1] ^= 1
    wire = response_to_wire(ApiKey.FETCH, 17, fetch_response(records=bytes(batch)))
    with pytest.raises(KafkaError, match="CRC"):
        response_from_wire(ApiKey.FETCH, through_the_wire(RESPONSES, ApiKey.FETCH, wire, 17))


def test_describe_quorum_reports_the_leaders_view() -> None:
    info = QuorumInfo(
        1,
        7,
        90,
        (ReplicaState(1, 90, 5, 5), ReplicaState(2, 80, 4, 3)),
        (ReplicaState(9, 70, 1, -1),),
    )
    for version in versions(ApiKey.DESCRIBE_QUORUM):
        wire = through_the_wire(
            RESPONSES,
            ApiKey.DESCRIBE_QUORUM,
            describe_quorum_to_wire(info, ErrorCode.NONE),
            version,
        )
        p = wire.topics[0].partitions[0]
        assert (p.leader_id, p.leader_epoch, p.high_watermark) == (1, 7, 90)
        assert [(r.replica_id, r.log_end_offset) for r in p.current_voters] == [(1, 90), (2, 80)]
        assert [r.replica_id for r in p.observers] == [9]
    error = describe_quorum_to_wire(None, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert error.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
