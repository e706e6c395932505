"""Counters the broker's hooks update: plain ints and bucket lists, no locks, no registry.

Each object is written by one thread (the event loop; the log cleaner's thread for
:class:`CleanerStats`) once per request, batch or fetch response, never per record. The
metrics endpoint copies them on the event loop when Prometheus scrapes
(:mod:`moldau.metrics.snapshot`), so nothing here needs to be thread-safe.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol


class Histogram:
    """Counts per bucket (``value <= bound``; the last bucket is +Inf) and their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def snapshot(self) -> HistogramSnapshot:
        return HistogramSnapshot(self.bounds, tuple(self.counts), self.sum)


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    bounds: tuple[float, ...]
    counts: tuple[int, ...]  # per bucket, not cumulative
    sum: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def plus(self, other: HistogramSnapshot) -> HistogramSnapshot:
        """Both histograms' observations (same bounds)."""
        counts = tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        return HistogramSnapshot(self.bounds, counts, self.sum + other.sum)


class _TopicCounters:
    __slots__ = ("messages_in", "bytes_in", "bytes_out", "share_requests")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        # ShareFetch, failed ShareFetch, ShareAcknowledge, failed ShareAcknowledge requests
        self.share_requests = [0, 0, 0, 0]

    def copy(self) -> TopicCounts:
        return TopicCounts(
            self.messages_in, self.bytes_in, self.bytes_out, tuple(self.share_requests)
        )


@dataclass(frozen=True, slots=True)
class TopicCounts:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    share_requests: tuple[int, ...] = (0, 0, 0, 0)  # as _TopicCounters.share_requests


class _Topical(Protocol):
    @property
    def topic(self) -> str: ...


class _Sized(Protocol):
    @property
    def size(self) -> int: ...


class _Registration(Protocol):
    @property
    def leader_epoch(self) -> int: ...

    @property
    def isr(self) -> Sequence[int]: ...


class _LocalReplica(_Registration, Protocol):
    @property
    def is_leader(self) -> bool: ...


class TopicStats:
    """Kafka's BrokerTopicStats: messages and bytes in (leader appends), bytes out
    (consumer fetches), per topic and for all topics; replication traffic (bytes a
    follower appends, bytes sent to followers) apart."""

    def __init__(self) -> None:
        self.topics: dict[str, _TopicCounters] = {}
        self.all = _TopicCounters()
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0

    def _topic(self, topic: str) -> _TopicCounters:
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = _TopicCounters()
        return counters

    def appended(self, topic: str, size: int, base_offset: int, last_offset: int) -> None:
        """A leader appended ``size`` bytes of batches holding offsets base..last."""
        messages = last_offset - base_offset + 1
        counters = self._topic(topic)
        counters.messages_in += messages
        counters.bytes_in += size
        self.all.messages_in += messages
        self.all.bytes_in += size

    def replicated(self, size: int) -> None:
        """A follower appended ``size`` bytes fetched from its leader."""
        self.replication_bytes_in += size

    def fetched(
        self, follower: bool, partitions: Sequence[_Topical], results: Sequence[_Sized]
    ) -> None:
        """A fetch response carries ``results`` (record bytes) for ``partitions``."""
        if follower:
            self.replication_bytes_out += sum(r.size for r in results)
            return
        for p, r in zip(partitions, results, strict=True):
            size = r.size
            if size:
                self._topic(p.topic).bytes_out += size
                self.all.bytes_out += size

    def share_requests(
        self, acknowledgement: bool, topics: Collection[str], failed: Collection[str]
    ) -> None:
        """A ShareFetch (or, with ``acknowledgement``, acknowledgements: a ShareAcknowledge
        or those a ShareFetch carries) naming ``topics``; ``failed``: those where a
        partition answered an error. Each topic counts once per request, as in Kafka."""
        total = 2 if acknowledgement else 0
        for topic in topics:
            self._topic(topic).share_requests[total] += 1
            self.all.share_requests[total] += 1
        for topic in failed:
            self._topic(topic).share_requests[total + 1] += 1
            self.all.share_requests[total + 1] += 1

    def retain(self, topics: Collection[str]) -> None:
        """Forget deleted topics (the all-topics totals keep what they counted)."""
        for gone in [t for t in self.topics if t not in topics]:
            del self.topics[gone]

    def snapshot(self) -> tuple[dict[str, TopicCounts], TopicCounts, tuple[int, int]]:
        """Per topic, all topics, and replication bytes (in, out)."""
        return (
            {topic: c.copy() for topic, c in self.topics.items()},
            self.all.copy(),
            (self.replication_bytes_in, self.replication_bytes_out),
        )


class IsrStats:
    """Kafka's IsrShrinksPerSec / IsrExpandsPerSec, counted by the leader when a new
    registration of its partition (same leader epoch) removes or adds in-sync replicas."""

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0

    def leader_update(self, partition: _LocalReplica, update: _Registration) -> None:
        if partition.is_leader and partition.leader_epoch == update.leader_epoch:
            old, new = set(partition.isr), set(update.isr)
            self.shrinks += not old <= new
            self.expands += not new <= old


class GroupStats:
    """Group coordinator counters shared by all its shards (they outlive a shard)."""

    def __init__(self) -> None:
        self.completed_rebalances = 0


# InFlightBatchMessageCount's buckets: records per acquired batch (a fetch's max.poll.records
# is 500 by default; group.share.partition.max.record.locks bounds a batch at 10000).
SHARE_BATCH_RECORD_BOUNDS = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)


class ShareMeters:
    """Kafka's meters of one share-partition (KIP-1103), counted per range acquired,
    acknowledged or expired, never per record: records acknowledged per acknowledgement
    type (RecordAcknowledgementsPerSec), records whose acquisition lock ran out
    (AcquisitionLockTimeoutPerSec) and records per acquired batch
    (InFlightBatchMessageCount)."""

    __slots__ = ("acknowledged", "lock_timeouts", "batch_records")

    def __init__(self) -> None:
        self.acknowledged = [0, 0, 0, 0]  # records, indexed by acknowledgement type (0: gap)
        self.lock_timeouts = 0
        self.batch_records = Histogram(SHARE_BATCH_RECORD_BOUNDS)


class CleanerStats:
    """The log cleaner's last pass over the logs: when it ended, how long it took, and how
    many partitions it has given up on (uncleanable until a restart)."""

    def __init__(self) -> None:
        self.last_run_end_ms = int(time.time() * 1000)  # Kafka starts counting at start-up
        self.last_run_seconds = 0.0
        self.uncleanable_partitions = 0

    def ran(self, seconds: float, uncleanable_partitions: int) -> None:
        self.last_run_seconds = seconds
        self.last_run_end_ms = int(time.time() * 1000)
        self.uncleanable_partitions = uncleanable_partitions


@dataclass
class RemoteStorageStats:
    """Kafka's remote storage metrics of this broker (BrokerTopicMetrics names)."""

    copy_bytes: int = 0  # RemoteCopyBytesPerSec
    copy_requests: int = 0  # RemoteCopyRequestsPerSec
    failed_copy_requests: int = 0  # FailedRemoteCopyRequestsPerSec
    fetch_bytes: int = 0  # RemoteFetchBytesPerSec
    fetch_requests: int = 0  # RemoteFetchRequestsPerSec
    failed_fetch_requests: int = 0  # FailedRemoteFetchRequestsPerSec
    delete_requests: int = 0  # RemoteDeleteRequestsPerSec
    failed_delete_requests: int = 0  # FailedRemoteDeleteRequestsPerSec
