"""The ACL matrix: for every API and resource type it authorizes, a principal without the
permission is refused with Kafka's error code, and the same request succeeds once the
ACLs Kafka requires are created (by a super user, with CreateAcls).

The broker runs the standard authorizer with ``allow.everyone.if.no.acl.found=false``;
``alice`` logs in with SASL/PLAIN and starts with no ACL at all, ``admin`` is a super
user. Each case uses fresh topic, group and transactional-id names, so the ACLs of one
case never help another.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from moldau.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from moldau.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from moldau.protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from moldau.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from moldau.protocol.messages.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from moldau.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from moldau.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from moldau.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from moldau.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from moldau.protocol.messages.delete_groups_request import DeleteGroupsRequest
from moldau.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from moldau.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from moldau.protocol.messages.describe_acls_request import DescribeAclsRequest
from moldau.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from moldau.protocol.messages.describe_cluster_request import DescribeClusterRequest
from moldau.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from moldau.protocol.messages.describe_groups_request import DescribeGroupsRequest
from moldau.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from moldau.protocol.messages.describe_producers_request import DescribeProducersRequest
from moldau.protocol.messages.describe_producers_request import TopicRequest as ProducersTopic
from moldau.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from moldau.protocol.messages.describe_quorum_request import PartitionData as QuorumPartition
from moldau.protocol.messages.describe_quorum_request import TopicData as QuorumTopic
from moldau.protocol.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from moldau.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from moldau.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from moldau.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from moldau.protocol.messages.end_txn_request import EndTxnRequest
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.heartbeat_request import HeartbeatRequest
from moldau.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from moldau.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from moldau.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from moldau.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from moldau.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from moldau.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from moldau.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from moldau.protocol.messages.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from moldau.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from moldau.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from moldau.protocol.messages.sync_group_request import SyncGroupRequest
from moldau.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from moldau.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from moldau.records.record import build_batch
from moldau.security.acl import AclOperation as Op
from moldau.security.acl import AclPermissionType, PatternType
from moldau.security.acl import ResourceType as Res
from tests.integration.helpers import produce_request
from tests.security.conftest import PASSWORDS, broker_configs
from tests.security.raw import SaslRawClient
from tests.security.secure import Listeners

TOPIC_CONFIG, BROKER_CONFIG = 2, 4
GROUP_KEY, TXN_KEY = 0, 1
_numbers = itertools.count()
Grant = tuple[Res, str, Op]


@dataclass(frozen=True)
class Names:
    topic: str  # exists, one partition, one record
    new_topic: str  # does not exist
    group: str  # has a committed offset for ``topic``
    txn: str


@dataclass(frozen=True)
class Case:
    name: str
    request: Callable[[Names], tuple[Any, int]]
    error: Callable[[Any], int]
    denied: E
    grants: Callable[[Names], list[Grant]]
    allowed: E | None = E.NONE  # None: any answer but the denied one
    before: Callable[[Names], list[Grant]] = lambda n: []  # ACLs given for both attempts


CLUSTER = "kafka-cluster"


def topic_grant(op: Op) -> Callable[[Names], list[Grant]]:
    return lambda n: [(Res.TOPIC, n.topic, op)]


def group_grant(op: Op) -> Callable[[Names], list[Grant]]:
    return lambda n: [(Res.GROUP, n.group, op)]


def cluster_grant(op: Op) -> Callable[[Names], list[Grant]]:
    return lambda n: [(Res.CLUSTER, CLUSTER, op)]


def txn_grant(op: Op) -> Callable[[Names], list[Grant]]:
    return lambda n: [(Res.TRANSACTIONAL_ID, n.txn, op)]


def produce(n: Names, transactional: bool = False) -> tuple[Any, int]:
    attrs = (
        {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0, "is_transactional": True}
        if transactional
        else {}
    )
    request = produce_request(n.topic, {0: build_batch([(b"k", b"v", [])], **attrs)})
    if transactional:
        request.transactional_id = n.txn
    return request, 9


def fetch(n: Names, replica_id: int = -1) -> tuple[Any, int]:
    part = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request = FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                           topics=[FetchTopic(topic=n.topic, partitions=[part])])  # fmt: skip
    return request, 12


def commit(n: Names) -> tuple[Any, int]:
    """A simple (group-less) offset commit of offset 1 of the topic's partition."""
    return OffsetCommitRequest(group_id=n.group, generation_id_or_member_epoch=-1, member_id="",
                               topics=[OffsetCommitRequestTopic(name=n.topic, partitions=[
                                   OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 8  # fmt: skip


def first_partition_error(r: Any) -> int:
    return r.responses[0].partitions[0].error_code


def join(n: Names) -> tuple[Any, int]:
    return JoinGroupRequest(group_id=n.group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                            member_id="", protocol_type="consumer",
                            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")]), 7  # fmt: skip


def describe_config(kind: int, name: Callable[[Names], str]) -> Callable[[Names], tuple[Any, int]]:
    return lambda n: (DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=kind, resource_name=name(n), configuration_keys=None)]), 4)  # fmt: skip


def alter_config(
    kind: int, name: Callable[[Names], str], key: str, value: str
) -> Callable[[Names], tuple[Any, int]]:
    return lambda n: (AlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=kind, resource_name=name(n), configs=[AlterableConfig(name=key, value=value)])]), 2)  # fmt: skip


