"""Kafka 4.0's online upgrade of a classic group to a consumer group, the classic
protocol spoken inside a consumer group, and the downgrade back (Kafka's
GroupMetadataManager ``convertToConsumerGroup``, ``classicGroup*ToConsumerGroup`` and
``convertToClassicGroup``).

When the first member with ``group.protocol=consumer`` heartbeats into a classic group
that still has members, the group becomes a consumer group: each classic member keeps
its last assignment (member epoch, group epoch and target epoch = the generation) and
goes on with JoinGroup/SyncGroup/Heartbeat/LeaveGroup, now answered from the consumer
group's state: a JoinGroup is a heartbeat that reconciles the member with its target, a
SyncGroup hands back its assigned partitions, a Heartbeat says REBALANCE_IN_PROGRESS when
it should rejoin to move on. When the last member speaking the consumer protocol leaves,
the group goes back to being a classic group and rebalances.
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.protocol.errors import ErrorCode

from .assignors import Assignment
from .config import GroupConfig
from .consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
)
from .consumer_groups import ConsumerGroupManager, ConsumerHeartbeat, TopicsView
from .consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    assignment_partitions,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from .group import Group, GroupState
from .member import Member
from .reconciliation import MemberAssignment, MemberState
from .results import JoinGroupResult, SyncGroupResult


def upgrade_refusal(classic: Group, config: GroupConfig) -> str | None:
    """Why ``classic`` (with members) cannot become a consumer group now, or None."""
    if not config.upgrade_enabled:
        return "the online upgrade is disabled (group.consumer.migration.policy)"
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) > config.consumer_max_size:
        return "the group size exceeds the consumer group maximum size"
    return None


def to_consumer_group(classic: Group, topics: TopicsView) -> ConsumerGroup:
    """The consumer group a classic one becomes (Kafka's ConsumerGroup.fromClassicGroup):
    every member at the generation with its last assignment as its target. A partition
    a member still reported owning in its JoinGroup that no one was assigned (the
    cooperative assignor withholds a partition until its owner gives it up; the member
    may not have its new assignment yet) is held for it as pending revocation, so it
    moves only once the member rejoins without it. Raises ValueError when a member's
    embedded consumer protocol is malformed."""
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = group.target_assignment_epoch = classic.generation_id
    subscriptions = {
        m.member_id: decode_subscription(m.metadata(classic.protocol_name or m.protocols[0][0]))
        for m in classic.members.values()
    }
    assignments = {
        m.member_id: to_ids(assignment_partitions(m.assignment) if m.assignment else {}, topics)
        for m in classic.members.values()
    }
    taken = {(t, p) for a in assignments.values() for t, ps in a.items() for p in ps}
    for m in classic.members.values():
        subscription, assigned = subscriptions[m.member_id], assignments[m.member_id]
        owned: dict[str, list[int]] = {}
        for tp in subscription.owned_partitions:
            owned.setdefault(tp.topic, []).extend(tp.partitions)
        unrevoked = {
            t: kept
            for t, ps in to_ids(owned, topics).items()
            if (kept := frozenset(p for p in ps if (t, p) not in taken))
        }
        generation = classic.generation_id
        state = MemberState.UNREVOKED_PARTITIONS if unrevoked else MemberState.STABLE
        member = ConsumerGroupMember(
            m.member_id,
            m.group_instance_id,
            subscription.rack_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            tuple(subscription.topics),
            assignment=MemberAssignment(generation, generation, state, assigned, unrevoked),
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.put_member(member)
        group.target_assignment[m.member_id] = assigned
    names = {n for m in group.members.values() for n in m.subscribed_topic_names}
    group.subscription_metadata = {n: topics[n] for n in sorted(names) if n in topics}
    return group


def downgrade_refusal(group: ConsumerGroup, config: GroupConfig) -> str | None:
    """Why a consumer group whose members all speak the classic protocol cannot become a
    classic group (Kafka's validateOnlineDowngrade*), or None."""
    if config.consumer_migration_policy not in ("downgrade", "bidirectional"):
        return "the online downgrade is disabled (group.consumer.migration.policy)"
    if len(group.members) > config.group_max_size:
        return (
            f"its size ({len(group.members)}) is greater than the classic group maximum "
            f"size (group.max.size={config.group_max_size})"
        )
    return None


def to_classic_group(group: ConsumerGroup, now_ms: int) -> Group:
    """The classic group a consumer group of classic members becomes (Kafka's
    ClassicGroup.fromConsumerGroup): Stable at the generation its members reached (the
    epoch before the leaving member's bump, so their heartbeats are told to rejoin, not
    fenced), each member's assignment in the consumer protocol version it speaks.

    Unlike Kafka, a member's assignment is what it holds now (its assigned partitions
    and those it has yet to revoke), not its target: a partition in its target that
    another member still owns must not be handed to it by a SyncGroup, nor seen as free
    by an upgrade back before the rebalance that follows (see :func:`reconciled`)."""
    classic = Group(group.group_id, now_ms)
    classic.generation_id = max(m.member_epoch for m in group.members.values())
    for m in group.members.values():
        assert m.classic is not None
        session_ms, protocols = m.classic.session_timeout_ms, list(m.classic.protocols)
        classic.add(
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                session_ms,
                CONSUMER_PROTOCOL_TYPE,
                protocols,
            )
        )
    classic.protocol_name = classic.select_protocol()
    classic.transition(GroupState.STABLE, now_ms)
    classic.refresh_subscribed_topics()
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
    for member in classic.members.values():
        held = group.members[member.member_id].assignment
        assigned: dict[str, list[int]] = {}
        for t, ps in [*held.assigned.items(), *held.pending_revocation.items()]:
            if t in names:
                assigned.setdefault(names[t], []).extend(ps)
        version = protocol_version(member.metadata(classic.protocol_name))
        member.assignment = encode_assignment(assigned, version)
    return classic


def reconciled(group: ConsumerGroup) -> bool:
    """Every member holds exactly its target at the target epoch: a classic group made
    from it needs no rebalance."""
    return all(
        m.state is MemberState.STABLE
        and m.member_epoch == group.target_assignment_epoch
        and m.assignment.assigned == group.target_assignment.get(m.member_id, {})
        for m in group.members.values()
    )


def supports_protocols(
    group: ConsumerGroup, member_id: str, protocols: Sequence[tuple[str, bytes]]
) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: a classic member joining shares a
    protocol with every other classic member, so the group can become classic again."""
    others = [
        {name for name, _ in m.classic.protocols}
        for m in group.members.values()
        if m.classic is not None and m.member_id != member_id
    ]
    return any(all(name in o for o in others) for name, _ in protocols)


def to_ids(by_name: dict[str, list[int]], topics: TopicsView) -> Assignment:
    """Partitions by topic name to partitions by topic id (unknown topics dropped)."""
    return {
        topics[name].topic_id: frozenset(parts)
        for name, parts in by_name.items()
        if name in topics and parts
    }


def join(
    manager: ConsumerGroupManager,
    group: ConsumerGroup,
    topics: TopicsView,
    joining: ConsumerHeartbeat,
    protocol_type: str,
    protocols: Sequence[tuple[str, bytes]],
    session_timeout_ms: int,
    require_known_member_id: bool,
    now_ms: int,
) -> JoinGroupResult:
    """A classic JoinGroup to a consumer group (Kafka's classicGroupJoinToConsumerGroup):
    answered at once, with the member epoch as the generation and no leader (the
    coordinator assigns). ``joining`` carries the request's ids and timeouts. The member
    must then send SyncGroup within its rebalance timeout, or it is fenced."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, joining.member_id)
    try:
        subscription = decode_subscription(protocols[0][1])
    except ValueError:
        return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, joining.member_id)
    member_id = joining.member_id
    if not supports_protocols(group, member_id, protocols):
        return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
    if not member_id and joining.instance_id is None and require_known_member_id:
        return JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, manager.new_member_id())
    member = group.members.get(member_id)
    if member is not None and member.classic is None:
        return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
    previous = group.static_members.get(joining.instance_id or "")
    if member is None and previous is not None:
        # A restarted classic static member replaces its old self (Kafka skips the
        # unreleased-instance check for the classic protocol).
        manager.release_static(group, group.members[previous])
    owned: dict[str, list[int]] = {}
    for tp in subscription.owned_partitions:
        owned.setdefault(tp.topic, []).extend(tp.partitions)
    result = manager.heartbeat(
        ConsumerHeartbeat(
            group.group_id,
            member_id,
            0 if member is None else member.member_epoch,
            joining.instance_id,
            subscription.rack_id,
            joining.rebalance_timeout_ms,
            tuple(subscription.topics),
            # Always reported (a restarted static member owns nothing): its predecessor
            # may have been revoking, and its place moves on only once nothing is owned.
            owned=to_ids(owned, topics),
            client_id=joining.client_id,
            client_host=joining.client_host,
            classic=ClassicMemberMetadata(session_timeout_ms, tuple(protocols)),
        ),
        topics,
    )
    if result.error is not ErrorCode.NONE:
        return JoinGroupResult(result.error, member_id)
    joined = result.member_id or member_id
    manager.timers.cancel(("consumer-join", group.group_id, joined))
    manager.timers.set(
        ("consumer-sync", group.group_id, joined), now_ms + joining.rebalance_timeout_ms
    )
    return JoinGroupResult(
        ErrorCode.NONE,
        joined,
        result.member_epoch,
        CONSUMER_PROTOCOL_TYPE,
        protocols[0][0],
    )


