"""`moldau perf`: Kafka's producer-perf-test and consumer-perf-test, with a live display.

Both work against any Kafka-protocol cluster through confluent-kafka. MB is 2^20 bytes of
record values, as in Kafka's tools. The loops here are the client's hot path: one
`produce()` per record (librdkafka batches), latency from librdkafka's own per-message
timer (`Message.latency()`), consumption in batches of `consume()`.
"""

from __future__ import annotations

import random
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, Message, TopicPartition
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import NewTopic
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    TOPIC_OP_TIMEOUTS,
    BootstrapOption,
    CommandConfigOption,
    JsonOption,
    PropertyOption,
    admin_client,
    client_config,
    cluster_metadata,
    consumer_client,
    describe_error,
    err,
    fail,
    kafka_errors,
    out,
    print_json,
    result,
    table,
    topic_metadata,
)
from moldau.cli.produce import Acks, Compression

app = typer.Typer(
    help="Measure producer and consumer throughput and latency.", no_args_is_help=True
)

MB = 1024 * 1024
_CHECK_EVERY = 1000  # records between clock reads (progress, throttle slack)
_REFRESH_S = 0.25


# --- pure parts -----------------------------------------------------------------------------


class Throttle:
    """Kafka's ThroughputThrottler: how long to sleep to stay at `rate` records/s.

    A rate <= 0 means no cap.
    """

    def __init__(self, rate: float, start: float) -> None:
        self.rate = rate
        self.start = start

    def delay(self, sent: int, now: float) -> float:
        if self.rate <= 0:
            return 0.0
        return max(sent / self.rate - (now - self.start), 0.0)


def percentile(ordered: array | list[float], fraction: float) -> float:
    """The value at `fraction` of a sorted sample (nearest rank, as Kafka's perf test)."""
    if not ordered:
        return 0.0
    return float(ordered[min(int(fraction * len(ordered)), len(ordered) - 1)])


def produce_summary(
    records: int, failed: int, value_bytes: int, seconds: float, latencies_s: array
) -> dict[str, Any]:
    """What producer-perf-test prints at the end, as numbers (latencies in ms)."""
    ordered = [latency * 1000 for latency in sorted(latencies_s)]
    seconds = max(seconds, 1e-9)
    return {
        "records": records,
        "failed": failed,
        "seconds": round(seconds, 3),
        "records_per_sec": round(records / seconds, 1),
        "mb_per_sec": round(value_bytes / seconds / MB, 2),
        "latency_ms": {
            "avg": round(sum(ordered) / len(ordered), 2) if ordered else 0.0,
            "p50": round(percentile(ordered, 0.50), 2),
            "p95": round(percentile(ordered, 0.95), 2),
            "p99": round(percentile(ordered, 0.99), 2),
            "p999": round(percentile(ordered, 0.999), 2),
            "max": round(ordered[-1], 2) if ordered else 0.0,
        },
    }


def consume_summary(
    records: int, value_bytes: int, seconds: float, rebalance_s: float, first_s: float | None
) -> dict[str, Any]:
    """What consumer-perf-test prints at the end: totals over the whole run, and over
    the fetch time (the run minus the group rebalance); also when the first record came."""
    seconds = max(seconds, 1e-9)
    fetch_s = max(seconds - rebalance_s, 1e-9)
    return {
        "records": records,
        "mb": round(value_bytes / MB, 2),
        "seconds": round(seconds, 3),
        "records_per_sec": round(records / seconds, 1),
        "mb_per_sec": round(value_bytes / seconds / MB, 2),
        "rebalance_ms": round(rebalance_s * 1000, 1),
        "fetch_seconds": round(fetch_s, 3),
        "fetch_records_per_sec": round(records / fetch_s, 1),
        "fetch_mb_per_sec": round(value_bytes / fetch_s / MB, 2),
        "first_record_ms": None if first_s is None else round(first_s * 1000, 1),
    }


# --- produce --------------------------------------------------------------------------------


