"""Generated index of message codecs by API key. Do not edit."""

from __future__ import annotations

from typing import Any

from moldau.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from moldau.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from moldau.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from moldau.protocol.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from moldau.protocol.messages.alter_client_quotas_request import AlterClientQuotasRequest
from moldau.protocol.messages.alter_client_quotas_response import AlterClientQuotasResponse
from moldau.protocol.messages.alter_configs_request import AlterConfigsRequest
from moldau.protocol.messages.alter_configs_response import AlterConfigsResponse
from moldau.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from moldau.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from moldau.protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from moldau.protocol.messages.alter_replica_log_dirs_response import AlterReplicaLogDirsResponse
from moldau.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from moldau.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.api_versions_response import ApiVersionsResponse
from moldau.protocol.messages.create_acls_request import CreateAclsRequest
from moldau.protocol.messages.create_acls_response import CreateAclsResponse
from moldau.protocol.messages.create_partitions_request import CreatePartitionsRequest
from moldau.protocol.messages.create_partitions_response import CreatePartitionsResponse
from moldau.protocol.messages.create_topics_request import CreateTopicsRequest
from moldau.protocol.messages.create_topics_response import CreateTopicsResponse
from moldau.protocol.messages.delete_acls_request import DeleteAclsRequest
from moldau.protocol.messages.delete_acls_response import DeleteAclsResponse
from moldau.protocol.messages.delete_groups_request import DeleteGroupsRequest
from moldau.protocol.messages.delete_groups_response import DeleteGroupsResponse
from moldau.protocol.messages.delete_records_request import DeleteRecordsRequest
from moldau.protocol.messages.delete_records_response import DeleteRecordsResponse
from moldau.protocol.messages.delete_topics_request import DeleteTopicsRequest
from moldau.protocol.messages.delete_topics_response import DeleteTopicsResponse
from moldau.protocol.messages.describe_acls_request import DescribeAclsRequest
from moldau.protocol.messages.describe_acls_response import DescribeAclsResponse
from moldau.protocol.messages.describe_client_quotas_request import DescribeClientQuotasRequest
from moldau.protocol.messages.describe_client_quotas_response import DescribeClientQuotasResponse
from moldau.protocol.messages.describe_cluster_request import DescribeClusterRequest
from moldau.protocol.messages.describe_cluster_response import DescribeClusterResponse
from moldau.protocol.messages.describe_configs_request import DescribeConfigsRequest
from moldau.protocol.messages.describe_configs_response import DescribeConfigsResponse
from moldau.protocol.messages.describe_groups_request import DescribeGroupsRequest
from moldau.protocol.messages.describe_groups_response import DescribeGroupsResponse
from moldau.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from moldau.protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from moldau.protocol.messages.describe_producers_request import DescribeProducersRequest
from moldau.protocol.messages.describe_producers_response import DescribeProducersResponse
from moldau.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from moldau.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from moldau.protocol.messages.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from moldau.protocol.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponse,
)
from moldau.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from moldau.protocol.messages.describe_transactions_response import DescribeTransactionsResponse
from moldau.protocol.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from moldau.protocol.messages.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)
from moldau.protocol.messages.elect_leaders_request import ElectLeadersRequest
from moldau.protocol.messages.elect_leaders_response import ElectLeadersResponse
from moldau.protocol.messages.end_txn_request import EndTxnRequest
from moldau.protocol.messages.end_txn_response import EndTxnResponse
from moldau.protocol.messages.fetch_request import FetchRequest
from moldau.protocol.messages.fetch_response import FetchResponse
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from moldau.protocol.messages.heartbeat_request import HeartbeatRequest
from moldau.protocol.messages.heartbeat_response import HeartbeatResponse
from moldau.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.messages.init_producer_id_response import InitProducerIdResponse
from moldau.protocol.messages.join_group_request import JoinGroupRequest
from moldau.protocol.messages.join_group_response import JoinGroupResponse
from moldau.protocol.messages.leave_group_request import LeaveGroupRequest
from moldau.protocol.messages.leave_group_response import LeaveGroupResponse
from moldau.protocol.messages.list_config_resources_request import ListConfigResourcesRequest
from moldau.protocol.messages.list_config_resources_response import ListConfigResourcesResponse
from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from moldau.protocol.messages.list_groups_response import ListGroupsResponse
from moldau.protocol.messages.list_offsets_request import ListOffsetsRequest
from moldau.protocol.messages.list_offsets_response import ListOffsetsResponse
from moldau.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from moldau.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from moldau.protocol.messages.list_transactions_request import ListTransactionsRequest
from moldau.protocol.messages.list_transactions_response import ListTransactionsResponse
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.protocol.messages.metadata_response import MetadataResponse
from moldau.protocol.messages.offset_commit_request import OffsetCommitRequest
from moldau.protocol.messages.offset_commit_response import OffsetCommitResponse
from moldau.protocol.messages.offset_delete_request import OffsetDeleteRequest
from moldau.protocol.messages.offset_delete_response import OffsetDeleteResponse
from moldau.protocol.messages.offset_fetch_request import OffsetFetchRequest
from moldau.protocol.messages.offset_fetch_response import OffsetFetchResponse
from moldau.protocol.messages.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from moldau.protocol.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from moldau.protocol.messages.produce_request import ProduceRequest
from moldau.protocol.messages.produce_response import ProduceResponse
from moldau.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from moldau.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from moldau.protocol.messages.sync_group_request import SyncGroupRequest
from moldau.protocol.messages.sync_group_response import SyncGroupResponse
from moldau.protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from moldau.protocol.messages.txn_offset_commit_response import TxnOffsetCommitResponse
from moldau.protocol.messages.update_features_request import UpdateFeaturesRequest
from moldau.protocol.messages.update_features_response import UpdateFeaturesResponse
from moldau.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

