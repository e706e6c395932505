"""A fake-clock harness that drives the pure group coordinator like the asyncio adapter would."""

from __future__ import annotations

import itertools
import struct

import pytest

from moldau.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupResult,
    MemberIdentity,
    OffsetCommit,
    OffsetsRecord,
    SyncGroupResult,
)
from moldau.protocol.errors import ErrorCode


def subscription(*topics: str, version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription as the Java client encodes it (v0 or v1)."""
    out = struct.pack(">hi", version, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        out += struct.pack(">i", 0)
    return out


SUB = subscription("t1")


class Harness:
    """Owns the clock; collects every completion (at most once per id) and every record."""

    def __init__(self, **config: int) -> None:
        self.now = 1_000_000
        self.coordinator = GroupCoordinator(GroupConfig(**config), now_ms=self.now)
        self.completed: dict[int, JoinGroupResult | SyncGroupResult] = {}
        self.records: list[OffsetsRecord] = []
        self._ids = itertools.count()

    def _absorb(self, effects) -> None:
        for request_id, result in effects.completions:
            assert request_id not in self.completed, f"request {request_id} answered twice"
            self.completed[request_id] = result
        self.records += effects.records

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer that falls due on the way, in order."""
        target = self.now + ms
        while self.coordinator.next_timer_ms() <= target:
            self.now = max(self.now, self.coordinator.next_timer_ms())
            self._absorb(self.coordinator.tick(self.now))
        self.now = target

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        client: str = "client",
        protocols: tuple[tuple[str, bytes], ...] = (("range", SUB),),
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        version: int = 5,
        topics=None,
    ) -> int:
        request_id = next(self._ids)
        extra = {} if topics is None else {"topics": topics}
        self._absorb(
            self.coordinator.join_group(
                request_id,
                self.now,
                group_id=group,
                member_id=member_id,
                group_instance_id=instance,
                client_id=client,
                client_host="/127.0.0.1",
                session_timeout_ms=session,
                rebalance_timeout_ms=rebalance,
                protocol_type=protocol_type,
                protocols=protocols,
                require_known_member_id=version >= 4 and instance is None,
                **extra,
            )
        )
        return request_id

    def new_member(self, **kwargs) -> tuple[str, int]:
        """KIP-394 handshake: MEMBER_ID_REQUIRED, then rejoin with the given id."""
        first = self.completed[self.join(**kwargs)]
        assert first.error is ErrorCode.MEMBER_ID_REQUIRED
        return first.member_id, self.join(first.member_id, **kwargs)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        request_id = next(self._ids)
        self._absorb(
            self.coordinator.sync_group(
                request_id,
                self.now,
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
                protocol_name=protocol_name,
                assignments=assignments or {},
            )
        )
        return request_id

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> ErrorCode:
        return self.coordinator.heartbeat(
            self.now,
            group_id=group,
            member_id=member_id,
            generation_id=generation,
            group_instance_id=instance,
        )

    def leave(self, *members: MemberIdentity, group: str = "g") -> list[ErrorCode]:
        error, errors, effects = self.coordinator.leave_group(self.now, group, members)
        assert error is ErrorCode.NONE
        self._absorb(effects)
        return errors

    def commit(
        self,
        member_id: str,
        generation: int,
        *offsets: OffsetCommit,
        group: str = "g",
        instance: str | None = None,
        retention: int = -1,
    ) -> dict[tuple[str, int], ErrorCode]:
        results, effects = self.coordinator.offsets.commit_offsets(
            self.now,
            group_id=group,
            member_id=member_id,
            generation_id=generation,
            group_instance_id=instance,
            offsets=offsets,
            retention_time_ms=retention,
        )
        self._absorb(effects)
        return results

    def state(self, group: str = "g") -> str:
        return self.coordinator.describe_group(group).state

    def stable_group(self, n: int, **kwargs) -> tuple[list[str], int]:
        """n dynamic members joined within the initial delay, synced and Stable."""
        members, requests = zip(*(self.new_member(**kwargs) for _ in range(n)), strict=True)
        while requests[0] not in self.completed:  # joins during the delay extend it
            self.advance(self.coordinator.config.group_initial_rebalance_delay_ms)
        results = [self.completed[r] for r in requests]
        generation = results[0].generation_id
        leader = results[0].leader
        syncs = [
            self.sync(m, generation, {x: x.encode() for x in members} if m == leader else None)
            for m in members
        ]
        assert all(self.completed[s].error is ErrorCode.NONE for s in syncs)
        assert self.state() == "Stable"
        return list(members), generation


@pytest.fixture
def h() -> Harness:
    return Harness()


@pytest.fixture(scope="session")
def make_harness():
    return Harness
