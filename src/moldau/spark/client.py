"""The data source's only contact with the broker, through confluent-kafka (librdkafka).

Using a real Kafka client keeps the data source honest: it works against Apache Kafka as
well as Moldau. Planning (metadata, watermarks, time lookups) runs on the driver; fetching
a range and producing run in tasks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from moldau.spark.arrow import arrow_schema, to_record_batch
from moldau.spark.offsets import OffsetMap, OffsetRange, check_position
from moldau.spark.options import Subscription

TIMEOUT_S = 30.0
CHUNK = 20_000
# Long enough for a big task on a busy machine, short enough that a transaction left open
# by a task that is never retried does not hold read_committed readers back for long.
TRANSACTION_TIMEOUT_MS = 300_000

# A group id is mandatory in librdkafka, but we only assign() and never commit,
# so no group is ever joined and Spark's checkpoint stays the only source of truth.
_CONSUMER_DEFAULTS = {
    "group.id": "moldau-spark",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "enable.partition.eof": True,
    # Prefetch deep: a task reads its whole range, and a full local queue is what keeps
    # consume() fed (3-4x the rows/s of librdkafka's defaults here).
    "queued.min.messages": 1_000_000,
    "fetch.message.max.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
}


# Idempotence: librdkafka's internal retries never duplicate or reorder a record.
_PRODUCER_DEFAULTS = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1024 * 1024,
    "delivery.report.only.error": True,
}

Header = tuple[str, str | bytes | None]


def consumer(config: dict[str, str]) -> Consumer:
    return Consumer({**_CONSUMER_DEFAULTS, **config})


class Cluster:
    """Driver-side planning queries; one consumer reused for metadata and offsets."""

    def __init__(self, config: dict[str, str]) -> None:
        self._consumer = consumer(config)

    def close(self) -> None:
        self._consumer.close()

    def partitions(self, subscription: Subscription) -> list[tuple[str, int]]:
        """Partitions the subscription covers right now (patterns skip internal topics)."""
        if subscription.assigned:
            return list(subscription.assigned)
        metadata = self._consumer.list_topics(timeout=TIMEOUT_S)
        found: list[tuple[str, int]] = []
        for name, topic in metadata.topics.items():
            if topic.error is not None or not subscription.matches(name):
                continue
            if subscription.pattern is not None and name.startswith("__"):
                continue
            found.extend((name, p) for p in topic.partitions)
        return sorted(found)

    def watermarks(self, partitions: list[tuple[str, int]]) -> tuple[OffsetMap, OffsetMap]:
        """Log start and end (high watermark, or LSO under read_committed) per partition."""
        low: OffsetMap = {}
        high: OffsetMap = {}
        for tp in partitions:
            low[tp], high[tp] = self._consumer.get_watermark_offsets(
                TopicPartition(*tp), timeout=TIMEOUT_S, cached=False
            )
        return low, high

    def offsets_for_times(self, times: dict[tuple[str, int], int]) -> OffsetMap:
        """First offset with timestamp >= the time, -1 if there is none."""
        if not times:
            return {}
        asked = [TopicPartition(t, p, ts) for (t, p), ts in times.items()]
        answered = self._consumer.offsets_for_times(asked, timeout=TIMEOUT_S)
        for tp in answered:
            if tp.error is not None:
                raise KafkaException(tp.error)
        return {(tp.topic, tp.partition): tp.offset for tp in answered}


def fetch_range(
    config: dict[str, str],
    r: OffsetRange,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_s: float = TIMEOUT_S,
    native: bool = True,
) -> Iterator[pa.RecordBatch]:
    """Exactly the records of `r`, as Arrow batches (of up to CHUNK rows through librdkafka).

    Offsets may have gaps (compaction, transaction markers), so the range is done when a
    record at or past `r.end - 1` arrives or the end of the log is reached at or past `r.end`.
    """
    if r.size == 0:
        return
    c = consumer(config)
    try:
        tp = TopicPartition(r.topic, r.partition)
        low, high = c.get_watermark_offsets(tp, timeout=TIMEOUT_S, cached=False)
        start = check_position((r.topic, r.partition), r.start, low, high, fail_on_data_loss)
        # Imported here: only read tasks need the protocol codecs, and every Python worker
        # Spark starts (planning, streaming sources) imports this module within a deadline.
        from moldau.spark.fetcher import native_capable

        if native and native_capable(config, include_headers):
            yield from _fetch_native(c, r, start, config, fail_on_data_loss, poll_timeout_s)
            return
        c.assign([TopicPartition(r.topic, r.partition, start)])
        idle_since = time.monotonic()
        done = False
        while not done:
            messages = c.consume(num_messages=CHUNK, timeout=1.0)
            data = []
            for m in messages:
                err = m.error()
                if err is None:
                    data.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    done = done or _offset(m) >= r.end or _log_shrank(c, r, fail_on_data_loss)
                else:
                    raise KafkaException(err)
            if data:
                idle_since = time.monotonic()
                done = done or _offset(data[-1]) >= r.end - 1
                if _offset(data[-1]) >= r.end:
                    data = [m for m in data if _offset(m) < r.end]
                if data:
                    yield to_record_batch(data, r.topic, r.partition, include_headers)
            elif time.monotonic() - idle_since > poll_timeout_s:
                raise TimeoutError(f"no records of {r} arrived within {poll_timeout_s}s")
    finally:
        c.close()


def _fetch_native(
    c: Consumer,
    r: OffsetRange,
    start: int,
    config: dict[str, str],
    fail_on_data_loss: bool,
    poll_timeout_s: float,
) -> Iterator[pa.RecordBatch]:
    """`fetcher.fetch_batches`, resuming where failOnDataLoss=false allows a skip."""
    from moldau.spark.fetcher import OutOfRange, fetch_batches

    tp = TopicPartition(r.topic, r.partition)
    read_committed = config.get("isolation.level") == "read_committed"
    deadline = time.monotonic() + poll_timeout_s
    while True:
        try:
            yield from fetch_batches(
                c,
                r,
                start,
                read_committed=read_committed,
                schema=arrow_schema(False),
                timeout_s=TIMEOUT_S,
                poll_timeout_s=poll_timeout_s,
            )
            return
        except OutOfRange as gone:
            low, high = c.get_watermark_offsets(tp, timeout=TIMEOUT_S, cached=False)
            if high < r.end:  # the log shrank below the range
                check_position((r.topic, r.partition), r.end, low, high, fail_on_data_loss)
                return
            start = check_position(
                (r.topic, r.partition), gone.offset, low, high, fail_on_data_loss
            )
            if start == gone.offset:  # answers and watermarks disagree for now: retry
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def _log_shrank(c: Consumer, r: OffsetRange, fail_on_data_loss: bool) -> bool:
    """At the end of the log before `r.end`: stale EOF (keep reading) or truncated log."""
    tp = TopicPartition(r.topic, r.partition)
    low, high = c.get_watermark_offsets(tp, timeout=TIMEOUT_S, cached=False)
    if high >= r.end:
        return False
    check_position((r.topic, r.partition), r.end, low, high, fail_on_data_loss)
    return True


class DeliveryError(RuntimeError):
    """The broker refused or never acknowledged a record: the Spark task must fail."""


def _offset(m: Message) -> int:
    """A consumed message's offset (librdkafka types it optional: only errors lack one)."""
    offset = m.offset()
    return -1 if offset is None else offset


