"""Consumer groups end to end: real clients, a real broker subprocess, real rebalances.

Every test checks the data, not only the group's bookkeeping: each produced record is
processed (at least once where members die, exactly once otherwise), with the value the
producer was acknowledged for, and duplicates appear only where Kafka's contract allows
them (work a killed member processed but had not committed). Most brokers here run with
``group.initial.rebalance.delay.ms=0``; one test keeps Kafka's 3000 ms to check the delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException, TopicPartition
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.join_group_request import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from moldau.testing import BrokerProcess
from tests.integration.group_helpers import (
    Member,
    MemberProcess,
    Processed,
    describe_group,
    described_assignment,
    group_consumer,
    group_offsets,
    poll_all,
    settled,
)
from tests.integration.helpers import (
    DEADLINE_S,
    FreshBroker,
    RawClient,
    admin,
    confluent_consumer,
    create_topic,
    delete_topic,
    make_records,
    produce_confluent,
    roundtrip_ok,
    wait_until,
    watermarks,
)

FAST = {"group.initial.rebalance.delay.ms": "0"}
JOIN_GROUP_VERSION = 5
Position = tuple[int, int]


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, without the initial rebalance delay."""
    with BrokerProcess(tmp_path_factory.mktemp("groups"), FAST) as running:
        yield running


@pytest.fixture
def names(topic: str) -> tuple[str, str]:
    """A unique (topic, group) pair."""
    return topic, f"group-{topic}"


# --- data ------------------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, n: int, partitions: int, seed: int) -> dict[Position, str]:
    """``n`` unique records spread evenly over ``partitions``: position -> value."""
    records = [
        dataclasses.replace(r, partition=i % partitions)
        for i, r in enumerate(make_records(n, seed=seed, headers=False))
    ]
    acked = produce_confluent(bootstrap, topic, records)
    return {position: value.decode("latin-1") for value, position in acked.items()}


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: hw for p, (_, hw) in watermarks(bootstrap, topic).items()}


def assert_processed(
    processed: Sequence[Processed],
    expected: dict[Position, str],
    *,
    may_repeat: Collection[Position] = (),
) -> None:
    """Every expected record processed with its acked value, nothing extra, and repeats
    only at positions in ``may_repeat``."""
    counts = Counter((p, o) for p, o, _ in processed)
    extra = [(p, o) for p, o, _ in processed if (p, o) not in expected]
    assert not extra, f"{len(extra)} records processed that were never produced: {extra[:5]}"
    wrong = [(p, o) for p, o, v in processed if expected[(p, o)] != v]
    assert not wrong, f"{len(wrong)} records came back with other values: {wrong[:5]}"
    missing = sorted(set(expected) - set(counts))
    assert not missing, f"{len(missing)} of {len(expected)} records never processed: {missing[:5]}"
    repeated = sorted(pos for pos, n in counts.items() if n > 1 and pos not in may_repeat)
    assert not repeated, f"{len(repeated)} records processed twice: {repeated[:5]}"


def generation_of(member: Member) -> int:
    """The generation the client is in, from librdkafka's serialized group metadata
    ("CGMDv2:" + native int32 generation + group id + member id ...)."""
    data = bytes(member.consumer.consumer_group_metadata())
    assert data.startswith(b"CGMDv2:"), data[:16]
    return int.from_bytes(data[7:11], sys.byteorder, signed=True)


def close_all(members: Sequence[Member]) -> None:
    for m in members:
        # a fenced (fatal) consumer may refuse to close cleanly
        with contextlib.suppress(KafkaException, RuntimeError):
            m.consumer.close()


# --- 1. failover ------------------------------------------------------------------------------


