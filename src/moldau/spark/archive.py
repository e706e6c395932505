"""Archive topics to Parquet (`topic=/partition=/date=` directories), restartably.

A Structured Streaming query with `Trigger.AvailableNow`: each run copies what is in the
topics when it starts and stops. The checkpoint remembers the offsets reached and Spark's
file sink commits files through its `_spark_metadata` log, so a rerun (even after a crash)
copies only new records, each exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery


@dataclass(frozen=True)
class ArchiveProgress:
    batches: int
    rows: int


def archive(
    spark: SparkSession,
    *,
    bootstrap: str,
    output: Path,
    checkpoint: Path,
    topics: list[str] | None = None,
    pattern: str | None = None,
    max_offsets_per_trigger: int | None = None,
    on_progress: Callable[[ArchiveProgress], None] | None = None,
) -> ArchiveProgress:
    """Run the archive query to completion; returns the rows copied by this run."""
    if bool(topics) == bool(pattern):
        raise ValueError("give topics or a pattern, not both")
    reader = (
        spark.readStream.format("moldau")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    reader = (
        reader.option("subscribe", ",".join(topics))
        if topics
        else reader.option("subscribePattern", pattern)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    records = reader.load().withColumn("date", F.to_date(F.col("timestamp")))
    query = (
        records.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .partitionBy("topic", "partition", "date")
        .trigger(availableNow=True)
        .start()
    )
    return _follow(query, on_progress)


def _follow(
    query: StreamingQuery, on_progress: Callable[[ArchiveProgress], None] | None
) -> ArchiveProgress:
    """Wait for the query, summing the progress reports of batches that copied records."""
    seen: set[int] = set()
    rows = 0
    while True:
        finished = query.awaitTermination(1)
        for progress in query.recentProgress:
            batch = progress["batchId"]
            if batch not in seen and progress["numInputRows"]:
                seen.add(batch)
                rows += progress["numInputRows"]
        if on_progress is not None:
            on_progress(ArchiveProgress(len(seen), rows))
        if finished:
            return ArchiveProgress(len(seen), rows)
