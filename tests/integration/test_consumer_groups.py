"""KIP-848 consumer groups end to end: confluent-kafka consumers with
``group.protocol=consumer`` against a real broker, checking the data (every record
consumed exactly once while partitions move between members) and what the admin APIs
report (ConsumerGroupDescribe, ListGroups with its type filter, committed offsets)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import ConsumerGroupType, KafkaError, KafkaException, TopicPartition

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.consumer_group_describe_request import (
    ConsumerGroupDescribeRequest,
)
from moldau.protocol.messages.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from moldau.protocol.messages.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.testing import BrokerProcess
from tests.integration.group_helpers import Member, group_offsets, poll_all
from tests.integration.helpers import (
    RawClient,
    admin,
    alter_group_config,
    create_topic,
    make_records,
    produce_confluent,
    wait_until,
)
from tests.integration.test_cli import moldau

BROKER = {"group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("consumer-groups"), BROKER) as running:
        yield running


def consumer_member(
    bootstrap: str, group: str, topics: list[str], name: str, **config: Any
) -> Member:
    """A ``group.protocol=consumer`` member that commits what it polled before every
    revocation, so a partition moving on resumes exactly where it left."""
    member: Member

    def on_error(err: KafkaError) -> None:
        member.errors.append(err)

    consumer = _Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": on_error,
            **config,
        }
    )
    member = Member(name, consumer)

    def on_assign(c: Any, partitions: list[TopicPartition]) -> None:
        member.events.append(("assign", frozenset(tp.partition for tp in partitions)))

    def on_revoke(c: Any, partitions: list[TopicPartition]) -> None:
        member.events.append(("revoke", frozenset(tp.partition for tp in partitions)))
        commit(member)

    consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
    return member


def commit(member: Member) -> None:
    try:
        member.consumer.commit(asynchronous=False)
    except Exception as e:  # noqa: BLE001 - nothing consumed yet (NO_OFFSET) is fine
        if "NO_OFFSET" not in str(e):
            raise


def produce(bootstrap: str, topic: str, n: int, partitions: int, seed: int) -> set[str]:
    records = [
        dataclasses.replace(r, value=b"s%d-" % seed + (r.value or b""), partition=i % partitions)
        for i, r in enumerate(make_records(n, seed=seed))
    ]
    produce_confluent(bootstrap, topic, records)
    return {r.value.decode("latin-1") for r in records if r.value is not None}


def values(members: list[Member]) -> Counter[str]:
    return Counter(v for m in members for _, _, v in m.records)


def test_members_share_partitions_exactly_once(cbroker: BrokerProcess, topic: str) -> None:
    bootstrap, group = cbroker.bootstrap, f"group-{topic}"
    create_topic(bootstrap, topic, partitions=4)
    expected = produce(bootstrap, topic, 80, 4, seed=1)
    a = consumer_member(bootstrap, group, [topic], "a")
    b: Member | None = None
    try:
        poll_all([a], lambda: set(values([a])) == expected, "the lone member's records")
        assert a.owned() == frozenset(range(4))
        commit(a)
        b = consumer_member(bootstrap, group, [topic], "b")
        members = [a, b]
        poll_all(
            members,
            lambda: len(a.owned()) == 2 and len(b.owned()) == 2,  # type: ignore[union-attr]
            "partitions to move to the second member",
        )
        assert not a.owned() & b.owned()
        expected |= produce(bootstrap, topic, 80, 4, seed=2)
        poll_all(members, lambda: set(values(members)) == expected, "every record")
        counts = values(members)
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
        assert b.records and {p for p, _, _ in b.records} == set(b.owned())
        for m in members:
            commit(m)
            assert not [e for e in m.errors if e.fatal()]

        client = admin(bootstrap)  # must outlive its futures
        description = client.describe_consumer_groups([group])[group].result(30)
        assert description.type == ConsumerGroupType.CONSUMER
        assert str(description.state).endswith("STABLE")
        described = {
            m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in description.members
        }
        assert described == {"a": set(a.owned()), "b": set(b.owned())}
        listed = client.list_consumer_groups(types={ConsumerGroupType.CONSUMER})
        assert group in {g.group_id for g in listed.result(30).valid}
        committed = group_offsets(bootstrap, group)
        assert sum(committed[(topic, p)] for p in range(4)) == 160

        cli = json.loads(moldau(cbroker, f"groups describe {group} --json").stdout)
        assert (cli["type"], cli["state"]) == ("consumer", "STABLE")
        targets = {
            m["client_id"]: {tp["partition"] for tp in m["target_assignment"]}
            for m in cli["members"]
        }
        assert targets == described
        listed_cli = json.loads(moldau(cbroker, "groups list --json").stdout)
        assert {"group": group, "type": "consumer"}.items() <= next(
            g for g in listed_cli if g["group"] == group
        ).items()
    finally:
        a.consumer.close()
        if b is not None:
            b.consumer.close()


def test_regex_subscription_picks_up_a_topic_created_later(
    cbroker: BrokerProcess, topic: str
) -> None:
    bootstrap, group = cbroker.bootstrap, f"group-{topic}"
    first, later = f"{topic}-first", f"{topic}-later"
    create_topic(bootstrap, first, partitions=2)
    expected = produce(bootstrap, first, 20, 2, seed=3)
    member = consumer_member(bootstrap, group, [f"^{topic}-.*"], "regex")
    try:
        poll_all([member], lambda: set(values([member])) == expected, "the first topic")
        create_topic(bootstrap, later, partitions=3)
        expected |= produce(bootstrap, later, 30, 3, seed=4)
        poll_all([member], lambda: set(values([member])) == expected, "the topic created later")
        assert max(values([member]).values()) == 1
    finally:
        member.consumer.close()


def test_static_member_restart_gets_its_partitions_back(cbroker: BrokerProcess, topic: str) -> None:
    """A static member closing (epoch -2) and coming back with its group.instance.id
    gets the same partitions, and the other member is never asked to give any up."""
    bootstrap, group = cbroker.bootstrap, f"group-{topic}"
    create_topic(bootstrap, topic, partitions=4)
    a = consumer_member(bootstrap, group, [topic], "a", **{"group.instance.id": "i-a"})
    b = consumer_member(bootstrap, group, [topic], "b", **{"group.instance.id": "i-b"})
    restarted: Member | None = None
    try:
        poll_all([a, b], lambda: len(a.owned()) == 2 and len(b.owned()) == 2, "two members")
        held, kept = a.owned(), b.owned()
        b.events.clear()
        a.consumer.close()
        restarted = consumer_member(bootstrap, group, [topic], "a2", **{"group.instance.id": "i-a"})
        poll_all([restarted, b], lambda: restarted.owned() == held, "the restarted member")  # type: ignore[union-attr]
        poll_all([b], lambda: True, "b's callbacks")
        assert b.owned() == kept and b.revokes() == [], b.events
    finally:
        b.consumer.close()
        if restarted is not None:
            restarted.consumer.close()


def join_heartbeat(raw: RawClient, group: str, topic: str) -> ConsumerGroupHeartbeatResponse:
    request = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=[topic],
        topic_partitions=[],
    )
    response: ConsumerGroupHeartbeatResponse = raw.request(request, 0)
    return response


def test_a_groups_own_heartbeat_interval_and_bounds(cbroker: BrokerProcess, topic: str) -> None:
    """consumer.heartbeat.interval.ms set on the GROUP resource is what the coordinator
    tells the group's members; values outside Kafka's bounds are INVALID_CONFIG."""
    bootstrap, group = cbroker.bootstrap, f"group-{topic}"
    create_topic(bootstrap, topic, partitions=1)
    with RawClient(bootstrap) as raw:
        raw.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        wait_until(  # the coordinator is loaded
            lambda: join_heartbeat(raw, group, topic).error_code == ErrorCode.NONE, "a member"
        )
        assert join_heartbeat(raw, group, topic).heartbeat_interval_ms == 500  # broker's
        alter_group_config(bootstrap, group, {"consumer.heartbeat.interval.ms": "7000"})
        wait_until(
            lambda: join_heartbeat(raw, group, topic).heartbeat_interval_ms == 7000,
            "the group's own heartbeat interval",
        )
    for bad in ({"consumer.heartbeat.interval.ms": "15001"}, {"consumer.session.timeout.ms": "1"}):
        with pytest.raises(KafkaException) as e:
            alter_group_config(bootstrap, group, bad)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_consumer_apis_are_off_when_the_protocol_is_not_enabled(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """group.coordinator.rebalance.protocols without `consumer`: APIs 68 and 69 are not
    advertised and answer UNSUPPORTED_VERSION, as Kafka's."""
    off = {"group.coordinator.rebalance.protocols": "classic"}
    with (
        BrokerProcess(tmp_path_factory.mktemp("classic-only"), off) as broker,
        RawClient(broker.bootstrap) as raw,
    ):
        advertised = {v.api_key for v in raw.request(ApiVersionsRequest(), 3).api_keys}
        assert ApiKey.JOIN_GROUP in advertised
        assert ApiKey.CONSUMER_GROUP_HEARTBEAT not in advertised
        assert ApiKey.CONSUMER_GROUP_DESCRIBE not in advertised
        assert join_heartbeat(raw, "g", "t").error_code == ErrorCode.UNSUPPORTED_VERSION
        describe = raw.request(ConsumerGroupDescribeRequest(group_ids=["g"]), 0)
        assert [g.error_code for g in describe.groups] == [ErrorCode.UNSUPPORTED_VERSION]


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_classic_group_upgrades_online_and_downgrades_back(
    cbroker: BrokerProcess, topic: str, strategy: str
) -> None:
    """Kafka 4.0's online upgrade: two classic members share a 4-partition topic with
    committed offsets; one restarts with group.protocol=consumer. The group becomes a
    consumer group, the remaining classic member keeps consuming next to the new one, and
    every record arrives exactly once (each member commits before giving partitions up).
    When the consumer-protocol member leaves, the group is downgraded back to classic."""
    bootstrap, group = cbroker.bootstrap, f"group-{topic}"
    create_topic(bootstrap, topic, partitions=4)
    expected = produce(bootstrap, topic, 80, 4, seed=1)
    classic: dict[str, Any] = {"group.protocol": "classic", "session.timeout.ms": 10_000}
    classic["heartbeat.interval.ms"] = 500
    classic["partition.assignment.strategy"] = strategy  # eager, or incremental (owned)
    a = consumer_member(bootstrap, group, [topic], "a", **classic)
    b = consumer_member(bootstrap, group, [topic], "b", **classic)
    b2: Member | None = None
    try:
        poll_all(
            [a, b],
            lambda: set(values([a, b])) == expected and len(a.owned()) == len(b.owned()) == 2,
            "the classic group's records",
        )
        for m in (a, b):
            commit(m)
        client = admin(bootstrap)  # must outlive its futures
        listed = client.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
        assert group in {g.group_id for g in listed.valid}
        b.consumer.close()  # commits what it polled in on_revoke, then leaves
        b2 = consumer_member(bootstrap, group, [topic], "b2")
        members = [a, b2]
        expected |= produce(bootstrap, topic, 80, 4, seed=2)
        poll_all(
            members,
            lambda: len(a.owned()) == 2 and len(b2.owned()) == 2,  # type: ignore[union-attr]
            "partitions shared between the classic and the consumer member",
        )
        poll_all(members, lambda: set(values([a, b, b2])) == expected, "every record")
        counts = values([a, b, b2])
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
        assert not a.owned() & b2.owned() and b2.records
        for m in members:
            commit(m)
            assert not [e for e in m.errors if e.fatal()]
        listed = client.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert group in {g.group_id for g in listed.valid}
        description = client.describe_consumer_groups([group])[group].result(30)
        assert description.type == ConsumerGroupType.CONSUMER
        described = {
            m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in description.members
        }
        assert described == {"a": set(a.owned()), "b2": set(b2.owned())}
        assert sum(group_offsets(bootstrap, group)[(topic, p)] for p in range(4)) == 160

        # The downgrade: the last consumer-protocol member leaves, the group is classic again.
        b2.consumer.close()
        expected |= produce(bootstrap, topic, 40, 4, seed=3)
        poll_all(
            [a],
            lambda: a.owned() == frozenset(range(4)) and set(values([a, b, b2])) == expected,
            "the lone classic member's records after the downgrade",
        )
        counts = values([a, b, b2])
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
        listed = client.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
        assert group in {g.group_id for g in listed.valid}
    finally:
        a.consumer.close()
        if b2 is not None:
            b2.consumer.close()


