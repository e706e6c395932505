"""Share groups (KIP-932) end to end with confluent-kafka's ShareConsumer: several
consumers on ONE partition, each record acknowledged exactly once; records a consumer
holds without acknowledging go to another after the acquisition lock; REJECT archives; a
record released again and again is archived after ``group.share.delivery.count.limit``."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, ShareConsumer
from confluent_kafka.admin import ConfigResource

from moldau.protocol.messages.list_groups_request import ListGroupsRequest
from moldau.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    RawClient,
    admin,
    alter_group_config,
    confluent_producer,
    create_topic,
    wait_until,
)

LOCK_MS = 2_000  # group.share.record.lock.duration.ms of this module's broker


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        tmp_path_factory.mktemp("share"),
        {"group.share.record.lock.duration.ms": str(LOCK_MS)},
    ) as running:
        yield running


def share_consumer(bootstrap: str, group: str, topic: str, **config: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    consumer.subscribe([topic])
    return consumer


def setup(bootstrap: str, topic: str, group: str, n: int) -> None:
    """A one-partition topic of ``n`` records and a group reading it from the start."""
    create_topic(bootstrap, topic, partitions=1)
    alter_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    producer = confluent_producer(bootstrap)
    for i in range(n):
        producer.produce(topic, key=b"%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0


def poll(consumer: ShareConsumer, timeout: float = 0.5) -> list[Message]:
    return [m for m in consumer.poll(timeout) if m.error() is None]


def test_three_consumers_share_one_partition_each_record_once(
    share_broker: BrokerProcess, topic: str
) -> None:
    n, group = 900, f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, n)
    got: list[list[tuple[int, bytes]]] = [[], [], []]
    done = threading.Event()

    def consume(i: int) -> None:
        consumer = share_consumer(bootstrap, group, topic, **{"max.poll.records": 50})
        try:
            while not done.is_set():
                got[i] += [(m.offset(), m.value()) for m in poll(consumer)]
                time.sleep(0.01)  # let the others fetch too
            consumer.commit_sync()  # acknowledges the last poll; close() would release it
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: sum(map(len, got)) >= n, f"{n} records", timeout=60)
    finally:
        done.set()
        for t in threads:
            t.join(30)
    everything = [r for g in got for r in g]
    counts = Counter(offset for offset, _ in everything)
    assert sorted(counts) == list(range(n)), "every record delivered"
    assert [o for o, c in counts.items() if c > 1] == [], "no record delivered twice"
    assert all(value == b"v%d" % offset for offset, value in everything)
    assert sum(1 for g in got if g) >= 2, "the consumers shared the partition"
    # Everything was acknowledged: a new consumer of the group gets nothing.
    late = share_consumer(bootstrap, group, topic)
    try:
        assert [m for _ in range(4) for m in poll(late)] == []
    finally:
        late.close()


def test_records_held_without_acknowledgement_go_to_another_consumer_after_the_lock(
    share_broker: BrokerProcess, topic: str
) -> None:
    group = f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, 20)
    holder = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    other = share_consumer(bootstrap, group, topic)
    try:
        held: list[Message] = []
        wait_until(lambda: bool(held.extend(poll(holder)) or held), "the holder's records")
        held_offsets = {m.offset() for m in held}
        assert all(m.delivery_count() == 1 for m in held)
        # The holder stays in the group (heartbeating) but never acknowledges.
        started = time.monotonic()
        redelivered: dict[int, int] = {}

        def take() -> bool:
            for m in poll(other):
                redelivered[m.offset()] = m.delivery_count()
            return held_offsets <= redelivered.keys()

        wait_until(take, "the held records redelivered", timeout=30)
        assert time.monotonic() - started >= LOCK_MS / 1000 * 0.5
        assert all(redelivered[o] == 2 for o in held_offsets)
    finally:
        other.close()
        holder.close()


def test_reject_archives_and_the_delivery_limit_archives_a_poison_record(
    share_broker: BrokerProcess, topic: str
) -> None:
    group = f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, 3)
    consumer = share_consumer(bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries: Counter[int] = Counter()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and deliveries[1] < 6:
            messages = poll(consumer)
            for m in messages:
                deliveries[m.offset()] += 1
                assert m.delivery_count() == deliveries[m.offset()]
                kind = {0: AcknowledgeType.REJECT, 1: AcknowledgeType.RELEASE}.get(
                    m.offset(), AcknowledgeType.ACCEPT
                )
                consumer.acknowledge(m, kind)
            if messages:
                consumer.commit_sync()
            elif deliveries[1] == 5:
                break  # the poison record was archived: no sixth delivery
        assert deliveries == {0: 1, 1: 5, 2: 1}
        assert [m for _ in range(4) for m in poll(consumer)] == []
    finally:
        consumer.close()


def test_group_configs_are_described_and_validated(share_broker: BrokerProcess) -> None:
    bootstrap = share_broker.bootstrap_servers
    alter_group_config(bootstrap, "configured", {"share.record.lock.duration.ms": "20000"})
    client = admin(bootstrap)
    [future] = client.describe_configs(
        [ConfigResource(ConfigResource.Type.GROUP, "configured")]
    ).values()
    configs = future.result(timeout=30)
    assert configs["share.record.lock.duration.ms"].value == "20000"
    assert configs["share.auto.offset.reset"].value == "latest"
    assert configs["share.auto.offset.reset"].is_default
    with pytest.raises(Exception, match="share.record.lock.duration.ms"):
        alter_group_config(bootstrap, "configured", {"share.record.lock.duration.ms": "10"})
    with pytest.raises(Exception, match="no.such.config"):
        alter_group_config(bootstrap, "configured", {"no.such.config": "1"})


def test_share_groups_are_listed_by_type_and_described(
    share_broker: BrokerProcess, topic: str
) -> None:
    group = f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, 1)
    consumer = share_consumer(bootstrap, group, topic)
    try:
        wait_until(lambda: bool(poll(consumer)), "a record")
        with RawClient(share_broker.bootstrap) as raw:
            shares = raw.request(ListGroupsRequest(types_filter=["share"]), 5).groups
            classic = raw.request(ListGroupsRequest(types_filter=["classic"]), 5).groups
            [described] = raw.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups
        assert [
            (g.group_id, g.group_type, g.group_state) for g in shares if g.group_id == group
        ] == [(group, "share", "Stable")]
        assert group not in {g.group_id for g in classic}
        assert described.error_code == 0 and described.assignor_name == "simple"
        [member] = described.members
        [assigned] = member.assignment.topic_partitions
        assert (assigned.topic_name, assigned.partitions) == (topic, [0])
    finally:
        consumer.commit_sync()
        consumer.close()
