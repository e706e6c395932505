"""Test Kafka code against a real broker: ``moldau.testing.broker()`` and a pytest plugin.

::

    from moldau.testing import broker

    with broker(num_partitions=3) as b:          # or: async with broker() as b:
        b.create_topic("orders", partitions=3)
        my_app.run(bootstrap_servers=b.bootstrap_servers)
        assert [r.value for r in b.consume("orders", 2)] == [b"a", b"b"]
        b.restart()                               # same port, same data; b.kill() is kill -9

With Moldau installed, pytest gets the fixtures ``moldau_broker`` (one broker for the
session) and ``moldau_topic`` (a fresh topic per test); see :mod:`moldau.testing.plugin`.
A local multi-node ``cluster()`` will join ``broker()`` once Moldau runs as a cluster.
"""

from moldau.testing.clients import ClientHelpers, ExternalCluster, Record
from moldau.testing.process import BrokerProcess, broker, running_brokers

__all__ = [
    "BrokerProcess",
    "ClientHelpers",
    "ExternalCluster",
    "Record",
    "broker",
    "running_brokers",
]
