"""Durable share state (KIP-932's share coordinator and ``__share_group_state``): what a
share group acknowledged survives a kill -9 of its broker, and what it did not is
delivered again, with confluent-kafka's ShareConsumer against a real broker process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message

from moldau.testing import BrokerProcess
from tests.integration.helpers import wait_until
from tests.integration.test_share_groups import poll, setup, share_consumer

EXPLICIT = {"share.acknowledgement.mode": "explicit"}


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        tmp_path_factory.mktemp("share-state"),
        {"group.share.record.lock.duration.ms": "60000"},  # no redelivery by lock expiry
    ) as running:
        yield running


def test_after_kill_9_only_the_unacknowledged_records_are_delivered_again(
    broker: BrokerProcess, topic: str
) -> None:
    n, group = 40, f"{topic}-g"
    setup(broker.bootstrap_servers, topic, group, n)
    first = share_consumer(broker.bootstrap_servers, group, topic, **EXPLICIT)
    delivered: dict[int, Message] = {}
    try:
        wait_until(
            lambda: bool(delivered.update({m.offset(): m for m in poll(first)})) or delivered,
            "the first consumer's records",
        )
        done = {o for o in delivered if o % 3 == 0 or o < 5 or o == 7}  # 7 is rejected
        for o in sorted(done):
            kind = AcknowledgeType.REJECT if o == 7 else AcknowledgeType.ACCEPT
            first.acknowledge(delivered[o], kind)
        first.commit_sync()  # answered once the acknowledgements are durable
        broker.kill()  # the first consumer still holds the rest
        broker.start()
        second = share_consumer(broker.bootstrap_servers, group, topic, **EXPLICIT)
        try:
            again: dict[int, int] = {}

            def take() -> bool:
                for m in poll(second):
                    assert m.offset() not in again, f"{m.offset()} delivered twice"
                    again[m.offset()] = m.delivery_count()
                    second.acknowledge(m, AcknowledgeType.ACCEPT)
                second.commit_sync()
                return len(again) >= n - len(done)

            wait_until(take, "the unacknowledged records", timeout=60)
            assert sorted(again) == sorted(set(range(n)) - done)
            # Each record's delivery count says how often it was handed out before.
            assert again == {o: 2 if o in delivered else 1 for o in again}
            assert [m for _ in range(3) for m in poll(second)] == []
        finally:
            second.close()
        # What the second consumer accepted is durable too: a restart hands out nothing.
        broker.kill()
        broker.start()
        third = share_consumer(broker.bootstrap_servers, group, topic)
        try:
            assert [m.offset() for _ in range(6) for m in poll(third)] == []
        finally:
            third.close()
    finally:
        first.close()
