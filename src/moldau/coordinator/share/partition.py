"""A share-partition (KIP-932): the delivery state of one topic-partition for one share
group, as Kafka's ``SharePartition`` keeps it on the partition leader.

Offsets below the share-partition start offset (SPSO) are done. From the SPSO up to
``next_offset`` (one past the share-partition end offset, SPEO) the records are *in
flight*, each AVAILABLE, ACQUIRED (locked by one member until a deadline), ACKNOWLEDGED or
ARCHIVED, with a delivery count. State is held as runs of offsets with one state each, so
acquiring, acknowledging and expiring work on offset ranges, never record by record: a run
splits only where an acknowledgement or a lock boundary cuts it.

Pure: every call takes the time (``now_ms``) from its caller; nothing here waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from moldau.protocol.errors import ErrorCode
from moldau.stats.counters import ShareMeters


class RecordState(IntEnum):
    """Kafka's record states (their ids are those of the share-group state records)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """ShareFetch/ShareAcknowledge acknowledgement types."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


_ACK_TYPES = frozenset(int(t) for t in AcknowledgeType)
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_STATE = {
    AcknowledgeType.GAP: RecordState.ARCHIVED,
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
}


@dataclass(slots=True)
class Run:
    """Offsets ``first..last`` (inclusive) in one state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    deadline_ms: int = 0  # when an ACQUIRED run's lock expires

    @property
    def size(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class Acquired:
    """A range handed to a member (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """The settings a share-partition obeys (broker configs, per-group overrides)."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000


class SharePartition:
    def __init__(self, start_offset: int, limits: ShareLimits) -> None:
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.limits = limits
        self.runs: list[Run] = []  # contiguous, ascending, from start_offset to next_offset
        self.meters = ShareMeters()  # read by the metrics endpoint

    @classmethod
    def restore(
        cls, start_offset: int, batches: Iterable[tuple[int, int, int, int]], limits: ShareLimits
    ) -> SharePartition:
        """Rebuild from durable state: (first, last, state, delivery count) batches as the
        share coordinator keeps them. Offsets between batches were never delivered; a
        batch in a state a leader never writes (ACQUIRED) is AVAILABLE."""
        sp = cls(start_offset, limits)
        offset = start_offset
        for first, last, state, count in sorted(batches):
            if last < offset:
                continue
            first = max(first, offset)
            if first > offset:
                sp.runs.append(Run(offset, first - 1, RecordState.AVAILABLE))
            done = state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
            sp.runs.append(Run(first, last, RecordState(state if done else 0), count))
            offset = last + 1
        sp.next_offset = offset
        sp._advance()
        return sp

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """(first, last, state, delivery count) of the in-flight runs, as written to the
        share coordinator: an acquisition lock dies with its leader, so an ACQUIRED run
        is written AVAILABLE (with the deliveries it has had)."""
        return [
            (
                r.first,
                r.last,
                0 if r.state == RecordState.ACQUIRED else int(r.state),
                r.delivery_count,
            )
            for r in self.runs
        ]

    # -- reading -------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        """Records between the SPSO and the SPEO (what max.record.locks bounds)."""
        return self.next_offset - self.start_offset

    @property
    def batch_count(self) -> int:
        """Runs of records alike in the window (Kafka's InFlightBatchCount)."""
        return len(self.runs)

    def count(self, state: RecordState) -> int:
        return sum(r.size for r in self.runs if r.state == state)

    def fetch_offset(self) -> int:
        """Where the next acquisition starts: the first AVAILABLE record, else the end."""
        for r in self.runs:
            if r.state == RecordState.AVAILABLE:
                return r.first
        return self.next_offset

    def next_deadline_ms(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.runs if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of one in-flight offset; None outside the window."""
        for r in self.runs:
            if r.first <= offset <= r.last:
                return r.state, r.delivery_count
        return None

    # -- acquiring -----------------------------------------------------------------
    def acquire(
        self, member_id: str, last_offset: int, max_records: int, now_ms: int
    ) -> list[Acquired]:
        """Lock for ``member_id`` the AVAILABLE records up to ``last_offset`` (the last
        offset the caller read from the log), then new records past the SPEO, while fewer
        than ``max_records`` are taken and the in-flight window stays within
        ``max_record_locks``."""
        budget = max_records
        deadline = now_ms + self.limits.record_lock_duration_ms
        taken: list[Acquired] = []
        i = 0
        while i < len(self.runs) and budget > 0:
            r = self.runs[i]
            if r.first > last_offset:
                break
            if r.state == RecordState.AVAILABLE:
                end = min(r.last, last_offset, r.first + budget - 1)
                self._split(end + 1)
                r = self.runs[i]
                r.state = RecordState.ACQUIRED
                r.delivery_count += 1
                r.member_id = member_id
                r.deadline_ms = deadline
                taken.append(Acquired(r.first, r.last, r.delivery_count))
                self.meters.batch_records.observe(r.size)
                budget -= r.size
            i += 1
        room = self.limits.max_record_locks - self.in_flight
        end = min(last_offset, self.next_offset + min(budget, room) - 1)
        if end >= self.next_offset:
            run = Run(self.next_offset, end, RecordState.ACQUIRED, 1, member_id, deadline)
            self.runs.append(run)
            self.next_offset = end + 1
            taken.append(Acquired(run.first, run.last, 1))
            self.meters.batch_records.observe(run.size)
        return taken

    # -- acknowledging -------------------------------------------------------------
    def acknowledge(self, member_id: str, first: int, last: int, types: list[int]) -> ErrorCode:
        """One AcknowledgementBatch: one type for the whole range, or one per offset.
        Every offset must be ACQUIRED by ``member_id`` (else INVALID_RECORD_STATE and
        nothing changes)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        spans = list(_type_spans(first, last, types))
        if any(t not in _ACK_TYPES for _, _, t in spans):
            return ErrorCode.INVALID_REQUEST
        for a, b, t in spans:
            if t != AcknowledgeType.GAP and not self._held_by(member_id, a, b):
                return ErrorCode.INVALID_RECORD_STATE
        for a, b, t in spans:
            if t == AcknowledgeType.GAP and not self._held_by(member_id, a, b):
                continue  # a gap outside the window or not ours: nothing to record
            self.meters.acknowledged[t] += b - a + 1
            for r in self._cut(a, b):
                if t == AcknowledgeType.RELEASE:
                    self._make_available(r)
                else:
                    r.state = _ACK_STATE[AcknowledgeType(t)]
                    r.member_id = ""
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> int:
        """Give back everything ``member_id`` holds (it left, or its session closed)."""
        return self._release(lambda r: r.member_id == member_id)

    def expire_locks(self, now_ms: int) -> int:
        """Release the records whose acquisition lock ran out; how many records."""
        expired = self._release(lambda r: r.deadline_ms <= now_ms)
        self.meters.lock_timeouts += expired
        return expired

    def reset(self, start_offset: int) -> None:
        """Start over at ``start_offset`` (AlterShareGroupOffsets, an offset out of range)."""
        self.start_offset = self.next_offset = start_offset
        self.runs.clear()

    # -- internals -----------------------------------------------------------------
    def _release(self, which: Callable[[Run], bool]) -> int:
        released = 0
        for r in self.runs:
            if r.state == RecordState.ACQUIRED and which(r):
                self._make_available(r)
                released += r.size
        if released:
            self._advance()
        return released

    def _make_available(self, r: Run) -> None:
        """A released record goes back to AVAILABLE, or is archived once it was delivered
        ``delivery_count_limit`` times (a poison record)."""
        limit = self.limits.delivery_count_limit
        r.state = RecordState.ARCHIVED if r.delivery_count >= limit else RecordState.AVAILABLE
        r.member_id = ""
        r.deadline_ms = 0

    def _held_by(self, member_id: str, first: int, last: int) -> bool:
        if first < self.start_offset or last >= self.next_offset:
            return False
        return all(
            r.state == RecordState.ACQUIRED and r.member_id == member_id
            for r in self._overlapping(first, last)
        )

    def _overlapping(self, first: int, last: int) -> Iterator[Run]:
        for r in self.runs:
            if r.last >= first and r.first <= last:
                yield r

    def _cut(self, first: int, last: int) -> list[Run]:
        """The runs exactly covering ``first..last``, split at both ends."""
        self._split(first)
        self._split(last + 1)
        return list(self._overlapping(first, last))

    def _split(self, offset: int) -> None:
        """Make ``offset`` the first offset of a run (if it falls inside one)."""
        for i, r in enumerate(self.runs):
            if r.first < offset <= r.last:
                tail = Run(offset, r.last, r.state, r.delivery_count, r.member_id, r.deadline_ms)
                r.last = offset - 1
                self.runs.insert(i + 1, tail)
                return

    def _advance(self) -> None:
        """Move the SPSO past finished records and merge neighbouring runs alike."""
        runs = self.runs
        done = 0
        while done < len(runs) and runs[done].state in _DONE:
            done += 1
        if done:
            self.start_offset = runs[done - 1].last + 1
            del runs[:done]
        merged: list[Run] = []
        for r in runs:
            p = merged[-1] if merged else None
            if (
                p is not None
                and p.state == r.state
                and p.delivery_count == r.delivery_count
                and p.member_id == r.member_id
                and p.deadline_ms == r.deadline_ms
            ):
                p.last = r.last
            else:
                merged.append(r)
        self.runs = merged


def _type_spans(first: int, last: int, types: list[int]) -> Iterable[tuple[int, int, int]]:
    """(first, last, type) runs of an acknowledgement batch's per-offset types."""
    if len(types) == 1:
        yield first, last, types[0]
        return
    start = first
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[i - 1]:
            yield start, first + i - 1, types[i - 1]
            start = first + i
