"""The metadata loader under KRaft: no image is published before the node has replayed
its log up to the quorum's high watermark, so a restarting node never acts on the past."""

from __future__ import annotations

from moldau.metadata.image import MetadataImage
from moldau.metadata.loader import MetadataLoader
from moldau.metadata.publisher import LocalChanges, MetadataPublisher
from moldau.metadata.records import PartitionRecord, RemoveTopicRecord, TopicRecord

OLD, NEW = b"o" * 16, b"n" * 16


def created(topic_id: bytes) -> list:
    return [
        TopicRecord(name="t", topic_id=topic_id),
        PartitionRecord(
            partition_id=0,
            topic_id=topic_id,
            replicas=[1],
            isr=[1],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        ),
    ]


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[int, LocalChanges]] = []

    def on_metadata_update(
        self, old: MetadataImage, new: MetadataImage, changes: LocalChanges
    ) -> None:
        self.seen.append((new.offset, changes))


def test_the_first_image_waits_for_the_high_watermark() -> None:
    publisher = MetadataPublisher(1)
    recorder = Recorder()
    publisher.add_listener(recorder)
    high_watermark: int | None = None
    loader = MetadataLoader(publisher, lambda: high_watermark)
    loader.handle_commit(created(OLD), 0)  # committed before the HW is known: folded
    high_watermark = 3
    loader.handle_commit([RemoveTopicRecord(topic_id=OLD)], 1)
    assert recorder.seen == [] and publisher.image.offset == -1
    loader.handle_commit(created(NEW), 2)
    ((offset, changes),) = recorder.seen
    assert offset == 2 and publisher.image.topics["t"].topic_id == NEW
    assert list(changes.leaders) == [("t", 0)] and not changes.deletes
    high_watermark = 10  # caught up once: later batches are published one by one
    loader.handle_commit([RemoveTopicRecord(topic_id=NEW)], 3)
    assert [offset for offset, _ in recorder.seen] == [2, 3]
    assert recorder.seen[-1][1].deletes == {("t", 0): NEW}


def test_a_snapshot_behind_the_high_watermark_is_folded_too() -> None:
    publisher = MetadataPublisher(1)
    loader = MetadataLoader(publisher, lambda: 5)
    loader.load_snapshot(MetadataImage().apply(created(OLD), 2))
    assert publisher.image.offset == -1
    loader.handle_commit([RemoveTopicRecord(topic_id=OLD)], 4)
    assert publisher.image.offset == 4 and "t" not in publisher.image.topics


def test_without_a_high_watermark_every_batch_is_published() -> None:
    publisher = MetadataPublisher(1)
    loader = MetadataLoader(publisher)
    loader.handle_commit(created(OLD), 0)
    assert publisher.image.offset == 0 and "t" in publisher.image.topics
