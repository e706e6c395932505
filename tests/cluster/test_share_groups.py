"""A share group (KIP-932) on a 3-node cluster with more share consumers than partitions:
a consumer killed -9 while it holds acquired records loses them to the others once the
acquisition lock expires, and every record is acknowledged exactly once. Its offsets are
described and altered through the group's coordinator whichever nodes lead the
partitions (the share coordinator holds them), and a new consumer starts where altered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter

import pytest
from confluent_kafka import ShareConsumer

from moldau.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from moldau.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from tests.cluster.conftest import NewCluster
from tests.integration.helpers import (
    RawClient,
    alter_group_config,
    confluent_producer,
    wait_until,
)

LOCK_MS = 3_000
PARTITIONS, RECORDS = 2, 300

# A share consumer that acquires one poll of records, reports their (partition, offset)
# and delivery counts, and then holds them without acknowledging until it is killed.
_HOLDER = """
import json, sys, time
import pytest
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit", "max.poll.records": 40})
c.subscribe([sys.argv[3]])
while True:
    got = [m for m in c.poll(1.0) if m.error() is None]
    if got:
        print(json.dumps([[m.partition(), m.offset(), m.delivery_count()] for m in got]), flush=True)
        time.sleep(3600)
"""


@pytest.mark.slow  # ~65 s: a cluster, a killed consumer, a lock to expire, an alter
def test_killed_share_consumer_records_go_to_the_others_each_acknowledged_once(
    new_cluster: NewCluster, topic: str
) -> None:
    cluster = new_cluster(3, group_share_record_lock_duration_ms=LOCK_MS)
    bootstrap, group = cluster.bootstrap_servers, f"share-{topic}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    alter_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    producer = confluent_producer(bootstrap)
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    expected = {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}

    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        held = {(p, o) for p, o, count in json.loads(holder.stdout.readline()) if count == 1}
        assert held, "the holder acquired records"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)

    got: list[list[tuple[int, int, int]]] = [[], [], []]  # three consumers, two partitions
    done = threading.Event()

    def consume(i: int) -> None:
        consumer = ShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 50}
        )
        consumer.subscribe([topic])
        try:
            while not done.is_set():
                for m in consumer.poll(0.5):
                    if m.error() is None:
                        got[i].append((m.partition(), m.offset(), m.delivery_count()))
            consumer.commit_sync()  # acknowledges the last poll
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(
            lambda: {(p, o) for g in got for p, o, _ in g} >= expected,
            f"{RECORDS} records",
            timeout=90,
        )
    finally:
        done.set()
        for t in threads:
            t.join(30)
    everything = [r for g in got for r in g]
    counts = Counter((p, o) for p, o, _ in everything)
    assert set(counts) == expected, "every record delivered"
    assert [r for r, c in counts.items() if c > 1] == [], "each record acknowledged once"
    redelivered = {(p, o): d for p, o, d in everything if (p, o) in held}
    assert set(redelivered) == held and all(d >= 2 for d in redelivered.values())
    assert sum(1 for g in got if g) >= 2, "the consumers shared the work"
    # Everything was acknowledged: a new member of the group gets nothing.
    late = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    late.subscribe([topic])
    try:
        assert [m for _ in range(4) for m in late.poll(0.5) if m.error() is None] == []
    finally:
        late.close()
    _alter_on_the_coordinator_and_consume_again(bootstrap, group, topic)


def _coordinator(bootstrap: str, group: str) -> str:
    found: list[str] = []

    def find() -> bool:
        with RawClient(bootstrap.split(",")[0]) as raw:
            [c] = raw.request(FindCoordinatorRequest(coordinator_keys=[group]), 4).coordinators
        if not c.error_code:
            found.append(f"{c.host}:{c.port}")
        return bool(found)

    wait_until(find, "the group coordinator")
    return found[0]


def _alter_on_the_coordinator_and_consume_again(bootstrap: str, group: str, topic: str) -> None:
    """Every partition's durable start offset is described (no NOT_LEADER_OR_FOLLOWER for
    those led elsewhere); after an alter the leaders' idle share-partitions are read
    again when a consumer opens its sessions, and it gets the records from there."""
    end = RECORDS // PARTITIONS
    with RawClient(_coordinator(bootstrap, group)) as raw:

        def empty() -> bool:
            [g] = raw.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups
            return g.group_state == "Empty"

        wait_until(empty, "the group empty")
        describe = DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]
        )
        [described] = raw.request(describe, 1).groups
        offsets = {
            (p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in described.topics
            for p in t.partitions
        }
        assert offsets == {(p, end, 0, 0) for p in range(PARTITIONS)}
        parts = [AlterShareGroupOffsetsRequestPartition(p, end - 5) for p in range(PARTITIONS)]
        alter = AlterShareGroupOffsetsRequest(
            group_id=group, topics=[AlterShareGroupOffsetsRequestTopic(topic, parts)]
        )
        [altered] = raw.request(alter, 0).responses
        assert [p.error_code for p in altered.partitions] == [0] * PARTITIONS
    again: set[tuple[int, int]] = set()
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        wait_until(
            lambda: (
                bool(
                    again.update(
                        (m.partition(), m.offset()) for m in consumer.poll(0.5) if m.error() is None
                    )
                )
                or len(again) >= 5 * PARTITIONS
            ),
            "the records from the altered offsets",
        )
        consumer.commit_sync()
    finally:
        consumer.close()
    assert again == {(p, o) for p in range(PARTITIONS) for o in range(end - 5, end)}