def test_three_members_split_and_take_over_a_killed_member(
    gbroker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 6)
    expected = produce(bootstrap, topic, 600, 6, seed=1)
    # The victim joins first: it leads the group, so its death also moves the leadership.
    victim = MemberProcess(bootstrap, topic, group, "victim")
    members = [victim]
    try:
        wait_until(
            lambda: victim.assignment() == frozenset(range(6)), "the first member's assignment"
        )
        survivors = [MemberProcess(bootstrap, topic, group, f"survivor{i}") for i in range(2)]
        members += survivors

        def split(ms: Sequence[MemberProcess], per_member: int) -> bool:
            owned = [m.assignment() or frozenset() for m in ms]
            return sorted(p for o in owned for p in o) == list(range(6)) and all(
                len(o) == per_member for o in owned
            )

        def all_committed(ms: Sequence[MemberProcess], skip: frozenset[int] = frozenset()) -> bool:
            done: dict[int, int] = {}
            for m in ms:
                for p, o in m.committed().items():
                    done[p] = max(done.get(p, 0), o)
            want = {p: o for p, o in ends(bootstrap, topic).items() if p not in skip}
            return all(done.get(p) == o for p, o in want.items())

        wait_until(lambda: split(members, 2), "three members with two partitions each")
        wait_until(lambda: all_committed(members), "the first 600 records committed")
        described = described_assignment(bootstrap, group, topic)
        assert described == {m.name: m.assignment() for m in members}
        assert describe_group(bootstrap, group).state == ConsumerGroupState.STABLE

        # The victim keeps processing but stops committing; the others commit all they see.
        victim.send("nocommit")
        wait_until(lambda: bool(victim.events("mode")), "the victim to stop committing")
        victim_parts = victim.assignment() or frozenset()
        expected |= produce(bootstrap, topic, 600, 6, seed=2)
        end = ends(bootstrap, topic)

        def victim_caught_up() -> bool:
            seen = {(p, o) for p, o, _ in victim.processed()}
            return all((p, end[p] - 1) in seen for p in victim_parts)

        wait_until(victim_caught_up, "the victim to process its partitions' new records")
        wait_until(
            lambda: all_committed(survivors, skip=victim_parts),
            "the survivors to commit their records",
        )
        victim.kill()
        uncommitted = {
            (p, o) for p, o, _ in victim.processed() if o >= victim.committed().get(p, 0)
        }
        assert uncommitted, "test bug: the victim should hold uncommitted work"

        # After the session timeout the survivors own everything, from the victim's commits.
        wait_until(
            lambda: split(survivors, 3), "the survivors to take over the victim's partitions"
        )
        expected |= produce(bootstrap, topic, 300, 6, seed=3)
        wait_until(lambda: all_committed(members), "every record committed by the survivors")
        assert described_assignment(bootstrap, group, topic) == {
            m.name: m.assignment() for m in survivors
        }
        for m in survivors:
            assert not m.events("commit_error"), m.events("commit_error")
        for m in survivors:
            m.close()
        processed = [r for m in members for r in m.processed()]
        assert_processed(processed, expected, may_repeat=uncommitted)
        redone = {(p, o) for m in survivors for p, o, _ in m.processed()} & uncommitted
        assert redone == uncommitted, "the victim's uncommitted records were not redelivered"
        final = ends(bootstrap, topic)
        assert group_offsets(bootstrap, group) == {(topic, p): o for p, o in final.items()}
    finally:
        for m in members:
            m.close()


# --- 2. resume --------------------------------------------------------------------------------