class _Acks:
    """Delivery reports: librdkafka's latency of each acknowledged record, in seconds,
    and the failures. Called once per record, so it does as little as possible."""

    def __init__(self) -> None:
        self.latencies = array("d")
        self._append = self.latencies.append
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self._append(message.latency() or 0.0)
        else:
            self.errors.append(error)

    @property
    def acked(self) -> int:
        return len(self.latencies)

    @property
    def done(self) -> int:
        return len(self.latencies) + len(self.errors)


@app.command()
def produce(
    topic: str,
    num_records: Annotated[
        int, typer.Option("--num-records", "-n", min=1, help="Records to send.")
    ] = 1_000_000,
    record_size: Annotated[
        int, typer.Option("--record-size", "-s", min=0, help="Value bytes per record.")
    ] = 100,
    throughput: Annotated[
        float, typer.Option("--throughput", "-t", help="Cap in records/s (-1: none).")
    ] = -1,
    acks: Annotated[Acks, typer.Option(help="Acknowledgements to wait for.")] = Acks.all,
    compression: Annotated[Compression, typer.Option(help="Batch compression.")] = Compression.none,
    partitions: Annotated[
        int | None,
        typer.Option(min=1, help="Create the topic with this many partitions if missing."),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="batch.size in bytes.")] = 1_000_000,
    linger_ms: Annotated[float, typer.Option(min=0, help="linger.ms.")] = 5,
    payload_file: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="Send these lines as values (round robin)."),
    ] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
    json_output: JsonOption = False,
) -> None:
    """Produce records as fast as allowed; report records/s, MB/s and latency percentiles."""
    payloads = _payloads(record_size, payload_file)
    _ensure_topic(bootstrap, properties, command_config, topic, partitions)
    config = client_config(
        bootstrap,
        properties,
        command_config=command_config,
        **{
            "acks": acks.value,
            "compression.type": compression.value,
            "batch.size": batch_size,
            "linger.ms": linger_ms,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        },
    )
    with kafka_errors():
        producer = KafkaProducer(config)
    acked = _Acks()
    bytes_of = _bytes_counter(payloads)

    def line(seconds: float) -> str:
        seconds = max(seconds, 1e-9)
        latency = acked.latencies[-1] * 1000 if acked.latencies else 0.0
        return (
            f"{acked.acked / seconds:,.0f} rec/s  {bytes_of(acked.acked) / seconds / MB:,.1f} MB/s"
            f"  latency {latency:,.1f} ms"
        )

    progress = _progress(json_output, "produce", num_records)
    window = _Window("sent", json_output)
    with progress:
        task = progress.add_task("producing", total=num_records)
        start = time.monotonic()
        throttle = Throttle(throughput, start)
        count = len(payloads)
        with kafka_errors():
            for i in range(num_records):
                value = payloads[i % count]
                while True:
                    try:
                        producer.produce(topic, value, on_delivery=acked)
                        break
                    except BufferError:  # librdkafka's queue is full: serve deliveries
                        producer.poll(0.01)
                if i % _CHECK_EVERY == 0:
                    producer.poll(0)
                    now = time.monotonic()
                    progress.update(task, completed=acked.done, description=line(now - start))
                    window.report(acked.acked, bytes_of(acked.acked), now, acked.latencies)
                if throughput > 0 and (pause := throttle.delay(i + 1, time.monotonic())) > 0:
                    producer.poll(pause)
            while producer.flush(_REFRESH_S) > 0:
                progress.update(
                    task, completed=acked.done, description=line(time.monotonic() - start)
                )
        elapsed = time.monotonic() - start
        progress.update(task, completed=acked.done, description=line(elapsed))
    failed = len(acked.errors)
    summary = produce_summary(acked.acked, failed, bytes_of(acked.acked), elapsed, acked.latencies)
    summary.update(
        topic=topic, record_size=record_size, acks=acks.value, compression=compression.value
    )
    if json_output:
        print_json(summary)
    else:
        _print_summary("Producer", summary)
    if failed:
        fail(f"{failed} records failed; first error: {describe_error(acked.errors[0])}")


