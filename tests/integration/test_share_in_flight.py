"""A share group's records in flight, as Prometheus and `moldau groups describe` show them:
a confluent-kafka ShareConsumer in explicit acknowledgement mode holds what it polled;
the leader's KIP-1103 metrics and the IN-FLIGHT column count exactly those records, and
drop to 0 once they are acknowledged. A leader whose metrics cannot be read shows "-"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import AcknowledgeType, Message, ShareConsumer

from moldau.testing import BrokerProcess
from tests.integration.helpers import alter_group_config, confluent_producer, wait_until
from tests.integration.test_cli import moldau
from tests.integration.test_share_groups import poll, setup, share_consumer
from tests.metrics.helpers import Samples, free_port

RECORDS = 10
ACQUIRED = "moldau_share_partition_acquired_records"
IN_FLIGHT = "kafka_server_sharepartitionmetrics_inflightmessagecount"
ACCEPTED = "kafka_server_sharegroupmetrics_recordacknowledgements_total"


def describe(broker: BrokerProcess, group: str, *extra: str) -> dict:
    result = moldau(broker, f"groups describe {group} --json {' '.join(extra)}")
    return json.loads(result.stdout)


def setup_one_batch(bootstrap: str, topic: str, group: str, n: int) -> None:
    """A one-partition topic whose ``n`` records are one batch, so the first share fetch
    hands a consumer all of them (nothing is left for it to prefetch), and a group
    reading from the start."""
    setup(bootstrap, topic, group, 0)
    producer = confluent_producer(bootstrap, **{"linger.ms": 60_000})
    for i in range(n):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0


@contextmanager
def holding_one_batch(
    bootstrap: str, topic: str, group: str, n: int
) -> Iterator[tuple[ShareConsumer, list[Message]]]:
    """A ShareConsumer in explicit acknowledgement mode holding the records it polled of
    ``setup_one_batch``'s topic (unacknowledged); closed at the end."""
    setup_one_batch(bootstrap, topic, group, n)
    # The longest lock a group may ask for: the default 30 s can run out while a loaded
    # machine runs the CLI a few times, and the records would go back to AVAILABLE.
    alter_group_config(bootstrap, group, {"share.record.lock.duration.ms": "60000"})
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        held: list[Message] = []
        wait_until(lambda: bool(held.extend(poll(consumer)) or held), "records to hold")
        yield consumer, held
    finally:
        consumer.close()


def accept_all(consumer: ShareConsumer, held: list[Message]) -> None:
    for m in held:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    consumer.commit_sync()


def test_in_flight_counts_the_records_a_member_holds(metered: tuple[BrokerProcess, str]):
    broker, url = metered
    topic, group = "held", "held-g"
    with holding_one_batch(broker.bootstrap, topic, group, RECORDS) as (consumer, held):
        n = len(held)
        assert sorted(m.offset() for m in held) == list(range(RECORDS))
        labels = {"group": group, "topic": topic, "partition": "0"}
        s = Samples.scrape(url)
        assert s.value(ACQUIRED, **labels) == n
        assert s.value(IN_FLIGHT, **labels) == n

        # The leader's metrics address comes from its metrics.port config.
        shown = describe(broker, group)
        assert [(o["partition"], o["start_offset"], o["in_flight"]) for o in shown["offsets"]] == [
            (0, 0, n)
        ]
        assert shown["in_flight"] == n
        text = moldau(broker, f"groups describe {group}").stdout
        assert "IN-FLIGHT" in text and f"In-flight: {n}" in text
        # An endpoint that does not answer: "-", and the rest of the description stands.
        unreachable = describe(broker, group, f"--metrics http://127.0.0.1:{free_port()}/metrics")
        assert unreachable["in_flight"] is None
        assert [o["in_flight"] for o in unreachable["offsets"]] == [None]
        assert [o["start_offset"] for o in unreachable["offsets"]] == [0]
        assert describe(broker, group, f"--metrics {url}")["in_flight"] == n

        accept_all(consumer, held)
        s = Samples.scrape(url)
        assert s.value(ACQUIRED, **labels) == 0
        assert s.value(IN_FLIGHT, **labels) == 0
        assert s.value(ACCEPTED, ackType="Accept") == n
        meters = "kafka_server_brokertopicmetrics_"
        assert s.value(meters + "totalsharefetchrequests_total", topic=topic) >= 1
        assert s.value(meters + "totalshareacknowledgementrequests_total", topic=topic) >= 1
        assert s.value(meters + "failedsharefetchrequests_total", topic=topic) == 0
        assert s.value(meters + "failedshareacknowledgementrequests_total", topic=topic) == 0
        after = describe(broker, group)
        assert [(o["start_offset"], o["lag"], o["in_flight"]) for o in after["offsets"]] == [
            (n, RECORDS - n, 0)
        ]
        assert after["in_flight"] == 0