def test_restarted_group_resumes_from_committed_offsets(
    gbroker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 3)
    expected = produce(bootstrap, topic, 600, 3, seed=10)

    first = group_consumer(bootstrap, group, [topic], "first")
    processed: list[Processed] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(processed) < 300:
        assert time.monotonic() < deadline, f"stuck after {len(processed)} records"
        for msg in first.consumer.consume(100, 0.2):
            if msg.error() is None and len(processed) < 300:
                processed.append((msg.partition(), msg.offset(), msg.value().decode("latin-1")))
    committed = {}
    for p, o, _ in processed:
        committed[p] = max(committed.get(p, 0), o + 1)
    first.consumer.commit(
        offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False
    )
    first.consumer.close()

    expected |= produce(bootstrap, topic, 300, 3, seed=11)
    end = ends(bootstrap, topic)
    second = group_consumer(bootstrap, group, [topic], "second")
    poll_all(
        [second],
        lambda: {(p, o) for p, o, _ in second.records} >= {(p, end[p] - 1) for p in end},
        "the second consumer to reach the end",
    )
    second.consumer.close()
    for p in end:
        offsets = [o for q, o, _ in second.records if q == p]
        assert offsets == list(range(committed.get(p, 0), end[p])), f"partition {p}"
    assert_processed(processed + second.records, expected)


# --- 3. assignment strategies --------------------------------------------------------------------


def consume_exactly_once(
    bootstrap: str, topic: str, members: Sequence[Member], partitions: int, seed: int
) -> None:
    """Records produced now reach exactly the member owning their partition, once."""
    for m in members:
        m.records.clear()
    expected = produce(bootstrap, topic, 60 * partitions, partitions, seed=seed)
    poll_all(
        members,
        lambda: sum(len(m.records) for m in members) >= len(expected),
        "every record to be consumed",
    )
    for m in members:
        owned = m.owned()
        strays = [(p, o) for p, o, _ in m.records if p not in owned]
        assert not strays, f"{m.name} consumed partitions it does not own: {strays[:5]}"
    assert_processed([r for m in members for r in m.records], expected)


def test_cooperative_sticky_moves_only_what_it_must(
    gbroker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 6)
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    a = group_consumer(bootstrap, group, [topic], "a", **config)
    b = group_consumer(bootstrap, group, [topic], "b", **config)
    members = [a, b]
    try:
        poll_all([a, b], lambda: settled([a, b], 6, 3), "two members with three partitions each")
        before = {m.name: m.owned() for m in (a, b)}
        events_before = {m.name: len(m.events) for m in (a, b)}
        c = group_consumer(bootstrap, group, [topic], "c", **config)
        members.append(c)
        poll_all([a, b, c], lambda: settled([a, b, c], 6, 2), "three members with two each")
        moved = set()
        for m in (a, b):
            later = m.events[events_before[m.name] :]
            revoked = frozenset().union(*(p for kind, p in later if kind != "assign"))
            assigned = frozenset().union(*(p for kind, p in later if kind == "assign"))
            assert not any(kind == "lost" for kind, _ in later), f"{m.name}: {later}"
            assert not assigned, f"{m.name} was given {sorted(assigned)}: {later}"
            assert revoked == before[m.name] - m.owned(), f"{m.name} revoked {sorted(revoked)}"
            assert m.owned() <= before[m.name], f"{m.name}: {sorted(m.owned())}"
            moved |= revoked
        assert c.owned() == moved
        assert c.revokes() == []
        description = describe_group(bootstrap, group)
        assert description.partition_assignor == "cooperative-sticky"
        assert described_assignment(bootstrap, group, topic) == {
            m.name: m.owned() for m in (a, b, c)
        }
        consume_exactly_once(bootstrap, topic, [a, b, c], 6, seed=20)
    finally:
        close_all(members)


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_eager_strategies_assign_every_partition_once(
    gbroker: BrokerProcess, names: tuple[str, str], strategy: str
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 5)
    config = {"partition.assignment.strategy": strategy}
    members = [group_consumer(bootstrap, group, [topic], f"m{i}", **config) for i in range(3)]
    try:
        poll_all(
            members,
            lambda: settled(members, 5) and all(m.owned() for m in members),
            f"a {strategy} assignment over all three members",
        )
        assert len({generation_of(m) for m in members}) == 1
        assert sorted(len(m.owned()) for m in members) == [1, 2, 2]
        description = describe_group(bootstrap, group)
        assert description.partition_assignor == strategy
        assert described_assignment(bootstrap, group, topic) == {m.name: m.owned() for m in members}
        consume_exactly_once(bootstrap, topic, members, 5, seed=30)
    finally:
        close_all(members)


