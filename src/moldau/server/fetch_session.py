"""Incremental fetch sessions (KIP-227).

A consumer or follower that fetches many partitions opens a session with a full fetch
(session id 0, epoch 0); later fetches name only the partitions whose fetch offset or
limits changed (and the ones to forget), and the response carries only partitions with
something new: records, an error, or a moved high watermark, last stable offset or log
start offset. That keeps requests and responses small for 1,000 partitions that are
mostly idle. Sessions live in a bounded cache (``max.incremental.fetch.session.cache.slots``)
and the least recently used one is evicted when it is full; a client whose session is
gone gets FETCH_SESSION_ID_NOT_FOUND and starts over with a full fetch, as with Kafka.

As in Kafka, a partition that is answered moves to the end of its session's order, so
under ``max_bytes`` no partition starves.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode
from moldau.replication.replica_manager import FetchRequestPartition, FetchResult

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0

Key = tuple[str, int]


@dataclass(slots=True)
class CachedPartition:
    request: FetchRequestPartition
    # What the client was last told, to answer only what moved since.
    sent_high_watermark: int = -1
    sent_last_stable_offset: int = -1
    sent_log_start_offset: int = -1

    def must_respond(self, result: FetchResult) -> bool:
        """Whether ``result`` tells the client something new; remembers what was sent."""
        changed = (
            result.size > 0
            or result.error != ErrorCode.NONE
            or result.high_watermark != self.sent_high_watermark
            or result.last_stable_offset != self.sent_last_stable_offset
            or result.log_start_offset != self.sent_log_start_offset
        )
        self.sent_high_watermark = result.high_watermark
        self.sent_last_stable_offset = result.last_stable_offset
        self.sent_log_start_offset = result.log_start_offset
        return changed


class FetchSession:
    def __init__(self, session_id: int, partitions: Iterable[FetchRequestPartition]) -> None:
        self.id = session_id
        self.epoch = INITIAL_EPOCH + 1  # the epoch the next incremental fetch must carry
        self.partitions: OrderedDict[Key, CachedPartition] = OrderedDict(
            ((p.topic, p.partition), CachedPartition(p)) for p in partitions
        )

    def update(self, changed: Iterable[FetchRequestPartition], forgotten: Iterable[Key]) -> None:
        for key in forgotten:
            self.partitions.pop(key, None)
        for p in changed:
            key = (p.topic, p.partition)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(p)
            else:
                cached.request = p

    def requests(self) -> list[FetchRequestPartition]:
        return [c.request for c in self.partitions.values()]


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What to read for one Fetch request and how to shape its answer."""

    session_id: int
    partitions: Sequence[FetchRequestPartition]
    session: FetchSession | None = None
    full: bool = False  # a session's first fetch answers every partition
    error: ErrorCode = ErrorCode.NONE

    def select(
        self, results: Sequence[FetchResult]
    ) -> list[tuple[FetchRequestPartition, FetchResult]]:
        """The partitions to answer: all of them, or for an incremental fetch only those
        with news (moved to the end of the session's order)."""
        pairs = list(zip(self.partitions, results, strict=True))
        if self.session is None:
            return pairs
        answered = []
        for p, result in pairs:
            key = (p.topic, p.partition)
            cached = self.session.partitions[key]
            if cached.must_respond(result) or self.full:
                answered.append((p, result))
                if not self.full:
                    self.session.partitions.move_to_end(key)
        return answered


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self._sessions)

    def new_context(
        self,
        session_id: int,
        epoch: int,
        partitions: Sequence[FetchRequestPartition],
        forgotten: Sequence[Key],
    ) -> FetchContext:
        if epoch == FINAL_EPOCH:
            # Sessionless full fetch; a named session is closed.
            self._sessions.pop(session_id, None)
            return FetchContext(INVALID_SESSION_ID, partitions)
        if epoch == INITIAL_EPOCH:
            self._sessions.pop(session_id, None)
            session = self._create(partitions)
            if session is None:
                return FetchContext(INVALID_SESSION_ID, partitions)
            return FetchContext(session.id, session.requests(), session, full=True)
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext(INVALID_SESSION_ID, [], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            return FetchContext(INVALID_SESSION_ID, [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.update(partitions, forgotten)
        session.epoch += 1
        self._sessions.move_to_end(session_id)
        return FetchContext(session.id, session.requests(), session)

    def _create(self, partitions: Sequence[FetchRequestPartition]) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._sessions.popitem(last=False)  # the least recently used goes
        session_id = self._rng.randint(1, 0x7FFFFFFF)
        while session_id in self._sessions:
            session_id = self._rng.randint(1, 0x7FFFFFFF)
        session = FetchSession(session_id, partitions)
        self._sessions[session_id] = session
        return session
