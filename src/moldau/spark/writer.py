"""Batch and streaming sinks; exactly-once through Kafka transactions (the default).

Every write task has a name that all its attempts share: `<prefix>-<write>-<task>`, with
`<write>` the streaming query's id (kept in the checkpoint, so stable across restarts) or a
batch write's id, and `<task>` Spark's partition id. It is the task's `transactional.id`
and the group id of its ledger entry (`ledger.py`: "batches up to N of this task are
written"). An attempt of micro-batch N (a batch write is batch 0):

1. `init_transactions()`: the coordinator fences every older producer of the name (older
   attempts, speculative copies, zombies of executors that lost contact) and finishes the
   transaction it left open: a commit that had reached the coordinator completes, anything
   else is aborted. From here on no older attempt can commit anything.
2. Reads the ledger entry (`require_stable`). If it says N is written, an older attempt
   committed this task: write nothing and succeed.
3. Otherwise, in one transaction, produces the rows and commits the ledger entry `N + 1`
   (TxnOffsetCommit), then commits the transaction: rows and entry become visible together
   or not at all.

Why each failure writes nothing twice (readers under `read_committed`):
- A task that fails or dies before its commit reached the coordinator: its rows are
  aborted, by its own abort or by the next attempt's step 1; the retry writes them once.
- A task that dies after its commit reached the coordinator (even after it finished, but
  before Spark heard of it): the commit completes, the retry finds the entry and skips.
- Speculative or zombie attempts run concurrently: whichever runs step 1 later fences the
  other. If the earlier had already committed, the later skips at step 2; if not, the
  earlier can no longer commit (PRODUCER_FENCED fails that attempt) and the later writes.
- A micro-batch replayed after a driver crash (its offsets were journaled but its commit
  was not): the same query id, batch id and partition ids, so tasks that had committed
  skip and the others write. This assumes, as any replay does, that a replayed batch puts
  the same rows in the same partition ids (true for the `moldau` source's ranges and for
  Spark's deterministic shuffles).
- A zombie of batch N still running when batch N+1 starts shares its name with the new
  task, whose step 1 fences it.

`deliveryGuarantee=at-least-once` keeps the older, cheaper sink: an idempotent producer, and
for streaming writes the ledger entry committed after the rows are acknowledged, so a
replayed batch is skipped, except when a task died between its acknowledgement and its
entry. Its records carry the header `moldau.batch = <queryId>:<batchId>`, which lets
consumers drop such duplicates.
"""

from __future__ import annotations

import uuid
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

from moldau.spark.client import Header, TransactionalProducer, produce_batches
from moldau.spark.ledger import TaskLedger, task_name
from moldau.spark.options import WriteOptions

BATCH_HEADER = "moldau.batch"
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


@dataclass
class Written(WriterCommitMessage):
    """What one task did: rows written by this attempt, or skipped as already written."""

    rows: int
    skipped: bool = False


def _task_context() -> TaskContext:
    context = TaskContext.get()
    assert context is not None, "write() runs in a Spark task"
    return context


def write_task(
    options: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    write_id: str,
    batch_id: int,
    task: int,
    stamp: list[Header],
) -> Written:
    """One task attempt: steps 1-3 of the module doc (at-least-once: 2, rows, entry)."""
    first = next(batches, None)
    if first is None:  # nothing to write, so nothing to remember either
        return Written(0)
    prefix = options.transactional_id_prefix
    ledger = TaskLedger(options.client, prefix, write_id, task)
    try:
        producer = None
        if options.exactly_once:
            producer = TransactionalProducer(options.client, task_name(prefix, write_id, task))
            producer.init()
        if ledger.done(batch_id):
            for _ in batches:  # an earlier attempt wrote these rows
                pass
            return Written(0, skipped=True)
        rows = chain([first], batches)
        if producer is not None:
            entry = ledger.entry(batch_id)
            return Written(
                producer.write(rows, options.topic, stamp, entry, ledger.group_metadata())
            )
        written = produce_batches(options.client, rows, options.topic, stamp)
        ledger.record(batch_id)
        return Written(written)
    finally:
        ledger.close()


class MoldauBatchWriter(DataSourceArrowWriter):
    """`df.write.format("moldau")`: one transaction per task (or at-least-once, by option)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.write_id = uuid.uuid4().hex  # made on the driver: shared by all task attempts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        if not self.options.exactly_once:
            return Written(produce_batches(self.options.client, iterator, self.options.topic, []))
        task = _task_context().partitionId()
        return write_task(self.options, iterator, self.write_id, 0, task, [])


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("moldau")`: exactly once per micro-batch (see module doc)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        context = _task_context()
        query_id = context.getLocalProperty(_QUERY_ID)
        batch_id = context.getLocalProperty(_BATCH_ID)
        assert query_id is not None and batch_id is not None, "set by the micro-batch's driver"
        stamp: list[Header] = [(BATCH_HEADER, f"{query_id}:{batch_id}".encode())]
        task = context.partitionId()
        return write_task(self.options, iterator, query_id, int(batch_id), task, stamp)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing left to do: every task committed its own rows and ledger entry."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Tasks that committed stay committed; the replay of the batch skips them."""
