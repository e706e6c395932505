"""Samples the cluster every few seconds for the charts: throughput per topic, lag per group.

With metrics URLs it reads Kafka's broker counters (messages and bytes in/out per topic)
and, when exported, consumer lag; otherwise it samples offsets through the Kafka protocol:
the rate of the high watermarks is the produce rate, and lag is high watermark minus the
committed offset.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections.abc import Sequence

from moldau.console.cluster import Cluster, ConsoleError
from moldau.console.metrics import BYTES_IN, BYTES_OUT, MESSAGES_IN, Scrape
from moldau.console.series import History, Key, Rates

_log = logging.getLogger("moldau.console.sampler")
_SCRAPE_TIMEOUT_S = 5.0


class Sampler:
    def __init__(
        self,
        cluster: Cluster,
        metrics_urls: Sequence[str] = (),
        interval_s: float = 5.0,
        keep: int = 360,
    ) -> None:
        self.cluster = cluster
        self.metrics_urls = tuple(metrics_urls)
        self.interval_s = interval_s
        self.history = History(keep)
        self.scrape: Scrape | None = None  # the latest, for sizes and the version
        self.error: str | None = None  # why the latest sample failed, shown on the pages
        self._rates = Rates()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def source(self) -> str:
        return "metrics endpoint" if self.metrics_urls else "sampled offsets"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.sample()
                self.error = None
            except (ConsoleError, OSError, ValueError) as exc:
                self.error = str(exc)
                _log.warning("sampling failed: %s", exc)
            self._stop.wait(max(self.interval_s - (time.monotonic() - started), 0.1))

    def sample(self, now: float | None = None) -> None:
        """Take one sample of every series."""
        now = time.time() if now is None else now
        counters: dict[Key, float] = {}
        lag: dict[str, dict[str, float]] | None = None
        if self.metrics_urls:
            scrape = Scrape.parse(map(_fetch, self.metrics_urls))
            self.scrape = scrape
            for kind, name in (
                ("messages", MESSAGES_IN),
                ("bytes_in", BYTES_IN),
                ("bytes_out", BYTES_OUT),
            ):
                counters.update(((kind, topic), v) for topic, v in scrape.per_topic(name).items())
            if scrape.reports_lag():
                lag = scrape.group_lag()
        else:
            self.cluster.check_reachable()
            for topic in self.cluster.topics():
                if not topic.internal:
                    counters[("messages", topic.name)] = sum(p.end_offset for p in topic.partitions)
        if lag is None:
            self.cluster.check_reachable()
            lag = {g.group_id: dict(g.lag_by_topic()) for g in self.cluster.groups()}
        values: dict[Key, float] = dict(self._rates.update(now, counters))
        for group, topics in lag.items():
            values.update((("lag", group, topic), v) for topic, v in topics.items())
        self.history.add(now, values)


def _fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=_SCRAPE_TIMEOUT_S) as response:
        return response.read().decode()