def incremental_config(
    kind: int, name: Callable[[Names], str], key: str, value: str
) -> Callable[[Names], tuple[Any, int]]:
    return lambda n: (IncrementalAlterConfigsRequest(resources=[IncrementalResource(
        resource_type=kind, resource_name=name(n),
        configs=[IncrementalConfig(name=key, config_operation=0, value=value)])]), 1)  # fmt: skip


def add_partitions(n: Names) -> tuple[Any, int]:
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=n.txn, v3_and_below_producer_id=7,
                                     v3_and_below_producer_epoch=0,
                                     v3_and_below_topics=[AddPartitionsToTxnTopic(name=n.topic, partitions=[0])]), 3  # fmt: skip


def txn_commit(n: Names) -> tuple[Any, int]:
    return TxnOffsetCommitRequest(transactional_id=n.txn, group_id=n.group, producer_id=7, producer_epoch=0,
                                  topics=[TxnOffsetCommitRequestTopic(name=n.topic, partitions=[
                                      TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 3  # fmt: skip


def txn_commit_error(r: Any) -> int:
    return r.topics[0].partitions[0].error_code


def both(*grants: Callable[[Names], list[Grant]]) -> Callable[[Names], list[Grant]]:
    return lambda n: [g for grant in grants for g in grant(n)]


def topic_name(n: Names) -> str:
    return n.topic


def broker_name(n: Names) -> str:
    return "1"


def group_result(r: Any) -> int:
    return r.groups[0].error_code


CASES = [
    # -- topics: data ------------------------------------------------------------------
    Case("Produce/TOPIC:WRITE", produce, lambda r: r.responses[0].partition_responses[0].error_code,
         E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.WRITE)),
    Case("Produce/TRANSACTIONAL_ID:WRITE", lambda n: produce(n, transactional=True),
         lambda r: r.responses[0].partition_responses[0].error_code,
         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_grant(Op.WRITE), allowed=None,
         before=topic_grant(Op.WRITE)),
    Case("Fetch/TOPIC:READ", fetch, first_partition_error, E.TOPIC_AUTHORIZATION_FAILED,
         topic_grant(Op.READ)),
    Case("Fetch(follower)/CLUSTER:CLUSTER_ACTION", lambda n: fetch(n, replica_id=2),
         first_partition_error, E.TOPIC_AUTHORIZATION_FAILED, cluster_grant(Op.CLUSTER_ACTION),
         allowed=None),
    Case("ListOffsets/TOPIC:DESCRIBE",
         lambda n: (ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsTopic(name=n.topic, partitions=[
             ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7),
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         topic_grant(Op.DESCRIBE)),
    Case("Metadata/TOPIC:DESCRIBE",
         lambda n: (MetadataRequest(topics=[MetadataRequestTopic(name=n.topic)], allow_auto_topic_creation=False), 12),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.READ)),
    Case("DescribeTopicPartitions/TOPIC:DESCRIBE",
         lambda n: (DescribeTopicPartitionsRequest(topics=[TopicRequest(name=n.topic)]), 0),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.ALTER)),
    Case("Metadata(auto-create)/TOPIC:CREATE",
         lambda n: (MetadataRequest(topics=[MetadataRequestTopic(name=n.new_topic)], allow_auto_topic_creation=True), 12),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         lambda n: [(Res.TOPIC, n.new_topic, Op.CREATE)], allowed=None,
         before=lambda n: [(Res.TOPIC, n.new_topic, Op.DESCRIBE)]),
    Case("DeleteRecords/TOPIC:DELETE",
         lambda n: (DeleteRecordsRequest(topics=[DeleteRecordsTopic(name=n.topic, partitions=[
             DeleteRecordsPartition(partition_index=0, offset=0)])], timeout_ms=5000), 2),
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         topic_grant(Op.DELETE)),
    # -- topics: admin -----------------------------------------------------------------
    Case("CreateTopics/TOPIC:CREATE",
         lambda n: (CreateTopicsRequest(topics=[CreatableTopic(name=n.new_topic, num_partitions=1,
                                                               replication_factor=-1)], timeout_ms=5000), 7),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         lambda n: [(Res.TOPIC, n.new_topic, Op.CREATE)]),
    Case("CreateTopics/CLUSTER:CREATE",
         lambda n: (CreateTopicsRequest(topics=[CreatableTopic(name=n.new_topic, num_partitions=1,
                                                               replication_factor=-1)], timeout_ms=5000), 7),
         lambda r: r.topics[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, cluster_grant(Op.CREATE)),
    Case("DeleteTopics/TOPIC:DELETE",
         lambda n: (DeleteTopicsRequest(topics=[DeleteTopicState(name=n.topic)], timeout_ms=5000), 6),
         lambda r: r.responses[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.DELETE)),
    Case("CreatePartitions/TOPIC:ALTER",
         lambda n: (CreatePartitionsRequest(topics=[CreatePartitionsTopic(name=n.topic, count=2)],
                                            timeout_ms=5000), 3),
         lambda r: r.results[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.ALTER)),
    Case("DescribeConfigs(topic)/TOPIC:DESCRIBE_CONFIGS", describe_config(TOPIC_CONFIG, topic_name),
         lambda r: r.results[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         topic_grant(Op.DESCRIBE_CONFIGS)),
    Case("DescribeConfigs(broker)/CLUSTER:DESCRIBE_CONFIGS", describe_config(BROKER_CONFIG, broker_name),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         cluster_grant(Op.ALTER_CONFIGS)),
    Case("AlterConfigs(topic)/TOPIC:ALTER_CONFIGS", alter_config(TOPIC_CONFIG, topic_name, "retention.ms", "3600000"),
         lambda r: r.responses[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.ALTER_CONFIGS)),
    Case("AlterConfigs(broker)/CLUSTER:ALTER_CONFIGS",
         alter_config(BROKER_CONFIG, broker_name, "log.retention.ms", "604800000"),
         lambda r: r.responses[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER_CONFIGS)),
    Case("IncrementalAlterConfigs(topic)/TOPIC:ALTER_CONFIGS",
         incremental_config(TOPIC_CONFIG, topic_name, "retention.ms", "3600000"),
         lambda r: r.responses[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.ALTER_CONFIGS)),
    Case("IncrementalAlterConfigs(broker)/CLUSTER:ALTER_CONFIGS",
         incremental_config(BROKER_CONFIG, broker_name, "log.retention.ms", "604800000"),
         lambda r: r.responses[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER_CONFIGS)),
    Case("ElectLeaders/CLUSTER:ALTER",
         lambda n: (ElectLeadersRequest(election_type=0, topic_partitions=[TopicPartitions(topic=n.topic, partitions=[0])],
                                        timeout_ms=5000), 2),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER), allowed=None),
    Case("AlterPartitionReassignments/CLUSTER:ALTER",
         lambda n: (AlterPartitionReassignmentsRequest(timeout_ms=5000, topics=[ReassignableTopic(
             name=n.topic, partitions=[ReassignablePartition(partition_index=0, replicas=None)])]), 0),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER)),
    Case("ListPartitionReassignments/CLUSTER:DESCRIBE",
         lambda n: (ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None), 0),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.DESCRIBE)),
    Case("DescribeQuorum/CLUSTER:DESCRIBE",
         lambda n: (DescribeQuorumRequest(topics=[QuorumTopic(topic_name="__cluster_metadata",
                                                              partitions=[QuorumPartition(partition_index=0)])]), 1),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.DESCRIBE), allowed=None),
    # -- producers ---------------------------------------------------------------------
    Case("InitProducerId/CLUSTER:IDEMPOTENT_WRITE",
         lambda n: (InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.IDEMPOTENT_WRITE)),
    Case("InitProducerId/TOPIC:WRITE (any topic)",
         lambda n: (InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, topic_grant(Op.WRITE)),
    Case("InitProducerId/TRANSACTIONAL_ID:WRITE",
         lambda n: (InitProducerIdRequest(transactional_id=n.txn, transaction_timeout_ms=60000), 4),
         lambda r: r.error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_grant(Op.WRITE), allowed=None),
    Case("FindCoordinator(transaction)/TRANSACTIONAL_ID:DESCRIBE",
         lambda n: (FindCoordinatorRequest(key_type=TXN_KEY, coordinator_keys=[n.txn]), 4),
         lambda r: r.coordinators[0].error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         txn_grant(Op.WRITE), allowed=None),
    # -- groups ------------------------------------------------------------------------
    Case("FindCoordinator(group)/GROUP:DESCRIBE",
         lambda n: (FindCoordinatorRequest(key_type=GROUP_KEY, coordinator_keys=[n.group]), 4),
         lambda r: r.coordinators[0].error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ)),
    Case("JoinGroup/GROUP:READ", join, lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED,
         group_grant(Op.READ), allowed=E.MEMBER_ID_REQUIRED),
    Case("SyncGroup/GROUP:READ",
         lambda n: (SyncGroupRequest(group_id=n.group, generation_id=1, member_id="m", assignments=[]), 5),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ), allowed=E.UNKNOWN_MEMBER_ID),
    Case("Heartbeat/GROUP:READ",
         lambda n: (HeartbeatRequest(group_id=n.group, generation_id=1, member_id="m"), 4),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ), allowed=E.UNKNOWN_MEMBER_ID),
    Case("LeaveGroup/GROUP:READ",
         lambda n: (LeaveGroupRequest(group_id=n.group, members=[MemberIdentity(member_id="m")]), 5),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ), allowed=None),
    Case("OffsetCommit/GROUP:READ",
         commit,
         lambda r: r.topics[0].partitions[0].error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ),
         before=topic_grant(Op.READ)),
    Case("OffsetCommit/TOPIC:READ",
         commit,
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.READ),
         before=group_grant(Op.READ)),
    Case("OffsetFetch/GROUP:DESCRIBE",
         lambda n: (OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=n.group, topics=None)]), 8),
         group_result, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.DESCRIBE)),
    Case("OffsetFetch/TOPIC:DESCRIBE",
         lambda n: (OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=n.group, topics=[
             OffsetFetchRequestTopics(name=n.topic, partition_indexes=[0])])]), 8),
         lambda r: r.groups[0].topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         topic_grant(Op.DESCRIBE), before=group_grant(Op.DESCRIBE)),
    Case("DescribeGroups/GROUP:DESCRIBE",
         lambda n: (DescribeGroupsRequest(groups=[n.group]), 5),
         lambda r: r.groups[0].error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.DESCRIBE)),
    Case("DeleteGroups/GROUP:DELETE",
         lambda n: (DeleteGroupsRequest(groups_names=[n.group]), 2),
         lambda r: r.results[0].error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.DELETE)),
    Case("OffsetDelete/GROUP:DELETE",
         lambda n: (OffsetDeleteRequest(group_id=n.group, topics=[OffsetDeleteRequestTopic(
             name=n.topic, partitions=[OffsetDeleteRequestPartition(partition_index=0)])]), 0),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.DELETE), before=topic_grant(Op.READ)),
    Case("OffsetDelete/TOPIC:READ",
         lambda n: (OffsetDeleteRequest(group_id=n.group, topics=[OffsetDeleteRequestTopic(
             name=n.topic, partitions=[OffsetDeleteRequestPartition(partition_index=0)])]), 0),
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.READ),
         before=group_grant(Op.DELETE)),
    # -- security admin ----------------------------------------------------------------
    Case("DescribeAcls/CLUSTER:DESCRIBE",
         lambda n: (DescribeAclsRequest(resource_type_filter=Res.ANY, resource_name_filter=None, principal_filter=None, host_filter=None, pattern_type_filter=PatternType.ANY,
                                        operation=Op.ANY, permission_type=AclPermissionType.ANY), 3),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER)),
    Case("CreateAcls/CLUSTER:ALTER",
         lambda n: (CreateAclsRequest(creations=[AclCreation(
             resource_type=Res.DELEGATION_TOKEN, resource_name=n.txn, resource_pattern_type=PatternType.LITERAL,
             principal="User:bob", host="*", operation=Op.DESCRIBE, permission_type=AclPermissionType.ALLOW)]), 3),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER)),
    Case("DeleteAcls/CLUSTER:ALTER",
         lambda n: (DeleteAclsRequest(filters=[DeleteAclsFilter(
             resource_type_filter=Res.DELEGATION_TOKEN, resource_name_filter=n.txn, principal_filter=None,
             host_filter=None, pattern_type_filter=PatternType.ANY, operation=Op.ANY, permission_type=AclPermissionType.ANY)]), 3),
         lambda r: r.filter_results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER)),
    Case("DescribeClientQuotas/CLUSTER:DESCRIBE_CONFIGS",
         lambda n: (DescribeClientQuotasRequest(components=[], strict=False), 1),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER_CONFIGS)),
    Case("AlterClientQuotas/CLUSTER:ALTER_CONFIGS",
         lambda n: (AlterClientQuotasRequest(entries=[EntryData(
             entity=[EntityData(entity_type="client-id", entity_name=n.txn)],
             ops=[OpData(key="producer_byte_rate", value=1e6)])]), 1),
         lambda r: r.entries[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER_CONFIGS)),
    Case("DescribeUserScramCredentials/CLUSTER:DESCRIBE",
         lambda n: (DescribeUserScramCredentialsRequest(users=None), 0),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.DESCRIBE)),
    Case("AlterUserScramCredentials/CLUSTER:ALTER",
         lambda n: (AlterUserScramCredentialsRequest(deletions=[], upsertions=[ScramCredentialUpsertion(
             name=n.txn, mechanism=1, iterations=4096, salt=b"salt", salted_password=b"x" * 32)]), 0),
         lambda r: r.results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.ALTER)),
    # -- transactions --------------------------------------------------------------------
    Case("AddPartitionsToTxn/TRANSACTIONAL_ID:WRITE", add_partitions,
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_grant(Op.WRITE), allowed=None, before=topic_grant(Op.WRITE)),
    Case("AddPartitionsToTxn/TOPIC:WRITE", add_partitions,
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.WRITE), allowed=None, before=txn_grant(Op.WRITE)),
    Case("AddPartitionsToTxn(verify)/CLUSTER:CLUSTER_ACTION",
         lambda n: (AddPartitionsToTxnRequest(transactions=[]), 4),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.CLUSTER_ACTION)),
    Case("AddOffsetsToTxn/TRANSACTIONAL_ID:WRITE",
         lambda n: (AddOffsetsToTxnRequest(transactional_id=n.txn, producer_id=7, producer_epoch=0, group_id=n.group), 3),
         lambda r: r.error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_grant(Op.WRITE),
         allowed=None, before=group_grant(Op.READ)),
    Case("AddOffsetsToTxn/GROUP:READ",
         lambda n: (AddOffsetsToTxnRequest(transactional_id=n.txn, producer_id=7, producer_epoch=0, group_id=n.group), 3),
         lambda r: r.error_code, E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ),
         allowed=None, before=txn_grant(Op.WRITE)),
    Case("TxnOffsetCommit/TRANSACTIONAL_ID:WRITE", txn_commit, txn_commit_error,
         E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_grant(Op.WRITE), allowed=None,
         before=both(group_grant(Op.READ), topic_grant(Op.READ))),
    Case("TxnOffsetCommit/GROUP:READ", txn_commit, txn_commit_error,
         E.GROUP_AUTHORIZATION_FAILED, group_grant(Op.READ), allowed=None,
         before=both(txn_grant(Op.WRITE), topic_grant(Op.READ))),
    Case("TxnOffsetCommit/TOPIC:READ", txn_commit, txn_commit_error,
         E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.READ), allowed=None,
         before=both(txn_grant(Op.WRITE), group_grant(Op.READ))),
    Case("EndTxn/TRANSACTIONAL_ID:WRITE",
         lambda n: (EndTxnRequest(transactional_id=n.txn, producer_id=7, producer_epoch=0, committed=True), 3),
         lambda r: r.error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, txn_grant(Op.WRITE), allowed=None),
    Case("WriteTxnMarkers/CLUSTER:CLUSTER_ACTION",
         lambda n: (WriteTxnMarkersRequest(markers=[WritableTxnMarker(producer_id=7, producer_epoch=0,
                    transaction_result=False, coordinator_epoch=0,
                    topics=[WritableTxnMarkerTopic(name=n.topic, partition_indexes=[0])])]), 1),
         lambda r: r.markers[0].topics[0].partitions[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         cluster_grant(Op.CLUSTER_ACTION), allowed=None),
    Case("DescribeTransactions/TRANSACTIONAL_ID:DESCRIBE",
         lambda n: (DescribeTransactionsRequest(transactional_ids=[n.txn]), 0),
         lambda r: r.transaction_states[0].error_code, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
         txn_grant(Op.DESCRIBE), allowed=None),
    Case("DescribeProducers/TOPIC:READ",
         lambda n: (DescribeProducersRequest(topics=[ProducersTopic(name=n.topic, partition_indexes=[0])]), 0),
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED, topic_grant(Op.READ)),
    Case("OffsetForLeaderEpoch/TOPIC:DESCRIBE", lambda n: offset_for_leader_epoch(n, -1),
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         topic_grant(Op.DESCRIBE)),
    Case("OffsetForLeaderEpoch(broker)/CLUSTER:CLUSTER_ACTION", lambda n: offset_for_leader_epoch(n, 2),
         lambda r: r.topics[0].partitions[0].error_code, E.TOPIC_AUTHORIZATION_FAILED,
         cluster_grant(Op.CLUSTER_ACTION)),
    Case("DescribeLogDirs/CLUSTER:DESCRIBE", lambda n: (DescribeLogDirsRequest(topics=None), 4),
         lambda r: r.error_code, E.CLUSTER_AUTHORIZATION_FAILED, cluster_grant(Op.DESCRIBE)),
    Case("AlterReplicaLogDirs/CLUSTER:ALTER",
         lambda n: (AlterReplicaLogDirsRequest(dirs=[AlterReplicaLogDir(
             path="/no/such/log/dir", topics=[AlterReplicaLogDirTopic(name=n.topic, partitions=[0])])]), 2),
         lambda r: r.results[0].partitions[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED,
         cluster_grant(Op.ALTER), allowed=E.LOG_DIR_NOT_FOUND),
]  # fmt: skip


def offset_for_leader_epoch(n: Names, replica_id: int) -> tuple[Any, int]:
    partition = OffsetForLeaderPartition(partition=0, leader_epoch=0)
    topics = [OffsetForLeaderTopic(topic=n.topic, partitions=[partition])]
    return OffsetForLeaderEpochRequest(replica_id=replica_id, topics=topics), 4


@pytest.fixture(scope="module")
def acl_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: dict[str, Any]
) -> Iterator[Listeners]:
    configs = broker_configs(certs, **{"allow.everyone.if.no.acl.found": "false"})
    broker = Listeners(
        tmp_path_factory.mktemp("acls"), {"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, configs
    ).start()
    yield broker
    broker.close()


def connect(broker: Listeners, user: str) -> SaslRawClient:
    raw = SaslRawClient(broker.bootstrap("SASL_PLAINTEXT"))
    assert raw.login("PLAIN", user, PASSWORDS[user]).error_code == E.NONE
    return raw


def grant(admin: SaslRawClient, grants: list[Grant], principal: str = "User:alice") -> None:
    if not grants:
        return
    response = admin.request(CreateAclsRequest(creations=[
        AclCreation(resource_type=r, resource_name=name, resource_pattern_type=PatternType.LITERAL,
                    principal=principal, host="*", operation=op, permission_type=AclPermissionType.ALLOW)
        for r, name, op in grants
    ]), 3)  # fmt: skip
    assert all(r.error_code == E.NONE for r in response.results), response


def revoke_all(admin: SaslRawClient, principal: str = "User:alice") -> None:
    """Earlier cases' ACLs on the one CLUSTER resource must not help this one."""
    admin.request(DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=Res.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
        principal_filter=principal, host_filter=None, operation=Op.ANY,
        permission_type=AclPermissionType.ANY)]), 3)  # fmt: skip


