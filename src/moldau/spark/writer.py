"""Batch and streaming sinks: produce with an idempotent producer, then commit the task.

Guarantee of the streaming sink: every micro-batch is written exactly once, across task
retries and query restarts that replay a batch id. Each task stamps its records with the
header `moldau.batch = <queryId>:<batchId>`, produces and flushes them (acks=all), and then
records `(batch, task)` in the commit ledger; the driver records the whole batch on commit.
A replayed task whose `(batch, task)` or batch is in the ledger writes nothing.
The one window left is a task dying after its records are acknowledged but before its ledger
record is: its replay writes those records again (at-least-once), and consumers can drop
them by the `moldau.batch` header. Batch writes are at-least-once per Spark task attempt.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from moldau.spark.client import Header, produce_batches
from moldau.spark.ledger import CommitLedger
from moldau.spark.options import WriteOptions

BATCH_HEADER = "moldau.batch"
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


@dataclass
class Written(WriterCommitMessage):
    """What one task did; `query_id` lets the driver-side commit find the ledger."""

    rows: int
    query_id: str | None = None
    skipped: bool = False


class MoldauBatchWriter(DataSourceArrowWriter):
    """`df.write.format("moldau")`."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return Written(produce_batches(self.options.client, iterator, self.options.topic, []))


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("moldau")`: exactly once per micro-batch (see module doc)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        context = TaskContext.get()
        assert context is not None, "write() runs in a Spark task"
        query_id = context.getLocalProperty(_QUERY_ID)
        batch_id = context.getLocalProperty(_BATCH_ID)
        assert query_id is not None and batch_id is not None, "set by the micro-batch's driver"
        return self._write(iterator, query_id, int(batch_id), context.partitionId())

    def _write(
        self, iterator: Iterator[pa.RecordBatch], query_id: str, batch_id: int, task: int
    ) -> Written:
        first = next(iterator, None)
        if first is None:  # nothing to write, so nothing to remember either
            return Written(0, query_id)
        ledger = CommitLedger(self.options.client, query_id)
        if ledger.contains(batch_id, task):
            for _ in iterator:  # a replay: the rows are already in the topic
                pass
            return Written(0, query_id, skipped=True)
        stamp: list[Header] = [(BATCH_HEADER, f"{query_id}:{batch_id}".encode())]
        batches = chain([first], iterator)
        rows = produce_batches(self.options.client, batches, self.options.topic, stamp)
        ledger.record(batch_id, task)
        return Written(rows, query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_ids = {m.query_id for m in messages if isinstance(m, Written) and m.query_id}
        for query_id in query_ids:
            CommitLedger(self.options.client, query_id).record(batchId, None)
