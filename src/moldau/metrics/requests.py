"""Kafka's RequestMetrics: per request type, the request count per version and histograms
of the time split (queue/local/remote/send/total, milliseconds) and of request sizes.

As Kafka does, a Fetch is counted both as ``Fetch`` and as ``FetchConsumer`` or
``FetchFollower``.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.metrics.stats import Histogram, HistogramSnapshot
from moldau.metrics.timing import RequestTimer, current_timer
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages import REQUESTS

#: Kafka's request names (ApiKeys' names: "Produce", "ListOffsets", ...).
REQUEST_NAMES = {key: cls.__name__.removesuffix("Request") for key, cls in REQUESTS.items()}
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"

TIME_BUCKETS_MS = (
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
)  # fmt: skip
SIZE_BUCKETS = tuple(float(1 << n) for n in range(6, 27, 2))  # 64 B .. 64 MiB

#: Kafka's histogram names, in the order of :attr:`RequestTypeStats.histograms`.
TIME_NAMES = (
    "requestqueuetimems",
    "localtimems",
    "remotetimems",
    "responsesendtimems",
    "totaltimems",
)


class RequestTypeStats:
    __slots__ = ("versions", "histograms", "size")

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        self.histograms = tuple(Histogram(TIME_BUCKETS_MS) for _ in TIME_NAMES)
        self.size = Histogram(SIZE_BUCKETS)

    def observe(self, version: int, size: int, times_ms: tuple[float, ...]) -> None:
        self.versions[version] = self.versions.get(version, 0) + 1
        for histogram, value in zip(self.histograms, times_ms, strict=True):
            histogram.observe(value)
        self.size.observe(size)


@dataclass(frozen=True, slots=True)
class RequestTypeSnapshot:
    versions: dict[int, int]
    times: tuple[HistogramSnapshot, ...]  # as TIME_NAMES
    size: HistogramSnapshot


class RequestStats:
    """The dispatcher's request metrics (a :class:`~moldau.metrics.timing.RequestSink`)."""

    def __init__(self) -> None:
        self.types: dict[str, RequestTypeStats] = {}

    def identify(self, api_key: int, version: int, request: object, size: int) -> None:
        """Name the request being handled, so its timer records here once it is sent."""
        timer = current_timer()
        if timer is None:
            return
        timer.sink, timer.api_key, timer.version, timer.size = self, api_key, version, size
        # Fetch v15+ would carry it in replica_state; Moldau serves Fetch up to v12.
        timer.follower = api_key == ApiKey.FETCH and getattr(request, "replica_id", -1) >= 0

    def record(self, timer: RequestTimer, sent: float) -> None:
        remote = timer.remote
        times_ms = (
            1000 * (timer.dequeued - timer.received),
            1000 * max(timer.handled - timer.dequeued - remote, 0.0),
            1000 * remote,
            1000 * (sent - timer.handled),
            1000 * (sent - timer.received),
        )
        self._type(REQUEST_NAMES[timer.api_key]).observe(timer.version, timer.size, times_ms)
        if timer.api_key == ApiKey.FETCH:
            name = FETCH_FOLLOWER if timer.follower else FETCH_CONSUMER
            self._type(name).observe(timer.version, timer.size, times_ms)

    def _type(self, name: str) -> RequestTypeStats:
        stats = self.types.get(name)
        if stats is None:
            stats = self.types[name] = RequestTypeStats()
        return stats

    def snapshot(self) -> dict[str, RequestTypeSnapshot]:
        return {
            name: RequestTypeSnapshot(
                dict(s.versions), tuple(h.snapshot() for h in s.histograms), s.size.snapshot()
            )
            for name, s in self.types.items()
        }
