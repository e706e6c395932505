"""Primary election through the group coordinator, as Confluent's registry and Karapace do.

Every registry node joins one classic group (`schema-registry`, protocol type `sr`) with
its URL in the member metadata; the group's leader names the primary (itself, if it may
be primary) in the assignment every member receives. A node that loses its group session
(a rebalance, the coordinator gone) stops writing until the next assignment, so two nodes
never both assign ids for long; the new primary catches up with `_schemas` before deciding.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.heartbeat_request import HeartbeatRequest
from moldau.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from moldau.protocol.messages.leave_group_request import LeaveGroupRequest
from moldau.protocol.messages.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from moldau.security.client import ClientSecurity

log = logging.getLogger(__name__)

GROUP_ID = "schema-registry"  # Confluent's schema.registry.group.id default
PROTOCOL_TYPE = "sr"
PROTOCOL = "v0"
SESSION_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_S = 1.0
RETRY_S = 0.5
JOIN_VERSION, SYNC_VERSION, HEARTBEAT_VERSION, FIND_VERSION, LEAVE_VERSION = 5, 3, 3, 2, 1


class GroupError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"group error {code}")
        self.code = code


def member_metadata(url: str, eligible: bool) -> bytes:
    return json.dumps({"version": 1, "url": url, "master_eligibility": eligible}).encode()


def assign(leader: str, members: dict[str, bytes]) -> bytes:
    """The assignment the group leader sends: the leader itself is primary if eligible,
    else the eligible member with the smallest URL (none: no primary)."""
    identities: dict[str, dict[str, Any]] = {}
    for member_id, raw in members.items():
        try:
            identity = json.loads(raw)
        except ValueError:
            continue
        if isinstance(identity, dict) and identity.get("master_eligibility"):
            identities[member_id] = identity
    chosen = leader if leader in identities else None
    if chosen is None and identities:
        chosen = min(identities, key=lambda m: str(identities[m].get("url")))
    return json.dumps(
        {
            "version": 1,
            "error": 0,
            "master": chosen,
            "master_identity": identities.get(chosen) if chosen else None,
        }
    ).encode()


@dataclass
class Assignment:
    primary_url: str | None
    is_primary: bool


class PrimaryElection:
    """This node's view of who the primary is, kept current by `run()`."""

    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        url: str,
        eligible: bool = True,
        group_id: str = GROUP_ID,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.url = url
        self.eligible = eligible
        self.group_id = group_id
        self.assignment = Assignment(None, False)
        self.elected = asyncio.Event()
        self._member_id = ""
        self._client = NetworkClient(
            "moldau-schema-registry", request_timeout_ms=30_000, security=security
        )

    def is_primary(self) -> bool:
        return self.assignment.is_primary

    def primary_url(self) -> str | None:
        return self.assignment.primary_url

    async def run(self) -> None:
        """Stay in the group until cancelled, rejoining after every error."""
        try:
            while True:
                try:
                    coordinator = await self._find_coordinator()
                    generation = await self._join(coordinator)
                    await self._heartbeat(coordinator, generation)
                except (ConnectionError, TimeoutError, GroupError) as e:
                    self._lost(e)
                    await asyncio.sleep(RETRY_S)
        finally:
            await self._leave()
            self._client.close()

    def _lost(self, error: Exception) -> None:
        if isinstance(error, GroupError) and error.code == ErrorCode.UNKNOWN_MEMBER_ID:
            self._member_id = ""
        if self.assignment.primary_url is not None:
            log.info("schema registry: left the primary election (%s), rejoining", error)
        self.assignment = Assignment(None, False)
        self.elected.clear()

    async def _find_coordinator(self) -> tuple[str, int]:
        error: Exception = ConnectionError("no bootstrap server")
        for address in self.bootstrap:
            try:
                answer = await self._client.send(
                    address, FindCoordinatorRequest(key=self.group_id, key_type=0), FIND_VERSION
                )
            except (ConnectionError, TimeoutError) as e:
                error = e
                continue
            if answer.error_code:
                raise GroupError(answer.error_code)
            return answer.host, answer.port
        raise error

    async def _join(self, coordinator: tuple[str, int]) -> int:
        while True:
            joined = await self._client.send(
                coordinator,
                JoinGroupRequest(
                    group_id=self.group_id,
                    session_timeout_ms=SESSION_TIMEOUT_MS,
                    rebalance_timeout_ms=SESSION_TIMEOUT_MS,
                    member_id=self._member_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=[
                        JoinGroupRequestProtocol(PROTOCOL, member_metadata(self.url, self.eligible))
                    ],
                ),
                JOIN_VERSION,
                timeout_ms=SESSION_TIMEOUT_MS * 2 + 5_000,
            )
            if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self._member_id = joined.member_id
                continue
            if joined.error_code:
                raise GroupError(joined.error_code)
            self._member_id = joined.member_id
            break
        assignments = []
        if joined.leader == joined.member_id:
            assignment = assign(joined.leader, {m.member_id: m.metadata for m in joined.members})
            assignments = [
                SyncGroupRequestAssignment(m.member_id, assignment) for m in joined.members
            ]
        synced = await self._client.send(
            coordinator,
            SyncGroupRequest(
                group_id=self.group_id,
                generation_id=joined.generation_id,
                member_id=self._member_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=PROTOCOL,
                assignments=assignments,
            ),
            SYNC_VERSION,
        )
        if synced.error_code:
            raise GroupError(synced.error_code)
        decided = json.loads(synced.assignment or b"{}")
        identity = decided.get("master_identity") or {}
        self.assignment = Assignment(identity.get("url"), decided.get("master") == self._member_id)
        log.info(
            "schema registry: generation %d, primary %s%s",
            joined.generation_id,
            self.assignment.primary_url,
            " (this node)" if self.assignment.is_primary else "",
        )
        if self.assignment.primary_url is not None:
            self.elected.set()
        return int(joined.generation_id)

    async def _heartbeat(self, coordinator: tuple[str, int], generation: int) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            answer = await self._client.send(
                coordinator,
                HeartbeatRequest(
                    group_id=self.group_id, generation_id=generation, member_id=self._member_id
                ),
                HEARTBEAT_VERSION,
            )
            if answer.error_code:
                raise GroupError(answer.error_code)

    async def _leave(self) -> None:
        if not self._member_id:
            return
        try:
            coordinator = await self._find_coordinator()
            await self._client.send(
                coordinator,
                LeaveGroupRequest(group_id=self.group_id, member_id=self._member_id),
                LEAVE_VERSION,
                timeout_ms=3_000,
            )
        except (ConnectionError, TimeoutError, GroupError):
            pass  # the session timeout removes it
