"""Batch and streaming readers: plan offset ranges on the driver, fetch them in tasks.

Plans never reach past the end of the log as the reading isolation level sees it: under
`read_committed` (the default) that is the last stable offset, so no task waits for, or
reads, records of a transaction still open.

Streaming offsets are `{"topic": {"partition": next_offset}}` JSON in sorted order. Spark
journals the end offsets of every micro-batch before running it and replays the same range
after a crash, and a range always yields the same records, so a restarted query resumes
exactly after the last committed batch: no loss, no duplicates.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from moldau.spark.client import Cluster, fetch_range
from moldau.spark.compat import (
    ADMISSION_CONTROL,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from moldau.spark.offsets import (
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetMap,
    OffsetRange,
    check_position,
    from_json_dict,
    plan_ranges,
    rate_limit,
    to_json_dict,
)
from moldau.spark.options import ReadOptions
from moldau.spark.serde import decode_batches

if TYPE_CHECKING:
    from moldau.storage.remote.segment import RemoteLogSegmentMetadata

log = logging.getLogger(__name__)


class RangePartition(InputPartition):
    """One Spark task: one offset range of one topic-partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


class RemoteSegmentPartition(RangePartition):
    """One Spark task reading one remote segment's part of a range from the object store
    (`remoteStorage.directRead`)."""

    def __init__(self, offset_range: OffsetRange, segment: RemoteLogSegmentMetadata) -> None:
        super().__init__(offset_range)
        self.segment = segment


def _freeze_worker_heap() -> None:
    """Hide what the first task left alive (modules mostly) from the cyclic collector.

    PySpark's worker runs a full `gc.collect()` after every task, between a reused worker's
    tasks; with numpy, pyarrow, confluent-kafka and the protocol codecs loaded it walks some
    60,000 objects (0.1-0.2 s on a busy 2-core machine, 15% of a reading worker's samples).
    Frozen objects are skipped by it and still freed by reference counting; only cycles
    among them would outlive the worker. Once per worker process.
    """
    if not gc.get_freeze_count():
        gc.collect()
        gc.freeze()


class _Planner:
    """Shared by both readers: the parsed options and a lazily opened planning client.

    The client never travels to executors (readers are pickled into tasks).
    """

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._cluster: Cluster | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cluster": None}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options.client)
        return self._cluster

    def snapshot(self) -> tuple[list[tuple[str, int]], OffsetMap, OffsetMap]:
        """Subscribed partitions and their current `[low, high)` bounds."""
        partitions = self.cluster.partitions(self.options.subscription)
        low, high = self.cluster.watermarks(partitions)
        return partitions, low, high

    def starting_offsets(
        self, partitions: list[tuple[str, int]], low: OffsetMap, high: OffsetMap
    ) -> OffsetMap:
        spec = self.options.starting
        by_time = self.cluster.offsets_for_times(spec.timestamps_for(partitions))
        wanted = spec.resolve(partitions, low, high, by_time, missing=EARLIEST)
        fail = self.options.fail_on_data_loss
        return {tp: check_position(tp, off, low[tp], high[tp], fail) for tp, off in wanted.items()}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition), partition
        batches = self._remote_batches(partition) or self._broker_batches(partition.range)
        fmt = self.options.value_format
        r = partition.range
        yield from (
            batches if fmt is None else decode_batches(batches, fmt, f"{r.topic}-{r.partition}")
        )
        _freeze_worker_heap()

    def _broker_batches(self, r: OffsetRange) -> Iterator[pa.RecordBatch]:
        return fetch_range(
            self.options.client,
            r,
            include_headers=self.options.include_headers,
            fail_on_data_loss=self.options.fail_on_data_loss,
            poll_timeout_s=self.options.poll_timeout_s,
            native=self.options.native_fetch,
        )

    def _remote_batches(self, partition: RangePartition) -> Iterator[pa.RecordBatch] | None:
        """A remote segment read from the store (None: not a remote segment task)."""
        if not isinstance(partition, RemoteSegmentPartition) or self.options.remote is None:
            return None
        from moldau.spark.arrow import arrow_schema
        from moldau.spark.remote_read import read_segment

        return read_segment(
            self.options.remote,
            partition.segment,
            partition.range,
            read_committed=self.options.client["isolation.level"] == "read_committed",
            schema=arrow_schema(False),
            broker_read=self._broker_batches,
        )

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


