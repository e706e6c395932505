"""The console's share-group page in Chromium: its In flight column and total count the
records a ShareConsumer holds unacknowledged, read from the leader's metrics (found
through the broker's metrics.port config), and go to 0 once they are acknowledged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message
from playwright.sync_api import Page, expect

from moldau.testing import BrokerProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.console.conftest import Console
from tests.integration.helpers import wait_until
from tests.integration.test_share_groups import poll, share_consumer
from tests.integration.test_share_in_flight import setup_one_batch
from tests.metrics.helpers import start_metered_broker

RECORDS = 8


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    """This module's broker serves its metrics (the console fixture uses it)."""
    running, _ = start_metered_broker(TEST_DEFAULTS)
    try:
        yield running
    finally:
        running.close()


def test_share_group_page_shows_records_in_flight(page: Page, console: Console, broker):
    topic, group = "inflight-topic", "inflight-group"
    setup_one_batch(broker.bootstrap, topic, group, RECORDS)
    consumer = share_consumer(
        broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"}
    )
    try:
        held: list[Message] = []
        wait_until(lambda: bool(held.extend(poll(consumer)) or held), "records to hold")
        n = len(held)
        page.goto(console.page_url(f"/groups/{group}"))
        expect(page.locator("#offsets thead")).to_contain_text("In flight")
        row = page.locator("#offsets tr[data-partition='0']")
        expect(row.locator("td.in-flight")).to_have_text(str(n))
        expect(row.locator("td.committed")).to_have_text("0")
        total = page.locator(".stat", has_text="In flight").locator(".stat-value")
        expect(total).to_have_text(str(n))

        for m in held:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        page.reload()
        expect(row.locator("td.in-flight")).to_have_text("0")
        expect(row.locator("td.committed")).to_have_text(str(n))
        expect(total).to_have_text("0")
    finally:
        consumer.close()
