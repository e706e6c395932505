"""Persistent election state: Kafka's `quorum-state` file (QuorumStateData as JSON).

Every durable transition (new epoch, a vote, a known leader) is written before the step's
effects leave the node, so a restarted voter never votes twice in one epoch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

QUORUM_STATE_FILE = "quorum-state"
UNKNOWN_LEADER_ID = -1
NOT_VOTED = -1


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """Survives a simulated crash because the simulation keeps the object across restarts."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1


class QuorumStateFileError(ValueError):
    """The quorum-state file is unreadable; the node must not guess its vote."""


class FileQuorumStateStore:
    """`<metadata log dir>/quorum-state`, replaced atomically (write tmp, fsync, rename).

    Written as QuorumStateData version 0 (static voters: kraft.version 0), with
    `data_version`, in Kafka's JSON field names; versions 0 and 1 are read.
    """

    def __init__(self, path: Path, voters: frozenset[int]) -> None:
        self.path = path
        self._voters = voters

    def read(self) -> ElectionState | None:
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text.splitlines()[0])
            version = data["data_version"]
            if version not in (0, 1):
                raise QuorumStateFileError(f"{self.path}: unsupported data_version {version}")
            leader, voted = int(data["leaderId"]), int(data["votedId"])
            return ElectionState(
                epoch=int(data["leaderEpoch"]),
                leader_id=None if leader == UNKNOWN_LEADER_ID else leader,
                voted_id=None if voted == NOT_VOTED else voted,
            )
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, QuorumStateFileError):
                raise
            raise QuorumStateFileError(f"{self.path}: corrupt quorum state: {exc}") from None

    def write(self, state: ElectionState) -> None:
        data = {
            "clusterId": "",
            "leaderId": UNKNOWN_LEADER_ID if state.leader_id is None else state.leader_id,
            "leaderEpoch": state.epoch,
            "votedId": NOT_VOTED if state.voted_id is None else state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": voter} for voter in sorted(self._voters)],
            "data_version": 0,
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, separators=(",", ":")))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
