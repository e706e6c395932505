"""A real broker serving its metrics, and reading what it serves."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from moldau import metrics
from moldau.testing import BrokerProcess

Labels = frozenset[tuple[str, str]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_metered_broker(configs: Mapping[str, object] | None = None) -> tuple[BrokerProcess, str]:
    """A broker with ``metrics.port`` set, once it serves; returns it and its metrics URL.
    A free port may be taken before the broker binds it: then another is tried."""
    for attempt in range(3):
        broker = BrokerProcess(configs={**(configs or {}), metrics.PORT_KEY: free_port()})
        try:
            broker.start()
        except RuntimeError as e:
            broker.close()
            if "cannot serve metrics" in str(e) and attempt < 2:
                continue
            raise
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in list(broker.output):
                if url := metrics.served_url(line):
                    return broker, url
            time.sleep(0.02)
        broker.close()
        raise RuntimeError("the broker never said where its metrics are")
    raise AssertionError("unreachable")


def fetch_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


@dataclass(frozen=True)
class Samples:
    """One scrape: (sample name, labels) -> value."""

    values: Mapping[tuple[str, Labels], float]

    @classmethod
    def scrape(cls, url: str) -> Samples:
        return cls.parse(fetch_text(url))

    @classmethod
    def parse(cls, text: str) -> Samples:
        return cls(
            {
                (s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
        )

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels (KeyError if there is none)."""
        return self.values[(name, frozenset(labels.items()))]

    def series(self, name: str, *label_names: str) -> dict[tuple[str, ...], float]:
        """Samples of ``name`` that have exactly ``label_names``, by their values."""
        out = {}
        for (sample, labels), value in self.values.items():
            found = dict(labels)
            if sample == name and set(found) == set(label_names):
                out[tuple(found[n] for n in label_names)] = value
        return out

    def requests(self, api: str) -> float:
        """Requests of one type, over all versions."""
        name = "kafka_network_requestmetrics_requests_total"
        return sum(v for (r, _), v in self.series(name, "request", "version").items() if r == api)

    def by_topic(self, name: str) -> dict[str, float]:
        return {topic: v for (topic,), v in self.series(name, "topic").items()}