def prepare(admin: SaslRawClient) -> Names:
    i = next(_numbers)
    n = Names(f"acl-topic-{i}", f"acl-new-{i}", f"acl-group-{i}", f"acl-txn-{i}")
    created = admin.request(CreateTopicsRequest(topics=[CreatableTopic(
        name=n.topic, num_partitions=1, replication_factor=-1)], timeout_ms=5000), 7)  # fmt: skip
    assert created.topics[0].error_code == E.NONE, created
    request, version = produce(n)
    assert admin.request(request, version).responses[0].partition_responses[0].error_code == E.NONE
    found = admin.request(FindCoordinatorRequest(key_type=GROUP_KEY, coordinator_keys=[n.group]), 4)
    assert found.coordinators[0].error_code == E.NONE, found
    request, version = commit(n)  # the group exists, with an offset
    deadline = time.monotonic() + 30
    while (error := admin.request(request, version).topics[0].partitions[0].error_code) in (
        E.NOT_COORDINATOR,
        E.COORDINATOR_LOAD_IN_PROGRESS,
    ):
        assert time.monotonic() < deadline, "the group coordinator never loaded"
        time.sleep(0.1)
    assert error == E.NONE
    return n


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_acl_matrix(acl_broker: Listeners, case: Case) -> None:
    with connect(acl_broker, "admin") as admin, connect(acl_broker, "alice") as alice:
        n = prepare(admin)
        revoke_all(admin)
        grant(admin, case.before(n))
        request, version = case.request(n)
        assert case.error(alice.request(request, version)) == case.denied, "refused with this error"
        grant(admin, case.grants(n))
        request, version = case.request(n)
        got = case.error(alice.request(request, version))
        if case.allowed is None:
            assert got != case.denied, f"still refused ({case.denied.name})"
        else:
            assert got == case.allowed, f"allowed with {E(got).name}, expected {case.allowed.name}"


