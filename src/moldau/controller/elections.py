"""Leader election and ISR changes: how a partition's registration changes when brokers
come and go, as Kafka's PartitionChangeBuilder decides it.

- The leader is the first replica, in replica order, that is in the ISR and alive
  (unfenced, not shutting down). If the current leader still qualifies it stays.
- Unclean election (``unclean.leader.election.enable``) may pick an alive replica outside
  the ISR, only when no ISR member is alive; the ISR then becomes that leader alone.
  Acknowledged data can be lost that way, which is why it is off by default.
- A fenced broker leaves every ISR, except that the ISR is never emptied: its last
  member stays, so the partition keeps a record of who has all the data.

Every change is one PartitionChangeRecord; applying it bumps the partition epoch, and the
leader epoch when the leader changes (``PartitionImage.change``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from moldau.metadata.image import NO_LEADER, NO_LEADER_CHANGE, PartitionImage
from moldau.metadata.records import PartitionChangeRecord


def elect_leader(
    part: PartitionImage,
    isr: tuple[int, ...],
    alive: Callable[[int], bool],
    *,
    unclean: bool = False,
    preferred: bool = False,
) -> tuple[int, bool]:
    """(leader, unclean) for ``part`` with ``isr``. Keeps a live current leader unless
    ``preferred`` asks for the first replica (when it is eligible)."""
    eligible = [r for r in part.replicas if r in isr and alive(r)]
    if not preferred and part.leader in eligible:
        return part.leader, False
    if eligible:
        return eligible[0], False
    if unclean:
        outside = [r for r in part.replicas if alive(r)]
        if outside:
            return outside[0], True
    return NO_LEADER, False


def change_record(
    topic_id: bytes,
    part: PartitionImage,
    *,
    isr: tuple[int, ...] | None = None,
    alive: Callable[[int], bool],
    unclean: bool = False,
    preferred: bool = False,
    replicas: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
) -> PartitionChangeRecord | None:
    """The record moving ``part`` to the given ISR/replicas and the leader they imply, or
    None when nothing would change."""
    target = part if replicas is None else _with_replicas(part, replicas)
    new_isr = part.isr if isr is None else isr
    leader, was_unclean = elect_leader(target, new_isr, alive, unclean=unclean, preferred=preferred)
    if was_unclean:
        new_isr = (leader,)
    changed_isr = new_isr != part.isr
    changed_leader = leader != part.leader
    changed_replicas = replicas is not None and replicas != part.replicas
    changed_reassignment = (adding is not None and adding != part.adding_replicas) or (
        removing is not None and removing != part.removing_replicas
    )
    if not (changed_isr or changed_leader or changed_replicas or changed_reassignment):
        return None
    return PartitionChangeRecord(
        partition_id=part.partition_id,
        topic_id=topic_id,
        leader=leader if changed_leader else NO_LEADER_CHANGE,
        isr=list(new_isr) if changed_isr else None,
        replicas=list(replicas) if changed_replicas and replicas is not None else None,
        adding_replicas=list(adding) if adding is not None else None,
        removing_replicas=list(removing) if removing is not None else None,
    )


def _with_replicas(part: PartitionImage, replicas: tuple[int, ...]) -> PartitionImage:
    return PartitionImage(
        part.partition_id,
        replicas,
        part.isr,
        part.leader,
        part.leader_epoch,
        part.partition_epoch,
    )


def without(isr: tuple[int, ...], brokers: Collection[int]) -> tuple[int, ...]:
    """``isr`` minus ``brokers``, but never empty: the last member stays."""
    kept = tuple(r for r in isr if r not in brokers)
    return kept if kept else isr[-1:]