REQUESTS: dict[int, Any] = {
    25: AddOffsetsToTxnRequest,
    24: AddPartitionsToTxnRequest,
    49: AlterClientQuotasRequest,
    33: AlterConfigsRequest,
    45: AlterPartitionReassignmentsRequest,
    34: AlterReplicaLogDirsRequest,
    51: AlterUserScramCredentialsRequest,
    18: ApiVersionsRequest,
    30: CreateAclsRequest,
    37: CreatePartitionsRequest,
    19: CreateTopicsRequest,
    31: DeleteAclsRequest,
    42: DeleteGroupsRequest,
    21: DeleteRecordsRequest,
    20: DeleteTopicsRequest,
    29: DescribeAclsRequest,
    48: DescribeClientQuotasRequest,
    60: DescribeClusterRequest,
    32: DescribeConfigsRequest,
    15: DescribeGroupsRequest,
    35: DescribeLogDirsRequest,
    61: DescribeProducersRequest,
    55: DescribeQuorumRequest,
    75: DescribeTopicPartitionsRequest,
    65: DescribeTransactionsRequest,
    50: DescribeUserScramCredentialsRequest,
    43: ElectLeadersRequest,
    26: EndTxnRequest,
    1: FetchRequest,
    10: FindCoordinatorRequest,
    12: HeartbeatRequest,
    44: IncrementalAlterConfigsRequest,
    22: InitProducerIdRequest,
    11: JoinGroupRequest,
    13: LeaveGroupRequest,
    74: ListConfigResourcesRequest,
    16: ListGroupsRequest,
    2: ListOffsetsRequest,
    46: ListPartitionReassignmentsRequest,
    66: ListTransactionsRequest,
    3: MetadataRequest,
    8: OffsetCommitRequest,
    47: OffsetDeleteRequest,
    9: OffsetFetchRequest,
    23: OffsetForLeaderEpochRequest,
    0: ProduceRequest,
    36: SaslAuthenticateRequest,
    17: SaslHandshakeRequest,
    14: SyncGroupRequest,
    28: TxnOffsetCommitRequest,
    57: UpdateFeaturesRequest,
    27: WriteTxnMarkersRequest,
}

RESPONSES: dict[int, Any] = {
    25: AddOffsetsToTxnResponse,
    24: AddPartitionsToTxnResponse,
    49: AlterClientQuotasResponse,
    33: AlterConfigsResponse,
    45: AlterPartitionReassignmentsResponse,
    34: AlterReplicaLogDirsResponse,
    51: AlterUserScramCredentialsResponse,
    18: ApiVersionsResponse,
    30: CreateAclsResponse,
    37: CreatePartitionsResponse,
    19: CreateTopicsResponse,
    31: DeleteAclsResponse,
    42: DeleteGroupsResponse,
    21: DeleteRecordsResponse,
    20: DeleteTopicsResponse,
    29: DescribeAclsResponse,
    48: DescribeClientQuotasResponse,
    60: DescribeClusterResponse,
    32: DescribeConfigsResponse,
    15: DescribeGroupsResponse,
    35: DescribeLogDirsResponse,
    61: DescribeProducersResponse,
    55: DescribeQuorumResponse,
    75: DescribeTopicPartitionsResponse,
    65: DescribeTransactionsResponse,
    50: DescribeUserScramCredentialsResponse,
    43: ElectLeadersResponse,
    26: EndTxnResponse,
    1: FetchResponse,
    10: FindCoordinatorResponse,
    12: HeartbeatResponse,
    44: IncrementalAlterConfigsResponse,
    22: InitProducerIdResponse,
    11: JoinGroupResponse,
    13: LeaveGroupResponse,
    74: ListConfigResourcesResponse,
    16: ListGroupsResponse,
    2: ListOffsetsResponse,
    46: ListPartitionReassignmentsResponse,
    66: ListTransactionsResponse,
    3: MetadataResponse,
    8: OffsetCommitResponse,
    47: OffsetDeleteResponse,
    9: OffsetFetchResponse,
    23: OffsetForLeaderEpochResponse,
    0: ProduceResponse,
    36: SaslAuthenticateResponse,
    17: SaslHandshakeResponse,
    14: SyncGroupResponse,
    28: TxnOffsetCommitResponse,
    57: UpdateFeaturesResponse,
    27: WriteTxnMarkersResponse,
}
