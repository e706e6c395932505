"""KIP-392 fetch from the closest replica, with librdkafka's ``client.rack`` on a cluster
of two racks: node 1 and 2 in r1, node 3 in r2, every partition on all three."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.config.broker import RACK_AWARE_SELECTOR
from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.integration.group_helpers import poll_all
from tests.integration.helpers import (
    DEADLINE_S,
    Consumed,
    Got,
    assert_log_matches,
    make_records,
    produce_confluent,
)
from tests.integration.test_consumer_groups import consumer_member
from tests.metrics.helpers import Samples

RACKS = ["r1", "r1", "r2"]
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    configs = {
        **TEST_DEFAULTS,
        "replica.selector.class": RACK_AWARE_SELECTOR,
        "group.consumer.heartbeat.interval.ms": 500,
    }
    cluster = ClusterProcess(
        3, RACKS, configs, data_dir=tmp_path_factory.mktemp("racked"), metrics=True
    )
    try:
        yield cluster.start()
    finally:
        cluster.close()


def bytes_out(cluster: ClusterProcess, node: int, topic: str) -> float:
    samples = Samples.scrape(cluster.metrics_url(node))
    return samples.values.get((BYTES_OUT, frozenset({("topic", topic)})), 0.0)


def consume(bootstrap: str, topic: str, ends: dict[int, int], **config: str) -> Consumed:
    """librdkafka from offset 0 of each partition in ``ends`` up to its end offset."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False} | config
    )
    out: Consumed = {p: [] for p in ends}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + DEADLINE_S
        while any(len(out[p]) < end for p, end in ends.items()):
            assert time.monotonic() < deadline, f"stuck at {[len(v) for v in out.values()]}"
            for m in consumer.consume(500, timeout=0.5):
                assert m.error() is None, m.error()
                headers = tuple(m.headers() or ())
                out[m.partition()].append(
                    Got(m.partition(), m.offset(), m.key(), m.value(), headers, None)
                )
    finally:
        consumer.close()
    return out


def test_consumer_in_r2_reads_from_the_r2_follower(racked: ClusterProcess, topic: str) -> None:
    racked.create_topic(topic, 3, replication_factor=3)
    leaders = {p: racked.leader(topic, p) for p in range(3)}
    remote = {p: leader for p, leader in leaders.items() if leader != 3}
    assert remote, f"every partition is led from r2: {leaders}"
    records = make_records(300, seed=392)
    acked = produce_confluent(racked.bootstrap_servers, topic, records, acks="all")
    ends = {p: sum(1 for part, _ in acked.values() if part == p) for p in remote}
    expected = [r for r in records if acked[r.value][0] in remote]
    before = {node: bytes_out(racked, node, topic) for node in (1, 2, 3)}

    consumed = consume(racked.bootstrap_servers, topic, ends, **{"client.rack": "r2"})

    assert_log_matches(expected, consumed, acked=acked)
    for node in set(remote.values()):
        assert bytes_out(racked, node, topic) == before[node], f"r1 leader {node} served"
    assert bytes_out(racked, 3, topic) > before[3], "the r2 follower served nothing"

    # Without client.rack the same reads come from the leaders: the counters do move.
    assert_log_matches(expected, consume(racked.bootstrap_servers, topic, ends), acked=acked)
    assert sum(bytes_out(racked, n, topic) for n in set(remote.values())) > sum(
        before[n] for n in set(remote.values())
    )


def test_kip848_members_get_the_partitions_of_their_rack(
    racked: ClusterProcess, topic: str
) -> None:
    """group.protocol=consumer members with client.rack r1 and r2: the broker's uniform
    assignor gives each the partitions whose one replica is in its rack (node 3 is r2)."""
    client = AdminClient({"bootstrap.servers": racked.bootstrap_servers})
    placement = [[1], [3], [2], [3]]  # partitions 0 and 2 in r1, 1 and 3 in r2
    client.create_topics([NewTopic(topic, len(placement), replica_assignment=placement)])[
        topic
    ].result(30)
    group = f"group-{topic}"
    members = [
        consumer_member(racked.bootstrap_servers, group, [topic], rack, **{"client.rack": rack})
        for rack in ("r1", "r2")
    ]
    try:
        poll_all(
            members,
            lambda: [m.owned() for m in members] == [frozenset({0, 2}), frozenset({1, 3})],
            "each member to hold its rack's partitions",
        )
    finally:
        for m in members:
            m.consumer.close()
