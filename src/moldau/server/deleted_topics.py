"""What the coordinators do when topics are deleted (Kafka's BrokerMetadataPublisher calls
the group coordinator's and the share coordinator's deletion hooks).

Every group's committed offsets of a deleted topic's partitions are tombstoned in
``__consumer_offsets`` by the node coordinating the group, so a topic created again under
the same name is consumed from ``auto.offset.reset``, not from the old topic's offsets.

A deleted topic's id leaves the share groups' ShareGroupStatePartitionMetadata and its
share state leaves ``__share_group_state``, on whichever node coordinates each, so a
topic created again under the same name (a new id) starts afresh at the group's
``share.auto.offset.reset`` and nothing of the old topic lingers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import LocalChanges

if TYPE_CHECKING:
    from moldau.coordinator.group.service import GroupCoordinatorService
    from moldau.coordinator.share.service import ShareGroupService
    from moldau.coordinator.share_state.service import ShareCoordinatorService

log = logging.getLogger(__name__)


class DeletedTopics:
    """A metadata listener: each image that drops topics starts their clean-up."""

    def __init__(
        self,
        groups: GroupCoordinatorService,
        shares: ShareGroupService,
        share_state: ShareCoordinatorService,
    ) -> None:
        self.groups = groups
        self.shares = shares
        self.share_state = share_state
        self._tasks: set[asyncio.Task[None]] = set()

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        gone = frozenset(old.topics_by_id.keys() - new.topics_by_id.keys())
        if gone:
            partitions = [
                (topic.name, p)
                for topic in (old.topics[old.topics_by_id[topic_id]] for topic_id in gone)
                for p in topic.partitions
            ]
            task = asyncio.get_running_loop().create_task(self._clean_up(gone, partitions))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _clean_up(
        self, topic_ids: frozenset[bytes], partitions: list[tuple[str, int]]
    ) -> None:
        for name, clean_up in (
            ("group offsets", lambda: self.groups.on_partitions_deleted(partitions)),
            ("share groups", lambda: self.shares.on_topics_deleted(topic_ids)),
            ("share state", lambda: self.share_state.on_topics_deleted(topic_ids)),
        ):
            try:
                await clean_up()
            except Exception:
                log.exception("cleaning up the %s of deleted topics failed", name)