def _producer(config: dict[str, str], errors: list[KafkaError]) -> Producer:
    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    return Producer({**_PRODUCER_DEFAULTS, **config, "on_delivery": on_delivery})


def _produce_all(
    producer: Producer,
    batches: Iterator[pa.RecordBatch],
    topic: str | None,
    stamp: Sequence[Header],
    errors: list[KafkaError],
) -> int:
    """Hand every row to the producer (not yet acknowledged); raise on the first failure."""
    count = 0
    for batch in batches:
        for topic_, value, key, partition, headers in _rows(batch, topic, stamp):
            while True:
                try:
                    producer.produce(
                        topic_, value=value, key=key, partition=partition, headers=headers
                    )
                    break
                except BufferError:
                    producer.poll(0.05)  # local queue full: let deliveries drain
        producer.poll(0)
        count += batch.num_rows
        if errors:
            raise DeliveryError(f"{len(errors)} records failed, first: {errors[0]}")
    return count


def produce_batches(
    config: dict[str, str],
    batches: Iterator[pa.RecordBatch],
    topic: str | None,
    stamp: Sequence[Header],
) -> int:
    """Produce every row (`value`, optional `key`, `topic`, `partition`, `headers`) and flush.

    Returns only once every record is acknowledged by all in-sync replicas; any delivery
    error raises, so Spark never commits a task whose records are not durable.
    """
    errors: list[KafkaError] = []
    producer = _producer(config, errors)
    count = _produce_all(producer, batches, topic, stamp, errors)
    unsent = producer.flush(TIMEOUT_S * 4)
    if errors or unsent:
        first = errors[0] if errors else "flush timed out"
        raise DeliveryError(f"{len(errors) + unsent} records not delivered, first: {first}")
    return count


