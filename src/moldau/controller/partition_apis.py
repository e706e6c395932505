"""The controller's side of the partition RPCs: AlterPartition (ISR changes from leaders),
ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments (decided by
:class:`ReplicationControl`)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from moldau.controller.quorum_controller import ControllerResult
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from moldau.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from moldau.protocol.messages.alter_partition_request import AlterPartitionRequest
from moldau.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
)
from moldau.protocol.messages.alter_partition_response import (
    PartitionData as AlterPartitionResult,
)
from moldau.protocol.messages.alter_partition_response import (
    TopicData as AlterPartitionTopic,
)
from moldau.protocol.messages.elect_leaders_request import ElectLeadersRequest
from moldau.protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from moldau.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from moldau.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

if TYPE_CHECKING:
    from moldau.controller.context import ControllerContext

TOPIC_IDS_VERSION = 2  # AlterPartition v2+ names topics by id


async def alter_partition(
    controller: ControllerContext, version: int, request: AlterPartitionRequest
) -> AlterPartitionResponse:
    def op(image: MetadataImage) -> ControllerResult[AlterPartitionResponse]:
        broker = image.brokers.get(request.broker_id)
        if broker is None or broker.epoch != request.broker_epoch:
            return ControllerResult(AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
        records: list[MetadataRecord] = []
        topics = []
        for t in request.topics:
            name = t.topic_name
            if version >= TOPIC_IDS_VERSION:
                name = image.topics_by_id.get(t.topic_id, "")
            results = []
            for p in t.partitions:
                isr = p.new_isr or [b.broker_id for b in p.new_isr_with_epochs]
                error, after, changes = controller.replication.alter_partition(
                    image.apply(records),
                    request.broker_id,
                    name,
                    p.partition_index,
                    p.leader_epoch,
                    p.partition_epoch,
                    isr,
                )
                records += changes
                result = AlterPartitionResult(partition_index=p.partition_index, error_code=error)
                if after is not None and error == ErrorCode.NONE:
                    result.leader_id = after.leader
                    result.leader_epoch = after.leader_epoch
                    result.isr = list(after.isr)
                    result.partition_epoch = after.partition_epoch
                results.append(result)
            topics.append(
                AlterPartitionTopic(
                    topic_name=t.topic_name, topic_id=t.topic_id, partitions=results
                )
            )
        return ControllerResult(AlterPartitionResponse(topics=topics), records)

    return await controller.quorum.write(op)


async def elect_leaders(
    controller: ControllerContext, version: int, request: ElectLeadersRequest
) -> ElectLeadersResponse:
    def op(image: MetadataImage) -> ControllerResult[ElectLeadersResponse]:
        if request.topic_partitions is None:  # every partition
            wanted = {t.name: sorted(t.partitions) for t in image.topics.values()}
        else:
            wanted = defaultdict(list)
            for tp in request.topic_partitions:
                wanted[tp.topic] += tp.partitions
        records: list[MetadataRecord] = []
        results = []
        for topic, partitions in wanted.items():
            outcomes = []
            for p in partitions:
                error, message, record = controller.replication.elect(
                    image.apply(records), topic, p, request.election_type
                )
                if record is not None:
                    records.append(record)
                if request.topic_partitions is None and error == ErrorCode.ELECTION_NOT_NEEDED:
                    continue  # "all partitions" reports only the ones it could act on
                outcomes.append(
                    PartitionResult(partition_id=p, error_code=error, error_message=message)
                )
            if outcomes:
                results.append(ReplicaElectionResult(topic=topic, partition_result=outcomes))
        return ControllerResult(ElectLeadersResponse(replica_election_results=results), records)

    return await controller.quorum.write(op)


async def alter_partition_reassignments(
    controller: ControllerContext, version: int, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    def op(image: MetadataImage) -> ControllerResult[AlterPartitionReassignmentsResponse]:
        records: list[MetadataRecord] = []
        responses = []
        for t in request.topics:
            partitions = []
            for p in t.partitions:
                error, message, changes = controller.replication.reassign(
                    image.apply(records), t.name, p.partition_index, p.replicas
                )
                records += changes
                partitions.append(
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=error, error_message=message
                    )
                )
            responses.append(ReassignableTopicResponse(name=t.name, partitions=partitions))
        return ControllerResult(AlterPartitionReassignmentsResponse(responses=responses), records)

    return await controller.quorum.write(op)


async def list_partition_reassignments(
    controller: ControllerContext, version: int, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    wanted = (
        None
        if request.topics is None
        else {t.name: list(t.partition_indexes) for t in request.topics}
    )
    by_topic: dict[str, list[OngoingPartitionReassignment]] = defaultdict(list)
    for topic, part in controller.replication.reassignments(controller.quorum.committed, wanted):
        by_topic[topic].append(
            OngoingPartitionReassignment(
                partition_index=part.partition_id,
                replicas=list(part.replicas),
                adding_replicas=list(part.adding_replicas),
                removing_replicas=list(part.removing_replicas),
            )
        )
    return ListPartitionReassignmentsResponse(
        topics=[OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()]
    )