def test_initial_rebalance_delay_gathers_early_joiners(
    fresh_broker: Callable[..., BrokerProcess], names: tuple[str, str]
) -> None:
    """With Kafka's default 3000 ms delay, a member subscribing right after the first
    lands in the same first generation: each sees one assignment and no revocation."""
    topic, group = names
    broker = fresh_broker()  # group.initial.rebalance.delay.ms left at its default
    create_topic(broker.bootstrap, topic, 4)
    a = group_consumer(broker.bootstrap, group, [topic], "a")
    a.poll(0.05)  # a's JoinGroup is on its way
    b = group_consumer(broker.bootstrap, group, [topic], "b")
    try:
        poll_all([a, b], lambda: settled([a, b], 4, 2), "both members assigned")
        for m in (a, b):
            assert m.events == [("assign", m.owned())], f"{m.name}: {m.events}"
            assert generation_of(m) == 1, m.name
        consume_exactly_once(broker.bootstrap, topic, [a, b], 4, seed=40)
    finally:
        close_all([a, b])


# --- 4. static membership ---------------------------------------------------------------------


def test_static_member_restarts_without_rebalance_and_duplicates_are_fenced(
    gbroker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 4)
    static = {"group.instance.id": "a", "session.timeout.ms": 30000}
    s1 = group_consumer(bootstrap, group, [topic], "s1", **static)
    d = group_consumer(bootstrap, group, [topic], "d")
    live = [s1, d]
    try:
        poll_all([s1, d], lambda: settled([s1, d], 4, 2), "two members with two each")
        owned, generation = s1.owned(), generation_of(s1)
        assert generation_of(d) == generation
        d_events = list(d.events)
        s1.consumer.close()  # a static member does not send LeaveGroup
        live.remove(s1)
        described = describe_group(bootstrap, group)
        assert described.state == ConsumerGroupState.STABLE
        assert sorted(m.group_instance_id or "" for m in described.members) == ["", "a"]

        s2 = group_consumer(bootstrap, group, [topic], "s2", **static)
        live.append(s2)
        poll_all([s2, d], lambda: s2.owned() == owned, "the restarted member's assignment")
        assert s2.events == [("assign", owned)]
        assert generation_of(s2) == generation, "the static rejoin started a new generation"
        described = describe_group(bootstrap, group)
        assert {
            m.group_instance_id: frozenset(tp.partition for tp in m.assignment.topic_partitions)
            for m in described.members
        } == {"a": owned, None: d.owned()}
        # d would have been told to rejoin (and revoke) if the generation had moved; its
        # generation-checked commit succeeding proves it did not.
        d.consumer.commit(
            offsets=[TopicPartition(topic, p, 0) for p in d.owned()], asynchronous=False
        )
        assert d.events == d_events
        assert generation_of(d) == generation
        consume_exactly_once(bootstrap, topic, [s2, d], 4, seed=50)

        s3 = group_consumer(bootstrap, group, [topic], "s3", **static)
        live.append(s3)

        def fenced(m: Member) -> bool:
            """librdkafka raises FENCED_INSTANCE_ID as a fatal error (_FATAL, with the text)."""
            return any(
                e.code() == KafkaError.FENCED_INSTANCE_ID
                or (e.code() == KafkaError._FATAL and "fenced" in e.str())
                for e in m.errors
            )

        poll_all([s2, s3, d], lambda: fenced(s2) or fenced(s3), "one of the twins fenced")
        assert not (fenced(s2) and fenced(s3)), "both twins were fenced"
        assert not fenced(d)
    finally:
        close_all(live)


# --- 5. other clients ---------------------------------------------------------------------------