class TransactionalProducer:
    """One task attempt's transactional producer: `init()`, then at most one `write()`.

    `init()` fences every older producer of the same `transactional.id` and waits until
    the transaction it left open is completed (committed, if its commit had reached the
    coordinator) or aborted: after it, what the earlier attempts did is final and visible.
    """

    def __init__(self, config: dict[str, str], transactional_id: str) -> None:
        self._errors: list[KafkaError] = []
        settings = {"transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS), **config}
        self._producer = _producer({**settings, "transactional.id": transactional_id}, self._errors)

    def init(self) -> None:
        self._producer.init_transactions(TIMEOUT_S * 4)

    def write(
        self,
        batches: Iterator[pa.RecordBatch],
        topic: str | None,
        stamp: Sequence[Header],
        entry: Callable[[int], list[TopicPartition]],
        group_metadata: object,
    ) -> int:
        """Rows, then the group offsets `entry(rows)`, in one transaction, committed.

        Raises (after aborting) if anything fails, so nothing of a failed write is visible.
        """
        self._producer.begin_transaction()
        try:
            count = _produce_all(self._producer, batches, topic, stamp, self._errors)
            self._producer.send_offsets_to_transaction(entry(count), group_metadata, TIMEOUT_S * 4)
            self._producer.commit_transaction(TIMEOUT_S * 4)
        except BaseException:  # failed rows, a failing upstream, a fenced producer
            self._abort()
            raise
        if self._errors:  # committed but a record failed: cannot happen, never hide it
            raise DeliveryError(f"{len(self._errors)} records failed, first: {self._errors[0]}")
        return count

    def _abort(self) -> None:
        """Best effort: a fenced or dead producer cannot abort; the next attempt's init does."""
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(TIMEOUT_S)


def _rows(
    batch: pa.RecordBatch, topic: str | None, stamp: Sequence[Header]
) -> Iterator[tuple[str, Any, Any, int, list[Header] | None]]:
    """Per-row produce arguments from whole columns (missing columns become constants)."""
    n = batch.num_rows
    names = set(batch.schema.names)
    if "value" not in names:
        raise ValueError("the DataFrame to write needs a value column")

    def column(name: str, default: Any) -> Iterable[Any]:
        return batch.column(name).to_pylist() if name in names else repeat(default, n)

    if topic is not None:
        topics: Iterable[Any] = repeat(topic, n)
    elif "topic" in names:
        topics = column("topic", None)
    else:
        raise ValueError("set the topic option or give the DataFrame a topic column")
    partitions = (-1 if p is None else p for p in column("partition", None))
    tail = list(stamp)
    headers = (
        [(h["key"], h["value"]) for h in hs or ()] + tail or None for hs in column("headers", None)
    )
    return zip(topics, column("value", None), column("key", None), partitions, headers, strict=True)
