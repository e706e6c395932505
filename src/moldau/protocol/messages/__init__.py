"""Generated index of message codecs by API key. Do not edit.

A codec module is imported when its class is first looked up: a broker uses a few
dozen of them, and importing them all was most of its start-up time.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any


class _Index(Mapping[int, Any]):
    def __init__(self, where: dict[int, tuple[str, str]]) -> None:
        self._where = where  # API key -> (module, class)
        self._classes: dict[int, Any] = {}

    def __getitem__(self, api_key: int) -> Any:
        try:
            return self._classes[api_key]
        except KeyError:
            module, name = self._where[api_key]
            cls = getattr(importlib.import_module(f"{__name__}.{module}"), name)
            self._classes[api_key] = cls
            return cls

    def __iter__(self) -> Iterator[int]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


REQUESTS: Mapping[int, Any] = _Index(
    {
        25: ("add_offsets_to_txn_request", "AddOffsetsToTxnRequest"),
        24: ("add_partitions_to_txn_request", "AddPartitionsToTxnRequest"),
        49: ("alter_client_quotas_request", "AlterClientQuotasRequest"),
        33: ("alter_configs_request", "AlterConfigsRequest"),
        45: ("alter_partition_reassignments_request", "AlterPartitionReassignmentsRequest"),
        34: ("alter_replica_log_dirs_request", "AlterReplicaLogDirsRequest"),
        51: ("alter_user_scram_credentials_request", "AlterUserScramCredentialsRequest"),
        18: ("api_versions_request", "ApiVersionsRequest"),
        30: ("create_acls_request", "CreateAclsRequest"),
        37: ("create_partitions_request", "CreatePartitionsRequest"),
        19: ("create_topics_request", "CreateTopicsRequest"),
        31: ("delete_acls_request", "DeleteAclsRequest"),
        42: ("delete_groups_request", "DeleteGroupsRequest"),
        21: ("delete_records_request", "DeleteRecordsRequest"),
        20: ("delete_topics_request", "DeleteTopicsRequest"),
        29: ("describe_acls_request", "DescribeAclsRequest"),
        48: ("describe_client_quotas_request", "DescribeClientQuotasRequest"),
        60: ("describe_cluster_request", "DescribeClusterRequest"),
        32: ("describe_configs_request", "DescribeConfigsRequest"),
        15: ("describe_groups_request", "DescribeGroupsRequest"),
        35: ("describe_log_dirs_request", "DescribeLogDirsRequest"),
        61: ("describe_producers_request", "DescribeProducersRequest"),
        55: ("describe_quorum_request", "DescribeQuorumRequest"),
        75: ("describe_topic_partitions_request", "DescribeTopicPartitionsRequest"),
        65: ("describe_transactions_request", "DescribeTransactionsRequest"),
        50: ("describe_user_scram_credentials_request", "DescribeUserScramCredentialsRequest"),
        43: ("elect_leaders_request", "ElectLeadersRequest"),
        26: ("end_txn_request", "EndTxnRequest"),
        1: ("fetch_request", "FetchRequest"),
        10: ("find_coordinator_request", "FindCoordinatorRequest"),
        12: ("heartbeat_request", "HeartbeatRequest"),
        44: ("incremental_alter_configs_request", "IncrementalAlterConfigsRequest"),
        22: ("init_producer_id_request", "InitProducerIdRequest"),
        11: ("join_group_request", "JoinGroupRequest"),
        13: ("leave_group_request", "LeaveGroupRequest"),
        74: ("list_config_resources_request", "ListConfigResourcesRequest"),
        16: ("list_groups_request", "ListGroupsRequest"),
        2: ("list_offsets_request", "ListOffsetsRequest"),
        46: ("list_partition_reassignments_request", "ListPartitionReassignmentsRequest"),
        66: ("list_transactions_request", "ListTransactionsRequest"),
        3: ("metadata_request", "MetadataRequest"),
        8: ("offset_commit_request", "OffsetCommitRequest"),
        47: ("offset_delete_request", "OffsetDeleteRequest"),
        9: ("offset_fetch_request", "OffsetFetchRequest"),
        23: ("offset_for_leader_epoch_request", "OffsetForLeaderEpochRequest"),
        0: ("produce_request", "ProduceRequest"),
        36: ("sasl_authenticate_request", "SaslAuthenticateRequest"),
        17: ("sasl_handshake_request", "SaslHandshakeRequest"),
        14: ("sync_group_request", "SyncGroupRequest"),
        28: ("txn_offset_commit_request", "TxnOffsetCommitRequest"),
        57: ("update_features_request", "UpdateFeaturesRequest"),
        27: ("write_txn_markers_request", "WriteTxnMarkersRequest"),
    }
)

RESPONSES: Mapping[int, Any] = _Index(
    {
        25: ("add_offsets_to_txn_response", "AddOffsetsToTxnResponse"),
        24: ("add_partitions_to_txn_response", "AddPartitionsToTxnResponse"),
        49: ("alter_client_quotas_response", "AlterClientQuotasResponse"),
        33: ("alter_configs_response", "AlterConfigsResponse"),
        45: ("alter_partition_reassignments_response", "AlterPartitionReassignmentsResponse"),
        34: ("alter_replica_log_dirs_response", "AlterReplicaLogDirsResponse"),
        51: ("alter_user_scram_credentials_response", "AlterUserScramCredentialsResponse"),
        18: ("api_versions_response", "ApiVersionsResponse"),
        30: ("create_acls_response", "CreateAclsResponse"),
        37: ("create_partitions_response", "CreatePartitionsResponse"),
        19: ("create_topics_response", "CreateTopicsResponse"),
        31: ("delete_acls_response", "DeleteAclsResponse"),
        42: ("delete_groups_response", "DeleteGroupsResponse"),
        21: ("delete_records_response", "DeleteRecordsResponse"),
        20: ("delete_topics_response", "DeleteTopicsResponse"),
        29: ("describe_acls_response", "DescribeAclsResponse"),
        48: ("describe_client_quotas_response", "DescribeClientQuotasResponse"),
        60: ("describe_cluster_response", "DescribeClusterResponse"),
        32: ("describe_configs_response", "DescribeConfigsResponse"),
        15: ("describe_groups_response", "DescribeGroupsResponse"),
        35: ("describe_log_dirs_response", "DescribeLogDirsResponse"),
        61: ("describe_producers_response", "DescribeProducersResponse"),
        55: ("describe_quorum_response", "DescribeQuorumResponse"),
        75: ("describe_topic_partitions_response", "DescribeTopicPartitionsResponse"),
        65: ("describe_transactions_response", "DescribeTransactionsResponse"),
        50: ("describe_user_scram_credentials_response", "DescribeUserScramCredentialsResponse"),
        43: ("elect_leaders_response", "ElectLeadersResponse"),
        26: ("end_txn_response", "EndTxnResponse"),
        1: ("fetch_response", "FetchResponse"),
        10: ("find_coordinator_response", "FindCoordinatorResponse"),
        12: ("heartbeat_response", "HeartbeatResponse"),
        44: ("incremental_alter_configs_response", "IncrementalAlterConfigsResponse"),
        22: ("init_producer_id_response", "InitProducerIdResponse"),
        11: ("join_group_response", "JoinGroupResponse"),
        13: ("leave_group_response", "LeaveGroupResponse"),
        74: ("list_config_resources_response", "ListConfigResourcesResponse"),
        16: ("list_groups_response", "ListGroupsResponse"),
        2: ("list_offsets_response", "ListOffsetsResponse"),
        46: ("list_partition_reassignments_response", "ListPartitionReassignmentsResponse"),
        66: ("list_transactions_response", "ListTransactionsResponse"),
        3: ("metadata_response", "MetadataResponse"),
        8: ("offset_commit_response", "OffsetCommitResponse"),
        47: ("offset_delete_response", "OffsetDeleteResponse"),
        9: ("offset_fetch_response", "OffsetFetchResponse"),
        23: ("offset_for_leader_epoch_response", "OffsetForLeaderEpochResponse"),
        0: ("produce_response", "ProduceResponse"),
        36: ("sasl_authenticate_response", "SaslAuthenticateResponse"),
        17: ("sasl_handshake_response", "SaslHandshakeResponse"),
        14: ("sync_group_response", "SyncGroupResponse"),
        28: ("txn_offset_commit_response", "TxnOffsetCommitResponse"),
        57: ("update_features_response", "UpdateFeaturesResponse"),
        27: ("write_txn_markers_response", "WriteTxnMarkersResponse"),
    }
)
