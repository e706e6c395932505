"""Generated index of coordinator record codecs by record type. Do not edit."""

from __future__ import annotations

from typing import Any

from moldau.protocol.coordinator_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from moldau.protocol.coordinator_records.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from moldau.protocol.coordinator_records.consumer_group_member_metadata_key import (
    ConsumerGroupMemberMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue,
)
from moldau.protocol.coordinator_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from moldau.protocol.coordinator_records.consumer_group_metadata_value import (
    ConsumerGroupMetadataValue,
)
from moldau.protocol.coordinator_records.consumer_group_partition_metadata_key import (
    ConsumerGroupPartitionMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_partition_metadata_value import (
    ConsumerGroupPartitionMetadataValue,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from moldau.protocol.coordinator_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from moldau.protocol.coordinator_records.group_metadata_key import GroupMetadataKey
from moldau.protocol.coordinator_records.group_metadata_value import GroupMetadataValue
from moldau.protocol.coordinator_records.offset_commit_key import OffsetCommitKey
from moldau.protocol.coordinator_records.offset_commit_value import OffsetCommitValue
from moldau.protocol.coordinator_records.share_group_current_member_assignment_key import (
    ShareGroupCurrentMemberAssignmentKey,
)
from moldau.protocol.coordinator_records.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue,
)
from moldau.protocol.coordinator_records.share_group_member_metadata_key import (
    ShareGroupMemberMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_member_metadata_value import (
    ShareGroupMemberMetadataValue,
)
from moldau.protocol.coordinator_records.share_group_metadata_key import ShareGroupMetadataKey
from moldau.protocol.coordinator_records.share_group_metadata_value import ShareGroupMetadataValue
from moldau.protocol.coordinator_records.share_group_partition_metadata_key import (
    ShareGroupPartitionMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_partition_metadata_value import (
    ShareGroupPartitionMetadataValue,
)
from moldau.protocol.coordinator_records.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_member_key import (
    ShareGroupTargetAssignmentMemberKey,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_metadata_key import (
    ShareGroupTargetAssignmentMetadataKey,
)
from moldau.protocol.coordinator_records.share_group_target_assignment_metadata_value import (
    ShareGroupTargetAssignmentMetadataValue,
)
from moldau.protocol.coordinator_records.transaction_log_key import TransactionLogKey
from moldau.protocol.coordinator_records.transaction_log_value import TransactionLogValue
from moldau.protocol.coordinator_records.share_snapshot_key import ShareSnapshotKey
from moldau.protocol.coordinator_records.share_snapshot_value import ShareSnapshotValue
from moldau.protocol.coordinator_records.share_update_key import ShareUpdateKey
from moldau.protocol.coordinator_records.share_update_value import ShareUpdateValue

GROUP_RECORD_TYPES: dict[int, Any] = {
    0: (OffsetCommitKey, OffsetCommitValue),
    1: (OffsetCommitKey, OffsetCommitValue),
    2: (GroupMetadataKey, GroupMetadataValue),
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    9: (ShareGroupPartitionMetadataKey, ShareGroupPartitionMetadataValue),
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
}

TRANSACTION_RECORD_TYPES: dict[int, Any] = {
    0: (TransactionLogKey, TransactionLogValue),
}

SHARE_RECORD_TYPES: dict[int, Any] = {
    0: (ShareSnapshotKey, ShareSnapshotValue),
    1: (ShareUpdateKey, ShareUpdateValue),
}
