"""The console's share-group page in Chromium: its In flight column and total count the
records a ShareConsumer holds unacknowledged, read from the leader's metrics (found
through the broker's metrics.port config), and go to 0 once they are acknowledged."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from moldau.testing import BrokerProcess
from tests.console.conftest import Console
from tests.integration.test_share_in_flight import accept_all, holding_one_batch

RECORDS = 8


@pytest.fixture(scope="module")
def broker(metered: tuple[BrokerProcess, str]) -> BrokerProcess:
    """This module's broker serves its metrics (the console fixture uses it)."""
    return metered[0]


def test_share_group_page_shows_records_in_flight(page: Page, console: Console, broker):
    topic, group = "inflight-topic", "inflight-group"
    with holding_one_batch(broker.bootstrap, topic, group, RECORDS) as (consumer, held):
        n = len(held)
        page.goto(console.page_url(f"/groups/{group}"))
        expect(page.locator("#offsets thead")).to_contain_text("In flight")
        row = page.locator("#offsets tr[data-partition='0']")
        expect(row.locator("td.in-flight")).to_have_text(str(n))
        expect(row.locator("td.committed")).to_have_text("0")
        total = page.locator(".stat", has_text="In flight").locator(".stat-value")
        expect(total).to_have_text(str(n))

        accept_all(consumer, held)
        page.reload()
        expect(row.locator("td.in-flight")).to_have_text("0")
        expect(row.locator("td.committed")).to_have_text(str(n))
        expect(total).to_have_text("0")