def kafka_python_group_consume(bootstrap: str, topic: str, group: str, n: int) -> list[Processed]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    out: list[Processed] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < n:
            assert time.monotonic() < deadline, f"kafka-python stuck after {len(out)}"
            batch = consumer.poll(timeout_ms=500)
            out += [
                (m.partition, m.offset, m.value.decode("latin-1"))
                for ms in batch.values()
                for m in ms
            ]
            if batch:
                consumer.commit()
    finally:
        consumer.close()
    return out


def aiokafka_group_consume(bootstrap: str, topic: str, group: str, n: int) -> list[Processed]:
    async def run() -> list[Processed]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        out: list[Processed] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < n:
                assert time.monotonic() < deadline, f"aiokafka stuck after {len(out)}"
                batch = await consumer.getmany(timeout_ms=500)
                out += [
                    (m.partition, m.offset, m.value.decode("latin-1"))
                    for ms in batch.values()
                    for m in ms
                ]
                if batch:
                    await consumer.commit()
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


@pytest.mark.parametrize(
    "consume",
    [kafka_python_group_consume, aiokafka_group_consume],
    ids=["kafka-python", "aiokafka"],
)
def test_python_clients_consume_with_commits(
    gbroker: BrokerProcess,
    names: tuple[str, str],
    consume: Callable[[str, str, str, int], list[Processed]],
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 3)
    expected = produce(bootstrap, topic, 900, 3, seed=60)
    processed = consume(bootstrap, topic, group, len(expected))
    assert_processed(processed, expected)
    assert group_offsets(bootstrap, group) == {
        (topic, p): o for p, o in ends(bootstrap, topic).items()
    }


# --- 6. broker restarts ------------------------------------------------------------------------


