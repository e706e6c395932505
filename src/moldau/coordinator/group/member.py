"""A member of a classic group (Kafka's MemberMetadata)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .results import RequestId


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    """(name, metadata) in the member's order of preference."""
    assignment: bytes = b""
    join_request: RequestId | None = None
    """The parked JoinGroup, answered when the join phase completes."""
    sync_request: RequestId | None = None
    """The parked SyncGroup, answered when the leader's assignment arrives."""
    is_new: bool = False
    """Joined in the current rebalance: expires on the new-member timeout, not its session."""

    @property
    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol: str) -> bytes:
        return next(data for name, data in self.protocols if name == protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)
