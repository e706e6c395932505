"""Reading a Prometheus endpoint with Kafka's metric names (as the JMX exporter renders them).

Pure: `Scrape.parse` takes exposition texts; the sampler does the HTTP. Counters from several
endpoints (one per broker) are summed into cluster totals; a partition's size is the largest
any replica reports, as replicas hold the same log.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
LOG_SIZE = "kafka_log_log_size"
# kafka-exporter's names (Moldau brokers export them too): consumer lag and what it is
# computed from, the committed offset and the partition's high watermark.
GROUP_LAG = "kafka_consumergroup_lag"
GROUP_OFFSET = "kafka_consumergroup_current_offset"
PARTITION_OFFSET = "kafka_topic_partition_current_offset"
_APP_INFO = "kafka_server_app_info"

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Scrape:
    """The samples of each endpoint: (name, labels) -> value."""

    endpoints: tuple[dict[tuple[str, Labels], float], ...]

    @classmethod
    def parse(cls, texts: Iterable[str]) -> Scrape:
        endpoints = []
        for text in texts:
            values: dict[tuple[str, Labels], float] = defaultdict(float)
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    values[(sample.name, tuple(sorted(sample.labels.items())))] += sample.value
            endpoints.append(dict(values))
        return cls(tuple(endpoints))

    def by(
        self,
        name: str,
        *label_names: str,
        combine: Callable[[float, float], float] = lambda a, b: a + b,
    ) -> dict[tuple[str, ...], float]:
        """Values of metric `name` keyed by the given labels, combined across endpoints.

        Samples lacking one of the labels are skipped (Kafka's all-topics aggregate has no
        `topic` label)."""
        found: dict[tuple[str, ...], float] = {}
        for values in self.endpoints:
            for (sample, labels), value in values.items():
                present = dict(labels)
                if sample != name or not all(label in present for label in label_names):
                    continue
                key = tuple(present[label] for label in label_names)
                found[key] = combine(found[key], value) if key in found else value
        return found

    def per_topic(self, name: str) -> dict[str, float]:
        return {topic: v for (topic,), v in self.by(name, "topic").items()}

    def has(self, name: str) -> bool:
        return any(sample == name for values in self.endpoints for sample, _ in values)

    def log_sizes(self) -> dict[tuple[str, int], int]:
        """Bytes on disk per (topic, partition), where the brokers export it."""
        sizes = self.by(LOG_SIZE, "topic", "partition", combine=max)
        return {(t, int(p)): int(v) for (t, p), v in sizes.items()}

    def reports_lag(self) -> bool:
        return self.has(GROUP_LAG) or self.has(GROUP_OFFSET)

    def group_lag(self) -> dict[str, dict[str, float]]:
        """group -> topic -> lag, summed over partitions.

        A partition's lag is its lag series where an endpoint has one, else its high
        watermark minus the committed offset: a broker reports lag only for partitions it
        has a replica of, but its groups' committed offsets always. A series reported by
        several endpoints (two exporters of one cluster) counts once."""
        gtp = ("consumergroup", "topic", "partition")
        lag = self.by(GROUP_LAG, *gtp, combine=max)
        ends = self.by(PARTITION_OFFSET, "topic", "partition", combine=max)
        for (group, topic, partition), committed in self.by(
            GROUP_OFFSET, *gtp, combine=max
        ).items():
            end = ends.get((topic, partition))
            if end is not None:
                lag.setdefault((group, topic, partition), max(end - committed, 0.0))
        totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for (group, topic, _), value in lag.items():
            totals[group][topic] += value
        return {group: dict(topics) for group, topics in totals.items()}

    def version(self) -> str | None:
        """The software version the brokers report (app-info's `version` label)."""
        versions = {
            dict(labels)["version"]
            for values in self.endpoints
            for sample, labels in values
            if sample.startswith(_APP_INFO) and "version" in dict(labels)
        }
        return ", ".join(sorted(versions)) or None
