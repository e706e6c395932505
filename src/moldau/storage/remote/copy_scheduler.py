"""What a leader copies to and expires from the remote tier next: pure, clock-driven.

Kafka's RLMCopyTask and RLMExpirationTask decide from the log's state; here that decision
is a plain object stepped by the ``RemoteLogManager`` (which does the IO in worker threads)
and by unit tests with a manual clock:

- ``highest_remote_offset``: where a new leader continues, found from its own leader-epoch
  lineage and the remote metadata (Kafka's findHighestRemoteOffset), so no segment is copied
  twice in one lineage and a leader change resumes where the old leader stopped.
- ``CopyScheduler``: per leader partition, up to ``max_in_flight`` uploads at once (the
  broker's copier pool bounds them all), chosen in offset order and finished (made
  COPY_SEGMENT_FINISHED) strictly in offset order, so the remote tier is always a prefix
  and what it holds is whole; only closed segments whose records all lie below the last
  stable offset; a failed copy abandons the ones after it and is retried after an
  exponential backoff (the store may be down); a finished one lets the next start at once.
- ``remote_segments_to_delete``: total retention (``retention.ms``/``retention.bytes`` over
  both tiers), DeleteRecords (the log start offset) and segments outside the leader's lineage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from moldau.storage.remote.segment import RemoteLogSegmentMetadata


@dataclass(frozen=True, slots=True)
class LocalSegment:
    """What the scheduler needs of one local segment (the last one is the active one)."""

    base_offset: int
    size: int
    max_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class CopyCandidate:
    """A closed local segment to copy: offsets ``base_offset..end_offset`` (inclusive)."""

    base_offset: int
    end_offset: int
    size: int
    max_timestamp: int


def highest_remote_offset(
    epochs: Sequence[tuple[int, int]],
    log_end_offset: int,
    highest_offset_for_epoch: Callable[[int], int | None],
) -> int:
    """The highest offset already copied within this replica's lineage, -1 if none.

    ``epochs`` are the leader-epoch cache entries (epoch, start offset), oldest first. The
    newest epoch with copied data wins, capped at that epoch's end in this lineage: a copy by
    a deposed leader past the point where this replica's log diverged does not count.
    """
    for i in range(len(epochs) - 1, -1, -1):
        epoch = epochs[i][0]
        highest = highest_offset_for_epoch(epoch)
        if highest is not None:
            end = epochs[i + 1][1] if i + 1 < len(epochs) else log_end_offset
            return min(end - 1, highest)
    return -1


class CopyScheduler:
    """The copy decisions of one partition while this broker leads it."""

    def __init__(
        self,
        copied_offset: int,
        now_ms: int,
        *,
        interval_ms: int,
        backoff_ms: int,
        backoff_max_ms: int,
        max_in_flight: int = 1,
    ) -> None:
        self.copied_offset = copied_offset  # highest offset in the remote tier (this lineage)
        self.in_flight: list[CopyCandidate] = []  # in offset order; the first finishes first
        self.failures = 0  # consecutive failed copies
        self._interval_ms = interval_ms
        self._backoff_ms = backoff_ms
        self._backoff_max_ms = backoff_max_ms
        self._max_in_flight = max_in_flight
        self._next_ms = now_ms

    @property
    def next_run_ms(self) -> int:
        """When ``next_copy`` may next find work (copies finishing wake it earlier)."""
        return self._next_ms

    def next_copy(
        self,
        now_ms: int,
        segments: Sequence[LocalSegment],
        last_stable_offset: int,
        local_log_start_offset: int,
    ) -> CopyCandidate | None:
        """The next segment to copy, or None (``max_in_flight`` under way, backing off, or
        nothing closed below the LSO after what is copied or in flight). The segment
        returned is in flight until ``copied`` or ``failed``."""
        if len(self.in_flight) >= self._max_in_flight or now_ms < self._next_ms:
            return None
        after = self.in_flight[-1].end_offset if self.in_flight else self.copied_offset
        start = max(after + 1, local_log_start_offset)
        for segment, following in zip(segments, segments[1:], strict=False):
            if following.base_offset > last_stable_offset:
                break  # records at or above the LSO are not copied yet
            end = following.base_offset - 1
            if end < start or segment.size == 0:
                continue
            candidate = CopyCandidate(segment.base_offset, end, segment.size, segment.max_timestamp)
            self.in_flight.append(candidate)
            return candidate
        if not self.in_flight:
            self._next_ms = now_ms + self._interval_ms
        return None

    def holds(self, candidate: CopyCandidate) -> bool:
        """Still in flight: not abandoned by the failure of a copy before it."""
        return any(c is candidate for c in self.in_flight)

    def copied(self, candidate: CopyCandidate) -> None:
        """The copy finished (COPY_SEGMENT_FINISHED is durable): the next may start. Only
        the first in flight may finish: the remote tier grows as a prefix."""
        if not self.in_flight or self.in_flight[0] is not candidate:
            raise ValueError(f"copy of {candidate} is not the first in flight")
        self.in_flight.pop(0)
        self.copied_offset = max(self.copied_offset, candidate.end_offset)
        self.failures = 0

    def failed(self, candidate: CopyCandidate, now_ms: int) -> None:
        """The copy failed (store down or slow): it and the copies after it are dropped
        (they cannot finish before it) and the first of them is tried again after a
        backoff doubling per consecutive failure up to the max."""
        index = next((i for i, c in enumerate(self.in_flight) if c is candidate), None)
        if index is None:
            raise ValueError(f"copy of {candidate} is not in flight")
        del self.in_flight[index:]
        self.failures += 1
        backoff = min(self._backoff_ms * 2 ** min(self.failures - 1, 30), self._backoff_max_ms)
        self._next_ms = now_ms + backoff


def copy_lag(
    segments: Sequence[LocalSegment], copied_offset: int, last_stable_offset: int
) -> tuple[int, int]:
    """Kafka's RemoteCopyLagBytes / RemoteCopyLagSegments: closed segments below the LSO
    not copied yet."""
    lag_bytes = lag_segments = 0
    for segment, following in zip(segments, segments[1:], strict=False):
        if following.base_offset > last_stable_offset:
            break
        if following.base_offset - 1 > copied_offset:
            lag_bytes += segment.size
            lag_segments += 1
    return lag_bytes, lag_segments


def in_lineage(segment: RemoteLogSegmentMetadata, epochs: Sequence[tuple[int, int]]) -> bool:
    """Kafka's isRemoteSegmentWithinLeaderEpochs: the segment's epochs are in the leader's
    epoch cache (those older than the cache's first entry were cut by the log start offset)
    and each epoch after its first starts where the cache says. A segment copied by a leader
    whose log was later truncated away fails this and is deleted."""
    if not epochs:
        return True
    starts = dict(epochs)
    earliest = epochs[0][0]
    for i, (epoch, start) in enumerate(segment.segment_leader_epochs.items()):
        if epoch not in starts:
            if epoch < earliest:
                continue
            return False
        if i == 0:
            if epoch != earliest and start < starts[epoch]:
                return False
        elif starts[epoch] != start:
            return False
    return True


def remote_segments_to_delete(
    segments: Sequence[RemoteLogSegmentMetadata],
    *,
    now_ms: int,
    log_start_offset: int,
    retention_ms: int,
    retention_bytes: int,
    local_only_bytes: int,
    epochs: Sequence[tuple[int, int]],
) -> list[RemoteLogSegmentMetadata]:
    """Copied segments (oldest first) past total retention, wholly below the log start
    offset (DeleteRecords), or outside this leader's lineage; in offset order.

    ``local_only_bytes``: the local segments not in the remote tier, which count towards
    retention.bytes with the remote ones (Kafka's onlyLocalLogSegmentsSize).
    """
    doomed: list[RemoteLogSegmentMetadata] = []
    remaining = sum(s.segment_size_bytes for s in segments) + local_only_bytes
    over = remaining - retention_bytes if retention_bytes >= 0 else 0
    deadline = now_ms - retention_ms if retention_ms >= 0 else None
    by_time = by_size = True
    for segment in segments:
        expired = False
        if segment.end_offset < log_start_offset or not in_lineage(segment, epochs):
            expired = True
        else:
            by_time = by_time and deadline is not None and segment.max_timestamp_ms < deadline
            by_size = by_size and over >= segment.segment_size_bytes > 0
            expired = by_time or by_size
        if not expired:
            break  # retention removes a prefix: the oldest first
        doomed.append(segment)
        over -= segment.segment_size_bytes
    return doomed
