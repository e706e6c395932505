"""The console reading Kafka's metric names from `--metrics URL`.

Until the broker serves its own Prometheus endpoint, the endpoint here is prometheus-client's
HTTP server in the test process, publishing the names the JMX exporter gives Kafka's
metrics; the cluster itself is a live broker. Switch to the broker's endpoint once it exists.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import Page, expect
from prometheus_client import CollectorRegistry, Counter, Gauge, Info, start_http_server

from tests.console.conftest import Console, start_console, stop_console

TIMEOUT_MS = 30_000


class KafkaMetrics:
    """A registry with Kafka's broker metric names, served over HTTP."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Messages in per topic",
            ["topic"],
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes in per topic",
            ["topic"],
            registry=self.registry,
        )
        self.log_size = Gauge(
            "kafka_log_log_size", "Log size", ["topic", "partition"], registry=self.registry
        )
        self.lag = Gauge(
            "kafka_consumergroup_lag",
            "Consumer lag",
            ["consumergroup", "topic", "partition"],
            registry=self.registry,
        )
        Info("kafka_server_app", "Broker software", registry=self.registry).info(
            {"version": "9.9.9-test"}
        )
        self.server, self.thread = start_http_server(0, "127.0.0.1", registry=self.registry)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def metrics() -> Iterator[KafkaMetrics]:
    served = KafkaMetrics()
    yield served
    served.close()


@pytest.fixture(scope="module")
def metrics_console(broker, metrics: KafkaMetrics) -> Iterator[Console]:
    running = start_console(broker.bootstrap, "--metrics", metrics.url)
    yield running
    stop_console(running)


def test_version_sizes_rates_and_lag_come_from_the_metrics_endpoint(
    page: Page, metrics_console: Console, metrics: KafkaMetrics, admin: AdminClient
):
    admin.create_topics([NewTopic("metered", 2, 1)])["metered"].result()
    metrics.messages_in.labels("metered")  # the series exists (at 0) from the start
    metrics.log_size.labels("metered", "0").set(3 * 2**20)
    metrics.log_size.labels("metered", "1").set(2**20)
    metrics.lag.labels("billing", "metered", "0").set(7)
    metrics.lag.labels("billing", "metered", "1").set(5)

    page.goto(metrics_console.page_url("/"))
    expect(page.locator("#version")).to_have_text("9.9.9-test")

    page.goto(metrics_console.page_url("/topics/metered"))
    expect(page.locator("#partitions tbody tr").nth(0).locator("td").nth(7)).to_have_text("3.0 MiB")
    expect(page.locator(".stat", has_text="Size").locator(".stat-value")).to_have_text("4.0 MiB")

    series = page.locator(".chart g.series[data-series='metered']")
    expect(series).to_have_attribute("data-max", "0", timeout=TIMEOUT_MS)
    metrics.messages_in.labels("metered").inc(1000)
    expect(series).not_to_have_attribute("data-max", "0", timeout=TIMEOUT_MS)

    page.goto(metrics_console.page_url("/charts/lag?group=billing"))
    expect(page.locator("g.series[data-series='metered']")).to_have_attribute("data-last", "12")
