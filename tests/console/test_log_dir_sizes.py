"""The console's partition sizes come from DescribeLogDirs (as Kafka UIs do), so a
console started without any metrics endpoint still shows them, equal to the files."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from playwright.sync_api import Page

from moldau.console.cluster import Cluster
from moldau.console.render import size
from moldau.testing import BrokerProcess
from tests.console.conftest import Console
from tests.console.test_browser import cells

TOPIC = "sized"


def on_disk(broker: BrokerProcess, partition: int) -> int:
    return sum(
        f.stat().st_size for f in Path(broker.data_dir, f"{TOPIC}-{partition}").glob("*.log")
    )


def test_sizes_come_from_describe_log_dirs(page: Page, broker: BrokerProcess, console: Console):
    broker.create_topic(TOPIC, 2)
    broker.produce(TOPIC, *(b"x" * 200 for _ in range(30)))
    expected = {p: on_disk(broker, p) for p in (0, 1)}
    assert sum(expected.values()) > 30 * 200
    cluster = Cluster(broker.bootstrap)
    try:  # in a thread, as the console calls it (Playwright runs an event loop here)
        with ThreadPoolExecutor(1) as pool:
            sizes = pool.submit(cluster.partition_sizes).result()
    finally:
        cluster.close()
    assert {p: sizes[(TOPIC, p)] for p in (0, 1)} == expected
    page.goto(console.page_url(f"/topics/{TOPIC}"))
    shown = {int(r[0]): r[7] for r in cells(page, "#partitions tbody tr")}
    assert shown == {p: size(n) for p, n in expected.items()}
