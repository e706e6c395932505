"""Share sessions (KIP-932): the partitions a share consumer fetches, kept between its
ShareFetch requests so that each request names only what changed.

A session belongs to a (group, member). Epoch 0 opens it (replacing an older one), each
later request carries the next epoch (ShareFetch and ShareAcknowledge alike), -1 closes it.
A request with no session answers SHARE_SESSION_NOT_FOUND, one with the wrong epoch
INVALID_SHARE_SESSION_EPOCH; the client then opens a new session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = 0x7FFFFFFF

TopicIdPartition = tuple[bytes, int]


@dataclass(slots=True)
class ShareSession:
    next_epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


class ShareSessionCache:
    def __init__(self, max_sessions: int = 1000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def update(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition] = (),
        forgotten: Iterable[TopicIdPartition] = (),
    ) -> tuple[ErrorCode, ShareSession | None]:
        """Apply one request's session change: the session to serve, or the error.
        A closing request (-1) gets the session it closes (its acknowledgements still
        apply), which is gone afterwards."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            if key not in self._sessions and len(self._sessions) >= self.max_sessions:
                return ErrorCode.SHARE_SESSION_NOT_FOUND, None
            session = self._sessions[key] = ShareSession()
        else:
            found = self._sessions.get(key)
            if found is None:
                return ErrorCode.SHARE_SESSION_NOT_FOUND, None
            if epoch == CLOSE_EPOCH:
                del self._sessions[key]
            elif epoch != found.next_epoch:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            else:
                found.next_epoch = 1 if epoch == _MAX_EPOCH else epoch + 1
            session = found
        for tp in added:
            session.partitions[tp] = None
        for tp in forgotten:
            session.partitions.pop(tp, None)
        return ErrorCode.NONE, session

    def remove(self, group_id: str, member_id: str) -> bool:
        return self._sessions.pop((group_id, member_id), None) is not None
