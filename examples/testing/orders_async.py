"""The code under test, on aiokafka: the same order pipeline as ``orders.py``."""

from __future__ import annotations

import asyncio
import json

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def publish_orders(bootstrap_servers: str, topic: str, orders: list[dict]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, enable_idempotence=True)
    await producer.start()
    try:
        for order in orders:
            await producer.send(
                topic, key=order["customer"].encode(), value=json.dumps(order).encode()
            )
        await producer.flush()
    finally:
        await producer.stop()


async def bill(bootstrap_servers: str, topic: str, group: str, count: int) -> dict[str, int]:
    """Read ``count`` new orders as a member of ``group``, commit, and total them."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    totals: dict[str, int] = {}
    try:
        async with asyncio.timeout(30):
            seen = 0
            async for msg in consumer:
                order = json.loads(msg.value)
                totals[order["customer"]] = totals.get(order["customer"], 0) + order["cents"]
                seen += 1
                if seen == count:
                    break
        await consumer.commit()
    finally:
        await consumer.stop()
    return totals
