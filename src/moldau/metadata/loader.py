"""The metadata loader: folds committed metadata batches into images and publishes them.

Every node runs one: on start it folds the committed batches until it has caught up to
the quorum's high watermark (a single node's too: a quorum of one), then it applies each
committed batch as it arrives and hands the new image to the publisher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from moldau.metadata.image import MetadataImage
from moldau.metadata.publisher import MetadataPublisher
from moldau.metadata.records import MetadataRecord


class MetadataLoader:
    """Publishes each committed batch's image; with ``quorum_high_watermark`` (KRaft: the
    quorum's, None while unknown) it first folds the log up to it and publishes the first
    image only then, as Kafka's loader does: a restarting node never acts on an image of
    the past (say, a topic's earlier incarnation) while its logs hold the present."""

    def __init__(
        self,
        publisher: MetadataPublisher,
        quorum_high_watermark: Callable[[], int | None] | None = None,
    ) -> None:
        self.publisher = publisher
        self._quorum_high_watermark = quorum_high_watermark
        self._caught_up = quorum_high_watermark is None
        self._unpublished: MetadataImage | None = None  # folded, not published yet

    def handle_commit(
        self, records: Sequence[MetadataRecord], offset: int, image: MetadataImage | None = None
    ) -> None:
        """Committed records up to `offset`; `image`, the image after them if the metadata
        log replica built it already (its cluster id included)."""
        current = self._unpublished or self.publisher.image
        if offset > current.offset:
            self._publish_when_caught_up(
                image if image is not None else current.apply(records, offset)
            )

    def load_snapshot(self, image: MetadataImage) -> None:
        """A snapshot replaces everything this node knew (it was far behind, or new)."""
        self._publish_when_caught_up(image)

    def _publish_when_caught_up(self, image: MetadataImage) -> None:
        if not self._caught_up:
            source = self._quorum_high_watermark
            hw = source() if source is not None else None
            if hw is None or image.offset < hw - 1:
                self._unpublished = image
                return
            self._caught_up = True
            self._unpublished = None
        self.publisher.publish(image)
