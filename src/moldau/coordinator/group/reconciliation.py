"""Incremental reconciliation of one KIP-848 member (Kafka's CurrentAssignmentBuilder).

A member moves from its current assignment to its target one in steps, never stopping
the world: first it revokes only the partitions that leave it (state
UNREVOKED_PARTITIONS, member epoch unchanged); once it reports them gone it takes the
target epoch and the new partitions whose previous owners have released them (the rest
wait in UNRELEASED_PARTITIONS). So no partition is ever owned by two members at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from .assignors import Assignment


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class MemberAssignment:
    """What a member holds: its epochs, state, assigned partitions and those it must revoke."""

    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def reconcile(
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    owned: Mapping[bytes, frozenset[int]] | None,
    is_free: Callable[[bytes, int], bool],
) -> MemberAssignment:
    """The member's next step toward ``target`` (at ``target_epoch``).

    ``owned``: what the member reported in this heartbeat (None: not reported).
    ``is_free(topic_id, partition)``: no other member owns or still revokes it.
    """
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _overlaps(owned, current.pending_revocation):
            return current
        # Revocation done: go on from what remains assigned.
        return _next(current, target_epoch, target, is_free)
    if current.state is MemberState.UNRELEASED_PARTITIONS or current.member_epoch != target_epoch:
        return _next(current, target_epoch, target, is_free)
    return current


def _next(
    current: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    is_free: Callable[[bytes, int], bool],
) -> MemberAssignment:
    assigned = current.assigned
    kept = {t: ps & target.get(t, frozenset()) for t, ps in assigned.items()}
    revoke = {t: ps - target.get(t, frozenset()) for t, ps in assigned.items()}
    kept = {t: ps for t, ps in kept.items() if ps}
    revoke = {t: ps for t, ps in revoke.items() if ps}
    if revoke:
        return MemberAssignment(
            current.member_epoch,
            current.previous_member_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            kept,
            revoke,
        )
    unreleased = False
    new: dict[bytes, frozenset[int]] = dict(kept)
    for topic_id, parts in target.items():
        have = kept.get(topic_id, frozenset())
        free = frozenset(p for p in parts - have if is_free(topic_id, p))
        unreleased |= len(free) < len(parts - have)
        if have | free:
            new[topic_id] = have | free
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    previous = (
        current.member_epoch
        if current.member_epoch != target_epoch
        else current.previous_member_epoch
    )
    return MemberAssignment(target_epoch, previous, state, new, {})


def _overlaps(owned: Mapping[bytes, frozenset[int]], other: Assignment) -> bool:
    return any(owned.get(t, frozenset()) & ps for t, ps in other.items())
