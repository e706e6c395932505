"""What the group coordinator takes and gives back: request parts, results and effects.

Field names follow the Kafka RPC schemas so handlers can copy them across one to one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from moldau.coordinator.effects import Completion, CoordinatorRecord, Effects, RequestId
from moldau.protocol.errors import ErrorCode

__all__ = ["Completion", "Effects", "RequestId"]

TopicPartition = tuple[str, int]


class JoinGroupMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    """All members' metadata for the leader; empty for followers."""


@dataclass(frozen=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


OffsetsRecord = CoordinatorRecord
"""A `__consumer_offsets` record to append; value None is a tombstone."""


class MemberIdentity(NamedTuple):
    """One entry of LeaveGroup v3+ (v0-2 carry a single member id)."""

    member_id: str
    group_instance_id: str | None = None


class OffsetCommit(NamedTuple):
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


class PartitionOffset(NamedTuple):
    """A fetched offset; offset -1 / leader_epoch -1 / metadata "" when none is committed.
    ``unstable``: a transaction has an offset for it pending (asked with require_stable)."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    unstable: bool = False


class GroupOverview(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
