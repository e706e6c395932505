"""Kafka's classic group coordinator as a sans-IO state machine.

Behaves like Kafka's GroupCoordinator: callers pass request fields and `now_ms` (wall
clock, it is persisted); JoinGroup/SyncGroup are parked under a caller-chosen request id
and answered through `Effects.completions`, possibly by a later call or `tick()`; records
for `__consumer_offsets` come back in `Effects.records`. Kafka's purgatories become
deadlines: call `tick(now)` once `next_timer_ms()` is reached. Single-threaded by design,
so Kafka's transient Dead-group races cannot occur and removed groups are simply gone.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from moldau.ids import SYSTEM_IDS, IdSource
from moldau.protocol.errors import ErrorCode
from moldau.stats.counters import GroupStats

from . import consumer_group_records, migration
from .config import GroupConfig
from .consumer_group import ConsumerGroup, ConsumerGroupMember
from .consumer_groups import (
    MEMBER_TIMERS,
    NO_OVERRIDES,
    ConsumerGroupManager,
    ConsumerHeartbeat,
    GroupOverrides,
    HeartbeatResult,
    TopicsView,
)
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, encode_assignment, encode_subscription
from .group import Group, GroupState
from .loader import GroupLoader
from .member import Member
from .offsets import OffsetMetadataManager, OperationEffects
from .offsets_records import encode_group_key, encode_group_value
from .results import (
    Effects,
    GroupDescription,
    GroupOverview,
    JoinGroupResult,
    MemberDescription,
    MemberIdentity,
    RequestId,
    SyncGroupResult,
)
from .timers import Timers
from .txn_offsets import PendingTxnOffsets

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
"""Kafka's bound on a new member's parked JoinGroup (it cannot heartbeat yet)."""

_CLEANUP = ("cleanup",)
NO_TOPICS: TopicsView = MappingProxyType({})
_CAN_REBALANCE = (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE)


@dataclass(frozen=True)
class GroupsSnapshot:
    groups: dict[str, Group | None]  # None: the group did not exist
    consumer_groups: dict[str, ConsumerGroup | None]
    everything: bool
    timers: Timers[tuple[str, ...]]


class GroupCoordinator:
    """One ``__consumer_offsets`` shard (Kafka's GroupCoordinatorShard): the classic
    groups' membership here (Kafka's GroupMetadataManager), their offsets in
    :attr:`offsets` (its OffsetMetadataManager)."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        now_ms: int = 0,
        stats: GroupStats | None = None,
        ids: IdSource = SYSTEM_IDS,
    ) -> None:
        self.config = config or GroupConfig()
        self.stats = stats or GroupStats()
        self._ids = ids
        self._groups: dict[str, Group] = {}
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        # Share groups' records found by the load, until the share-group service takes them.
        self.loaded_share_group_records: list[tuple[bytes, bytes | None]] = []
        self._timers: Timers[tuple[str, ...]] = Timers()
        self._ops = OperationEffects(now_ms)
        self.offsets = OffsetMetadataManager(
            self.config, self._groups, self._ops, self._schedule_heartbeat, self._consumer_groups
        )
        self.consumer = ConsumerGroupManager(
            self.config, self._consumer_groups, self._ops, self._timers, ids
        )
        self._timers.set(_CLEANUP, now_ms + self.config.offsets_retention_check_interval_ms)

    @property
    def groups(self) -> Mapping[str, Group]:
        """Read-only view of live groups (for describe tooling and tests)."""
        return MappingProxyType(self._groups)

    @property
    def consumer_groups(self) -> Mapping[str, ConsumerGroup]:
        """Read-only view of the KIP-848 consumer groups."""
        return MappingProxyType(self._consumer_groups)

    def consumer_group_heartbeat(
        self,
        now_ms: int,
        heartbeat: ConsumerHeartbeat,
        topics: TopicsView,
        overrides: GroupOverrides = NO_OVERRIDES,
    ) -> tuple[HeartbeatResult, Effects]:
        """ConsumerGroupHeartbeat (KIP-848). A classic group with members becomes a
        consumer group when a member joins with it and group.consumer.migration.policy
        allows; otherwise it is not a consumer group: GROUP_ID_NOT_FOUND, as Kafka answers."""
        self._begin(now_ms)
        classic = self._groups.get(heartbeat.group_id)
        before_upgrade: GroupsSnapshot | None = None
        if classic is not None and classic.members:
            invalid = self.consumer.check(heartbeat)
            if invalid is not None:
                return invalid, self._end()
            # Only a joining member (epoch 0) may upgrade the group, as in Kafka.
            if heartbeat.member_epoch == 0:
                before_upgrade = self.snapshot([heartbeat.group_id])
            refusal = (
                "only a joining member upgrades a group"
                if heartbeat.member_epoch != 0
                else self._upgrade(classic, topics)
            )
            if refusal is not None:
                message = (
                    f"Group {heartbeat.group_id} is not a consumer group "
                    f"and cannot be upgraded: {refusal}."
                )
                result = HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    message,
                    heartbeat.member_id or None,
                    heartbeat.member_epoch,
                )
                return result, self._end()
        consumer = self._consumer_groups.get(heartbeat.group_id)
        leaving = consumer.members.get(heartbeat.member_id) if consumer is not None else None
        result = self.consumer.heartbeat(heartbeat, topics, overrides)
        if before_upgrade is not None and result.error is not ErrorCode.NONE:
            # The joining member was refused (its static instance id is still in use, the
            # group is full): as Kafka reverts the failed operation, the group stays classic.
            self.restore(before_upgrade)
            self._begin(now_ms)
            return result, self._end()
        self._maybe_downgrade(heartbeat.group_id, leaving)
        return result, self._end()

    def _maybe_downgrade(self, group_id: str, gone: ConsumerGroupMember | None) -> None:
        """Once ``gone``, the last member speaking the consumer protocol, has left or was
        fenced, the group becomes a classic group again and rebalances (Kafka 4.0's online
        downgrade)."""
        group = self._consumer_groups.get(group_id)
        if gone is None or gone.classic is not None or group is None:
            return
        if gone.member_id not in group.members:
            self._downgrade_if_classic(group, rebalance=True)

    def _downgrade_if_classic(self, group: ConsumerGroup, rebalance: bool) -> None:
        """A consumer group whose members all speak the classic protocol becomes a classic
        group, if group.consumer.migration.policy and group.max.size allow. Its offsets
        stay. Without ``rebalance`` (a classic static member took the place of the last
        consumer-protocol one, as in Kafka) the group stays Stable, unless a member had
        not reached its target yet."""
        if not group.members or any(m.classic is None for m in group.members.values()):
            return
        refusal = migration.downgrade_refusal(group, self.config)
        if refusal is not None:
            log.info(
                "Cannot downgrade consumer group %s to a classic group: %s.",
                group.group_id,
                refusal,
            )
            return
        group_id = group.group_id
        rebalance = rebalance or not migration.reconciled(group)
        classic = migration.to_classic_group(group, self._now)
        for member_id in group.members:
            for kind in MEMBER_TIMERS:
                self._timers.cancel((kind, group_id, member_id))
            for record in consumer_group_records.tombstones(group_id, member_id):
                self._ops.append(*record)
        for record in consumer_group_records.group_tombstones(group_id):
            self._ops.append(*record)
        del self._consumer_groups[group_id]
        holder = self._groups.get(group_id)
        if holder is not None:
            classic.offsets, classic.pending_txn = holder.offsets, holder.pending_txn
        self._groups[group_id] = classic
        for member in classic.members.values():
            self._schedule_heartbeat(classic, member)
        if rebalance:
            # Written at the generation the rebalance will make (unlike Kafka): a failover
            # meanwhile loads it Stable with partitions nobody is assigned (the leaving
            # member's); at that generation the members' heartbeats are answered
            # ILLEGAL_GENERATION, they rejoin, and the leader's rejoin rebalances.
            value = replace(classic.metadata_value(), generation=classic.generation_id + 1)
            self._ops.append(encode_group_key(group_id), encode_group_value(value))
            self._prepare_rebalance(classic)
        else:
            self._store_group(classic)

    def _upgrade(self, classic: Group, topics: TopicsView) -> str | None:
        """Convert a classic group with members to a consumer group (Kafka 4.0's online
        upgrade): parked joins and syncs get REBALANCE_IN_PROGRESS (their members rejoin
        into the consumer group), the classic metadata is tombstoned, the offsets stay.
        Returns why it cannot, or None once done."""
        refusal = migration.upgrade_refusal(classic, self.config)
        if refusal is not None:
            return refusal
        try:
            converted = migration.to_consumer_group(classic, topics)
        except ValueError:
            return "the embedded consumer protocol is malformed"
        group_id = classic.group_id
        for member in classic.members.values():
            rebalance = ErrorCode.REBALANCE_IN_PROGRESS
            self._invoke_join(member, JoinGroupResult(rebalance, member_id=member.member_id))
            self._invoke_sync(member, SyncGroupResult(rebalance))
            self._timers.cancel(("heartbeat", group_id, member.member_id))
        for pending in classic.pending_members:
            self._timers.cancel(("pending", group_id, pending))
        self._timers.cancel(("join", group_id))
        self._timers.cancel(("sync", group_id))
        self._ops.append(encode_group_key(group_id), None)
        del self._groups[group_id]
        if classic.offsets or classic.pending_txn:
            holder = self._groups[group_id] = Group(group_id, self._now)
            holder.offsets, holder.pending_txn = classic.offsets, classic.pending_txn
        self.consumer.adopt(converted)
        return None

    def next_timer_ms(self) -> int:
        """When `tick` next has work; re-read after every call."""
        deadline = self._timers.next_deadline()
        assert deadline is not None  # the offsets cleanup timer is always armed
        return deadline

    def tick(self, now_ms: int) -> Effects:
        self._begin(now_ms)
        while (key := self._timers.pop_due(now_ms)) is not None:
            self._fire(key)
        return self._end()

    # JoinGroup / SyncGroup / Heartbeat / LeaveGroup

    def join_group(
        self,
        request_id: RequestId,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        require_known_member_id: bool,
        topics: TopicsView = NO_TOPICS,
    ) -> Effects:
        """JoinGroup; `require_known_member_id` is `version >= 4 and group_instance_id is None`.
        ``topics``: the metadata image's, for a join to a consumer group (upgraded online).

        The response arrives as a Completion for request_id, now or when the join phase ends.
        """
        self._begin(now_ms)
        joining = Member(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            list(protocols),
        )
        cfg = self.config
        group = self._groups.get(group_id)
        if not group_id:
            self._fail_join(request_id, joining, ErrorCode.INVALID_GROUP_ID)
        elif not (
            cfg.group_min_session_timeout_ms
            <= session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            self._fail_join(request_id, joining, ErrorCode.INVALID_SESSION_TIMEOUT)
        elif (consumer := self._consumer_groups.get(group_id)) is not None and consumer.members:
            hb = ConsumerHeartbeat(
                group_id,
                member_id,
                0,
                group_instance_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=client_id,
                client_host=client_host,
            )
            result = migration.join(
                self.consumer,
                consumer,
                topics,
                hb,
                protocol_type,
                protocols,
                session_timeout_ms,
                require_known_member_id,
                now_ms,
            )
            self._complete(request_id, result)
            if result.error is ErrorCode.NONE:  # it may have replaced the last consumer one
                self._downgrade_if_classic(consumer, rebalance=False)
        elif group is None and member_id:
            self._fail_join(request_id, joining, ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            # An empty consumer group becomes a classic one (its offsets stay).
            self.consumer.delete(group_id)
            if group is None:
                group = self._groups[group_id] = Group(group_id, now_ms)
            self._classic_join(group, request_id, joining, require_known_member_id)
        return self._end()

    def sync_group(
        self,
        request_id: RequestId,
        now_ms: int,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: Mapping[str, bytes],
    ) -> Effects:
        """SyncGroup; followers are parked until the leader's assignments arrive."""
        self._begin(now_ms)
        consumer = self._consumer_groups.get(group_id)
        if consumer is not None and consumer.members:
            cerror, cmember = migration.classic_member(consumer, member_id, group_instance_id)
            result = (
                SyncGroupResult(cerror)
                if cmember is None
                else migration.sync(
                    self.consumer,
                    consumer,
                    cmember,
                    generation_id,
                    protocol_type,
                    protocol_name,
                    now_ms,
                )
            )
            self._complete(request_id, result)
            return self._end()
        error = self._validate_sync(
            group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name
        )
        if error is not None:
            self._complete(request_id, SyncGroupResult(error))
            return self._end()
        group = self._groups[group_id]
        member = group.members[member_id]
        self._received_sync(group, member_id)
        if group.state is GroupState.STABLE:
            self._complete(
                request_id,
                SyncGroupResult(
                    ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
                ),
            )
            self._schedule_heartbeat(group, member)
            return self._end()
        self._park_sync(member, request_id)
        if group.is_leader(member_id):
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            self._store_group(group)
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition(GroupState.STABLE, now_ms)
            self.stats.completed_rebalances += 1
        return self._end()

    def heartbeat(
        self,
        now_ms: int,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """Heartbeat; REBALANCE_IN_PROGRESS tells the member to rejoin. Never has effects."""
        self._ops.now_ms = now_ms
        consumer = self._consumer_groups.get(group_id)
        if consumer is not None and consumer.members:
            cerror, cmember = migration.classic_member(consumer, member_id, group_instance_id)
            if cmember is None:
                return cerror
            return migration.heartbeat(self.consumer, consumer, cmember, generation_id, now_ms)
        error = self._validate_generation(group_id, member_id, generation_id, group_instance_id)
        if error is not None:
            return error
        group = self._groups[group_id]
        self._schedule_heartbeat(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(
        self, now_ms: int, group_id: str, members: Sequence[MemberIdentity]
    ) -> tuple[ErrorCode, list[ErrorCode], Effects]:
        """LeaveGroup: (top-level error, one error per member in request order, effects).

        A member id of "" with a group.instance.id removes that static member (admin removal).
        """
        self._begin(now_ms)
        group = self._groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, [], self._end()
        consumer = self._consumer_groups.get(group_id)
        if consumer is not None and consumer.members:
            return ErrorCode.NONE, self._leave_consumer_group(consumer, members), self._end()
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members), self._end()
        errors = []
        for leaving in members:
            if not leaving.member_id:
                current = group.static_members.get(leaving.group_instance_id or "")
                error = None if current is not None else ErrorCode.UNKNOWN_MEMBER_ID
            elif leaving.member_id in group.pending_members:
                self._remove_pending_member(group, leaving.member_id)
                current, error = None, None
            else:
                current = leaving.member_id
                error = group.validate_member(current, leaving.group_instance_id)
            if current is not None and error is None:
                self._remove_member_and_update_group(group, group.members[current])
            errors.append(error or ErrorCode.NONE)
        return ErrorCode.NONE, errors, self._end()

    def _leave_consumer_group(
        self, group: ConsumerGroup, members: Sequence[MemberIdentity]
    ) -> list[ErrorCode]:
        """Classic members of a consumer group leave (Kafka's classicGroupLeaveToConsumerGroup)."""
        errors = []
        for leaving in members:
            error, member = migration.classic_member(
                group, leaving.member_id, leaving.group_instance_id
            )
            if member is not None:
                self.consumer.fence(group, member.member_id)
            errors.append(error)
        return errors

    # Admin

    def delete_groups(
        self, now_ms: int, group_ids: Sequence[str]
    ) -> tuple[dict[str, ErrorCode], Effects]:
        """DeleteGroups: only Empty groups go; their offsets and metadata are tombstoned."""
        self._begin(now_ms)
        results = {}
        for group_id in group_ids:
            group = self._groups.get(group_id)
            consumer = self._consumer_groups.get(group_id)
            if consumer is not None:
                if consumer.members:
                    results[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.consumer.delete(group_id)
                if group is None:
                    results[group_id] = ErrorCode.NONE
                    continue
            if group is None:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                removed, group.offsets = group.offsets, {}
                self.offsets.cleanup_group(group, removed)
                results[group_id] = ErrorCode.NONE
        return results, self._end()

    def list_groups(
        self, states_filter: Iterable[str] = (), types_filter: Iterable[str] = ()
    ) -> list[GroupOverview]:
        """ListGroups; the v4+ states and v5+ types filters are case-insensitive, empty
        means all."""
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        overviews = [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value, "classic")
            for g in self._groups.values()
            if g.group_id not in self._consumer_groups
        ] + [
            GroupOverview(g.group_id, "consumer", g.state.value, "consumer")
            for g in self._consumer_groups.values()
        ]
        return [
            o
            for o in overviews
            if (not states or o.state.lower() in states) and (not types or o.group_type in types)
        ]

    def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups; unknown groups describe as Dead. Metadata only when Stable. A
        consumer group answers with its state and members, without metadata (as Kafka)."""
        consumer = self._consumer_groups.get(group_id)
        if consumer is not None:
            return self._describe_consumer_group(consumer)
        group = self._groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        stable = group.state is GroupState.STABLE
        protocol = (group.protocol_name or "") if stable else ""
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id, group.state.value, group.protocol_type or "", protocol, members
        )

    def _describe_consumer_group(self, group: ConsumerGroup) -> GroupDescription:
        """Kafka's ConsumerGroup.asDescribedGroup: the preferred server assignor as the
        protocol, members' subscriptions and assignments in consumer protocol blobs."""
        names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                encode_subscription(sorted(m.subscribed_topic_names), m.rack_id),
                encode_assignment(
                    {names[t]: list(ps) for t, ps in m.assignment.assigned.items() if t in names}
                ),
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group.group_id,
            group.state.value,
            CONSUMER_PROTOCOL_TYPE,
            group.preferred_assignor(self.config.consumer_assignors[0]),
            members,
        )

    def load(self, records: Iterable[tuple[bytes, bytes | None]], now_ms: int) -> None:
        """Rebuild groups from `__consumer_offsets` records, oldest first (strict: a record
        that does not decode raises ValueError; the runtime replays one by one instead)."""
        loader = GroupLoader()
        for key, value in records:
            loader.replay(key, value)
        self.finish_load(loader, now_ms)

    def finish_load(self, loader: GroupLoader, now_ms: int) -> None:
        """Install what ``loader`` replayed. As in Kafka, a group with members comes back
        Stable (members keep heartbeating across a coordinator move); one without comes
        back Empty with its generation."""
        self._ops.now_ms = now_ms
        offsets, metadata, pending = loader.offsets, loader.metadata, loader.pending
        self._consumer_groups.update(loader.consumer_groups)
        self.loaded_share_group_records = loader.share_group_records
        self.consumer.schedule_loaded()
        for group_id in (
            metadata.keys()
            | {g for g, o in offsets.items() if o}
            | {g for g, p in pending.items() if p}
        ):
            value = metadata.get(group_id)
            group = (
                Group(group_id, now_ms)
                if value is None
                else Group.from_metadata(group_id, value, now_ms)
            )
            group.offsets = offsets.get(group_id, {})
            group.pending_txn = pending.get(group_id) or PendingTxnOffsets()
            self._groups[group_id] = group
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
            if len(group.members) > self.config.group_max_size:
                # group.max.size was lowered: the members rejoin and only that many are kept.
                log.info(
                    "Freshly-loaded group %s (size %d) is over capacity %d: rebalancing",
                    group_id,
                    len(group.members),
                    self.config.group_max_size,
                )
                self._prepare_rebalance(group)

    # Undo: the coordinator runtime reverts an operation whose records could not be written

    def snapshot(self, group_ids: Iterable[str] | None = None) -> GroupsSnapshot:
        """Copies of the named groups (every group when None) and of the timers."""
        if group_ids is None:
            groups: dict[str, Group | None] = dict(copy.deepcopy(self._groups))
            consumer: dict[str, ConsumerGroup | None] = dict(copy.deepcopy(self._consumer_groups))
        else:
            groups = {g: copy.deepcopy(self._groups.get(g)) for g in group_ids}
            consumer = {g: copy.deepcopy(self._consumer_groups.get(g)) for g in group_ids}
        return GroupsSnapshot(groups, consumer, group_ids is None, self._timers.copy())

    def restore(self, snapshot: GroupsSnapshot) -> None:
        if snapshot.everything:
            self._groups.clear()  # the managers share these dicts
            self._consumer_groups.clear()
        for group_id, group in snapshot.groups.items():
            if group is None:
                self._groups.pop(group_id, None)
            else:
                self._groups[group_id] = group
        for group_id, consumer in snapshot.consumer_groups.items():
            if consumer is None:
                self._consumer_groups.pop(group_id, None)
            else:
                self._consumer_groups[group_id] = consumer
        self._timers = self.consumer.timers = snapshot.timers.copy()

    # Join phase

    def _new_member_join(
        self, group: Group, request_id: RequestId, joining: Member, require_known_member_id: bool
    ) -> None:
        if not group.supports_protocols(joining.protocol_type, joining.protocol_names):
            self._fail_join(request_id, joining, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            return
        instance_id = joining.group_instance_id
        new_member_id = (
            f"{joining.client_id if instance_id is None else instance_id}-{self._ids.uuid4()}"
        )
        if instance_id is not None and instance_id in group.static_members:
            old_member_id = group.static_members[instance_id]
            self._replace_static_member(group, request_id, joining, old_member_id, new_member_id)
        elif instance_id is None and require_known_member_id:
            group.pending_members.add(new_member_id)
            self._timers.set(
                ("pending", group.group_id, new_member_id), self._now + joining.session_timeout_ms
            )
            self._complete(
                request_id, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id)
            )
        else:
            joining.member_id = new_member_id
            self._add_member_and_rebalance(group, request_id, joining)

    def _classic_join(
        self, group: Group, request_id: RequestId, joining: Member, require_known_member_id: bool
    ) -> None:
        member_id = joining.member_id
        if not self._accepts_joining_member(group, member_id):
            self._refuse_joining_member(group, member_id)
            self._complete(request_id, JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif member_id:
            self._current_member_join(group, request_id, joining)
        else:
            self._new_member_join(group, request_id, joining, require_known_member_id)
        self._try_complete_join(group)

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: ``group.max.size`` bounds who may join. While
        preparing a rebalance the members that already rejoined are counted (the group may be
        over a lowered limit: the last to rejoin are left out); otherwise its size."""
        limit = self.config.group_max_size
        if group.state is GroupState.EMPTY:
            return True
        member = group.members.get(member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            awaiting = sum(m.join_request is not None for m in group.members.values())
            return (member is not None and member.join_request is not None) or awaiting < limit
        return member is not None or len(group.members) < limit

    def _refuse_joining_member(self, group: Group, member_id: str) -> None:
        """A refused member leaves the group (Kafka removes it, pending or not)."""
        member = group.members.get(member_id)
        if member is not None:
            self._remove_member(group, member)
        elif member_id in group.pending_members:
            self._remove_pending_member(group, member_id)

    def _current_member_join(self, group: Group, request_id: RequestId, joining: Member) -> None:
        member_id = joining.member_id
        if not group.supports_protocols(joining.protocol_type, joining.protocol_names):
            self._fail_join(request_id, joining, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            return
        if member_id in group.pending_members and joining.group_instance_id is None:
            self._timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, request_id, joining)
            return
        error = group.validate_member(member_id, joining.group_instance_id)
        if error is not None:
            self._fail_join(request_id, joining, error)
            return
        member = group.members[member_id]
        unchanged = member.matches(joining.protocols)
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # The member probably lost its JoinGroup response: repeat it.
            self._complete(request_id, self._join_result(group, member_id))
        elif group.state is GroupState.STABLE and unchanged and not group.is_leader(member_id):
            self._complete(request_id, self._join_result(group, member_id, with_members=False))
        else:
            # Changed metadata, or the leader rejoining (it may have seen new topic metadata).
            group.update_member(
                member, joining.protocols, joining.rebalance_timeout_ms, joining.session_timeout_ms
            )
            self._park_join(member, request_id)
            self._maybe_prepare_rebalance(group)

    def _replace_static_member(
        self, group: Group, request_id: RequestId, joining: Member, old_id: str, new_id: str
    ) -> None:
        """KIP-345: a restarted static member takes over its old member id's place."""
        previous_leader = group.leader_id
        old = group.members[old_id]
        self._invoke_join(old, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        self._invoke_sync(old, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        self._timers.cancel(("heartbeat", group.group_id, old_id))
        member = group.replace_static_member(old.group_instance_id or "", old_id, new_id)
        self._schedule_heartbeat(group, member)
        group.update_member(
            member, joining.protocols, joining.rebalance_timeout_ms, joining.session_timeout_ms
        )
        if group.state is GroupState.STABLE and group.protocol_name == group.select_protocol():
            # No rebalance: answer with the old leader id so that a restarted leader does not
            # run an assignment the Stable group would ignore; SyncGroup returns its assignment.
            self._store_group(group)
            self._complete(
                request_id,
                JoinGroupResult(
                    ErrorCode.NONE,
                    new_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    previous_leader or "",
                ),
            )
            return
        self._park_join(member, request_id)
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group)

    def _add_member_and_rebalance(
        self, group: Group, request_id: RequestId, member: Member
    ) -> None:
        member.is_new = True
        if group.state is GroupState.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._park_join(member, request_id)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group)

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.state in _CAN_REBALANCE:
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._timers.cancel(("sync", group.group_id))
        if group.state is GroupState.EMPTY:
            delay = self.config.group_initial_rebalance_delay_ms
            group.initial_join = (delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            delay = group.rebalance_timeout_ms
            group.initial_join = None
        group.transition(GroupState.PREPARING_REBALANCE, self._now)
        self._timers.set(("join", group.group_id), self._now + delay)
        self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        """Finish the join phase early once everyone is in (never during the initial delay)."""
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.initial_join is None
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _expire_join(self, group: Group) -> None:
        if group.initial_join is not None and group.new_member_added:
            delay, remaining = group.initial_join
            if remaining:
                # New members keep arriving: wait another delay, bounded by rebalance timeout.
                group.new_member_added = False
                next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                group.initial_join = (next_delay, max(remaining - delay, 0))
                self._timers.set(("join", group.group_id), self._now + next_delay)
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self._timers.cancel(("join", group.group_id))
        group.initial_join = None
        for m in list(group.members.values()):
            if m.join_request is None and m.group_instance_id is None:
                self._remove_member(group, m)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined remain: wait for them or their expiry.
            self._timers.set(("join", group.group_id), self._now + group.rebalance_timeout_ms)
            return
        group.init_next_generation(self._now)
        if group.state is GroupState.EMPTY:
            self._store_group(group)
            return
        for m in group.members.values():
            self._invoke_join(m, self._join_result(group, m.member_id))
            self._schedule_heartbeat(group, m)
            m.is_new = False
            group.pending_sync_members.add(m.member_id)
        self._timers.set(("sync", group.group_id), self._now + group.rebalance_timeout_ms)

    def _join_result(
        self, group: Group, member_id: str, with_members: bool = True
    ) -> JoinGroupResult:
        leader = group.is_leader(member_id)
        return JoinGroupResult(
            ErrorCode.NONE,
            member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if leader and with_members else (),
        )

    # Sync phase

    def _validate_generation(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode | None:
        """The checks SyncGroup and Heartbeat share: a known member of this generation."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def _validate_sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode | None:
        error = self._validate_generation(group_id, member_id, generation_id, group_instance_id)
        if error is not None:
            return error
        group = self._groups[group_id]
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def _received_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self._timers.cancel(("sync", group.group_id))

    def _expire_sync(self, group: Group) -> None:
        """Members that never sent SyncGroup within the rebalance timeout are removed."""
        if not group.pending_sync_members or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        for member_id in list(group.pending_sync_members):
            self._remove_member(group, group.members[member_id])
        self._prepare_rebalance(group)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for m in group.members.values():
            if m.sync_request is not None:
                result = SyncGroupResult(
                    error,
                    group.protocol_type if ok else None,
                    group.protocol_name if ok else None,
                    m.assignment,
                )
                self._invoke_sync(m, result)
                self._schedule_heartbeat(group, m)

    # Membership changes

    def _schedule_heartbeat(
        self, group: Group, member: Member, timeout_ms: int | None = None
    ) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._timers.set(("heartbeat", group.group_id, member.member_id), self._now + timeout)

    def _expire_heartbeat(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        awaiting = member.join_request is not None or member.sync_request is not None
        if member.is_new or not awaiting:
            self._remove_member_and_update_group(group, member)

    def _remove_pending_member(self, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self._timers.cancel(("pending", group.group_id, member_id))
        self._try_complete_join(group)

    def _remove_member(self, group: Group, member: Member) -> None:
        """Drop a member, answering any request it still has parked."""
        self._invoke_join(member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._invoke_sync(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._timers.cancel(("heartbeat", group.group_id, member.member_id))

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._maybe_prepare_rebalance(group)

    def _park_join(self, member: Member, request_id: RequestId) -> None:
        """A newer JoinGroup supersedes a parked one, which is told to retry."""
        self._invoke_join(
            member, JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id)
        )
        member.join_request = request_id

    def _park_sync(self, member: Member, request_id: RequestId) -> None:
        self._invoke_sync(member, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_request = request_id

    def _invoke_join(self, member: Member, result: JoinGroupResult) -> None:
        if member.join_request is not None:
            self._complete(member.join_request, result)
            member.join_request = None

    def _invoke_sync(self, member: Member, result: SyncGroupResult) -> None:
        if member.sync_request is not None:
            self._complete(member.sync_request, result)
            member.sync_request = None

    def _fail_join(self, request_id: RequestId, joining: Member, error: ErrorCode) -> None:
        self._complete(request_id, JoinGroupResult(error, member_id=joining.member_id))

    # Plumbing

    def _fire(self, key: tuple[str, ...]) -> None:
        if key == _CLEANUP:
            self.offsets.expire_offsets()
            self.consumer.delete_empty(lambda group_id: group_id in self._groups)
            self._timers.set(_CLEANUP, self._now + self.config.offsets_retention_check_interval_ms)
            return
        kind, group_id, *member = key
        if kind.startswith("consumer-"):
            consumer = self._consumer_groups.get(group_id)
            gone = consumer.members.get(member[0]) if consumer is not None else None
            self.consumer.fire(kind, group_id, member[0])
            self._maybe_downgrade(group_id, gone)
            return
        group = self._groups.get(group_id)
        if group is None:
            return
        if kind == "heartbeat":
            self._expire_heartbeat(group, member[0])
        elif kind == "pending":
            self._remove_pending_member(group, member[0])
        elif kind == "join":
            if group.state is GroupState.PREPARING_REBALANCE:
                self._expire_join(group)
        else:
            self._expire_sync(group)

    def _store_group(self, group: Group) -> None:
        self._ops.append(
            encode_group_key(group.group_id), encode_group_value(group.metadata_value())
        )

    def _complete(self, request_id: RequestId, result: JoinGroupResult | SyncGroupResult) -> None:
        self._ops.complete(request_id, result)

    @property
    def _now(self) -> int:
        return self._ops.now_ms

    def _begin(self, now_ms: int) -> None:
        self._ops.begin(now_ms)

    def _end(self) -> Effects:
        return self._ops.end()