def _payloads(record_size: int, payload_file: Path | None) -> list[bytes]:
    if payload_file is not None:
        lines = [line for line in payload_file.read_bytes().splitlines() if line]
        if not lines:
            raise typer.BadParameter("the file has no non-empty lines", param_hint="--payload-file")
        return lines
    # Like Kafka's tool: random upper-case letters (compressible about as much as text).
    rng = random.Random(0)
    return [bytes(rng.choices(range(65, 91), k=record_size))]


def _ensure_topic(
    bootstrap: str,
    properties: list[str] | None,
    command_config: Path | None,
    topic: str,
    partitions: int | None,
) -> None:
    admin = admin_client(bootstrap, properties, command_config)
    if topic in cluster_metadata(admin).topics:
        return
    if partitions is None:
        fail(
            f"UNKNOWN_TOPIC_OR_PART: topic {topic!r} does not exist (give --partitions to create it)"
        )
    new = NewTopic(topic, num_partitions=partitions, replication_factor=-1)
    result(
        admin.create_topics([new], **TOPIC_OP_TIMEOUTS)[topic], f"cannot create topic {topic!r}: "
    )
    err.print(f"Created topic {topic} with {partitions} partitions.")


def _bytes_counter(payloads: list[bytes]) -> Callable[[int], int]:
    """Value bytes of the first n records sent (payloads go round robin)."""
    sizes = [len(p) for p in payloads]
    prefix = [0]
    for n in sizes:
        prefix.append(prefix[-1] + n)

    def bytes_of(n: int) -> int:
        cycles, rest = divmod(n, len(sizes))
        return cycles * prefix[-1] + prefix[rest]

    return bytes_of


# --- consume --------------------------------------------------------------------------------


@app.command()
def consume(
    topic: str,
    messages: Annotated[
        int, typer.Option("--messages", "-n", min=1, help="Records to read.")
    ] = 1_000_000,
    group: Annotated[
        str | None,
        typer.Option(
            "--group", "-g", help="Join this group (timing its rebalance); default: assign."
        ),
    ] = None,
    from_latest: Annotated[
        bool, typer.Option("--from-latest", help="Start at the log end (wait for new records).")
    ] = False,
    timeout_ms: Annotated[
        int, typer.Option(min=1, help="Stop when no record arrived for this long.")
    ] = 10_000,
    fetch_max_bytes: Annotated[int, typer.Option(min=1, help="fetch.max.bytes.")] = 52_428_800,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
    json_output: JsonOption = False,
) -> None:
    """Read records as fast as the client can; report records/s and MB/s."""
    consumer = consumer_client(
        bootstrap,
        properties,
        group,
        command_config,
        **{
            "auto.offset.reset": "latest" if from_latest else "earliest",
            "enable.auto.commit": group is not None,
            "fetch.max.bytes": fetch_max_bytes,
            "max.partition.fetch.bytes": min(fetch_max_bytes, 10_485_760),
            "queued.min.messages": 1_000_000,
        },
    )
    assigned_at: list[float] = []
    try:
        meta = topic_metadata(consumer, topic)
        start = time.monotonic()
        with kafka_errors():
            if group is None:
                offset = OFFSET_END if from_latest else OFFSET_BEGINNING
                consumer.assign([TopicPartition(topic, p, offset) for p in sorted(meta.partitions)])
                assigned_at.append(start)
            else:
                consumer.subscribe(
                    [topic], on_assign=lambda _c, _ps: assigned_at.append(time.monotonic())
                )
            records, value_bytes, first, last = _read(
                consumer, messages, timeout_ms / 1000, json_output, start
            )
    finally:
        consumer.close()
    rebalance_s = (assigned_at[0] - start) if assigned_at else 0.0
    first_s = None if first is None else first - start
    summary = consume_summary(records, value_bytes, last - start, rebalance_s, first_s)
    summary.update(topic=topic, group=group)
    if json_output:
        print_json(summary)
    else:
        _print_summary("Consumer", summary)
    if records < messages:
        err.print(
            f"Warning: read {records} of {messages} records before {timeout_ms} ms without data."
        )


