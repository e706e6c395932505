"""`moldau consume`: print records to stdout (like kafka-console-consumer.sh)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    PropertyOption,
    consumer_client,
    describe_error,
    err,
    fail,
    kafka_errors,
    topic_metadata,
    unescape,
)

_BATCH = 1000
# Errors librdkafka recovers from by itself: report them, keep consuming.
_TRANSIENT = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._PARTITION_EOF,
}


@dataclass(frozen=True)
class _Format:
    """Kafka's DefaultMessageFormatter layout: [partition, offset] [headers] [key] value."""

    separator: bytes
    offset: bool
    headers: bool
    key: bool

    def render(self, message: Message) -> bytes:
        fields = []
        if self.offset:
            fields += [
                b"Partition:%d" % (message.partition() or 0),
                b"Offset:%d" % (message.offset() or 0),
            ]
        if self.headers:
            fields.append(_headers(message.headers()))
        if self.key:
            fields.append(_or_null(message.key()))
        fields.append(_or_null(message.value()))
        return self.separator.join(fields) + b"\n"


def consume(
    topic: str,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    from_beginning: Annotated[
        bool,
        typer.Option(
            "--from-beginning",
            help="Start at the earliest offset (with --group: if none committed).",
        ),
    ] = False,
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", min=0, help="Only this partition.")
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option(help="Start offset in --partition: N, 'earliest' or 'latest'."),
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", min=1, help="Exit after N records.")
    ] = None,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", help="Join this consumer group and commit offsets."),
    ] = None,
    print_key: Annotated[bool, typer.Option("--print-key", help="Print the key.")] = False,
    print_headers: Annotated[
        bool, typer.Option("--print-headers", help="Print headers as k:v,k:v.")
    ] = False,
    print_offset: Annotated[
        bool, typer.Option("--print-offset", help="Print partition and offset.")
    ] = False,
    key_separator: Annotated[str, typer.Option(help="Separator between printed fields.")] = r"\t",
    timeout_ms: Annotated[
        int | None, typer.Option(min=1, help="Exit when no record arrived for this long.")
    ] = None,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Print records of TOPIC, one per line, until --max-messages, --timeout-ms or Ctrl-C.

    Without --group, partitions are assigned directly: nothing is joined or committed.
    """
    start = _start_offset(from_beginning, partition, offset, group)
    reset: dict[str, Any] = {"auto.offset.reset": "earliest" if from_beginning else "latest"}
    consumer = consumer_client(bootstrap, properties, group, command_config, **reset)
    fmt = _Format(unescape(key_separator).encode(), print_offset, print_headers, print_key)
    try:
        meta = topic_metadata(consumer, topic, [partition])
        with kafka_errors():
            if group is None:
                chosen = [partition] if partition is not None else sorted(meta.partitions)
                consumer.assign([TopicPartition(topic, p, start) for p in chosen])
            else:
                consumer.subscribe([topic])
            count = _print_records(consumer, fmt, max_messages, timeout_ms)
    finally:
        consumer.close()
    err.print(f"Processed a total of {count} messages")


def _start_offset(
    from_beginning: bool, partition: int | None, offset: str | None, group: str | None
) -> int:
    """Validate the position options the way kafka-console-consumer does."""
    if group is not None and (partition is not None or offset is not None):
        raise typer.BadParameter("--partition/--offset cannot be combined with --group")
    if offset is None:
        return OFFSET_BEGINNING if from_beginning else OFFSET_END
    if partition is None:
        raise typer.BadParameter("requires --partition", param_hint="--offset")
    if from_beginning:
        raise typer.BadParameter("cannot be combined with --from-beginning", param_hint="--offset")
    named = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}
    if offset in named:
        return named[offset]
    if not offset.isdigit():
        raise typer.BadParameter(
            f"expected N >= 0, 'earliest' or 'latest', got {offset!r}", param_hint="--offset"
        )
    return int(offset)


def _print_records(
    consumer: Consumer, fmt: _Format, max_messages: int | None, timeout_ms: int | None
) -> int:
    """Write records to stdout until the limit, the idle timeout or Ctrl-C; return the count.

    The idle clock only runs while partitions are assigned: joining a group (and its
    rebalance delay) is not "no new data".
    """
    out = sys.stdout.buffer
    idle_limit = None if timeout_ms is None else timeout_ms / 1000
    idle_since = time.monotonic()
    count = 0
    try:
        while max_messages is None or count < max_messages:
            wanted = _BATCH if max_messages is None else min(_BATCH, max_messages - count)
            # Asking for no more than still wanted keeps auto-commit from skipping records.
            messages = consumer.consume(wanted, timeout=0.2)
            records = [m for m in messages if not _is_error(m)]
            if records:
                out.write(b"".join(map(fmt.render, records)))
                out.flush()
                count += len(records)
                idle_since = time.monotonic()
            elif not consumer.assignment():
                idle_since = time.monotonic()
            elif idle_limit is not None and time.monotonic() - idle_since >= idle_limit:
                break
    except KeyboardInterrupt:
        pass
    return count


def _is_error(message: Message) -> bool:
    error = message.error()
    if error is None:
        return False
    if error.fatal() or not (error.retriable() or error.code() in _TRANSIENT):
        fail(describe_error(error))
    if error.code() != KafkaError._PARTITION_EOF:
        err.print(f"Warning: {describe_error(error)}")
    return True


Headers = list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None]


def _headers(headers: Headers | None) -> bytes:
    if not headers:
        return b"NO_HEADERS"
    pairs = headers.items() if isinstance(headers, dict) else headers
    return b",".join(key.encode() + b":" + _or_null(value) for key, value in pairs)


def _or_null(data: str | bytes | None) -> bytes:
    if isinstance(data, str):
        return data.encode()
    return b"null" if data is None else data
