"""The console on a three-node KRaft cluster (racks, a quorum of three, replicated topics),
with the metrics of every node: what it shows agrees with what the cluster says, also once
a follower is gone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.console.conftest import Console, start_console, stop_console
from tests.console.test_browser import cells

RACKS = ["r1", "r1", "r2"]
TOPIC = "spread"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    configs = {**TEST_DEFAULTS, "replica.lag.time.max.ms": "3000"}
    with ClusterProcess(
        3, RACKS, configs, data_dir=tmp_path_factory.mktemp("cluster"), metrics=True
    ) as running:
        running.create_topic(TOPIC, 3, replication_factor=3)
        running.produce(TOPIC, *(b"v%d" % i for i in range(9)))
        yield running


@pytest.fixture(scope="module")
def cluster_console(cluster: ClusterProcess) -> Iterator[Console]:
    urls = [cluster.metrics_url(i) for i in sorted(cluster.nodes)]
    running = start_console(cluster.bootstrap_servers, *(a for u in urls for a in ("--metrics", u)))
    yield running
    stop_console(running)


def test_overview_and_topic_of_a_cluster(page: Page, cluster: ClusterProcess, cluster_console):
    described = cluster.describe()
    controller = cluster.controller()
    page.goto(cluster_console.page_url("/"))
    expect(page.locator("#controller")).to_have_text(str(controller))
    brokers = cells(page, "#brokers tbody tr")
    assert [(r[0], r[3]) for r in brokers] == [("1", "r1"), ("2", "r1"), ("3", "r2")]
    assert [r[-1] for r in brokers].count("controller") == 1
    quorum = cells(page, "#quorum tbody tr")
    assert sorted(r[0] for r in quorum) == ["1", "2", "3"]
    assert [r[0] for r in quorum if r[1] == "leader"] == [str(described["quorum"]["leader"])]

    page.goto(cluster_console.page_url(f"/topics/{TOPIC}"))
    shown = {r[0]: r[1:4] for r in cells(page, "#partitions tbody tr")}
    expected = {
        str(p["partition"]): [
            str(p["leader"]),
            ", ".join(map(str, p["replicas"])),
            ", ".join(map(str, p["isr"])),
        ]
        for p in described["topics"][TOPIC]
    }
    assert shown == expected
    # Sizes come from the nodes' metrics endpoints: every partition has a size.
    assert all(r[7] not in ("", "–") for r in cells(page, "#partitions tbody tr"))


def _ids(cell: str) -> list[str]:
    return cell.replace("under-replicated", "").strip().split(", ")


def test_a_lost_follower_shows_as_under_replicated(
    page: Page, cluster: ClusterProcess, cluster_console: Console
):
    victim = str(next(i for i in sorted(cluster.nodes) if i != cluster.controller()))
    cluster.kill(int(victim))
    try:

        def shrunk() -> list[list[str]] | None:
            """The topic page once it shows the victim out of every ISR (the node the
            console asks may apply the ISR changes a little later than another). The first
            ListOffsets after the loss may wait out librdkafka's request timeout (15 s) on
            the dead leader before it finds the new one."""
            page.goto(cluster_console.page_url(f"/topics/{TOPIC}"), timeout=60_000)
            rows = cells(page, "#partitions tbody tr")
            return rows if rows and all(victim not in _ids(r[3]) for r in rows) else None

        for row in cluster.wait_until(shrunk, timeout=90, interval=1):
            assert victim in _ids(row[2])  # still a replica
            assert "under-replicated" in row[3]

        def overview_warns() -> bool:
            page.goto(cluster_console.page_url("/"), timeout=60_000)
            stat = page.locator(".stat", has_text="Under-replicated").locator(".stat-value")
            return int(stat.inner_text().replace(",", "")) >= 3

        cluster.wait_until(overview_warns, timeout=60, interval=1)
    finally:
        cluster.start_node(int(victim))
