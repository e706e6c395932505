"""Kafka's RequestMetrics: per request type, the request count per version and histograms
of the time split (queue/local/remote/send/total, milliseconds) and of request sizes.

As Kafka does, a Fetch is counted both as ``Fetch`` and as ``FetchConsumer`` or
``FetchFollower``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages import REQUESTS
from moldau.stats.counters import HistogramSnapshot
from moldau.stats.timing import RequestRecorder, current_timer

#: Kafka's request names (ApiKeys' names: "Produce", "ListOffsets", ...).
REQUEST_NAMES = {key: cls.__name__.removesuffix("Request") for key, cls in REQUESTS.items()}
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"
_FETCH = int(ApiKey.FETCH)

TIME_BUCKETS_MS = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0,
    5000.0, 10000.0, 30000.0,
)  # fmt: skip
SIZE_BUCKETS = tuple(float(1 << n) for n in range(6, 27, 2))  # 64 B .. 64 MiB

#: Kafka's histogram names, in the order of the times a request records.
TIME_NAMES = (
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "responsesendtimems",
    "totaltimems",
)
_STRIDE = len(TIME_BUCKETS_MS) + 1
_LOCAL, _REMOTE, _SEND, _TOTAL = (i * _STRIDE for i in range(1, len(TIME_NAMES)))


class RequestTypeStats:
    """One request type's counts per version and its histograms, as flat lists: this runs
    for every request, so it is a few list increments and no calls."""

    __slots__ = ("versions", "counts", "sums", "size_counts", "size_sum")

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        self.counts = [0] * (len(TIME_NAMES) * _STRIDE)  # histogram i at i * _STRIDE
        self.sums = [0.0] * len(TIME_NAMES)
        self.size_counts = [0] * (len(SIZE_BUCKETS) + 1)
        self.size_sum = 0.0

    def observe(
        self,
        version: int,
        size: int,
        queue: float,
        local: float,
        remote: float,
        send: float,
        total: float,
    ) -> None:
        """Times in milliseconds, as TIME_NAMES (unrolled: a loop costs twice as much)."""
        versions = self.versions
        versions[version] = versions.get(version, 0) + 1
        counts, sums, bounds = self.counts, self.sums, TIME_BUCKETS_MS
        counts[bisect_left(bounds, queue)] += 1
        counts[_LOCAL + bisect_left(bounds, local)] += 1
        counts[_REMOTE + bisect_left(bounds, remote)] += 1
        counts[_SEND + bisect_left(bounds, send)] += 1
        counts[_TOTAL + bisect_left(bounds, total)] += 1
        sums[0] += queue
        sums[1] += local
        sums[2] += remote
        sums[3] += send
        sums[4] += total
        self.size_counts[bisect_left(SIZE_BUCKETS, size)] += 1
        self.size_sum += size

    def snapshot(self) -> RequestTypeSnapshot:
        counts = tuple(self.counts)
        return RequestTypeSnapshot(
            dict(self.versions),
            tuple(
                HistogramSnapshot(
                    TIME_BUCKETS_MS, counts[i * _STRIDE : (i + 1) * _STRIDE], self.sums[i]
                )
                for i in range(len(TIME_NAMES))
            ),
            HistogramSnapshot(SIZE_BUCKETS, tuple(self.size_counts), self.size_sum),
        )


@dataclass(frozen=True, slots=True)
class RequestTypeSnapshot:
    versions: dict[int, int]
    times: tuple[HistogramSnapshot, ...]  # as TIME_NAMES
    size: HistogramSnapshot

    def plus(self, other: RequestTypeSnapshot) -> RequestTypeSnapshot:
        versions = dict(self.versions)
        for version, n in other.versions.items():
            versions[version] = versions.get(version, 0) + n
        return RequestTypeSnapshot(
            versions,
            tuple(a.plus(b) for a, b in zip(self.times, other.times, strict=True)),
            self.size.plus(other.size),
        )


class RequestStats:
    """The dispatcher's request metrics: it names each request, its timer records here."""

    def __init__(self) -> None:
        self.types: dict[str, RequestTypeStats] = {}
        self._targets: dict[int, tuple[RequestRecorder, ...]] = {}  # by api key and role

    def identify(self, api_key: int, version: int, request: object, size: int) -> None:
        """Name the request being handled, so its timer records it once it is sent."""
        timer = current_timer()
        if timer is None:
            return
        # Fetch v15+ would carry it in replica_state; Moldau serves Fetch up to v12.
        follower = api_key == _FETCH and getattr(request, "replica_id", -1) >= 0
        key = api_key << 1 | follower
        targets = self._targets.get(key)
        if targets is None:
            targets = self._targets[key] = tuple(
                self._type(name).observe for name in _names(api_key, follower)
            )
        timer.recorders, timer.version, timer.size = targets, version, size

    def _type(self, name: str) -> RequestTypeStats:
        stats = self.types.get(name)
        if stats is None:
            stats = self.types[name] = RequestTypeStats()
        return stats

    def snapshot(self) -> dict[str, RequestTypeSnapshot]:
        return {name: s.snapshot() for name, s in self.types.items()}


def _names(api_key: int, follower: bool) -> tuple[str, ...]:
    if api_key == _FETCH:
        return REQUEST_NAMES[api_key], FETCH_FOLLOWER if follower else FETCH_CONSUMER
    return (REQUEST_NAMES[api_key],)


def merge_request_stats(sources: Iterable[RequestStats]) -> dict[str, RequestTypeSnapshot]:
    """The request metrics of several dispatchers (a node's broker and controller
    listeners) as one: Kafka's request metrics are per process, not per listener."""
    merged: dict[str, RequestTypeSnapshot] = {}
    for source in sources:
        for name, snap in source.snapshot().items():
            seen = merged.get(name)
            merged[name] = snap if seen is None else seen.plus(snap)
    return merged
