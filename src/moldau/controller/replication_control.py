"""The controller's decisions about partitions once they exist: who leads, who is in sync,
where replicas move. Pure: each method reads an image and returns records (and answers).

- Broker fenced (missed heartbeats), shutting down (controlled shutdown) or back: every
  partition it hosts gets a new ISR and leader (``elections``).
- AlterPartition from a leader: an ISR change, checked against the leader epoch and the
  partition epoch (a stale proposal is refused, never applied), with only live replicas.
  A replica whose log dir failed leaves the ISR by itself: from the leader that is its
  resignation (the next ISR replica leads), a follower may send only that change.
- ElectLeaders: preferred (the first replica) or unclean elections; the automatic leader
  balancer is preferred elections for brokers leading too few of their partitions.
- Reassignment (KIP-455): the new replicas are added and catch up; once all of them are
  in the ISR the old ones leave and the replica list becomes the target.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from moldau.controller.elections import change_record, elect_leader, without
from moldau.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import MetadataRecord, PartitionChangeRecord
from moldau.protocol.errors import ErrorCode

PREFERRED = 0
UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class PartitionRef:
    topic: TopicImage
    part: PartitionImage


def hosted_by(image: MetadataImage, broker_id: int) -> Iterator[PartitionRef]:
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if broker_id in part.replicas:
                yield PartitionRef(topic, part)


class ReplicationControl:
    def __init__(self, unclean_default: bool = False) -> None:
        self.unclean_default = unclean_default

    def unclean_allowed(self, topic: TopicImage) -> bool:
        value = topic.configs.get("unclean.leader.election.enable")
        return self.unclean_default if value is None else value.lower() == "true"

    @staticmethod
    def alive(image: MetadataImage) -> set[int]:
        return {b.broker_id for b in image.brokers.values() if b.alive}

    # -- brokers coming and going -------------------------------------------------------
    def broker_lost(self, image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
        """A broker was fenced or is shutting down: it leaves every ISR (never emptying
        one) and its leaderships move to the next eligible replica."""
        alive = self.alive(image)
        records: list[MetadataRecord] = []
        for ref in hosted_by(image, broker_id):
            part = ref.part
            record = change_record(
                ref.topic.topic_id,
                part,
                isr=without(part.isr, {broker_id}) if broker_id in part.isr else None,
                alive=lambda r: r in alive and r != broker_id,
                unclean=self.unclean_allowed(ref.topic),
            )
            if record is not None:
                records.append(record)
        return records

    def broker_back(self, image: MetadataImage, broker_id: int) -> list[MetadataRecord]:
        """A broker was unfenced: leaderless partitions it can lead get it as leader."""
        alive = set(self.alive(image)) | {broker_id}
        records: list[MetadataRecord] = []
        for ref in hosted_by(image, broker_id):
            if ref.part.leader != NO_LEADER:
                continue
            record = change_record(
                ref.topic.topic_id,
                ref.part,
                alive=alive.__contains__,
                unclean=self.unclean_allowed(ref.topic),
            )
            if record is not None:
                records.append(record)
        return records

    def leaders(self, image: MetadataImage, broker_id: int) -> int:
        return sum(1 for ref in hosted_by(image, broker_id) if ref.part.leader == broker_id)

    # -- AlterPartition ------------------------------------------------------------------
    def alter_partition(
        self,
        image: MetadataImage,
        broker_id: int,
        topic_name: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: Sequence[int],
    ) -> tuple[ErrorCode, PartitionImage | None, list[MetadataRecord]]:
        """(error, the partition as it will be, records) for one ISR change proposal."""
        topic = image.topics.get(topic_name)
        part = topic.partitions.get(partition) if topic is not None else None
        if topic is None or part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, []
        leaving = tuple(new_isr) == tuple(r for r in part.isr if r != broker_id)
        if part.leader != broker_id and not (broker_id in part.isr and leaving):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, part, []
        if leader_epoch != part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, part, []
        if partition_epoch != part.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, part, []
        alive = self.alive(image)
        isr = tuple(new_isr)
        # A leader leaving the ISR resigns: its replica went offline (a failed log dir).
        if broker_id not in isr:
            alive.discard(broker_id)
        if not isr or any(r not in part.replicas or r not in alive for r in isr):
            return ErrorCode.INELIGIBLE_REPLICA, part, []
        records: list[MetadataRecord] = []
        record = change_record(topic.topic_id, part, isr=isr, alive=alive.__contains__)
        if record is not None:
            records.append(record)
        after = part.change(record) if record is not None else part
        records += self._maybe_complete_reassignment(topic, after, alive)
        if len(records) > 1:
            after = after.change(records[-1])
        return ErrorCode.NONE, after, records

    # -- elections -----------------------------------------------------------------------
    def elect(
        self, image: MetadataImage, topic_name: str, partition: int, election_type: int
    ) -> tuple[ErrorCode, str | None, PartitionChangeRecord | None]:
        """ElectLeaders for one partition: (error, message, record)."""
        topic = image.topics.get(topic_name)
        part = topic.partitions.get(partition) if topic is not None else None
        if topic is None or part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, None
        alive = set(self.alive(image))
        if election_type == PREFERRED:
            preferred = part.replicas[0]
            if part.leader == preferred:
                return ErrorCode.ELECTION_NOT_NEEDED, "Leader is already the preferred one", None
            if preferred not in alive or preferred not in part.isr:
                return (
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Preferred replica {preferred} is not live or not in the ISR",
                    None,
                )
            record = change_record(topic.topic_id, part, alive=alive.__contains__, preferred=True)
            return ErrorCode.NONE, None, record
        if part.leader != NO_LEADER and part.leader in alive:
            return ErrorCode.ELECTION_NOT_NEEDED, "The partition has a live leader", None
        leader, _ = elect_leader(part, part.isr, alive.__contains__, unclean=True)
        if leader == NO_LEADER:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "No live replica", None
        record = change_record(topic.topic_id, part, alive=alive.__contains__, unclean=True)
        return ErrorCode.NONE, None, record

    def imbalanced_partitions(
        self, image: MetadataImage, max_imbalance_percent: int
    ) -> list[tuple[str, int]]:
        """Kafka's auto leader rebalance: for every broker whose share of partitions led by
        a non-preferred replica exceeds ``leader.imbalance.per.broker.percentage``, the
        partitions it should lead (and could: alive and in the ISR)."""
        alive = set(self.alive(image))
        preferred: dict[int, list[tuple[TopicImage, PartitionImage]]] = {}
        for topic in image.topics.values():
            for part in topic.partitions.values():
                if part.replicas:
                    preferred.setdefault(part.replicas[0], []).append((topic, part))
        wanted = []
        for broker, parts in preferred.items():
            if broker not in alive:
                continue
            not_led = [(t, p) for t, p in parts if p.leader != broker]
            if 100 * len(not_led) / len(parts) > max_imbalance_percent:
                wanted += [(t.name, p.partition_id) for t, p in not_led if broker in p.isr]
        return wanted

    # -- reassignment ------------------------------------------------------------------
    def reassign(
        self, image: MetadataImage, topic_name: str, partition: int, target: Sequence[int] | None
    ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]:
        """Start (``target``) or cancel (None) a reassignment of one partition."""
        topic = image.topics.get(topic_name)
        part = topic.partitions.get(partition) if topic is not None else None
        if topic is None or part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, []
        alive = set(self.alive(image))
        if target is None:
            if not part.adding_replicas and not part.removing_replicas:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None, []
            original = tuple(r for r in part.replicas if r not in part.adding_replicas)
            isr = tuple(r for r in part.isr if r in original) or original[:1]
            record = change_record(
                topic.topic_id,
                part,
                isr=isr,
                replicas=original,
                adding=(),
                removing=(),
                alive=alive.__contains__,
            )
            return ErrorCode.NONE, None, [record] if record is not None else []
        target = tuple(target)
        if not target or len(set(target)) != len(target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate or empty replica list", []
        unknown = [r for r in target if r not in image.brokers]
        if unknown:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Unknown brokers {unknown}", []
        current = tuple(r for r in part.replicas if r not in part.adding_replicas)
        adding = tuple(r for r in target if r not in current)
        removing = tuple(r for r in current if r not in target)
        merged = target + removing
        record = change_record(
            topic.topic_id,
            part,
            replicas=merged,
            adding=adding,
            removing=removing,
            alive=alive.__contains__,
        )
        records: list[MetadataRecord] = [record] if record is not None else []
        after = part.change(record) if record is not None else part
        records += self._maybe_complete_reassignment(topic, after, alive)
        return ErrorCode.NONE, None, records

    def _maybe_complete_reassignment(
        self, topic: TopicImage, part: PartitionImage, alive: Iterable[int]
    ) -> list[MetadataRecord]:
        """Once every added replica is in the ISR, the removed ones leave."""
        if not part.adding_replicas and not part.removing_replicas:
            return []
        if any(r not in part.isr for r in part.adding_replicas):
            return []
        target = tuple(r for r in part.replicas if r not in part.removing_replicas)
        isr = tuple(r for r in part.isr if r in target)
        live = set(alive)
        record = change_record(
            topic.topic_id,
            part,
            isr=isr,
            replicas=target,
            adding=(),
            removing=(),
            alive=live.__contains__,
        )
        return [record] if record is not None else []

    @staticmethod
    def reassignments(
        image: MetadataImage, wanted: Mapping[str, Sequence[int]] | None
    ) -> Iterator[tuple[str, PartitionImage]]:
        """Partitions under reassignment (of ``wanted`` topics/partitions, or all)."""
        for topic in image.topics.values():
            if wanted is not None and topic.name not in wanted:
                continue
            for part in topic.partitions.values():
                if wanted is not None and part.partition_id not in wanted[topic.name]:
                    continue
                if part.adding_replicas or part.removing_replicas:
                    yield topic.name, part