def test_classic_static_member_replacing_the_last_consumer_member_downgrades(
    cbroker: BrokerProcess, topic: str
) -> None:
    """A classic member and a static consumer-protocol member share a topic; the static
    one restarts with group.protocol=classic and the same group.instance.id. As in Kafka
    the group becomes classic at once (the restarted member takes its predecessor's
    place), and every record is consumed exactly once throughout."""
    bootstrap, group = cbroker.bootstrap, f"group-{topic}"
    create_topic(bootstrap, topic, partitions=4)
    expected = produce(bootstrap, topic, 40, 4, seed=1)
    classic: dict[str, Any] = {"group.protocol": "classic", "session.timeout.ms": 10_000}
    classic["heartbeat.interval.ms"] = 500
    a = consumer_member(bootstrap, group, [topic], "a", **classic)
    b = consumer_member(bootstrap, group, [topic], "b", **{"group.instance.id": "i-b"})
    b2: Member | None = None
    try:
        poll_all(
            [a, b],
            lambda: set(values([a, b])) == expected and len(a.owned()) == len(b.owned()) == 2,
            "the classic and the consumer member's records",
        )
        client = admin(bootstrap)  # must outlive its futures
        listed = client.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert group in {g.group_id for g in listed.valid}
        b.consumer.close()  # commits in on_revoke, leaves with epoch -2 (static)
        b2 = consumer_member(
            bootstrap, group, [topic], "b2", **classic, **{"group.instance.id": "i-b"}
        )
        members = [a, b2]
        expected |= produce(bootstrap, topic, 40, 4, seed=2)
        poll_all(
            members,
            lambda: set(values([a, b, b2])) == expected and len(b2.owned()) == 2,  # type: ignore[union-attr]
            "every record, the restarted member holding its predecessor's partitions",
        )
        counts = values([a, b, b2])
        assert max(counts.values()) == 1, [v for v, n in counts.items() if n > 1][:5]
        assert not a.owned() & b2.owned()
        listed = client.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
        assert group in {g.group_id for g in listed.valid}
        for m in members:
            assert not [e for e in m.errors if e.fatal()]
    finally:
        a.consumer.close()
        if b2 is not None:
            b2.consumer.close()
