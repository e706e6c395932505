"""DescribeShareGroupOffsets (v0 and v1 with the KIP-1226 lag) round-trips, and a failed
request's answer carries the error on every group it named."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.error_responses import error_response
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from moldau.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)


def _round_trip(message: DescribeShareGroupOffsetsResponse, version: int):
    data = b"".join(bytes(c) for c in message.encode(version))
    decoded, end = DescribeShareGroupOffsetsResponse.decode(memoryview(data), version)
    assert end == len(data)
    return decoded


def test_lag_is_on_the_wire_from_version_1_only():
    partition = DescribeShareGroupOffsetsResponsePartition(0, 42, 3, lag=7)
    message = DescribeShareGroupOffsetsResponse(
        groups=[
            DescribeShareGroupOffsetsResponseGroup(
                "g", [DescribeShareGroupOffsetsResponseTopic("t", b"\1" * 16, [partition])]
            )
        ]
    )
    [v1] = _round_trip(message, 1).groups[0].topics[0].partitions
    [v0] = _round_trip(message, 0).groups[0].topics[0].partitions
    assert (v1.start_offset, v1.leader_epoch, v1.lag) == (42, 3, 7)
    assert (v0.start_offset, v0.leader_epoch, v0.lag) == (42, 3, -1)


def test_a_failed_request_answers_the_error_for_each_group():
    request = DescribeShareGroupOffsetsRequest(
        groups=[
            DescribeShareGroupOffsetsRequestGroup("a"),
            DescribeShareGroupOffsetsRequestGroup("b"),
        ]
    )
    answer = error_response(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, request, ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    )
    assert [(g.group_id, g.error_code) for g in answer.groups] == [
        ("a", ErrorCode.COORDINATOR_NOT_AVAILABLE),
        ("b", ErrorCode.COORDINATOR_NOT_AVAILABLE),
    ]
