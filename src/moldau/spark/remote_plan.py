"""Planning a direct read of the remote tier: which offsets of a partition a task reads
straight from the object store, and which it asks a broker for.

The driver replays `__remote_log_metadata` from its beginning into one
`RemoteLogMetadataCache` per partition (as a broker loading its replicas does) and keeps
the segments reads use: COPY_SEGMENT_FINISHED, not being deleted. Below the partition's
local log start (ListOffsets `-4`, earliest-local, KIP-1005) each such segment becomes a
task of its own; from the local start on (or from the first gap in the remote tier) the
range stays a broker read, so every offset is read exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from itertools import groupby

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from moldau.spark.client import TIMEOUT_S, consumer
from moldau.spark.fetcher import Connection, leader
from moldau.spark.offsets import OffsetMap, OffsetRange
from moldau.spark.remote_options import METADATA_TOPIC
from moldau.storage.remote.metadata_cache import RemoteLogMetadataCache
from moldau.storage.remote.metadata_records import deserialize
from moldau.storage.remote.segment import RemoteLogSegmentMetadata, TopicIdPartition

EARLIEST_LOCAL = -4
LIST_OFFSETS_VERSION = 8  # the first to answer earliest-local
Piece = tuple[OffsetRange, RemoteLogSegmentMetadata | None]


def split(
    r: OffsetRange, segments: Sequence[RemoteLogSegmentMetadata], local_start: int
) -> list[Piece]:
    """`r` as consecutive pieces: one per remote segment below `local_start`, then the
    rest (None: a broker read). `segments` are sorted by start offset."""
    pieces: list[Piece] = []
    pos = r.start
    for md in segments:
        if md.end_offset < pos:
            continue
        end = min(md.end_offset + 1, local_start, r.end)
        if md.start_offset > pos or end <= pos:
            break
        pieces.append((OffsetRange(r.topic, r.partition, pos, end), md))
        pos = end
    if pos < r.end:
        pieces.append((OffsetRange(r.topic, r.partition, pos, r.end), None))
    return pieces


def plan_direct(config: dict[str, str], ranges: Sequence[OffsetRange]) -> list[Piece]:
    """Every range split into remote-segment pieces and broker pieces."""
    wanted = sorted({(r.topic, r.partition) for r in ranges if r.size})
    if not wanted:
        return [(r, None) for r in ranges]
    segments = remote_segments(config, wanted)
    local = local_log_starts(config, [tp for tp in wanted if segments.get(tp)])
    out: list[Piece] = []
    for r in ranges:
        tp = (r.topic, r.partition)
        if r.size and segments.get(tp):
            out.extend(split(r, segments[tp], local[tp]))
        else:
            out.append((r, None))
    return out


def remote_segments(
    config: dict[str, str], partitions: Iterable[tuple[str, int]], timeout_s: float = TIMEOUT_S
) -> dict[tuple[str, int], list[RemoteLogSegmentMetadata]]:
    """The readable remote segments of `partitions`, from a full replay of the metadata
    topic (a partition of a topic deleted and created again keeps its newest id's)."""
    wanted = set(partitions)
    c = consumer(config)
    try:
        topic = c.list_topics(METADATA_TOPIC, timeout=timeout_s).topics.get(METADATA_TOPIC)
        if topic is None or topic.error is not None:
            return {}
        ends = {
            p: c.get_watermark_offsets(TopicPartition(METADATA_TOPIC, p), timeout_s, False)[1]
            for p in topic.partitions
        }
        pending = {p for p, end in ends.items() if end > 0}
        c.assign([TopicPartition(METADATA_TOPIC, p, OFFSET_BEGINNING) for p in pending])
        caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        newest: dict[tuple[str, int], TopicIdPartition] = {}
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{METADATA_TOPIC} not read to its end in {timeout_s}s")
            for m in c.consume(num_messages=10_000, timeout=1.0):
                err = m.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(err)
                partition, offset, value = m.partition(), m.offset() or 0, m.value()
                if (offset if err is not None else offset + 1) >= ends[partition or 0]:
                    pending.discard(partition)
                if err is not None or value is None:
                    continue
                event = deserialize(value)
                tip = event.topic_id_partition
                if (tip.topic, tip.partition) in wanted:
                    newest[(tip.topic, tip.partition)] = tip
                    caches.setdefault(tip, RemoteLogMetadataCache()).apply(event)
    finally:
        c.close()
    return {tp: caches[tip].segments() for tp, tip in newest.items()}


def local_log_starts(
    config: dict[str, str], partitions: list[tuple[str, int]], timeout_s: float = TIMEOUT_S
) -> OffsetMap:
    """Each partition's first offset on its leader's disk (ListOffsets `-4`)."""
    c = consumer(config)
    leaders = {tp: leader(c, *tp, timeout_s) for tp in partitions}
    c.close()
    out: OffsetMap = {}
    for address, group in groupby(sorted(partitions, key=leaders.__getitem__), leaders.__getitem__):
        by_topic = groupby(list(group), lambda tp: tp[0])
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsTopic(
                    t,
                    [
                        ListOffsetsPartition(partition_index=p, timestamp=EARLIEST_LOCAL)
                        for _, p in tps
                    ],
                )
                for t, tps in by_topic
            ],
        )
        conn = Connection(*address, timeout_s)
        try:
            response = conn.call(request, LIST_OFFSETS_VERSION)
        finally:
            conn.close()
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != ErrorCode.NONE:
                    raise RuntimeError(
                        f"ListOffsets earliest-local of {topic.name}-{part.partition_index}: "
                        f"{ErrorCode(part.error_code).name}"
                    )
                out[(topic.name, part.partition_index)] = part.offset
    return out
