"""Generated index of message codecs by API key. Do not edit."""

from __future__ import annotations

from typing import Any

from moldau.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from moldau.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from moldau.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from moldau.protocol.messages.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from moldau.protocol.messages.add_raft_voter_request import AddRaftVoterRequest
from moldau.protocol.messages.add_raft_voter_response import AddRaftVoterResponse
from moldau.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from moldau.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
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
from moldau.protocol.messages.alter_partition_request import AlterPartitionRequest
from moldau.protocol.messages.alter_partition_response import AlterPartitionResponse
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
from moldau.protocol.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from moldau.protocol.messages.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse
from moldau.protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from moldau.protocol.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse
from moldau.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from moldau.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from moldau.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from moldau.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from moldau.protocol.messages.consumer_group_describe_request import ConsumerGroupDescribeRequest
from moldau.protocol.messages.consumer_group_describe_response import ConsumerGroupDescribeResponse
from moldau.protocol.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from moldau.protocol.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from moldau.protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from moldau.protocol.messages.controlled_shutdown_response import ControlledShutdownResponse
from moldau.protocol.messages.controller_registration_request import ControllerRegistrationRequest
from moldau.protocol.messages.controller_registration_response import ControllerRegistrationResponse
from moldau.protocol.messages.create_acls_request import CreateAclsRequest
from moldau.protocol.messages.create_acls_response import CreateAclsResponse
from moldau.protocol.messages.create_delegation_token_request import CreateDelegationTokenRequest
from moldau.protocol.messages.create_delegation_token_response import CreateDelegationTokenResponse
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
from moldau.protocol.messages.delete_share_group_state_request import DeleteShareGroupStateRequest
from moldau.protocol.messages.delete_share_group_state_response import DeleteShareGroupStateResponse
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
from moldau.protocol.messages.describe_delegation_token_request import (
    DescribeDelegationTokenRequest,
)
from moldau.protocol.messages.describe_delegation_token_response import (
    DescribeDelegationTokenResponse,
)
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
from moldau.protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from moldau.protocol.messages.end_quorum_epoch_response import EndQuorumEpochResponse
from moldau.protocol.messages.end_txn_request import EndTxnRequest
from moldau.protocol.messages.end_txn_response import EndTxnResponse
from moldau.protocol.messages.envelope_request import EnvelopeRequest
from moldau.protocol.messages.envelope_response import EnvelopeResponse
from moldau.protocol.messages.expire_delegation_token_request import ExpireDelegationTokenRequest
from moldau.protocol.messages.expire_delegation_token_response import ExpireDelegationTokenResponse
from moldau.protocol.messages.fetch_request import FetchRequest
from moldau.protocol.messages.fetch_response import FetchResponse
from moldau.protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from moldau.protocol.messages.fetch_snapshot_response import FetchSnapshotResponse
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from moldau.protocol.messages.get_telemetry_subscriptions_request import (
    GetTelemetrySubscriptionsRequest,
)
from moldau.protocol.messages.get_telemetry_subscriptions_response import (
    GetTelemetrySubscriptionsResponse,
)
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
from moldau.protocol.messages.initialize_share_group_state_request import (
    InitializeShareGroupStateRequest,
)
from moldau.protocol.messages.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse,
)
from moldau.protocol.messages.join_group_request import JoinGroupRequest
from moldau.protocol.messages.join_group_response import JoinGroupResponse
from moldau.protocol.messages.leader_and_isr_request import LeaderAndIsrRequest
from moldau.protocol.messages.leader_and_isr_response import LeaderAndIsrResponse
from moldau.protocol.messages.leave_group_request import LeaveGroupRequest
from moldau.protocol.messages.leave_group_response import LeaveGroupResponse
from moldau.protocol.messages.list_client_metrics_resources_request import (
    ListClientMetricsResourcesRequest,
)
from moldau.protocol.messages.list_client_metrics_resources_response import (
    ListClientMetricsResourcesResponse,
)
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
from moldau.protocol.messages.push_telemetry_request import PushTelemetryRequest
from moldau.protocol.messages.push_telemetry_response import PushTelemetryResponse
from moldau.protocol.messages.read_share_group_state_request import ReadShareGroupStateRequest
from moldau.protocol.messages.read_share_group_state_response import ReadShareGroupStateResponse
from moldau.protocol.messages.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from moldau.protocol.messages.read_share_group_state_summary_response import (
    ReadShareGroupStateSummaryResponse,
)
from moldau.protocol.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from moldau.protocol.messages.remove_raft_voter_response import RemoveRaftVoterResponse
from moldau.protocol.messages.renew_delegation_token_request import RenewDelegationTokenRequest
from moldau.protocol.messages.renew_delegation_token_response import RenewDelegationTokenResponse
from moldau.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from moldau.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from moldau.protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from moldau.protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from moldau.protocol.messages.share_fetch_request import ShareFetchRequest
from moldau.protocol.messages.share_fetch_response import ShareFetchResponse
from moldau.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from moldau.protocol.messages.share_group_describe_response import ShareGroupDescribeResponse
from moldau.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from moldau.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from moldau.protocol.messages.stop_replica_request import StopReplicaRequest
from moldau.protocol.messages.stop_replica_response import StopReplicaResponse
from moldau.protocol.messages.sync_group_request import SyncGroupRequest
from moldau.protocol.messages.sync_group_response import SyncGroupResponse
from moldau.protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from moldau.protocol.messages.txn_offset_commit_response import TxnOffsetCommitResponse
from moldau.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from moldau.protocol.messages.unregister_broker_response import UnregisterBrokerResponse
from moldau.protocol.messages.update_features_request import UpdateFeaturesRequest
from moldau.protocol.messages.update_features_response import UpdateFeaturesResponse
from moldau.protocol.messages.update_metadata_request import UpdateMetadataRequest
from moldau.protocol.messages.update_metadata_response import UpdateMetadataResponse
from moldau.protocol.messages.update_raft_voter_request import UpdateRaftVoterRequest
from moldau.protocol.messages.update_raft_voter_response import UpdateRaftVoterResponse
from moldau.protocol.messages.vote_request import VoteRequest
from moldau.protocol.messages.vote_response import VoteResponse
from moldau.protocol.messages.write_share_group_state_request import WriteShareGroupStateRequest
from moldau.protocol.messages.write_share_group_state_response import WriteShareGroupStateResponse
from moldau.protocol.messages.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