def commit_as_member(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` as a group member (the commit returned), then close."""
    m = group_consumer(bootstrap, group, [topic], "committer")
    try:
        poll_all([m], lambda: settled([m], len(offsets)), "the committer's assignment")
        m.consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        m.consumer.close()


def committed(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    """Consumer.committed() of a non-member: what OffsetFetch returns (-1001: none)."""
    consumer = confluent_consumer(bootstrap, **{"group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=30)}
    finally:
        consumer.close()


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_committed_offsets_survive_broker_restart(
    fresh_broker: Callable[..., BrokerProcess], names: tuple[str, str], how: str
) -> None:
    topic, group = names
    broker = fresh_broker(FAST)
    create_topic(broker.bootstrap, topic, 3)
    expected = produce(broker.bootstrap, topic, 300, 3, seed=70)

    def restart() -> None:
        if how == "sigterm":
            broker.restart()
        else:
            broker.kill()
            broker.start()

    first = {0: 10, 1: 57, 2: 100}
    commit_as_member(broker.bootstrap, topic, group, first)
    restart()
    assert committed(broker.bootstrap, topic, group, 3) == first
    second = {0: 99, 1: 58, 2: 3}  # offsets may move backwards too
    commit_as_member(broker.bootstrap, topic, group, second)
    restart()
    assert committed(broker.bootstrap, topic, group, 3) == second

    # The group resumes exactly there.
    m = group_consumer(broker.bootstrap, group, [topic], "resumer")
    try:
        poll_all([m], lambda: len(m.records) >= 300 - sum(second.values()), "the rest")
    finally:
        m.consumer.close()
    for p, start in second.items():
        assert [o for q, o, _ in m.records if q == p] == list(range(start, 100)), f"partition {p}"
    rest = {pos: v for pos, v in expected.items() if pos[1] >= second[pos[0]]}
    assert_processed(m.records, rest)

    # A deleted group stays deleted: its tombstones survive the restart too.
    client = admin(broker.bootstrap)  # must outlive its futures
    client.delete_consumer_groups([group], request_timeout=30)[group].result(30)
    restart()
    client = admin(broker.bootstrap)
    listed = client.list_consumer_groups(request_timeout=30).result(30)
    assert group not in {g.group_id for g in listed.valid}
    assert committed(broker.bootstrap, topic, group, 3) == dict.fromkeys(range(3), -1001)


# --- 7. group admin -------------------------------------------------------------------------


def test_group_admin_list_delete_and_offset_delete(
    gbroker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 30, 3, seed=80)
    active, empty, trimmed = f"{group}-active", f"{group}-empty", f"{group}-trimmed"
    for g in (empty, trimmed):
        commit_as_member(bootstrap, topic, g, {0: 1, 1: 2, 2: 3})
    member = group_consumer(bootstrap, active, [topic], "active")
    client = admin(bootstrap)
    try:
        poll_all([member], lambda: settled([member], 3), "the active member's assignment")
        listed = client.list_consumer_groups(request_timeout=30).result(30)
        assert not listed.errors
        states = {g.group_id: g.state for g in listed.valid}
        assert states[active] == ConsumerGroupState.STABLE
        assert states[empty] == ConsumerGroupState.EMPTY
        assert states[trimmed] == ConsumerGroupState.EMPTY
        only_empty = client.list_consumer_groups(
            states={ConsumerGroupState.EMPTY}, request_timeout=30
        ).result(30)
        assert {g.group_id for g in only_empty.valid} >= {empty, trimmed}
        assert active not in {g.group_id for g in only_empty.valid}

        futures = client.delete_consumer_groups([active, empty], request_timeout=30)
        with pytest.raises(KafkaException) as refused:
            futures[active].result(30)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        futures[empty].result(30)
        listed = client.list_consumer_groups(request_timeout=30).result(30)
        assert {g.group_id for g in listed.valid} >= {active, trimmed}
        assert empty not in {g.group_id for g in listed.valid}
        assert committed(bootstrap, topic, empty, 3) == dict.fromkeys(range(3), -1001)

        # OffsetDelete (KIP-496): an Empty group's offsets go, partition by partition; a
        # group whose members subscribe to the topic keeps them.
        kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            deleted = kp_admin.delete_group_offsets(
                trimmed, [KpTopicPartition(topic, 0), KpTopicPartition(topic, 2)]
            )
            assert {tp.partition: e.errno for tp, e in deleted.items()} == {0: 0, 2: 0}
            refused_offsets = kp_admin.delete_group_offsets(active, [KpTopicPartition(topic, 1)])
        finally:
            kp_admin.close()
        assert committed(bootstrap, topic, trimmed, 3) == {0: -1001, 1: 2, 2: -1001}
        assert {tp.partition: e.errno for tp, e in refused_offsets.items()} == {
            1: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
        }
    finally:
        member.consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_committed_offsets_go_with_their_deleted_topic(
    gbroker: BrokerProcess, names: tuple[str, str], protocol: str
) -> None:
    """Kafka's onPartitionsDeleted: every group's offsets of a deleted topic are deleted,
    an Empty group's as a Stable one's (whose member keeps its other topic), so the topic
    created again under the same name is read from ``auto.offset.reset``. The stale
    offsets (2 and 1) would lie inside the new topic's log: the new records would be
    skipped, not reset."""
    topic, group = names
    other = f"{topic}-other"
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, other, 1)
    produce(bootstrap, topic, 10, 2, seed=81)
    empty, stable = f"{group}-empty", f"{group}-stable"
    stale = {0: 2, 1: 1}
    commit_as_member(bootstrap, topic, empty, stale)
    member = group_consumer(
        bootstrap, stable, [topic, other], "stable", **{"group.protocol": protocol}
    )
    try:
        poll_all(
            [member],
            lambda: len(member.consumer.assignment()) == 3,
            "the stable member's assignment",
        )
        member.consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in stale.items()]
            + [TopicPartition(other, 0, 0)],
            asynchronous=False,
        )
        for g in (empty, stable):
            assert committed(bootstrap, topic, g, 2) == stale

        delete_topic(bootstrap, topic)
        gone = dict.fromkeys(range(2), -1001)  # OffsetFetch answers -1
        wait_until(
            lambda: all(committed(bootstrap, topic, g, 2) == gone for g in (empty, stable)),
            "the deleted topic's offsets to go",
        )
        assert committed(bootstrap, other, stable, 1) == {0: 0}
        poll_all(
            [member],
            lambda: describe_group(bootstrap, stable).state == ConsumerGroupState.STABLE,
            "the stable group, its member left with the other topic",
        )
    finally:
        member.consumer.close()

    create_topic(bootstrap, topic, 2)
    expected = produce(bootstrap, topic, 5, 2, seed=82)
    for g in (empty, stable):
        resumed = group_consumer(bootstrap, g, [topic], "resumer")
        try:
            poll_all([resumed], lambda m=resumed: len(m.records) >= 5, f"{g}'s 5 records")
            resumed.consumer.commit(asynchronous=False)
        finally:
            resumed.consumer.close()
        assert_processed(resumed.records, expected)
        assert committed(bootstrap, topic, g, 2) == {0: 3, 1: 2}


# --- 8. bad input -------------------------------------------------------------------------------


def test_session_timeout_out_of_bounds_is_refused(
    gbroker: BrokerProcess, names: tuple[str, str]
) -> None:
    topic, group = names
    bootstrap = gbroker.bootstrap
    create_topic(bootstrap, topic, 1)
    for timeout_ms in (5999, 1_800_001):
        with RawClient(bootstrap) as raw:
            response = raw.request(
                JoinGroupRequest(
                    group_id=group,
                    session_timeout_ms=timeout_ms,
                    rebalance_timeout_ms=10000,
                    member_id="",
                    protocol_type="consumer",
                    protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
                ),
                JOIN_GROUP_VERSION,
            )
        assert response.error_code == ErrorCode.INVALID_SESSION_TIMEOUT, timeout_ms

    bad = group_consumer(bootstrap, group, [topic], "bad", **{"session.timeout.ms": 1000})
    try:
        poll_all(
            [bad],
            lambda: any(e.code() == KafkaError.INVALID_SESSION_TIMEOUT for e in bad.errors),
            "INVALID_SESSION_TIMEOUT from the client",
        )
        assert bad.owned() == frozenset()
    finally:
        bad.consumer.close()
    assert describe_group(bootstrap, group).members == []
    roundtrip_ok(bootstrap, topic)  # the broker still serves everyone


def test_full_group_refuses_another_member_with_group_max_size_reached(
    fresh_broker: FreshBroker, names: tuple[str, str]
) -> None:
    """group.max.size=2: a third consumer is refused (a fatal error for it), the two
    members keep their partitions and consume every record exactly once."""
    topic, group = names
    bootstrap = fresh_broker({**FAST, "group.max.size": "2"}).bootstrap
    create_topic(bootstrap, topic, 2)
    members = [group_consumer(bootstrap, group, [topic], f"m{i}") for i in range(2)]
    extra: Member | None = None
    try:
        poll_all(members, lambda: settled(members, 2, per_member=1), "two members split")
        extra = group_consumer(bootstrap, group, [topic], "extra")
        poll_all(
            [*members, extra],
            lambda: any(e.code() == KafkaError.GROUP_MAX_SIZE_REACHED for e in extra.errors),
            "GROUP_MAX_SIZE_REACHED for the third member",
        )
        assert extra.owned() == frozenset()
        assert settled(members, 2, per_member=1)  # no rebalance for the refused member
        description = describe_group(bootstrap, group)
        assert sorted(m.client_id for m in description.members) == ["m0", "m1"]
        expected = produce(bootstrap, topic, 200, 2, seed=7)
        poll_all(
            [*members, extra],
            lambda: sum(len(m.records) for m in members) >= len(expected),
            "the members to consume every record",
        )
        assert settled(members, 2, per_member=1)
        assert not extra.records
        assert_processed([r for m in members for r in m.records], expected)
    finally:
        close_all([*members, *([extra] if extra else [])])
