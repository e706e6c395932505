"""KIP-848 server-side assignors: ``uniform`` (Kafka's UniformAssignor) and ``range``
(its RangeAssignor), chosen through ``group.consumer.assignors`` and a member's
``group.remote.assignor``.

An assignor maps the members' subscriptions (topic ids) and the topics' partition counts
to a target assignment. ``uniform`` is sticky: a partition stays with its current target
owner while that keeps the member counts balanced, so a rebalance moves only what must
move. ``range`` gives each subscribed member a contiguous range of every topic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Assignment = dict[bytes, frozenset[int]]
"""Partitions by topic id."""


@dataclass(frozen=True)
class AssignmentMember:
    member_id: str
    instance_id: str | None
    subscribed_topic_ids: frozenset[bytes]
    current: Mapping[bytes, frozenset[int]]
    """The member's current target assignment (what ``uniform`` keeps where it can)."""


Assignor = Callable[[Sequence[AssignmentMember], Mapping[bytes, int]], dict[str, Assignment]]


def uniform_assign(
    members: Sequence[AssignmentMember], partitions: Mapping[bytes, int]
) -> dict[str, Assignment]:
    """Balanced counts per member (within one partition among members of equal
    subscriptions), keeping current owners first."""
    owned: dict[str, set[tuple[bytes, int]]] = {m.member_id: set() for m in members}
    subscribers: dict[bytes, list[str]] = {}
    for m in sorted(members, key=lambda m: m.member_id):
        for topic_id in m.subscribed_topic_ids:
            if topic_id in partitions:
                subscribers.setdefault(topic_id, []).append(m.member_id)
    taken: set[tuple[bytes, int]] = set()
    for m in members:
        for topic_id, parts in m.current.items():
            if topic_id in m.subscribed_topic_ids and topic_id in partitions:
                for p in parts:
                    if p < partitions[topic_id] and (topic_id, p) not in taken:
                        owned[m.member_id].add((topic_id, p))
                        taken.add((topic_id, p))
    for topic_id in sorted(subscribers):
        for p in range(partitions[topic_id]):
            if (topic_id, p) not in taken:
                fewest = min(subscribers[topic_id], key=lambda mid: len(owned[mid]))
                owned[fewest].add((topic_id, p))
    _balance(owned, subscribers)
    return {mid: _by_topic(tps) for mid, tps in owned.items()}


def _balance(
    owned: dict[str, set[tuple[bytes, int]]], subscribers: Mapping[bytes, list[str]]
) -> None:
    """Move partitions from the fullest members to subscribed ones with two or more fewer,
    until no such move exists (each move shrinks the spread, so this ends)."""
    moved = True
    while moved:
        moved = False
        for giver in sorted(owned, key=lambda mid: (-len(owned[mid]), mid)):
            for tp in sorted(owned[giver]):
                taker = min(subscribers[tp[0]], key=lambda mid: (len(owned[mid]), mid))
                if len(owned[taker]) < len(owned[giver]) - 1:
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    moved = True
                    break
            if moved:
                break


def range_assign(
    members: Sequence[AssignmentMember], partitions: Mapping[bytes, int]
) -> dict[str, Assignment]:
    """Per topic, its subscribers sorted by (instance id or member id) take consecutive
    ranges; the first ``count % subscribers`` take one more."""
    result: dict[str, dict[bytes, set[int]]] = {m.member_id: {} for m in members}
    ordered = sorted(members, key=lambda m: (m.instance_id or m.member_id, m.member_id))
    for topic_id in sorted(partitions):
        subs = [m.member_id for m in ordered if topic_id in m.subscribed_topic_ids]
        if not subs:
            continue
        count = partitions[topic_id]
        per, extra = divmod(count, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            n = per + (1 if i < extra else 0)
            if n:
                result[mid][topic_id] = set(range(start, start + n))
            start += n
    return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in result.items()}


def _by_topic(tps: set[tuple[bytes, int]]) -> Assignment:
    out: dict[bytes, set[int]] = {}
    for topic_id, p in tps:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}

_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_names(configured: Sequence[str]) -> list[str]:
    """``group.consumer.assignors`` entries (Kafka's class names or short names) as names;
    raises ValueError for an assignor Moldau does not have."""
    names = []
    for entry in configured:
        name = _CLASS_NAMES.get(entry.strip(), entry.strip())
        if name not in ASSIGNORS:
            raise ValueError(f"unknown group.consumer.assignors entry {entry!r}")
        names.append(name)
    return names