REQUESTS: dict[int, Any] = {
    0: ProduceRequest,
    1: FetchRequest,
    2: ListOffsetsRequest,
    3: MetadataRequest,
    4: LeaderAndIsrRequest,
    5: StopReplicaRequest,
    6: UpdateMetadataRequest,
    7: ControlledShutdownRequest,
    8: OffsetCommitRequest,
    9: OffsetFetchRequest,
    10: FindCoordinatorRequest,
    11: JoinGroupRequest,
    12: HeartbeatRequest,
    13: LeaveGroupRequest,
    14: SyncGroupRequest,
    15: DescribeGroupsRequest,
    16: ListGroupsRequest,
    17: SaslHandshakeRequest,
    18: ApiVersionsRequest,
    19: CreateTopicsRequest,
    20: DeleteTopicsRequest,
    21: DeleteRecordsRequest,
    22: InitProducerIdRequest,
    23: OffsetForLeaderEpochRequest,
    24: AddPartitionsToTxnRequest,
    25: AddOffsetsToTxnRequest,
    26: EndTxnRequest,
    27: WriteTxnMarkersRequest,
    28: TxnOffsetCommitRequest,
    29: DescribeAclsRequest,
    30: CreateAclsRequest,
    31: DeleteAclsRequest,
    32: DescribeConfigsRequest,
    33: AlterConfigsRequest,
    34: AlterReplicaLogDirsRequest,
    35: DescribeLogDirsRequest,
    36: SaslAuthenticateRequest,
    37: CreatePartitionsRequest,
    38: CreateDelegationTokenRequest,
    39: RenewDelegationTokenRequest,
    40: ExpireDelegationTokenRequest,
    41: DescribeDelegationTokenRequest,
    42: DeleteGroupsRequest,
    43: ElectLeadersRequest,
    44: IncrementalAlterConfigsRequest,
    45: AlterPartitionReassignmentsRequest,
    46: ListPartitionReassignmentsRequest,
    47: OffsetDeleteRequest,
    48: DescribeClientQuotasRequest,
    49: AlterClientQuotasRequest,
    50: DescribeUserScramCredentialsRequest,
    51: AlterUserScramCredentialsRequest,
    52: VoteRequest,
    53: BeginQuorumEpochRequest,
    54: EndQuorumEpochRequest,
    55: DescribeQuorumRequest,
    56: AlterPartitionRequest,
    57: UpdateFeaturesRequest,
    58: EnvelopeRequest,
    59: FetchSnapshotRequest,
    60: DescribeClusterRequest,
    61: DescribeProducersRequest,
    62: BrokerRegistrationRequest,
    63: BrokerHeartbeatRequest,
    64: UnregisterBrokerRequest,
    65: DescribeTransactionsRequest,
    66: ListTransactionsRequest,
    67: AllocateProducerIdsRequest,
    68: ConsumerGroupHeartbeatRequest,
    69: ConsumerGroupDescribeRequest,
    70: ControllerRegistrationRequest,
    71: GetTelemetrySubscriptionsRequest,
    72: PushTelemetryRequest,
    73: AssignReplicasToDirsRequest,
    74: ListClientMetricsResourcesRequest,
    75: DescribeTopicPartitionsRequest,
    76: ShareGroupHeartbeatRequest,
    77: ShareGroupDescribeRequest,
    78: ShareFetchRequest,
    79: ShareAcknowledgeRequest,
    80: AddRaftVoterRequest,
    81: RemoveRaftVoterRequest,
    82: UpdateRaftVoterRequest,
    83: InitializeShareGroupStateRequest,
    84: ReadShareGroupStateRequest,
    85: WriteShareGroupStateRequest,
    86: DeleteShareGroupStateRequest,
    87: ReadShareGroupStateSummaryRequest,
}