def test_metadata_hides_topics_and_listings_filter(acl_broker: Listeners) -> None:
    """All-topics Metadata, ListGroups and OffsetFetch of all partitions leave out what the
    principal may not DESCRIBE; authorized operations are reported as bit fields."""
    with connect(acl_broker, "admin") as admin, connect(acl_broker, "alice") as alice:
        seen, hidden = prepare(admin), prepare(admin)
        revoke_all(admin)
        grant(admin, [(Res.TOPIC, seen.topic, Op.READ), (Res.GROUP, seen.group, Op.DESCRIBE)])
        listing = alice.request(
            MetadataRequest(topics=None, include_topic_authorized_operations=True), 12
        )
        names = {t.name: t for t in listing.topics}
        assert seen.topic in names and hidden.topic not in names
        assert names[seen.topic].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
        paged = {t.name: t for t in alice.request(DescribeTopicPartitionsRequest(), 0).topics}
        assert seen.topic in paged and hidden.topic not in paged
        assert paged[seen.topic].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
        groups = {g.group_id for g in alice.request(ListGroupsRequest(), 4).groups}
        assert seen.group in groups and hidden.group not in groups
        # With DESCRIBE on the cluster, every group is listed.
        grant(admin, [(Res.CLUSTER, CLUSTER, Op.DESCRIBE)])
        groups = {g.group_id for g in alice.request(ListGroupsRequest(), 4).groups}
        assert {seen.group, hidden.group} <= groups
        cluster = alice.request(
            DescribeClusterRequest(include_cluster_authorized_operations=True), 1
        )
        assert cluster.cluster_authorized_operations == 1 << Op.DESCRIBE
        # OffsetFetch of all partitions: topics the principal cannot describe are left out.
        grant(admin, [(Res.GROUP, hidden.group, Op.DESCRIBE)])
        fetched = alice.request(
            OffsetFetchRequest(
                groups=[OffsetFetchRequestGroup(group_id=hidden.group, topics=None)]
            ),
            8,
        )
        assert fetched.groups[0].error_code == E.NONE and fetched.groups[0].topics == []
        grant(admin, [(Res.TOPIC, hidden.topic, Op.DESCRIBE)])
        fetched = alice.request(
            OffsetFetchRequest(
                groups=[OffsetFetchRequestGroup(group_id=hidden.group, topics=None)]
            ),
            8,
        )
        assert [t.name for t in fetched.groups[0].topics] == [hidden.topic]


