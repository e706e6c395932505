"""The metadata image's topics as the group coordinator reads them (KIP-848 heartbeats and
classic members of a consumer group)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from moldau.coordinator.group.consumer_group import TopicMetadata
from moldau.metadata.image import MetadataImage


class ImageTopics(Mapping[str, TopicMetadata]):
    """The image's topics as the coordinator sees them (internal ones excluded), read on
    demand: a heartbeat looks up only its group's topics (all of them only for a regex).

    :meth:`of` hands out one view while the image's topics and brokers stay the same
    objects (an image copies them only when they change), so the coordinator's regex
    matches, cached per view, are recomputed only when topics are created or deleted."""

    _last: ImageTopics | None = None

    def __init__(self, image: MetadataImage) -> None:
        self._topics = image.topics
        self._brokers = image.brokers
        self._racks = {b.broker_id: b.rack for b in image.brokers.values() if b.rack}

    @classmethod
    def of(cls, image: MetadataImage) -> ImageTopics:
        last = cls._last
        if last is None or last._topics is not image.topics or last._brokers is not image.brokers:
            last = cls._last = cls(image)
        return last

    def __getitem__(self, name: str) -> TopicMetadata:
        t = self._topics[name]
        if t.is_internal:
            raise KeyError(name)
        racks: tuple[frozenset[str], ...] = ()
        if self._racks:  # replicas' racks only when brokers have them (broker.rack)
            racks = tuple(
                frozenset(r for b in p.replicas if (r := self._racks.get(b)))
                for _, p in sorted(t.partitions.items())
            )
        return TopicMetadata(t.topic_id, name, len(t.partitions), racks)

    def __iter__(self) -> Iterator[str]:
        return (name for name, t in self._topics.items() if not t.is_internal)

    def __len__(self) -> int:
        return sum(1 for _ in self)
