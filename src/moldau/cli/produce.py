"""`moldau produce`: one record per input line (like kafka-console-producer.sh)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import typer
from confluent_kafka import KafkaError, Message, Producer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    PropertyOption,
    client_config,
    describe_error,
    err,
    fail,
    kafka_errors,
    parse_pairs,
    topic_metadata,
    unescape,
)

# Progress bar redraws are not free; refresh every this many lines.
_PROGRESS_EVERY = 2048


class Compression(StrEnum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


class Acks(StrEnum):
    zero = "0"
    one = "1"
    all = "all"


class _Deliveries:
    """Counts delivery reports; keeps the first error for the summary line."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0
        self.first_error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.delivered += 1
            return
        self.failed += 1
        self.first_error = self.first_error or error


def produce(
    topic: str,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", exists=True, dir_okay=False, help="Read lines from FILE, not stdin."
        ),
    ] = None,
    key_separator: Annotated[
        str | None,
        typer.Option(help=r"Split each line into KEY SEP VALUE at the first SEP (e.g. '\t')."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", "-H", metavar="KEY=VALUE", help="Header on every record (repeatable)."
        ),
    ] = None,
    partition: Annotated[
        int | None,
        typer.Option("--partition", "-p", min=0, help="Target partition [default: by key]."),
    ] = None,
    compression: Annotated[
        Compression, typer.Option(help="Batch compression codec.")
    ] = Compression.none,
    acks: Annotated[
        Acks, typer.Option(help="Replicas that must have a record before it counts.")
    ] = Acks.all,
    idempotent: Annotated[
        bool, typer.Option("--idempotent", help="Idempotent producer (no duplicates on retry).")
    ] = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Produce each line of stdin (or --file) as one record.

    A line without the key separator gets a null key. Exits 1 if any record was not
    acknowledged.
    """
    if idempotent and acks is not Acks.all:
        raise typer.BadParameter("requires --acks all", param_hint="--idempotent")
    headers = list(parse_pairs(header, "--header").items()) or None
    separator = unescape(key_separator).encode() if key_separator else None
    settings: dict[str, Any] = {
        "acks": acks.value,
        "compression.type": compression.value,
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        # Interactive use: give up on an unreachable broker well before librdkafka's 5 min.
        "message.timeout.ms": 30000,
    }
    producer = Producer(
        client_config(bootstrap, properties, command_config=command_config, **settings)
    )
    topic_metadata(producer, topic, [partition])
    deliveries = _Deliveries()
    kwargs: dict[str, Any] = {"on_delivery": deliveries, "headers": headers}
    if partition is not None:
        kwargs["partition"] = partition
    sent = 0
    with _input_lines(file) as lines, kafka_errors():
        for line in lines:
            key, value = _split(line, separator)
            _send(producer, topic, value, key, kwargs)
            sent += 1
        producer.flush()
    if deliveries.first_error is not None:
        fail(
            f"{deliveries.failed} of {sent} records failed: {describe_error(deliveries.first_error)}"
        )
    err.print(f"Produced {deliveries.delivered} records to {topic}.")


def _split(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    return (key, value) if found else (None, line)


def _send(producer: Producer, topic: str, value: bytes, key: bytes | None, kwargs: dict) -> None:
    """Queue one record, waiting for room when librdkafka's local queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, **kwargs)
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.1)


@contextmanager
def _input_lines(file: Path | None) -> Iterator[Iterator[bytes]]:
    """Lines without their newline; from a file, with a progress bar on a terminal."""
    if file is None:
        yield _strip(sys.stdin.buffer)
        return
    progress = Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not err.is_terminal,
    )
    with file.open("rb") as source, progress:
        task = progress.add_task(f"producing {file.name}", total=file.stat().st_size)
        yield _strip(source, lambda done: progress.update(task, completed=done))


def _strip(source: BinaryIO, on_progress: Callable[[int], None] | None = None) -> Iterator[bytes]:
    done = 0
    for number, line in enumerate(source, 1):
        done += len(line)
        if on_progress and number % _PROGRESS_EVERY == 0:
            on_progress(done)
        yield line[:-1] if line.endswith(b"\n") else line
    if on_progress:
        on_progress(done)
