"""Share groups (KIP-932) end to end with confluent-kafka's ShareConsumer: several
consumers on ONE partition, each record acknowledged exactly once; records a consumer
holds without acknowledging go to another after the acquisition lock; REJECT archives; a
record released again and again is archived after ``group.share.delivery.count.limit``."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, ShareConsumer
from confluent_kafka.admin import ConfigResource

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.alter_share_group_offsets_request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from moldau.protocol.messages.delete_share_group_offsets_request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from moldau.protocol.messages.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from moldau.protocol.messages.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponseGroup,
)
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
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
from tests.integration.test_cli import moldau

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


def _describe_offsets(
    raw: RawClient, group: str, topics: list[tuple[str, list[int]]] | None, version: int = 1
) -> DescribeShareGroupOffsetsResponseGroup:
    request = DescribeShareGroupOffsetsRequest(
        groups=[
            DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=None
                if topics is None
                else [DescribeShareGroupOffsetsRequestTopic(t, ps) for t, ps in topics],
            )
        ]
    )
    [answer] = raw.request(request, version).groups
    return answer


def _offsets(answer: DescribeShareGroupOffsetsResponseGroup) -> dict[tuple[str, int], tuple]:
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
        for t in answer.topics
        for p in t.partitions
    }


def _alter(raw: RawClient, group: str, topic: str, offsets: dict[int, int]) -> Any:
    return raw.request(
        AlterShareGroupOffsetsRequest(
            group_id=group,
            topics=[
                AlterShareGroupOffsetsRequestTopic(
                    topic,
                    [AlterShareGroupOffsetsRequestPartition(p, o) for p, o in offsets.items()],
                )
            ],
        ),
        0,
    )


def _delete(raw: RawClient, group: str, topics: list[str]) -> Any:
    return raw.request(
        DeleteShareGroupOffsetsRequest(
            group_id=group, topics=[DeleteShareGroupOffsetsRequestTopic(t) for t in topics]
        ),
        0,
    )


def _drain(consumer: ShareConsumer, n: int) -> list[int]:
    """Offsets of the next ``n`` records (acknowledged by the next poll / commit)."""
    got: list[int] = []
    wait_until(
        lambda: bool(got.extend(m.offset() for m in poll(consumer))) or len(got) >= n,
        f"{n} records",
    )
    consumer.commit_sync()
    return got


def _wait_empty(raw: RawClient, group: str) -> None:
    def empty() -> bool:
        [g] = raw.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups
        return g.group_state == "Empty"

    wait_until(empty, f"{group} empty")


def test_share_group_offsets_described_altered_and_deleted(
    share_broker: BrokerProcess, topic: str
) -> None:
    group = f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, 10)
    with RawClient(share_broker.bootstrap) as raw:
        wait_until(  # as the admin client does first: finds (and so loads) the coordinator
            lambda: (
                raw.request(FindCoordinatorRequest(coordinator_keys=[group]), 4)
                .coordinators[0]
                .error_code
                == 0
            ),
            "the group coordinator",
        )
        assert _describe_offsets(raw, group, None).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        consumer = share_consumer(bootstrap, group, topic)
        try:
            assert sorted(_drain(consumer, 10)) == list(range(10))
            # A member is in the group: its offsets cannot change under it.
            assert _alter(raw, group, topic, {0: 0}).error_code == ErrorCode.NON_EMPTY_GROUP
            assert _delete(raw, group, [topic]).error_code == ErrorCode.NON_EMPTY_GROUP
        finally:
            consumer.close()
        _wait_empty(raw, group)
        assert _offsets(_describe_offsets(raw, group, None)) == {(topic, 0): (10, 0, 0)}
        v0 = _describe_offsets(raw, group, [(topic, [0]), ("no-such-topic", [0])], version=0)
        assert _offsets(v0) == {(topic, 0): (10, -1, 0), ("no-such-topic", 0): (-1, -1, 0)}

        answer = _alter(raw, group, topic, {0: 4, 7: 0})
        assert answer.error_code == 0
        [altered] = answer.responses
        assert [(p.partition_index, p.error_code) for p in altered.partitions] == [
            (0, 0),
            (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert _offsets(_describe_offsets(raw, group, [(topic, [0])])) == {(topic, 0): (4, 6, 0)}
        consumer = share_consumer(bootstrap, group, topic)
        try:
            assert sorted(_drain(consumer, 6)) == list(range(4, 10)), "redelivered from 4"
        finally:
            consumer.close()
        _wait_empty(raw, group)

        [deleted] = _delete(raw, group, [topic]).responses
        assert deleted.error_code == 0
        assert _offsets(_describe_offsets(raw, group, [(topic, [0])])) == {(topic, 0): (-1, -1, 0)}
        [again, unknown] = _delete(raw, group, [topic, "no-such-topic"]).responses
        assert again.error_code == unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (
            _alter(raw, "no-such-group", topic, {0: 0}).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        )


def _coordinator_ready(raw: RawClient, group: str) -> None:
    """As the admin client does first: find (and so load) the group's coordinator."""
    wait_until(
        lambda: (
            raw.request(FindCoordinatorRequest(coordinator_keys=[group]), 4)
            .coordinators[0]
            .error_code
            == 0
        ),
        "the group coordinator",
    )