RESPONSES: dict[int, Any] = {
    0: ProduceResponse,
    1: FetchResponse,
    2: ListOffsetsResponse,
    3: MetadataResponse,
    4: LeaderAndIsrResponse,
    5: StopReplicaResponse,
    6: UpdateMetadataResponse,
    7: ControlledShutdownResponse,
    8: OffsetCommitResponse,
    9: OffsetFetchResponse,
    10: FindCoordinatorResponse,
    11: JoinGroupResponse,
    12: HeartbeatResponse,
    13: LeaveGroupResponse,
    14: SyncGroupResponse,
    15: DescribeGroupsResponse,
    16: ListGroupsResponse,
    17: SaslHandshakeResponse,
    18: ApiVersionsResponse,
    19: CreateTopicsResponse,
    20: DeleteTopicsResponse,
    21: DeleteRecordsResponse,
    22: InitProducerIdResponse,
    23: OffsetForLeaderEpochResponse,
    24: AddPartitionsToTxnResponse,
    25: AddOffsetsToTxnResponse,
    26: EndTxnResponse,
    27: WriteTxnMarkersResponse,
    28: TxnOffsetCommitResponse,
    29: DescribeAclsResponse,
    30: CreateAclsResponse,
    31: DeleteAclsResponse,
    32: DescribeConfigsResponse,
    33: AlterConfigsResponse,
    34: AlterReplicaLogDirsResponse,
    35: DescribeLogDirsResponse,
    36: SaslAuthenticateResponse,
    37: CreatePartitionsResponse,
    38: CreateDelegationTokenResponse,
    39: RenewDelegationTokenResponse,
    40: ExpireDelegationTokenResponse,
    41: DescribeDelegationTokenResponse,
    42: DeleteGroupsResponse,
    43: ElectLeadersResponse,
    44: IncrementalAlterConfigsResponse,
    45: AlterPartitionReassignmentsResponse,
    46: ListPartitionReassignmentsResponse,
    47: OffsetDeleteResponse,
    48: DescribeClientQuotasResponse,
    49: AlterClientQuotasResponse,
    50: DescribeUserScramCredentialsResponse,
    51: AlterUserScramCredentialsResponse,
    52: VoteResponse,
    53: BeginQuorumEpochResponse,
    54: EndQuorumEpochResponse,
    55: DescribeQuorumResponse,
    56: AlterPartitionResponse,
    57: UpdateFeaturesResponse,
    58: EnvelopeResponse,
    59: FetchSnapshotResponse,
    60: DescribeClusterResponse,
    61: DescribeProducersResponse,
    62: BrokerRegistrationResponse,
    63: BrokerHeartbeatResponse,
    64: UnregisterBrokerResponse,
    65: DescribeTransactionsResponse,
    66: ListTransactionsResponse,
    67: AllocateProducerIdsResponse,
    68: ConsumerGroupHeartbeatResponse,
    69: ConsumerGroupDescribeResponse,
    70: ControllerRegistrationResponse,
    71: GetTelemetrySubscriptionsResponse,
    72: PushTelemetryResponse,
    73: AssignReplicasToDirsResponse,
    74: ListClientMetricsResourcesResponse,
    75: DescribeTopicPartitionsResponse,
    76: ShareGroupHeartbeatResponse,
    77: ShareGroupDescribeResponse,
    78: ShareFetchResponse,
    79: ShareAcknowledgeResponse,
    80: AddRaftVoterResponse,
    81: RemoveRaftVoterResponse,
    82: UpdateRaftVoterResponse,
    83: InitializeShareGroupStateResponse,
    84: ReadShareGroupStateResponse,
    85: WriteShareGroupStateResponse,
    86: DeleteShareGroupStateResponse,
    87: ReadShareGroupStateSummaryResponse,
}
