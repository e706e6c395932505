"""The code under test: a small order pipeline on confluent-kafka.

Orders are published keyed by customer (so each customer's orders stay in order, in one
partition); a billing consumer group reads them and totals the amounts per customer.
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, Producer


def publish_orders(bootstrap_servers: str, topic: str, orders: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    for order in orders:
        producer.produce(topic, key=order["customer"], value=json.dumps(order))
    if producer.flush(30):
        raise RuntimeError("some orders were not delivered")


def bill(bootstrap_servers: str, topic: str, group: str, count: int) -> dict[str, int]:
    """Read ``count`` new orders as a member of ``group``, commit, and total them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    totals: dict[str, int] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        seen = 0
        while seen < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(msg.error())
            order = json.loads(msg.value())
            totals[order["customer"]] = totals.get(order["customer"], 0) + order["cents"]
            seen += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return totals