def test_altered_offsets_are_durable_and_a_new_consumer_starts_there(
    share_broker: BrokerProcess, topic: str
) -> None:
    """AlterShareGroupOffsets goes to the share coordinator: it survives a restart of the
    broker, and the group's next consumer starts at the new offset."""
    group = f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, 10)
    consumer = share_consumer(bootstrap, group, topic)
    try:
        assert sorted(_drain(consumer, 10)) == list(range(10))
    finally:
        consumer.close()
    with RawClient(share_broker.bootstrap) as raw:
        _coordinator_ready(raw, group)
        _wait_empty(raw, group)
        [altered] = _alter(raw, group, topic, {0: 3}).responses
        assert [p.error_code for p in altered.partitions] == [0]
    share_broker.kill()
    share_broker.start()
    with RawClient(share_broker.bootstrap) as raw:
        _coordinator_ready(raw, group)
        wait_until(
            lambda: (
                _offsets(_describe_offsets(raw, group, [(topic, [0])])) == {(topic, 0): (3, 7, 0)}
            ),
            "the altered start offset after the restart",
        )
    consumer = share_consumer(bootstrap, group, topic)
    try:
        assert sorted(_drain(consumer, 7)) == list(range(3, 10)), "delivered again from 3"
    finally:
        consumer.close()


def test_read_committed_share_group_skips_open_and_aborted_transactions(
    share_broker: BrokerProcess, topic: str
) -> None:
    bootstrap = share_broker.bootstrap_servers
    committed, uncommitted = f"{topic}-rc", f"{topic}-ru"
    create_topic(bootstrap, topic, partitions=1)
    alter_group_config(
        bootstrap,
        committed,
        {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
    )
    alter_group_config(bootstrap, uncommitted, {"share.auto.offset.reset": "earliest"})
    producer = confluent_producer(bootstrap, **{"transactional.id": f"{topic}-txn"})
    producer.init_transactions(30)

    def transaction(prefix: bytes, n: int) -> None:
        producer.begin_transaction()
        for i in range(n):
            producer.produce(topic, value=b"%s%d" % (prefix, i))
        assert producer.flush(30) == 0

    transaction(b"c", 5)
    producer.commit_transaction(30)
    transaction(b"a", 5)
    producer.abort_transaction(30)
    transaction(b"open", 3)  # written, not committed yet: beyond the last stable offset
    consumer = share_consumer(bootstrap, committed, topic)
    got: list[bytes] = []

    def take(n: int) -> bool:
        got.extend(m.value() for m in poll(consumer))
        return len(got) >= n

    try:
        wait_until(lambda: take(5), "the committed records")
        assert not take(6), "nothing of the open transaction"
        producer.commit_transaction(30)
        wait_until(lambda: take(8), "the records of the transaction once committed")
        assert not take(9)
        consumer.commit_sync()
    finally:
        consumer.close()
    assert got == [b"c%d" % i for i in range(5)] + [b"open%d" % i for i in range(3)]
    # 5 + 5 + 3 records and 3 markers: all done (aborted ones archived, markers skipped).
    with RawClient(share_broker.bootstrap) as raw:
        _wait_empty(raw, committed)
        done = _offsets(_describe_offsets(raw, committed, [(topic, [0])]))
        assert done == {(topic, 0): (16, 0, 0)}
    # The same log read uncommitted delivers the aborted records too.
    dirty = share_consumer(bootstrap, uncommitted, topic)
    seen: list[bytes] = []
    try:
        wait_until(
            lambda: bool(seen.extend(m.value() for m in poll(dirty))) or len(seen) >= 13, "13"
        )
    finally:
        dirty.close()
    assert sorted(seen) == sorted(got + [b"a%d" % i for i in range(5)])


def test_cli_lists_and_describes_share_groups(share_broker: BrokerProcess, topic: str) -> None:
    group = f"{topic}-g"
    bootstrap = share_broker.bootstrap_servers
    setup(bootstrap, topic, group, 10)
    consumer = share_consumer(bootstrap, group, topic)
    try:
        assert sorted(_drain(consumer, 10)) == list(range(10))
        producer = confluent_producer(bootstrap)
        for i in range(5):
            producer.produce(topic, value=b"later%d" % i)
        assert producer.flush(30) == 0
        listed = json.loads(moldau(share_broker, "groups list --json").stdout)
        assert {"group": group, "type": "share", "state": "STABLE", "simple": False} in listed
        described = json.loads(moldau(share_broker, f"groups describe {group} --json").stdout)
        assert (described["type"], described["state"]) == ("share", "STABLE")
        [member] = described["members"]
        assert member["assignment"] == [{"topic": topic, "partition": 0}]
        [row] = described["offsets"]
        assert (row["start_offset"], row["log_end_offset"], row["lag"]) == (10, 15, 5)
    finally:
        consumer.close()
