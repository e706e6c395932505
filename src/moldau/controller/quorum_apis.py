"""DescribeQuorum of a node that is its own controller quorum."""

from __future__ import annotations

from typing import Any

from moldau.controller.context import ControllerContext
from moldau.metadata.topics import METADATA_TOPIC
from moldau.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from moldau.protocol.messages.describe_quorum_response import PartitionData as QuorumPartition
from moldau.protocol.messages.describe_quorum_response import ReplicaState as QuorumReplicaState
from moldau.protocol.messages.describe_quorum_response import TopicData as QuorumTopic


async def describe_quorum(
    controller: ControllerContext, version: int, request: Any
) -> DescribeQuorumResponse:
    """DescribeQuorum of a node that is its own quorum: it leads, alone and caught up.
    (A Raft quorum answers from its Raft state instead.)"""
    end = controller.quorum.committed.offset + 1
    me = controller.topics.node_id
    voter = QuorumReplicaState(replica_id=me, log_end_offset=end)
    partition = QuorumPartition(
        partition_index=0,
        leader_id=me,
        leader_epoch=0,
        high_watermark=end,
        current_voters=[voter],
    )
    return DescribeQuorumResponse(
        topics=[QuorumTopic(topic_name=METADATA_TOPIC, partitions=[partition])]
    )
