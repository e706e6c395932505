"""What the coordinators do when topics are deleted (Kafka's BrokerMetadataPublisher calls
the group coordinator's and the share coordinator's deletion hooks).

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
    from moldau.coordinator.share.service import ShareGroupService
    from moldau.coordinator.share_state.service import ShareCoordinatorService

log = logging.getLogger(__name__)


class DeletedTopics:
    """A metadata listener: each image that drops topics starts their clean-up."""

    def __init__(self, shares: ShareGroupService, share_state: ShareCoordinatorService) -> None:
        self.shares = shares
        self.share_state = share_state
        self._tasks: set[asyncio.Task[None]] = set()

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        gone = frozenset(old.topics_by_id.keys() - new.topics_by_id.keys())
        if gone:
            task = asyncio.get_running_loop().create_task(self._clean_up(gone))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _clean_up(self, topic_ids: frozenset[bytes]) -> None:
        try:
            await self.shares.on_topics_deleted(topic_ids)
            await self.share_state.on_topics_deleted(topic_ids)
        except Exception:
            log.exception("cleaning up after deleted topics failed")
