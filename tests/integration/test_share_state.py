"""Durable share state (KIP-932's share coordinator and ``__share_group_state``): what a
share group acknowledged survives a kill -9 of its broker, and what it did not is
delivered again, with confluent-kafka's ShareConsumer against a real broker process; the
group's membership survives too (``__consumer_offsets``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, TopicPartition

from moldau.metadata.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC
from moldau.protocol.coordinator_record_serde import (
    GROUP_RECORD_TYPES,
    SHARE_RECORD_TYPES,
    deserialize,
)
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages import delete_share_group_state_request as dq
from moldau.protocol.messages import initialize_share_group_state_request as iq
from moldau.protocol.messages import read_share_group_state_request as rq
from moldau.protocol.messages import read_share_group_state_summary_request as sq
from moldau.protocol.messages import write_share_group_state_request as wq
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.share_group_describe_request import ShareGroupDescribeRequest
from moldau.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from moldau.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from moldau.testing import BrokerProcess
from tests.integration.helpers import (
    RawClient,
    confluent_consumer,
    confluent_producer,
    create_topic,
    delete_topic,
    metadata_request,
    wait_until,
    watermarks,
)
from tests.integration.test_share_groups import (
    _describe_offsets,
    _offsets,
    poll,
    setup,
    share_consumer,
)

EXPLICIT = {"share.acknowledgement.mode": "explicit"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        tmp_path_factory.mktemp("share-state"),
        {"group.share.record.lock.duration.ms": "60000"},  # no redelivery by lock expiry
    ) as running:
        yield running


def test_after_kill_9_only_the_unacknowledged_records_are_delivered_again(
    broker: BrokerProcess, topic: str
) -> None:
    n, group = 40, f"{topic}-g"
    setup(broker.bootstrap_servers, topic, group, n)
    first = share_consumer(broker.bootstrap_servers, group, topic, **EXPLICIT)
    delivered: dict[int, Message] = {}
    try:
        wait_until(
            lambda: bool(delivered.update({m.offset(): m for m in poll(first)})) or delivered,
            "the first consumer's records",
        )
        done = {o for o in delivered if o % 3 == 0 or o < 5 or o == 7}  # 7 is rejected
        for o in sorted(done):
            kind = AcknowledgeType.REJECT if o == 7 else AcknowledgeType.ACCEPT
            first.acknowledge(delivered[o], kind)
        first.commit_sync()  # answered once the acknowledgements are durable
        broker.kill()  # the first consumer still holds the rest
        broker.start()
        second = share_consumer(broker.bootstrap_servers, group, topic, **EXPLICIT)
        try:
            again: dict[int, int] = {}

            def take() -> bool:
                for m in poll(second):
                    assert m.offset() not in again, f"{m.offset()} delivered twice"
                    again[m.offset()] = m.delivery_count()
                    second.acknowledge(m, AcknowledgeType.ACCEPT)
                second.commit_sync()
                return len(again) >= n - len(done)

            wait_until(take, "the unacknowledged records", timeout=60)
            assert sorted(again) == sorted(set(range(n)) - done)
            # Each record's delivery count says how often it was handed out before.
            assert again == {o: 2 if o in delivered else 1 for o in again}
            assert [m for _ in range(3) for m in poll(second)] == []
        finally:
            second.close()
        # What the second consumer accepted is durable too: a restart hands out nothing.
        broker.kill()
        broker.start()
        third = share_consumer(broker.bootstrap_servers, group, topic)
        try:
            assert [m.offset() for _ in range(6) for m in poll(third)] == []
        finally:
            third.close()
    finally:
        first.close()


def _heartbeat(
    broker: BrokerProcess, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    """One ShareGroupHeartbeat, after FindCoordinator (which creates __consumer_offsets)
    as a client does, retried while the coordinator loads after a start."""
    answer: list[ShareGroupHeartbeatResponse] = []

    def send() -> bool:
        with RawClient(broker.bootstrap) as raw:
            raw.request(FindCoordinatorRequest(coordinator_keys=[request.group_id]), 4)
            response = raw.request(request, 1)
        retriable = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        if response.error_code in retriable:
            return False
        answer.append(response)
        return True

    wait_until(send, "an answer from the group coordinator")
    return answer[0]


def test_a_share_group_survives_kill_9_of_its_coordinator(
    broker: BrokerProcess, topic: str
) -> None:
    group = f"{topic}-g"
    create_topic(broker.bootstrap_servers, topic, partitions=2)

    def beat(member: str, epoch: int, topics: list[str] | None = None) -> int:
        request = ShareGroupHeartbeatRequest(group, member, epoch, None, topics)
        response = _heartbeat(broker, request)
        assert response.error_code == ErrorCode.NONE, response
        return response.member_epoch

    beat("m1", 0, [topic])
    beat("m2", 0, [topic])
    beat("m3", 0, [topic])
    beat("m3", -1)  # left: not restored
    epoch = beat("m1", 1)  # catches up with the group epoch
    before = _describe(broker, group)
    broker.kill()
    broker.start()
    # m1 goes on with the epoch it had: the coordinator knows it (no UNKNOWN_MEMBER_ID),
    # does not fence it and has nothing new to hand it (its assignment was kept).
    after = _heartbeat(broker, ShareGroupHeartbeatRequest(group, "m1", epoch))
    assert (after.error_code, after.member_epoch, after.assignment) == (ErrorCode.NONE, epoch, None)
    described = _describe(broker, group)
    assert described.group_epoch == before.group_epoch == epoch
    assert _members(described) == _members(before)
    assert {m.member_id: m.subscribed_topic_names for m in described.members} == {
        "m1": [topic],
        "m2": [topic],
    }
    # m2 missed m3's join and leave: it gets the current target, as before the restart.
    m2 = _heartbeat(broker, ShareGroupHeartbeatRequest(group, "m2", 2))
    assert (m2.error_code, m2.member_epoch) == (ErrorCode.NONE, epoch)
    assert m2.assignment is not None


def _describe(broker: BrokerProcess, group: str) -> Any:
    with RawClient(broker.bootstrap) as raw:
        [described] = raw.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups
    assert described.error_code == 0, described
    return described


def _members(described: Any) -> dict[str, tuple[int, list[tuple[bytes, list[int]]]]]:
    """Each member's epoch and assigned partitions, as ShareGroupDescribe shows them."""
    return {
        m.member_id: (
            m.member_epoch,
            sorted((t.topic_id, sorted(t.partitions)) for t in m.assignment.topic_partitions),
        )
        for m in described.members
    }


