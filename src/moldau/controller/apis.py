"""The controller's side of the admin APIs: wire requests in, wire responses out.

Brokers send these requests to the active controller (forwarded client requests, auto
topic creation, producer-id blocks); a single node calls them in-process. Each request
is one operation of the :class:`QuorumController`, decided against its latest state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from moldau.clock import Clock, SystemClock
from moldau.config.topic import resolve_configs
from moldau.controller import broker_apis, partition_apis, security_apis
from moldau.controller.cluster_control import ClusterControl
from moldau.controller.configs import Changes, incremental, replacement
from moldau.controller.quorum_controller import ControllerResult, QuorumController
from moldau.controller.replication_control import PREFERRED, ReplicationControl
from moldau.controller.topic_control import Controller, Outcome
from moldau.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.topics import METADATA_TOPIC, is_internal, missing_topic, topic_name_error
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from moldau.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from moldau.protocol.messages.alter_configs_request import AlterConfigsRequest
from moldau.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from moldau.protocol.messages.create_partitions_request import CreatePartitionsRequest
from moldau.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from moldau.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from moldau.protocol.messages.delete_topics_request import DeleteTopicsRequest
from moldau.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from moldau.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from moldau.protocol.messages.describe_quorum_response import PartitionData as QuorumPartition
from moldau.protocol.messages.describe_quorum_response import ReplicaState as QuorumReplicaState
from moldau.protocol.messages.describe_quorum_response import TopicData as QuorumTopic
from moldau.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse as IncrementalAlterResourceResponse,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from moldau.protocol.primitives import ZERO_UUID

T = TypeVar("T")


class ConfigResource(Protocol):
    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str | None: ...


class ControllerApis:
    HANDLERS: ClassVar[dict[int, Callable[..., Awaitable[Any]]]]

    def __init__(
        self,
        quorum: QuorumController,
        decisions: Controller,
        *,
        cluster: ClusterControl | None = None,
        clock: Clock | None = None,
        delete_topic_enable: bool = True,
    ) -> None:
        self.quorum = quorum
        self.decisions = decisions
        self.replication = cluster.replication if cluster is not None else ReplicationControl()
        self.cluster = cluster or ClusterControl("", self.replication)
        self.clock: Clock = clock or SystemClock()
        self.delete_topic_enable = delete_topic_enable

    # -- upkeep of the active controller ----------------------------------------------
    async def expire_broker_sessions(self) -> None:
        """Fence the brokers whose heartbeats stopped (run periodically)."""
        now = self.clock.now_ms()
        await self.quorum.write(
            lambda image: ControllerResult(None, self.cluster.expire_sessions(image, now))
        )

    async def balance_leaders(self, max_imbalance_percent: int) -> None:
        """``auto.leader.rebalance.enable``: preferred elections where brokers lead too
        few of the partitions they prefer."""

        def op(image: MetadataImage) -> ControllerResult[None]:
            records: list[MetadataRecord] = []
            for topic, partition in self.replication.imbalanced_partitions(
                image, max_imbalance_percent
            ):
                _, _, record = self.replication.elect(
                    image.apply(records), topic, partition, PREFERRED
                )
                if record is not None:
                    records.append(record)
            return ControllerResult(None, records)

        await self.quorum.write(op)

    async def handle(self, api_key: int, version: int, request: Any) -> Any:
        handler = self.HANDLERS.get(api_key)
        if handler is None:
            raise KafkaError(
                f"the controller does not handle API {api_key}", ErrorCode.INVALID_REQUEST
            )
        return await handler(self, version, request)

    # -- topics --------------------------------------------------------------------
    async def create_topics(
        self, version: int, request: CreateTopicsRequest
    ) -> CreateTopicsResponse:
        return await self.quorum.write(lambda image: self._create_topics(image, request))

    def _create_topics(
        self, image: MetadataImage, request: CreateTopicsRequest
    ) -> ControllerResult[CreateTopicsResponse]:
        results = []
        records: list[MetadataRecord] = []
        counts = Counter(t.name for t in request.topics or [])
        for t in request.topics or []:
            if counts[t.name] > 1:
                results.append(
                    CreatableTopicResult(
                        name=t.name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="Duplicate topic name in request.",
                    )
                )
                continue
            result, created = self._create_topic(image, t)
            results.append(result)
            if not request.validate_only:
                records += created
        return ControllerResult(CreateTopicsResponse(topics=results), records)

    def _create_topic(
        self, image: MetadataImage, t: CreatableTopic
    ) -> tuple[CreatableTopicResult, list[MetadataRecord]]:
        name = t.name or ""
        configs = {c.name or "": c.value or "" for c in t.configs or []}
        assignments = {a.partition_index: list(a.broker_ids or []) for a in t.assignments or []}
        outcome = self.decisions.create_topic(
            image, name, t.num_partitions, t.replication_factor, configs, assignments
        )
        result = CreatableTopicResult(
            name=name, error_code=outcome.error, error_message=outcome.message
        )
        if outcome.error:
            return result, []
        created = image.apply(outcome.records).topics[name]
        result.num_partitions = len(created.partitions)
        result.replication_factor = len(next(iter(created.partitions.values())).replicas)
        result.topic_id = created.topic_id
        result.configs = [
            CreatableTopicConfigs(name=c.name, value=c.value, config_source=c.source)
            for c in resolve_configs(configs, self.decisions.broker_props).values()
        ]
        return result, outcome.records

    async def delete_topics(
        self, version: int, request: DeleteTopicsRequest
    ) -> DeleteTopicsResponse:
        if version >= 6:
            targets = [(t.name, t.topic_id) for t in request.topics or []]
        else:
            targets = [(n, ZERO_UUID) for n in request.topic_names or []]
        return await self.quorum.write(lambda image: self._delete_topics(image, targets))

    def _delete_topics(
        self, image: MetadataImage, targets: Sequence[tuple[str | None, bytes]]
    ) -> ControllerResult[DeleteTopicsResponse]:
        results = []
        records: list[MetadataRecord] = []
        for name, topic_id in targets:
            result, removed = self._delete_topic(image, name, topic_id)
            results.append(result)
            records += removed
        return ControllerResult(DeleteTopicsResponse(responses=results), records)

    def _delete_topic(
        self, image: MetadataImage, name: str | None, topic_id: bytes
    ) -> tuple[DeletableTopicResult, list[MetadataRecord]]:
        if name is None:
            name = image.topics_by_id.get(topic_id)
            if name is None:
                return DeletableTopicResult(
                    name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID
                ), []
        topic = image.topics.get(name)
        if not self.delete_topic_enable:
            return DeletableTopicResult(name=name, error_code=ErrorCode.TOPIC_DELETION_DISABLED), []
        if is_internal(name) or topic_name_error(name):
            return DeletableTopicResult(
                name=name,
                error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                error_message="Internal topics cannot be deleted."
                if is_internal(name)
                else topic_name_error(name),
            ), []
        outcome = self.decisions.delete_topic(image, name)
        return DeletableTopicResult(
            name=name,
            topic_id=topic.topic_id if topic else ZERO_UUID,
            error_code=outcome.error,
            error_message=outcome.message,
        ), outcome.records

    async def create_partitions(
        self, version: int, request: CreatePartitionsRequest
    ) -> CreatePartitionsResponse:
        return await self.quorum.write(lambda image: self._create_partitions(image, request))

    def _create_partitions(
        self, image: MetadataImage, request: CreatePartitionsRequest
    ) -> ControllerResult[CreatePartitionsResponse]:
        results = []
        records: list[MetadataRecord] = []
        counts = Counter(t.name for t in request.topics or [])
        for t in request.topics or []:
            name = t.name or ""
            if counts[t.name] > 1:
                outcome = Outcome(ErrorCode.INVALID_REQUEST, "Duplicate topic name in request.")
            elif is_internal(name):
                outcome = Outcome(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Cannot increase the number of partitions of internal topic {name}.",
                )
            else:
                outcome = self.decisions.create_partitions(image, name, t.count)
            if not outcome.error and not request.validate_only:
                records += outcome.records
            results.append(
                CreatePartitionsTopicResult(
                    name=t.name, error_code=outcome.error, error_message=outcome.message
                )
            )
        return ControllerResult(CreatePartitionsResponse(results=results), records)

    # -- a quorum of one ----------------------------------------------------------------
    async def describe_quorum(self, version: int, request: Any) -> DescribeQuorumResponse:
        """DescribeQuorum of a node that is its own quorum: it leads, alone and caught up.
        (A Raft quorum answers from its Raft state instead.)"""
        end = self.quorum.committed.offset + 1
        me = self.decisions.node_id
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

    # -- producer ids ----------------------------------------------------------------
    async def allocate_producer_ids(
        self, version: int, request: AllocateProducerIdsRequest
    ) -> AllocateProducerIdsResponse:
        """A block of producer ids for a broker, recorded so no id is handed out twice."""

        def op(image: MetadataImage) -> ControllerResult[AllocateProducerIdsResponse]:
            broker = image.brokers.get(request.broker_id)
            if broker is None or broker.epoch != request.broker_epoch:
                stale = AllocateProducerIdsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
                return ControllerResult(stale)
            block, outcome = self.decisions.allocate_producer_ids(image, request.broker_id)
            response = AllocateProducerIdsResponse(
                producer_id_start=block.start, producer_id_len=len(block)
            )
            return ControllerResult(response, outcome.records)

        return await self.quorum.write(op)

    # -- configs -------------------------------------------------------------------
    async def alter_configs(
        self, version: int, request: AlterConfigsRequest
    ) -> AlterConfigsResponse:
        responses = await self.quorum.write(
            lambda image: self._alter_configs(
                image,
                request.resources or [],
                lambda r, effective: replacement(r),
                AlterConfigsResourceResponse,
                replace=True,
                validate_only=request.validate_only,
            )
        )
        return AlterConfigsResponse(responses=responses)

    async def incremental_alter_configs(
        self, version: int, request: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        responses = await self.quorum.write(
            lambda image: self._alter_configs(
                image,
                request.resources or [],
                incremental,
                IncrementalAlterResourceResponse,
                replace=False,
                validate_only=request.validate_only,
            )
        )
        return IncrementalAlterConfigsResponse(responses=responses)

    def _alter_configs(
        self,
        image: MetadataImage,
        resources: Sequence[ConfigResource],
        changes: Callable[[Any, Mapping[str, str]], Changes],
        response: Callable[..., T],
        *,
        replace: bool,
        validate_only: bool,
    ) -> ControllerResult[list[T]]:
        """One response per resource, in request order. Kafka fails every copy of a
        resource named twice rather than guess which one wins."""
        counts = Counter((r.resource_type, r.resource_name) for r in resources)
        results = []
        records: list[MetadataRecord] = []
        for r in resources:
            if counts[(r.resource_type, r.resource_name)] > 1:
                outcome = Outcome(ErrorCode.INVALID_REQUEST, "Duplicate resource in request.")
            else:
                outcome = self._alter_resource(image, r, changes, replace)
            if not outcome.error and not validate_only:
                records += outcome.records
            results.append(
                response(
                    error_code=outcome.error,
                    error_message=outcome.message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
            )
        return ControllerResult(results, records)

    def _alter_resource(
        self,
        image: MetadataImage,
        r: ConfigResource,
        changes: Callable[[Any, Mapping[str, str]], Changes],
        replace: bool,
    ) -> Outcome:
        name = r.resource_name or ""
        decisions = self.decisions
        try:
            if r.resource_type == TOPIC_RESOURCE:
                topic = image.topics.get(name)
                if topic is None:
                    return Outcome(*missing_topic(name))
                effective = {
                    k: c.value
                    for k, c in resolve_configs(topic.configs, decisions.broker_props).items()
                    if c.value is not None
                }
                wanted = changes(r, effective)
                return decisions.alter_topic_configs(image, name, wanted, replace=replace)
            if r.resource_type == BROKER_RESOURCE:
                wanted = changes(r, image.broker_configs.get(name, {}))
                return decisions.alter_broker_configs(image, name, wanted, replace=replace)
        except KafkaError as e:
            return Outcome(e.code, str(e))
        return decisions.alter_configs_refused(r.resource_type)


ControllerApis.HANDLERS = {
    ApiKey.BROKER_REGISTRATION: broker_apis.broker_registration,
    ApiKey.BROKER_HEARTBEAT: broker_apis.broker_heartbeat,
    ApiKey.UNREGISTER_BROKER: broker_apis.unregister_broker,
    ApiKey.ALTER_PARTITION: partition_apis.alter_partition,
    ApiKey.ELECT_LEADERS: partition_apis.elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_apis.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_apis.list_partition_reassignments,
    ApiKey.ALLOCATE_PRODUCER_IDS: ControllerApis.allocate_producer_ids,
    ApiKey.DESCRIBE_QUORUM: ControllerApis.describe_quorum,
    ApiKey.CREATE_TOPICS: ControllerApis.create_topics,
    ApiKey.DELETE_TOPICS: ControllerApis.delete_topics,
    ApiKey.CREATE_PARTITIONS: ControllerApis.create_partitions,
    ApiKey.ALTER_CONFIGS: ControllerApis.alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ControllerApis.incremental_alter_configs,
    ApiKey.CREATE_ACLS: security_apis.create_acls,
    ApiKey.DELETE_ACLS: security_apis.delete_acls,
    ApiKey.ALTER_CLIENT_QUOTAS: security_apis.alter_client_quotas,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: security_apis.alter_user_scram_credentials,
}
