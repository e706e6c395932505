"""The console fed by a Moldau broker's own Prometheus endpoint (`--metrics URL`).

The broker serves Kafka's metric names; the console reads its version, partition sizes,
throughput counters and consumer lag from them. What the browser shows must match both
the endpoint and what the Kafka protocol says.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from playwright.sync_api import Page, expect

from moldau.console.render import size
from moldau.testing import BrokerProcess
from tests.console.conftest import SAMPLE_INTERVAL_S, Console, start_console, stop_console
from tests.console.test_browser import (
    consume_and_commit,
    create_topic,
    lag_from_offsets,
    produce,
)
from tests.metrics.helpers import Samples

TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def metrics_console(metered: tuple[BrokerProcess, str]) -> Iterator[Console]:
    broker, url = metered
    running = start_console(broker.bootstrap, "--metrics", url)
    yield running
    stop_console(running)


@pytest.fixture(scope="module")
def metered_admin(metered: tuple[BrokerProcess, str]) -> AdminClient:
    return AdminClient({"bootstrap.servers": metered[0].bootstrap})


def _reload_until(page: Page, url: str, selector: str, text: str) -> None:
    """Server-rendered values come from the console's latest scrape: reload until it has
    caught up with what was just produced."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        page.goto(url)
        if page.locator(selector).inner_text().strip() == text:
            return
        assert time.monotonic() < deadline, f"{selector} never showed {text!r}"
        time.sleep(SAMPLE_INTERVAL_S)


def _peak_at_least(page: Page, chart_url: str, series: str, floor: float) -> None:
    """Reload a chart fragment until its series has been drawn peaking at ``floor`` or more."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        page.goto(chart_url)
        drawn = page.locator(f"g.series[data-series='{series}']")
        if drawn.count() and float(drawn.get_attribute("data-max") or 0) >= floor:
            return
        assert time.monotonic() < deadline, f"{series} never peaked at {floor} or more"
        time.sleep(SAMPLE_INTERVAL_S)


def test_version_and_sizes_come_from_the_broker_endpoint(
    page: Page, metrics_console: Console, metered, metered_admin: AdminClient
):
    broker, url = metered
    create_topic(metered_admin, "metered", 2)
    produce(broker.bootstrap, "metered", [(b"k", b"x" * 1000, []) for _ in range(60)])
    scraped = Samples.scrape(url)
    sizes = scraped.series("kafka_log_log_size", "topic", "partition")
    assert sizes[("metered", "0")] + sizes[("metered", "1")] > 60 * 1000
    [(version,)] = [
        (dict(labels)["version"],)
        for (name, labels) in scraped.values
        if name == "kafka_server_app_info"
    ]

    page.goto(metrics_console.page_url("/"))
    expect(page.locator("#version")).to_have_text(version)
    expect(page.locator("body")).to_contain_text("metrics endpoint")

    topic_url = metrics_console.page_url("/topics/metered")
    first_size = "#partitions tbody tr:nth-child(1) td:nth-child(8)"
    _reload_until(page, topic_url, first_size, size(sizes[("metered", "0")]))
    total = sizes[("metered", "0")] + sizes[("metered", "1")]
    stat = page.locator(".stat", has_text="Size").locator(".stat-value")
    expect(stat).to_have_text(size(total))


def test_throughput_charts_are_fed_by_the_broker_counters(
    page: Page, metrics_console: Console, metered, metered_admin: AdminClient
):
    broker, url = metered
    create_topic(metered_admin, "flow", 1)
    produce(broker.bootstrap, "flow", [(None, b"first", [])])  # the broker's series starts
    # Bytes per second exist only as broker counters: sampled offsets cannot give them.
    chart = metrics_console.page_url("/charts/throughput?kind=bytes_in&topic=flow")
    _peak_at_least(page, chart, "flow", 0)  # drawn once sampled twice

    records, value = 2000, b"y" * 100
    started = time.monotonic()
    produce(broker.bootstrap, "flow", [(None, value, []) for _ in range(records)])
    elapsed = time.monotonic() - started
    produced = Samples.scrape(url).by_topic("kafka_server_brokertopicmetrics_bytesin_total")
    assert produced["flow"] > records * len(value)
    # The rate between two scrapes: at least the bytes appended spread over the
    # production time plus two sample intervals.
    _peak_at_least(
        page, chart, "flow", records * len(value) / (elapsed + 2 * SAMPLE_INTERVAL_S + 1)
    )

    page.goto(metrics_console.page_url("/topics/flow"))
    messages = page.locator(".chart g.series[data-series='flow']")
    expect(messages).not_to_have_attribute("data-max", "0", timeout=TIMEOUT_MS)


def test_lag_chart_is_fed_by_the_broker_lag(
    page: Page, metrics_console: Console, metered, metered_admin: AdminClient
):
    broker, url = metered
    topic, group = "metered-lag", "metered-group"
    create_topic(metered_admin, topic, 3)
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"v", []) for i in range(90)])
    consume_and_commit(broker.bootstrap, group, topic, 40)
    produce(broker.bootstrap, topic, [(b"k%d" % i, b"w", []) for i in range(25)])
    expected = lag_from_offsets(broker.bootstrap, group, topic, 3)
    total = sum(lag for lag in expected.values() if lag is not None)
    assert total >= 25

    exported = Samples.scrape(url).series(
        "kafka_consumergroup_lag", "consumergroup", "topic", "partition"
    )
    assert {int(p): v for (g, t, p), v in exported.items() if (g, t) == (group, topic)} == {
        p: lag for p, lag in expected.items() if lag is not None
    }
    page.goto(metrics_console.page_url(f"/groups/{group}"))
    series = page.locator(f".chart g.series[data-series='{topic}']")
    expect(series).to_have_attribute("data-last", str(total), timeout=TIMEOUT_MS)
