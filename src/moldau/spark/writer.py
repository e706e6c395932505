"""Batch and streaming sinks; exactly-once through Kafka transactions (the default).

Every write task has a name that all its attempts share: `<prefix>-<write>-<task>`, with
`<write>` the streaming query's id (kept in the checkpoint, so stable across restarts) or a
batch write's id, and `<task>` Spark's partition id. It is the task's `transactional.id`
and the group id of its ledger entry (`ledger.py`: "batches before N and the first R rows
of batch N of this task are written"). An attempt of micro-batch N (a batch write is batch 0):

1. `init_transactions()`: the coordinator fences every older producer of the name (older
   attempts, speculative copies, zombies of executors that lost contact) and finishes the
   transaction it left open: a commit that had reached the coordinator completes, anything
   else is aborted. From here on no older attempt can commit anything.
2. Reads the ledger entry (`require_stable`): the rows of batch N older attempts committed
   (all of them if a later batch ran). It skips that many rows of its input; if none are
   left, it writes nothing and succeeds.
3. In one transaction, produces the remaining rows and commits the ledger entry "batch N,
   rows so far" (TxnOffsetCommit), then commits: rows and entry become visible together or
   not at all.

Why each failure writes nothing twice (readers under `read_committed`):
- A task that fails or dies before its commit reached the coordinator: its rows are
  aborted, by its own abort or by the next attempt's step 1; the retry writes them once.
- A task that dies after its commit reached the coordinator (even after it finished, but
  before Spark heard of it): the commit completes, the retry finds the entry and skips.
- A task whose upstream fails: Spark ends the writer's input early as if it were complete,
  the writer commits the rows it got, and Spark fails the task afterwards. The retry skips
  the rows the entry counts and writes the rest.
- Speculative or zombie attempts run concurrently: whichever runs step 1 later fences the
  other. If the earlier had already committed, the later skips its rows at step 2; if not,
  the earlier can no longer commit (PRODUCER_FENCED fails that attempt) and the later writes.
- A micro-batch replayed after a driver crash (its offsets were journaled but its commit
  was not): the same query id, batch id and partition ids, so tasks that had committed
  skip and the others write.
- A zombie of batch N still running when batch N+1 starts shares its name with the new
  task, whose step 1 fences it.

Assumption, as for any replay: every attempt of a task gets the same rows in the same order
(true for the `moldau` source's ranges and row-wise transformations of them; after a
shuffle, sort within partitions). Only a partially committed task relies on the order.

`deliveryGuarantee=at-least-once` keeps the older, cheaper sink: an idempotent producer, and
for streaming writes the same ledger entry, committed after the rows are acknowledged, so a
replayed batch is skipped, except for rows of a task that died between their
acknowledgement and its entry. Its records carry the header `moldau.batch = <queryId>:<batchId>`, which lets
consumers drop such duplicates.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

import pyarrow as pa
from confluent_kafka import TopicPartition
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from moldau.spark.client import Header, TransactionalProducer, produce_batches
from moldau.spark.compat import DataSourceStreamArrowWriter
from moldau.spark.ledger import TaskLedger, task_name
from moldau.spark.options import WriteOptions
from moldau.spark.serde import encode_batches

BATCH_HEADER = "moldau.batch"
_QUERY_ID = "sql.streaming.queryId"
_BATCH_ID = "streaming.sql.batchId"


@dataclass
class Written(WriterCommitMessage):
    """What one task attempt did: rows it wrote; `skipped` if earlier attempts wrote some."""

    rows: int
    skipped: bool = False


def _task_context() -> TaskContext:
    context = TaskContext.get()
    assert context is not None, "write() runs in a Spark task"
    return context


def _encoded(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    fmt = options.value_format
    return batches if fmt is None else encode_batches(batches, fmt)


def skip_rows(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The batches without their first `rows` rows (all of them are consumed either way)."""
    for batch in batches:
        if rows >= batch.num_rows:
            rows -= batch.num_rows
        else:
            yield batch.slice(rows) if rows else batch
            rows = 0


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
        done = ledger.written(batch_id)
        rest = skip_rows(chain([first], batches), done)
        head = next(rest, None)
        if head is None:  # earlier attempts wrote every row
            return Written(0, skipped=True)
        rows = chain([head], rest)
        if producer is not None:

            def entry(count: int) -> list[TopicPartition]:
                return ledger.entry(batch_id, done + count)

            written = producer.write(rows, options.topic, stamp, entry, ledger.group_metadata())
        else:
            written = produce_batches(options.client, rows, options.topic, stamp)
            ledger.record(batch_id, done + written)
        return Written(written, skipped=done > 0)
    finally:
        ledger.close()


class MoldauBatchWriter(DataSourceArrowWriter):
    """`df.write.format("moldau")`: one transaction per task (or at-least-once, by option)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.write_id = uuid.uuid4().hex  # made on the driver: shared by all task attempts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        iterator = _encoded(self.options, iterator)
        if not self.options.exactly_once:
            return Written(produce_batches(self.options.client, iterator, self.options.topic, []))
        task = _task_context().partitionId()
        return write_task(self.options, iterator, self.write_id, 0, task, [])


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("moldau")`: exactly once per micro-batch (see module doc)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        iterator = _encoded(self.options, iterator)
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
