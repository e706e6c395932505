"""Random client behaviour never breaks the coordinator's invariants or leaks parked requests."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.coordinator.group import GroupState, JoinGroupResult, MemberIdentity, OffsetCommit
from moldau.protocol.errors import ErrorCode

from .conftest import Harness, subscription

CLIENTS = 4


@dataclass
class Client:
    """What a real consumer remembers between calls."""

    instance_id: str | None
    member_id: str = ""
    generation: int = -1
    leader_members: tuple[str, ...] = ()
    topic: str = "t1"
    needs_join: bool = True
    synced: bool = False
    outstanding: int | None = None


# "act" is a well-behaved consumer's next step; the other ops are arbitrary client behaviour.
CLIENT_OPS = ["act"] * 15 + ["join", "sync", "heartbeat", "leave", "commit", "restart"]
client_op = st.tuples(st.sampled_from(CLIENT_OPS), st.integers(0, CLIENTS - 1), st.booleans())
advance = st.tuples(
    st.just("advance"),
    st.sampled_from([0, 500, 1_000, 1_000, 3_000, 6_000, 11_000, 31_000]),
    st.just(False),
)
ops = st.one_of(client_op, client_op, client_op, advance)


def check_invariants(h: Harness, parked_ok: set) -> None:
    group = h.coordinator.groups.get("g")
    if group is None:
        return
    members = group.members
    if group.state is not GroupState.PREPARING_REBALANCE:  # memberless in the initial delay
        assert (group.state is GroupState.EMPTY) == (not members)
    assert (group.leader_id in members) if members else group.leader_id is None
    assert group.pending_sync_members <= members.keys()
    assert not group.pending_members & members.keys()
    assert {i: m for i, m in group.static_members.items()} == {
        m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id
    }
    for m in members.values():
        if m.join_request is not None:
            assert group.state is GroupState.PREPARING_REBALANCE
            assert m.join_request in parked_ok
        if m.sync_request is not None:
            assert group.state is GroupState.COMPLETING_REBALANCE
            assert m.sync_request in parked_ok
    if group.state is GroupState.STABLE:
        described = h.coordinator.describe_group("g")
        assert [d.member_id for d in described.members] == list(members)
        assert group.protocol_name == "range"


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0, 3_000]), st.lists(ops, min_size=10, max_size=100))
def test_random_client_sequences_keep_invariants(make_harness, initial_delay, steps):
    h: Harness = make_harness(group_initial_rebalance_delay_ms=initial_delay)
    clients = [Client(f"i{i}" if i % 2 == 0 else None) for i in range(CLIENTS)]
    owner: dict[int, int] = {}
    seen_generation = 0
    handled: set[int] = set()

    def learn() -> None:
        for request_id, result in h.completed.items():
            if request_id in handled or request_id not in owner:
                continue
            handled.add(request_id)
            client = clients[owner[request_id]]
            if not isinstance(result, JoinGroupResult):
                client.synced = result.error is ErrorCode.NONE
                client.needs_join = not client.synced
                continue
            if result.error in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                client.member_id = result.member_id
                client.generation = result.generation_id
                client.leader_members = tuple(m.member_id for m in result.members)
                client.needs_join = result.error is not ErrorCode.NONE
                client.synced = False
            elif result.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                client.member_id, client.generation = "", -1

    for op, arg, flag in steps:
        if op == "advance":
            h.advance(arg)
        else:
            c = clients[arg]
            if op == "act":  # a real client waits for its JoinGroup/SyncGroup response
                waiting = c.outstanding is not None and c.outstanding not in h.completed
                op = (
                    "wait"
                    if waiting
                    else "join"
                    if c.needs_join
                    else "heartbeat"
                    if c.synced
                    else "sync"
                )
                flag = False
            if op == "join":
                if flag:
                    c.topic = "t2" if c.topic == "t1" else "t1"
                rid = h.join(
                    c.member_id,
                    instance=c.instance_id,
                    protocols=(("range", subscription(c.topic)),),
                    rebalance=20_000,
                )
                owner[rid], c.outstanding = arg, rid
            elif op == "sync":
                assignments = {m: m.encode() for m in c.leader_members}
                rid = h.sync(c.member_id, c.generation, assignments, instance=c.instance_id)
                owner[rid], c.outstanding = arg, rid
            elif op == "heartbeat":
                error = h.heartbeat(c.member_id, c.generation, instance=c.instance_id)
                c.needs_join = error is not ErrorCode.NONE
                if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation = "", -1
            elif op == "leave":
                h.leave(MemberIdentity(c.member_id, c.instance_id))
                c.member_id, c.generation, c.needs_join = "", -1, True
            elif op == "commit":
                h.commit(
                    c.member_id, c.generation, OffsetCommit("t1", 0, 1), instance=c.instance_id
                )
            elif op == "restart":  # the process comes back without its member id
                c.member_id, c.generation, c.needs_join = "", -1, True
        learn()
        parked = set(owner) - h.completed.keys()
        check_invariants(h, parked)
        group = h.coordinator.groups.get("g")
        if group is None:
            seen_generation = 0
        else:
            assert group.generation_id >= seen_generation
            seen_generation = group.generation_id

    for _ in range(40):  # everyone goes silent: all parked requests get answered
        h.advance(60_000)
        check_invariants(h, set(owner) - h.completed.keys())
    assert set(owner) <= h.completed.keys()
    group = h.coordinator.groups.get("g")
    assert group is None or group.state is GroupState.EMPTY
