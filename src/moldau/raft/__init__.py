"""KRaft: the controller quorum's Raft over `__cluster_metadata`, as a pure state machine."""

from moldau.raft.client import (
    Committed,
    Effects,
    LeaderAndEpoch,
    LoadSnapshot,
    NotLeaderError,
    Outbound,
    RaftClient,
    RaftInvariantError,
)
from moldau.raft.config import QuorumConfig, QuorumConfigError, VoterAddress, parse_voters
from moldau.raft.log import LeaderChange, LogAppendInfo, OffsetAndEpoch, RaftLog
from moldau.raft.store import ElectionState, FileQuorumStateStore, MemoryQuorumStateStore

__all__ = [
    "Committed",
    "Effects",
    "ElectionState",
    "FileQuorumStateStore",
    "LeaderAndEpoch",
    "LeaderChange",
    "LoadSnapshot",
    "LogAppendInfo",
    "MemoryQuorumStateStore",
    "NotLeaderError",
    "OffsetAndEpoch",
    "Outbound",
    "QuorumConfig",
    "QuorumConfigError",
    "RaftClient",
    "RaftInvariantError",
    "RaftLog",
    "VoterAddress",
    "parse_voters",
]
