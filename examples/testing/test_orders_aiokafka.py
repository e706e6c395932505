"""Testing the aiokafka order pipeline against a real broker.

The fixtures are the same as for confluent-kafka; each test runs its coroutine with
``asyncio.run`` (with pytest-asyncio installed, ``async def`` tests work as well, and
``async with broker() as b:`` starts a broker without blocking the event loop).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from orders_async import bill, publish_orders

from moldau.testing import broker

ORDERS = [
    {"id": 1, "customer": "ada", "cents": 1250},
    {"id": 2, "customer": "bob", "cents": 300},
    {"id": 3, "customer": "ada", "cents": 99},
    {"id": 4, "customer": "cyd", "cents": 4200},
    {"id": 5, "customer": "bob", "cents": 700},
]


@pytest.mark.moldau_topic(partitions=3)
def test_a_customers_orders_stay_in_one_partition_in_order(moldau_broker, moldau_topic):
    asyncio.run(publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS))

    records = moldau_broker.consume(moldau_topic, len(ORDERS))

    for customer in ("ada", "bob", "cyd"):
        mine = [r for r in records if r.key == customer.encode()]
        assert len({r.partition for r in mine}) == 1
        assert [json.loads(r.value)["id"] for r in mine] == [
            o["id"] for o in ORDERS if o["customer"] == customer
        ]


def test_billing_totals_per_customer(moldau_broker, moldau_topic):
    asyncio.run(publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS))

    totals = asyncio.run(bill(moldau_broker.bootstrap_servers, moldau_topic, "billing", 5))

    assert totals == {"ada": 1349, "bob": 1000, "cyd": 4200}


def test_billing_resumes_where_it_stopped_after_a_broker_restart():
    async def scenario():
        async with broker() as b:  # a broker of our own, since we restart it
            await publish_orders(b.bootstrap_servers, "orders", ORDERS[:3])
            first = await bill(b.bootstrap_servers, "orders", "billing", 3)
            await asyncio.to_thread(b.restart)  # same address, same data
            await publish_orders(b.bootstrap_servers, "orders", ORDERS[3:])
            return first, await bill(b.bootstrap_servers, "orders", "billing", 2)

    first, second = asyncio.run(scenario())

    assert first == {"ada": 1349, "bob": 300}
    assert second == {"cyd": 4200, "bob": 700}