def classic_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None
) -> tuple[ErrorCode, ConsumerGroupMember | None]:
    """Kafka's validateConsumerGroupMember plus: the member must speak the classic protocol."""
    if instance_id is not None:
        static_id = group.static_members.get(instance_id)
        if static_id is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if member_id and static_id != member_id:
            return ErrorCode.FENCED_INSTANCE_ID, None
        member_id = static_id
    member = group.members.get(member_id)
    if member is None or member.classic is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, None
    return ErrorCode.NONE, member


def sync(
    manager: ConsumerGroupManager,
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    generation_id: int,
    protocol_type: str | None,
    protocol_name: str | None,
    now_ms: int,
) -> SyncGroupResult:
    """A classic SyncGroup to a consumer group: the member's assigned partitions, in the
    consumer protocol version it speaks."""
    assert member.classic is not None
    name, metadata = member.classic.protocols[0]
    if generation_id != member.member_epoch:
        return SyncGroupResult(ErrorCode.ILLEGAL_GENERATION)
    if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        protocol_name is not None and protocol_name != name
    ):
        return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if group.group_epoch > member.member_epoch and (
        member.state is not MemberState.UNREVOKED_PARTITIONS
    ):
        expect_join(manager, group, member, now_ms)
        return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
    manager.timers.cancel(("consumer-sync", group.group_id, member.member_id))
    manager.touch_session(group, member)
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
    assigned = {names[t]: list(ps) for t, ps in member.assignment.assigned.items() if t in names}
    return SyncGroupResult(
        ErrorCode.NONE,
        CONSUMER_PROTOCOL_TYPE,
        name,
        encode_assignment(assigned, protocol_version(metadata)),
    )


def heartbeat(
    manager: ConsumerGroupManager,
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    generation_id: int,
    now_ms: int,
) -> ErrorCode:
    """A classic Heartbeat to a consumer group: REBALANCE_IN_PROGRESS when the member
    should rejoin: the group epoch moved on, it has partitions to give up, or partitions
    it waits for have been released."""
    if generation_id != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION
    manager.touch_session(group, member)
    if _should_rejoin(group, member):
        expect_join(manager, group, member, now_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def _should_rejoin(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    target = group.target_assignment.get(member.member_id, {})
    held = member.assignment.assigned
    return any(
        group.is_free(member.member_id, t, p)
        for t, ps in target.items()
        for p in ps - held.get(t, frozenset())
    )


def expect_join(
    manager: ConsumerGroupManager, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int
) -> None:
    """A classic member told to rejoin must send JoinGroup within its rebalance timeout,
    counted from the first time it was told, or it is fenced (Kafka's join timeout)."""
    key = ("consumer-join", group.group_id, member.member_id)
    if not manager.timers.armed(key):
        manager.timers.set(key, now_ms + member.rebalance_timeout_ms)