def test_deny_wins_prefixes_and_wildcards(acl_broker: Listeners) -> None:
    with connect(acl_broker, "admin") as admin, connect(acl_broker, "alice") as alice:
        n = prepare(admin)
        revoke_all(admin)

        def can_fetch() -> bool:
            request, version = fetch(n)
            return first_partition_error(alice.request(request, version)) == E.NONE

        admin.request(CreateAclsRequest(creations=[AclCreation(
            resource_type=Res.TOPIC, resource_name="acl-topic-", resource_pattern_type=PatternType.PREFIXED,
            principal="User:*", host="*", operation=Op.READ, permission_type=AclPermissionType.ALLOW)]), 3)  # fmt: skip
        assert can_fetch()
        admin.request(CreateAclsRequest(creations=[AclCreation(
            resource_type=Res.TOPIC, resource_name=n.topic, resource_pattern_type=PatternType.LITERAL,
            principal="User:alice", host="*", operation=Op.ALL, permission_type=AclPermissionType.DENY)]), 3)  # fmt: skip
        assert not can_fetch()
        described = admin.request(DescribeAclsRequest(
            resource_type_filter=Res.TOPIC, resource_name_filter=n.topic, principal_filter=None, host_filter=None,
            pattern_type_filter=PatternType.MATCH,
            operation=Op.ANY, permission_type=AclPermissionType.ANY), 3)  # fmt: skip
        found = {(r.pattern_type, r.resource_name) for r in described.resources}
        assert found == {(PatternType.PREFIXED, "acl-topic-"), (PatternType.LITERAL, n.topic)}
        deleted = admin.request(DeleteAclsRequest(filters=[DeleteAclsFilter(
            resource_type_filter=Res.TOPIC, resource_name_filter=n.topic, principal_filter=None, host_filter=None,
            pattern_type_filter=PatternType.LITERAL,
            operation=Op.ANY, permission_type=AclPermissionType.DENY)]), 3)  # fmt: skip
        assert len(deleted.filter_results[0].matching_acls) == 1
        assert can_fetch()
        admin.request(DeleteAclsRequest(filters=[DeleteAclsFilter(
            resource_type_filter=Res.TOPIC, resource_name_filter="acl-topic-", principal_filter=None,
            host_filter=None, pattern_type_filter=PatternType.PREFIXED, operation=Op.ANY,
            permission_type=AclPermissionType.ANY)]), 3)  # fmt: skip
        assert not can_fetch()