def test_share_consumers_go_on_through_a_kill_9_without_a_new_epoch(
    broker: BrokerProcess, topic: str
) -> None:
    """Two ShareConsumers connected while their broker is killed -9 and restarted: they
    keep their member epochs (the group epoch does not move), every record is delivered,
    and none is delivered again once its acknowledgement was committed."""
    n, group = 60, f"{topic}-g"
    setup(broker.bootstrap_servers, topic, group, n)
    config = {**EXPLICIT, "max.poll.records": 5}
    consumers = [share_consumer(broker.bootstrap_servers, group, topic, **config) for _ in "ab"]
    delivered: Counter[int] = Counter()
    acked: set[int] = set()
    quiet = [0]

    def step() -> None:
        got = 0
        for c in consumers:
            batch = poll(c)
            for m in batch:
                assert m.offset() not in acked, f"{m.offset()} delivered after its commit"
                delivered[m.offset()] += 1
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch and all(e is None for e in c.commit_sync().values()):
                acked.update(m.offset() for m in batch)
            got += len(batch)
        quiet[0] = 0 if got else quiet[0] + 1

    try:
        wait_until(lambda: step() or len(acked) >= n // 3, "a third of the records")
        settled: list[Any] = []

        def both_members_settled() -> bool:
            settled[:] = [_describe(broker, group)]
            epochs = {m.member_epoch for m in settled[0].members}
            return len(settled[0].members) == 2 and epochs == {settled[0].group_epoch}

        wait_until(both_members_settled, "both members at the group epoch", timeout=60)
        [before] = settled
        assert not any(c > 1 for c in delivered.values())
        broker.kill()
        broker.start()
        wait_until(
            lambda: step() or (len(delivered) == n and quiet[0] >= 3),
            "every record after the restart",
            timeout=90,
        )
        described = _describe(broker, group)
        assert described.group_epoch == before.group_epoch
        assert _members(described) == _members(before)
    finally:
        for c in consumers:
            c.close()
    assert sorted(delivered) == list(range(n))
    late = share_consumer(broker.bootstrap_servers, group, topic)
    try:
        assert [m.offset() for _ in range(4) for m in poll(late)] == []
    finally:
        late.close()


def test_the_share_state_apis_answer_as_kafkas_share_coordinator(
    broker: BrokerProcess, topic: str
) -> None:
    """Initialize/Read/Write/Delete ShareGroupState and the summary, on the wire."""
    # As in Kafka, __share_group_state is made by the first share-partition leader that
    # persists state, not by these APIs: a share consumer's first records make it.
    setup(broker.bootstrap_servers, f"{topic}-first", f"{topic}-first-g", 1)
    first = share_consumer(broker.bootstrap_servers, f"{topic}-first-g", f"{topic}-first")
    try:
        wait_until(lambda: poll(first), "a share consumer's first record")
    finally:
        first.close()
    create_topic(broker.bootstrap_servers, topic, partitions=1)
    group = f"{topic}-g"
    with RawClient(broker.bootstrap) as raw:
        served = {k.api_key for k in raw.request(ApiVersionsRequest(), 3).api_keys}
        assert {83, 84, 85, 86, 87} <= served
        [meta] = raw.request(metadata_request([topic]), 12).topics
        tid = meta.topic_id

        def read() -> tuple[int, int, int, list[tuple[int, int, int, int]]]:
            request = rq.ReadShareGroupStateRequest(
                group, [rq.ReadStateData(tid, [rq.PartitionData(0, -1)])]
            )
            [result] = raw.request(request, 0).results[0].partitions
            batches = [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in result.state_batches
            ]
            return result.error_code, result.start_offset, result.state_epoch, batches

        def first_error(response: Any) -> int:
            code: int = response.results[0].partitions[0].error_code
            return code

        def until_served(request: Any) -> int:
            """Retried while the coordinator of the group's state partition loads."""
            codes: list[int] = []
            loading = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)

            def served() -> bool:
                codes.append(first_error(raw.request(request, 0)))
                return codes[-1] not in loading

            wait_until(served, "the share coordinator")
            return codes[-1]

        initialize = iq.InitializeShareGroupStateRequest(
            group, [iq.InitializeStateData(tid, [iq.PartitionData(0, 1, 5)])]
        )
        assert until_served(initialize) == ErrorCode.NONE
        assert read() == (ErrorCode.NONE, 5, 1, [])
        batch = wq.StateBatch(5, 7, 2, 1)
        write = wq.WriteShareGroupStateRequest(
            group, [wq.WriteStateData(tid, [wq.PartitionData(0, 1, 0, 5, [batch])])]
        )
        assert first_error(raw.request(write, 0)) == ErrorCode.NONE
        assert read() == (ErrorCode.NONE, 5, 1, [(5, 7, 2, 1)])
        stale = wq.WriteShareGroupStateRequest(
            group, [wq.WriteStateData(tid, [wq.PartitionData(0, 0, 0, 9, [])])]
        )
        assert first_error(raw.request(stale, 0)) == ErrorCode.FENCED_STATE_EPOCH
        summary = sq.ReadShareGroupStateSummaryRequest(
            group, [sq.ReadStateSummaryData(tid, [sq.PartitionData(0, -1)])]
        )
        [result] = raw.request(summary, 0).results[0].partitions
        assert (result.error_code, result.start_offset, result.state_epoch) == (0, 5, 1)
        unknown = iq.InitializeShareGroupStateRequest(
            group, [iq.InitializeStateData(b"x" * 16, [iq.PartitionData(0, 1, 0)])]
        )
        assert first_error(raw.request(unknown, 0)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        delete = dq.DeleteShareGroupStateRequest(
            group, [dq.DeleteStateData(tid, [dq.PartitionData(0)])]
        )
        assert first_error(raw.request(delete, 0)) == ErrorCode.NONE
        # As Kafka 4.1: state that does not exist is not read; its summary is -1.
        assert read() == (ErrorCode.INVALID_REQUEST, -1, 0, [])
        [result] = raw.request(summary, 0).results[0].partitions
        assert (result.error_code, result.start_offset) == (0, -1)


def _latest(bootstrap: str, topic: str) -> dict[bytes, bytes | None]:
    """Each key's last value in an internal topic (None: a tombstone), read to the end
    with a plain consumer."""
    ends = {p: hw for p, (_, hw) in watermarks(bootstrap, topic).items() if hw > 0}
    consumer = confluent_consumer(bootstrap, **{"auto.offset.reset": "earliest"})
    latest: dict[bytes, bytes | None] = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        left = dict(ends)

        def read() -> bool:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    latest[m.key()] = m.value()
                    if m.offset() + 1 >= left.get(m.partition(), 0):
                        left.pop(m.partition(), None)
            return not left

        wait_until(read, f"{topic} read to its end")
    finally:
        consumer.close()
    return latest


def _share_state_topics(bootstrap: str, group: str) -> tuple[set[bytes], list[set[bytes]]]:
    """The topic ids of ``group``'s share state in ``__share_group_state``, and of its
    ShareGroupStatePartitionMetadata (initialized, initializing, deleting)."""
    stored = {
        record.key.topic_id
        for key, value in _latest(bootstrap, SHARE_STATE_TOPIC).items()
        if value is not None
        and (record := deserialize(SHARE_RECORD_TYPES, key, value)).key.group_id == group
    }
    metadata = [set(), set(), set()]
    for key, value in _latest(bootstrap, OFFSETS_TOPIC).items():
        record = deserialize(GROUP_RECORD_TYPES, key, value)
        if record.record_type == 15 and record.key.group_id == group and value is not None:
            v = record.value
            metadata = [
                {t.topic_id for t in v.initialized_topics},
                {t.topic_id for t in v.initializing_topics},
                {t.topic_id for t in v.deleting_topics},
            ]
    return stored, metadata


def test_a_topic_deleted_and_created_again_starts_afresh_for_the_share_group(
    broker: BrokerProcess, topic: str
) -> None:
    """As Kafka 4.1: deleting a topic removes it from the share group's initialized topics
    and its state from ``__share_group_state``; the topic created again under its name is
    a new share-partition, started at the group's ``share.auto.offset.reset`` (``latest``,
    the default), so the consumer gets exactly what is produced to it from then on."""
    bootstrap, group = broker.bootstrap_servers, f"{topic}-g"
    producer = confluent_producer(bootstrap)

    def produce(prefix: str, n: int) -> None:
        for i in range(n):
            producer.produce(topic, value=b"%s-%d" % (prefix.encode(), i))
        assert producer.flush(30) == 0

    def described_start(raw: RawClient) -> int:
        return _offsets(_describe_offsets(raw, group, [(topic, [0])])).get((topic, 0), (-1,))[0]

    def take(consumer: Any, n: int) -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        wait_until(
            lambda: (
                bool(got.extend((m.offset(), m.value()) for m in poll(consumer))) or len(got) >= n
            ),
            f"{n} records",
        )
        consumer.commit_sync()
        return got

    create_topic(bootstrap, topic, partitions=1)
    produce("before", 3)  # before the group's first fetch: latest skips them
    consumer = share_consumer(bootstrap, group, topic)
    try:
        with RawClient(broker.bootstrap) as raw:
            early: list[Message] = []  # latest: nothing from before the state is set
            wait_until(lambda: early.extend(poll(consumer)) or described_start(raw) == 3, "at 3")
            produce("old", 4)
            assert take(consumer, 4) == [(3 + i, b"old-%d" % i) for i in range(4)]
            [meta] = raw.request(metadata_request([topic]), 12).topics
            old_id = meta.topic_id
            assert _share_state_topics(bootstrap, group) == (
                {old_id},
                [{old_id}, set(), set()],
            )

            delete_topic(bootstrap, topic)
            wait_until(lambda: _share_state_topics(bootstrap, group)[0] == set(), "state gone")
            # As Kafka 4.1's share coordinator: the state is looked up before the topic.
            read_old = rq.ReadShareGroupStateRequest(
                group, [rq.ReadStateData(old_id, [rq.PartitionData(0, -1)])]
            )
            [result] = raw.request(read_old, 0).results[0].partitions
            assert (result.error_code, result.start_offset) == (ErrorCode.INVALID_REQUEST, -1)
            create_topic(bootstrap, topic, partitions=1)
            [meta] = raw.request(metadata_request([topic]), 12).topics
            new_id = meta.topic_id
            assert new_id != old_id
            # The consumer goes on; the new share-partition starts at the high watermark.
            wait_until(lambda: early.extend(poll(consumer)) or described_start(raw) == 0, "at 0")
            produce("new", 5)
            assert take(consumer, 5) == [(i, b"new-%d" % i) for i in range(5)]
            assert early == []
            assert _share_state_topics(bootstrap, group) == ({new_id}, [{new_id}, set(), set()])
    finally:
        consumer.close()