def _read(
    consumer: Any, wanted: int, idle_s: float, quiet: bool, start: float
) -> tuple[int, int, float | None, float]:
    """Consume until `wanted` records or `idle_s` without any.

    Returns (records, value bytes, time of the first batch or None, time of the last)."""
    records = value_bytes = 0
    first: float | None = None
    last = start
    progress = _progress(quiet, "consume", wanted)
    window = _Window("read", quiet)
    with progress:
        task = progress.add_task("consuming", total=wanted)
        next_refresh = start
        while records < wanted:
            batch = consumer.consume(min(10_000, wanted - records), timeout=_REFRESH_S)
            now = time.monotonic()
            if batch:
                good = [m for m in batch if m.error() is None]
                if len(good) < len(batch):
                    _check_errors(batch)
                records += len(good)
                value_bytes += sum(map(len, good))
                if good:
                    first = now if first is None else first
                    last = now
            elif now - last > idle_s and now - start > idle_s:
                break
            if now >= next_refresh:
                seconds = max(now - start, 1e-9)
                line = f"{records / seconds:,.0f} rec/s  {value_bytes / seconds / MB:,.1f} MB/s"
                progress.update(task, completed=records, description=line)
                window.report(records, value_bytes, now)
                next_refresh = now + _REFRESH_S
        progress.update(task, completed=records)
    return records, value_bytes, first, last


def _check_errors(batch: list[Message]) -> None:
    for message in batch:
        error = message.error()
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            if error.fatal() or not error.retriable():
                fail(describe_error(error))
            err.print(f"Warning: {describe_error(error)}")


# --- display --------------------------------------------------------------------------------


def _progress(quiet: bool, verb: str, total: int) -> Progress:
    """A live bar on a terminal; nothing in pipes (see _Window) or with --json."""
    return Progress(
        TextColumn(f"[bold]{verb}[/bold]"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        console=err,
        disable=quiet or not err.is_terminal,
        transient=False,
    )


@dataclass
class _Window:
    """Kafka's periodic lines (`N records sent, R records/sec (M MB/sec), ...`) on stderr
    when there is no terminal for a live bar; silent with --json."""

    verb: str
    quiet: bool
    every_s: float = 5.0
    _at: float = 0.0
    _records: int = 0
    _bytes: int = 0
    _latencies: int = 0

    def report(
        self, records: int, value_bytes: int, now: float, latencies: array | None = None
    ) -> None:
        if self.quiet or err.is_terminal:
            return
        if not self._at:
            self._at = now
            return
        seconds = now - self._at
        if seconds < self.every_s:
            return
        line = (
            f"{records - self._records} records {self.verb}, "
            f"{(records - self._records) / seconds:.1f} records/sec "
            f"({(value_bytes - self._bytes) / seconds / MB:.2f} MB/sec)"
        )
        if latencies is not None:
            recent = latencies[self._latencies :]
            if recent:
                avg, peak = sum(recent) / len(recent) * 1000, max(recent) * 1000
                line += f", {avg:.1f} ms avg latency, {peak:.1f} ms max latency"
            self._latencies = len(latencies)
        err.print(line + ".")
        self._at, self._records, self._bytes = now, records, value_bytes


def _print_summary(title: str, summary: dict[str, Any]) -> None:
    grid = table("METRIC", "VALUE", title=f"{title} performance")
    for key, value in summary.items():
        if isinstance(value, dict):
            for sub, number in value.items():
                grid.add_row(f"{key}.{sub}", _fmt(number))
        elif value is not None:
            grid.add_row(key, _fmt(value))
    out.print(grid)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
