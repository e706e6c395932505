"""The metadata loader: folds committed metadata batches into images and publishes them.

Every node runs one: on start it replays the whole log into a single delta (one image
build, whatever the log's length), then applies each committed batch as it arrives and
hands the new image to the publisher.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from moldau.metadata.image import MetadataDelta, MetadataImage
from moldau.metadata.publisher import MetadataPublisher
from moldau.metadata.records import MetadataRecord


def replay(batches: Iterable[tuple[Sequence[MetadataRecord], int]]) -> MetadataImage:
    """The image of a whole log: batches of (records, last offset), oldest first."""
    delta = MetadataDelta(MetadataImage())
    last = -1
    for records, offset in batches:
        for record in records:
            delta.replay(record)
        last = offset
    return delta.apply(last)


class MetadataLoader:
    def __init__(self, publisher: MetadataPublisher) -> None:
        self.publisher = publisher

    def handle_commit(self, records: Sequence[MetadataRecord], offset: int) -> None:
        image = self.publisher.image
        if offset > image.offset:
            self.publisher.publish(image.apply(records, offset))

    def load_snapshot(self, image: MetadataImage) -> None:
        """A snapshot replaces everything this node knew (it was far behind, or new)."""
        self.publisher.publish(image)
