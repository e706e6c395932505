"""A KIP-848 consumer group survives kill -9 of its coordinator: the group's records in
``__consumer_offsets`` are replayed by the new coordinator, so the member keeps its
member id, epoch and partitions (never fenced, nothing revoked), every record is still
consumed exactly once and the committed offsets are kept."""

from __future__ import annotations

import pytest

from tests.cluster.conftest import NewCluster
from tests.integration.group_helpers import group_offsets, poll_all
from tests.integration.helpers import admin
from tests.integration.test_consumer_groups import commit, consumer_member, produce, values

PARTITIONS = 4


@pytest.mark.slow
def test_consumer_group_survives_coordinator_kill_9(new_cluster: NewCluster, topic: str) -> None:
    cluster = new_cluster(3, group_consumer_heartbeat_interval_ms=500)
    bootstrap, group = cluster.bootstrap_servers, f"group-{topic}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    expected = produce(bootstrap, topic, 60, PARTITIONS, seed=1)
    member = consumer_member(bootstrap, group, [topic], "a")
    try:
        poll_all([member], lambda: set(values([member])) == expected, "the first records")
        commit(member)
        client = admin(bootstrap)  # must outlive its futures
        description = client.describe_consumer_groups([group])[group].result(30)
        coordinator = description.coordinator.id
        (before,) = description.members
        cluster.kill(coordinator)
        expected |= produce(bootstrap, topic, 60, PARTITIONS, seed=2)
        poll_all([member], lambda: set(values([member])) == expected, "records after the kill")
        commit(member)
        counts = values([member])
        assert max(counts.values()) == 1
        assert member.revokes() == [], member.events  # never fenced: its state survived
        assert member.owned() == frozenset(range(PARTITIONS))
        after = client.describe_consumer_groups([group])[group].result(30)
        assert after.coordinator.id != coordinator
        assert [m.member_id for m in after.members] == [before.member_id]
        assert after.members[0].target_assignment is not None
        assert {tp.partition for tp in after.members[0].target_assignment.topic_partitions} == set(
            range(PARTITIONS)
        )
        committed = group_offsets(bootstrap, group)
        assert sum(committed[(topic, p)] for p in range(PARTITIONS)) == 120
    finally:
        member.consumer.close()