class MoldauBatchReader(_Planner, DataSourceReader):
    """`spark.read`: one task per topic-partition (more with `minPartitions`)."""

    def partitions(self) -> Sequence[InputPartition]:
        try:
            partitions, low, high = self.snapshot()
            start = self.starting_offsets(partitions, low, high)
            wanted = self.options.ending.resolve(partitions, low, high, {}, missing=LATEST)
        finally:
            self.close()
        end = {tp: min(off, high[tp]) for tp, off in wanted.items()}
        if end != wanted:  # beyond the end (the LSO under read_committed): nothing to wait for
            log.warning("endingOffsets past the end of the log, reading to %s", to_json_dict(end))
        ranges = plan_ranges(start, end, self.options.min_partitions)
        if self.options.remote is None:
            return [RangePartition(r) for r in ranges]
        from moldau.spark.remote_plan import plan_direct

        return [
            RangePartition(r) if md is None else RemoteSegmentPartition(r, md)
            for r, md in plan_direct(self.options.client, ranges)
        ]


class MoldauStreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream` with admission control and `Trigger.AvailableNow` (PySpark 4.2+)."""

    def __init__(self, options: ReadOptions) -> None:
        super().__init__(options)
        self._target: OffsetMap | None = None
        self._initial: dict | None = None
        if options.max_offsets_per_trigger and not ADMISSION_CONTROL:
            log.warning(
                "maxOffsetsPerTrigger needs PySpark 4.2 or newer (admission control for Python "
                "data sources); every micro-batch reads all that is available"
            )

    def initialOffset(self) -> dict:
        """Resolved once per run: until a first batch is journaled Spark may ask again, and
        a "latest" that moved meanwhile would silently skip the records in between."""
        if self._initial is None:
            partitions, low, high = self.snapshot()
            self._initial = to_json_dict(self.starting_offsets(partitions, low, high))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the ends of the log now: an AvailableNow run never reads past them."""
        self._target = self.snapshot()[2]

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next micro-batch: the end of every partition, capped by `limit`.

        PySpark 4.0 and 4.1 call it without arguments: no cap.
        """
        partitions, low, high = self.snapshot()
        if self._target is not None:
            partitions = [tp for tp in partitions if tp in self._target]
            high = {tp: min(high[tp], self._target[tp]) for tp in partitions}
        latest = {tp: high[tp] for tp in partitions}
        if start is not None and isinstance(limit, ReadMaxRows):
            # New partitions (more partitions, new topics matching the pattern) start at earliest.
            begin = from_json_dict(start)
            begin = {tp: begin.get(tp, low[tp]) for tp in partitions}
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json_dict(latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = from_json_dict(start), from_json_dict(end)
        self._check_vanished(begin, set(until))
        new = [tp for tp in until if tp not in begin]
        if new:
            begin.update(self.cluster.watermarks(new)[0])
        ranges = []
        for r in plan_ranges(begin, until, self.options.min_partitions):
            if r.end < r.start:
                self._report_loss(
                    f"{r.topic}-{r.partition}: offset went back from {r.start} to {r.end}"
                )
            elif r.size:
                ranges.append(RangePartition(r))
        return ranges

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint, not a consumer group, holds the position."""

    def stop(self) -> None:
        self.close()

    def _check_vanished(self, begin: OffsetMap, present: set[tuple[str, int]]) -> None:
        gone = sorted(tp for tp in begin if tp not in present)
        if gone:
            self._report_loss(f"partitions {gone} were deleted")

    def _report_loss(self, what: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{what}. Set failOnDataLoss=false to continue without them.")
        log.warning("%s; continuing (failOnDataLoss=false).", what)
