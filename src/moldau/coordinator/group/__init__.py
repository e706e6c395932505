"""Consumer group coordinator: Kafka's classic group protocol as a pure state machine."""

from .config import GroupConfig
from .coordinator import GroupCoordinator
from .group import Group, GroupState
from .partitioning import partition_for_group
from .results import (
    Completion,
    Effects,
    GroupDescription,
    GroupOverview,
    JoinGroupMember,
    JoinGroupResult,
    MemberDescription,
    MemberIdentity,
    OffsetCommit,
    OffsetsRecord,
    PartitionOffset,
    SyncGroupResult,
)

__all__ = [
    "Completion",
    "Effects",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupOverview",
    "GroupState",
    "JoinGroupMember",
    "JoinGroupResult",
    "MemberDescription",
    "MemberIdentity",
    "OffsetCommit",
    "OffsetsRecord",
    "PartitionOffset",
    "SyncGroupResult",
    "partition_for_group",
]
