"""Durable share state on a 3-node cluster: the node leading the ``__share_group_state``
partition of a share group's state is killed -9; the share coordinator moves to a
replica, and a new share consumer gets exactly the records not acknowledged before."""

from __future__ import annotations

import pytest
from confluent_kafka import AcknowledgeType, Message

from moldau.metadata.topics import SHARE_STATE_TOPIC
from tests.cluster.conftest import NewCluster
from tests.integration.helpers import alter_group_config, confluent_producer, wait_until
from tests.integration.test_share_groups import poll, share_consumer

LOCK_MS = 3_000  # records the first consumer holds return to the group after this


@pytest.mark.slow
def test_killing_the_share_coordinator_loses_no_acknowledgement(new_cluster: NewCluster) -> None:
    cluster = new_cluster(**{"group.share.record.lock.duration.ms": str(LOCK_MS)})
    topic, group, n = "queue", "workers", 30
    cluster.create_topic(topic, 1, replication_factor=3)
    bootstrap = cluster.bootstrap_servers
    alter_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    producer = confluent_producer(bootstrap, acks="all")
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(30) == 0

    first = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    delivered: dict[int, Message] = {}
    try:
        wait_until(
            lambda: bool(delivered.update({m.offset(): m for m in poll(first)})) or delivered,
            "the first consumer's records",
        )
        done = {o for o in delivered if o % 2 == 0}
        for o in sorted(done):
            first.acknowledge(delivered[o], AcknowledgeType.ACCEPT)
        first.commit_sync()
        coordinator = cluster.leader(SHARE_STATE_TOPIC, 0)  # the acknowledgements are there
        assert coordinator >= 0
        cluster.kill(coordinator)
    finally:
        first.close()  # its records go back to the group (or it is gone with the kill)

    others = ",".join(cluster.node(i).bootstrap_servers for i in cluster.serving())
    second = share_consumer(others, group, topic, **{"share.acknowledgement.mode": "explicit"})
    got: dict[int, bytes | None] = {}
    try:

        def take() -> bool:
            for m in poll(second):
                assert m.offset() not in got, f"{m.offset()} delivered twice"
                got[m.offset()] = m.value()
                second.acknowledge(m, AcknowledgeType.ACCEPT)
            second.commit_sync()
            return len(got) >= n - len(done)

        wait_until(take, "the unacknowledged records", timeout=90)
        assert sorted(got) == sorted(set(range(n)) - done)
        assert all(value == b"v%d" % o for o, value in got.items())
        assert [m for _ in range(4) for m in poll(second)] == []
    finally:
        second.close()
