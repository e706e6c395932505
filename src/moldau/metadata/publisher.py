"""The publisher: tells this node's components what a new metadata image changed for it.

Replaces a broker-wide "on image change" hook: listeners (the replica manager, the group
and transaction coordinators, config holders) get the old and new image plus the
partitions this node now leads or follows or must drop, computed once per image by
identity comparison (the delta shares everything it did not touch).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass
class LocalChanges:
    """What a new image means for one node's replicas."""

    leaders: dict[TopicPartition, PartitionImage] = field(default_factory=dict)
    followers: dict[TopicPartition, PartitionImage] = field(default_factory=dict)
    # replicas to drop, with the id of the topic they were dropped from: a log of the same
    # name but another topic id (a topic created again) must survive the drop
    deletes: dict[TopicPartition, bytes] = field(default_factory=dict)
    config_changed: set[str] = field(default_factory=set)  # topics whose configs changed

    def __bool__(self) -> bool:
        return bool(self.leaders or self.followers or self.deletes or self.config_changed)


def local_changes(old: MetadataImage, new: MetadataImage, node_id: int) -> LocalChanges:
    changes = LocalChanges()
    if old.topics is new.topics:
        return changes
    for name, topic in old.topics.items():
        current = new.topics.get(name)
        if current is None or current.topic_id != topic.topic_id:
            changes.deletes.update(dict.fromkeys(_hosted(topic, node_id), topic.topic_id))
    for name, topic in new.topics.items():
        before = old.topics.get(name)
        if before is topic:
            continue
        if before is not None and before.topic_id != topic.topic_id:
            before = None
        if before is not None and before.configs is not topic.configs:
            changes.config_changed.add(name)
        if before is not None and before.partitions is topic.partitions:
            continue
        for pid, part in topic.partitions.items():
            tp = (name, pid)
            previous = before.partitions.get(pid) if before is not None else None
            if previous is part:
                continue
            if node_id in part.replicas:
                target = changes.leaders if part.leader == node_id else changes.followers
                target[tp] = part
            elif previous is not None and node_id in previous.replicas:
                changes.deletes[tp] = topic.topic_id
    return changes


def _hosted(topic: TopicImage, node_id: int) -> Iterator[TopicPartition]:
    for pid, part in topic.partitions.items():
        if node_id in part.replicas:
            yield topic.name, pid


class MetadataListener(Protocol):
    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None: ...


class MetadataPublisher:
    """Holds the image this node serves from and fans each new one out, in order."""

    def __init__(self, node_id: int, image: MetadataImage | None = None) -> None:
        self.node_id = node_id
        self.image = image or MetadataImage()
        self._listeners: list[MetadataListener] = []

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def close(self) -> None:
        """The broker is stopping: later images reach no listener (Kafka removes its
        publishers before the replica and log managers shut down). An image committed
        during the stop, say the controlled shutdown's own, must not make the replica
        manager host partitions again after their logs were closed."""
        self._listeners.clear()

    def publish(self, image: MetadataImage) -> LocalChanges:
        old, self.image = self.image, image
        if not self._listeners:
            return LocalChanges()
        changes = local_changes(old, image, self.node_id)
        for listener in self._listeners:
            listener.on_metadata_update(old, image, changes)
        return changes
