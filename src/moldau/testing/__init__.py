"""Test Kafka code against a real broker: ``moldau.testing.broker()`` and a pytest plugin.

::

    from moldau.testing import broker

    with broker(num_partitions=3) as b:          # or: async with broker() as b:
        b.create_topic("orders", partitions=3)
        my_app.run(bootstrap_servers=b.bootstrap_servers)
        assert [r.value for r in b.consume("orders", 2)] == [b"a", b"b"]
        b.restart()                               # same port, same data; b.kill() is kill -9

``cluster(nodes=3, racks=["r1", "r1", "r2"])`` is the same for a local KRaft cluster, with
``kill(node)``, ``restart(node)``, ``pause(node)`` and the same helpers
(:mod:`moldau.testing.cluster`).

With Moldau installed, pytest gets the fixtures ``moldau_broker`` (one broker for the
session), ``moldau_topic`` (a fresh topic per test) and ``moldau_cluster`` (one cluster for
the session); see :mod:`moldau.testing.plugin`.
"""

from moldau.testing.clients import ClientHelpers, ExternalCluster, Record
from moldau.testing.cluster import ClusterProcess, cluster
from moldau.testing.process import BrokerProcess, broker, running_brokers

__all__ = [
    "BrokerProcess",
    "ClientHelpers",
    "ClusterProcess",
    "ExternalCluster",
    "Record",
    "broker",
    "cluster",
    "running_brokers",
]
