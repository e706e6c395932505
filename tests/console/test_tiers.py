"""The console's topic page on a tiered topic: remote and local offset ranges and sizes
per partition, the same figures as `moldau topics describe`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from moldau.console.render import size
from moldau.testing import broker
from moldau.testing.process import BrokerProcess
from tests.console.conftest import start_console, stop_console
from tests.console.test_browser import cells
from tests.tiered.test_tiered_broker import TIERED, file_tier_configs, local_bases, wait_for

pytestmark = pytest.mark.slow  # a broker, the console and Chromium: ~35 s

TOPIC = "tiered-shown"


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Path]]:
    remote = tmp_path_factory.mktemp("remote")
    with broker(**file_tier_configs(remote, 1)) as b:
        yield b, remote


def test_topic_page_shows_both_tiers(page: Page, tiered: tuple[BrokerProcess, Path]) -> None:
    b, remote = tiered
    b.create_topic(TOPIC, 1, **{k.replace(".", "_"): v for k, v in TIERED.items()})
    b.create_topic("local-only", 1)
    for n in range(6):
        b.produce(TOPIC, *(f"shown-{n}-{i:03d}-".encode() * 8 for i in range(20)))
    end = 6 * 20
    wait_for(lambda: local_bases(b, TOPIC)[0] > 0, "segments to leave the disk")
    # every closed segment copied and gone: the figures stay put while the page is read
    wait_for(lambda: len(local_bases(b, TOPIC)) == 1, "local retention")
    objects = sorted(remote.glob(f"{TOPIC}-*/0/*.log"))
    local_start = local_bases(b, TOPIC)[0]
    console = start_console(b.bootstrap_servers)
    try:
        page.goto(console.page_url(f"/topics/{TOPIC}"))
        expect(page.locator("#tiers")).to_be_visible()
        (row,) = cells(page, "#tiers tbody tr")
        assert row[0] == "0"
        assert row[1] == f"0–{local_start - 1}"
        assert row[2] == size(sum(p.stat().st_size for p in objects))
        assert row[3] == str(len(objects))
        assert row[4] == f"{local_start}–{end - 1}"
        page.goto(console.page_url("/topics/local-only"))
        expect(page.locator("#partitions")).to_be_visible()
        assert page.locator("#tiers").count() == 0
    finally:
        stop_console(console)
