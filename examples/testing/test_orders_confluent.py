"""Testing the order pipeline against a real broker (confluent-kafka).

Installing Moldau is all the set-up: its pytest plugin provides ``moldau_broker`` (one
broker for the session) and ``moldau_topic`` (a fresh topic per test). A test that
restarts or kills its broker starts its own with ``moldau.testing.broker()``.
"""

from __future__ import annotations

import json

import pytest
from orders import bill, publish_orders

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
    publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS)

    records = moldau_broker.consume(moldau_topic, len(ORDERS))

    assert len(records) == len(ORDERS)
    for customer in ("ada", "bob", "cyd"):
        mine = [r for r in records if r.key == customer.encode()]
        assert len({r.partition for r in mine}) == 1
        assert [json.loads(r.value)["id"] for r in mine] == [
            o["id"] for o in ORDERS if o["customer"] == customer
        ]


def test_billing_totals_per_customer(moldau_broker, moldau_topic):
    publish_orders(moldau_broker.bootstrap_servers, moldau_topic, ORDERS)

    totals = bill(moldau_broker.bootstrap_servers, moldau_topic, "billing", len(ORDERS))

    assert totals == {"ada": 1349, "bob": 1000, "cyd": 4200}


def test_orders_written_by_another_service_are_billed(moldau_broker, moldau_topic):
    moldau_broker.produce(
        moldau_topic, ("dee", json.dumps({"id": 9, "customer": "dee", "cents": 5}))
    )

    assert bill(moldau_broker.bootstrap_servers, moldau_topic, "billing", 1) == {"dee": 5}


def test_billing_resumes_where_it_stopped_after_a_broker_restart():
    with broker() as b:  # a broker of our own, since we restart it
        b.create_topic("orders", partitions=2)
        publish_orders(b.bootstrap_servers, "orders", ORDERS[:3])
        assert bill(b.bootstrap_servers, "orders", "billing", 3) == {"ada": 1349, "bob": 300}

        b.restart()  # same address, same data: committed offsets survive
        publish_orders(b.bootstrap_servers, "orders", ORDERS[3:])

        assert bill(b.bootstrap_servers, "orders", "billing", 2) == {"cyd": 4200, "bob": 700}
