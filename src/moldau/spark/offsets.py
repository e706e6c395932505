"""Pure offset arithmetic for the `moldau` data source: offset JSON, range planning, rate limits.

Nothing here talks to a broker, so the planning rules (which Spark's own Kafka source also
follows) are unit-testable without Spark or Kafka.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1

log = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Offsets Spark asked for are gone (retention, truncation, deleted topic)."""


@dataclass(frozen=True)
class OffsetRange:
    """Records `[start, end)` of one topic-partition: the unit of work of one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def to_json_dict(offsets: OffsetMap) -> dict[str, dict[str, int]]:
    """`{"topic": {"0": 100, "1": 42}}` with topics and partitions in a stable, sorted order.

    Spark compares and journals offsets as JSON, so the same positions must always serialise
    to the same text.
    """
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return out


def from_json_dict(data: dict[str, dict[str, int]]) -> OffsetMap:
    """Inverse of `to_json_dict`."""
    return {(topic, int(p)): int(off) for topic, parts in data.items() for p, off in parts.items()}


def parse_partition_json(text: str, what: str) -> OffsetMap:
    """Parse the user's `{"t":{"0":23,"1":-2}}` (offsets or timestamps) with a clear error."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
            raise ValueError("expected an object of topics to objects of partitions")
        return from_json_dict(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}: cannot parse {text!r}: {exc}") from exc


def check_position(
    tp: TopicPartition, wanted: int, low: int, high: int, fail_on_data_loss: bool
) -> int:
    """Clamp a start position into the log `[low, high]`, or fail if records were lost.

    `wanted < low` means retention deleted records; `wanted > high` means the log was
    truncated or the topic recreated. Either way Spark would silently skip data.
    """
    if low <= wanted <= high:
        return wanted
    reset = low if wanted < low else high
    why = "deleted (retention)" if wanted < low else "truncated or recreated"
    msg = (
        f"{tp[0]}-{tp[1]}: offset {wanted} is no longer available, log is now [{low}, {high}): "
        f"records were {why}."
    )
    if fail_on_data_loss:
        raise DataLossError(msg + " Set failOnDataLoss=false to skip ahead.")
    log.warning("%s Skipping to %d (failOnDataLoss=false).", msg, reset)
    return reset


def plan_ranges(
    start: OffsetMap, end: OffsetMap, min_partitions: int | None = None
) -> list[OffsetRange]:
    """One range per topic-partition in `end`, split further if `minPartitions` asks for more.

    Partitions missing from `start` (new ones) must already have been filled in by the caller.
    Like Spark's Kafka source, a range gets a share of `minPartitions` proportional to its size.
    """
    ranges = [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for t, p in sorted(end)]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    if total == 0:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size * min_partitions / total)))
        out.extend(split_range(r, parts))
    return out


def split_range(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`parts` contiguous pieces of nearly equal size."""
    if parts <= 1:
        return [r]
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [
        OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:], strict=False)
    ]


def rate_limit(start: OffsetMap, latest: OffsetMap, max_offsets: int) -> OffsetMap:
    """End offsets advancing at most `max_offsets` in total past `start` (same partitions).

    The budget is split in proportion to each partition's backlog (as Spark's Kafka source
    does), with largest-remainder rounding so the total never exceeds the limit and a
    non-zero budget always makes progress.
    """
    backlog = {tp: max(latest[tp] - start[tp], 0) for tp in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    shares = {tp: max_offsets * size / total for tp, size in backlog.items()}
    take = {tp: math.floor(share) for tp, share in shares.items()}
    spare = max_offsets - sum(take.values())
    by_remainder = sorted(backlog, key=lambda tp: (take[tp] - shares[tp], tp))
    for tp in by_remainder[:spare]:
        take[tp] += 1
    return {tp: start[tp] + take[tp] if backlog[tp] else latest[tp] for tp in latest}
