"""Helpers shared by the client-side `moldau` commands.

Every command talks to the broker through confluent-kafka (librdkafka), so it works
against any Kafka-protocol broker; this module holds what they have in common: the
connection options, client construction, KEY=VALUE parsing, and turning Kafka errors
into one line on stderr with exit code 1.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from moldau.admin.errors import describe_error
from moldau.admin.preflight import Unreachable, client_security, ensure_reachable

T = TypeVar("T")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# Bounds every admin/metadata request, so an unreachable broker ends in an error, not a hang.
REQUEST_TIMEOUT_S = 15.0
ADMIN_TIMEOUTS = {"request_timeout": REQUEST_TIMEOUT_S}
# For topic operations the broker itself waits up to operation_timeout (for the change to
# propagate), so the request must be allowed to outlive it.
TOPIC_OP_TIMEOUTS = {
    "operation_timeout": REQUEST_TIMEOUT_S,
    "request_timeout": REQUEST_TIMEOUT_S + 5,
}

def _bootstrap_option(*more_names: str) -> Any:
    return typer.Option(
        *more_names,
        "--bootstrap-server",
        "-b",
        envvar="MOLDAU_BOOTSTRAP",
        help="Kafka-protocol broker address(es), host:port[,host:port].",
    )


BootstrapOption = Annotated[str, _bootstrap_option()]
ServiceBootstrapOption = Annotated[str, _bootstrap_option("--bootstrap")]
"""The services' (console, registry): ``--bootstrap`` is accepted too."""
PropertyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--property",
        "-X",
        metavar="KEY=VALUE",
        help="Extra librdkafka client property (repeatable).",
    ),
]

CommandConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        exists=True,
        dir_okay=False,
        metavar="FILE",
        help="librdkafka properties file (security.protocol, sasl.*, ssl.*, ...); -X wins.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def metrics_urls(options: list[str] | None) -> tuple[str, ...]:
    """``--metrics`` values: the option repeats, and each may list URLs comma-separated."""
    return tuple(u.strip() for item in options or () for u in item.split(",") if u.strip())


# librdkafka logs (e.g. every failed connect) go here instead of straight to stderr;
# `moldau -v` shows them.
_KAFKA_LOGGER = logging.getLogger("moldau.cli.librdkafka")
_KAFKA_LOGGER.addHandler(logging.NullHandler())
_KAFKA_LOGGER.propagate = False


def show_client_logs() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s librdkafka %(message)s"))
    _KAFKA_LOGGER.addHandler(handler)
    _KAFKA_LOGGER.setLevel(logging.DEBUG)


# Non-terminal output is not wrapped at 80 columns, so tables stay parseable in pipes.
_WIDE = 1000


def _console(stderr: bool) -> Console:
    # Markup off: topic names, keys and broker messages may contain `[...]`.
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else _WIDE
    return Console(stderr=stderr, highlight=False, markup=False, width=width)


out = _console(stderr=False)
err = _console(stderr=True)


def fail(message: str) -> NoReturn:
    """Report a runtime error as one line on stderr and exit with status 1."""
    err.print(Text.assemble(("Error: ", "bold red"), message), soft_wrap=True)
    raise typer.Exit(1)


def check(error: KafkaError | None, context: str = "") -> None:
    """Fail on a per-item error returned inside an otherwise successful result."""
    if error is not None and error.code() != KafkaError.NO_ERROR:
        fail(f"{context}{describe_error(error)}")


@contextmanager
def kafka_errors(context: str = "") -> Iterator[None]:
    """Turn a KafkaException escaping the block into a clean `fail`."""
    try:
        yield
    except KafkaException as exc:
        fail(f"{context}{describe_error(exc)}")


def result(future: Future[T], context: str = "") -> T:
    """Wait for one admin future, failing cleanly on its Kafka error."""
    with kafka_errors(context):
        return future.result()


def report_each(
    futures: Mapping[str, Future[Any]], names: Iterable[str], failed: str, done: str
) -> None:
    """Wait for the operation on each name in turn: print ``done`` for it, or exit with
    ``failed``'s message at the first that failed (both formatted with the name)."""
    for name in names:
        result(futures[name], failed.format(name))
        out.print(done.format(name))


def parse_pairs(pairs: list[str] | None, option: str) -> dict[str, str]:
    """Parse repeated KEY=VALUE options; a malformed one is a usage error (exit 2)."""
    parsed: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        parsed[key] = value
    return parsed


def unescape(separator: str) -> str:
    r"""Let shells pass separators such as `\t` literally (non-ASCII text survives)."""
    return separator.encode("latin-1", "backslashreplace").decode("unicode_escape")


def user_properties(
    properties: list[str] | None = None, command_config: Path | None = None
) -> dict[str, str]:
    """The user's librdkafka properties: the --command-config file, then -X overrides.

    This is where SASL/TLS settings come in, as with Kafka's tools.
    """
    from moldau.config.broker import ConfigError, read_properties

    loaded: dict[str, str] = {}
    if command_config is not None:
        try:
            loaded = read_properties(command_config)
        except ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--command-config") from None
    return {**loaded, **parse_pairs(properties, "--property")}


def client_config(
    bootstrap: str,
    properties: list[str] | None = None,
    *,
    command_config: Path | None = None,
    **extra: Any,
) -> dict:
    """librdkafka configuration common to all clients, plus command and user extras.

    Fails at once, in one line, if no bootstrap server can be reached with it."""
    user = user_properties(properties, command_config)
    check_reachable(bootstrap, user)
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "moldau-cli",
        "logger": _KAFKA_LOGGER,
        **extra,
        **user,
    }


_reachable: set[tuple[str, tuple[tuple[str, str], ...]]] = set()


def check_reachable(bootstrap: str, properties: Mapping[str, str]) -> None:
    """The pre-flight of :mod:`moldau.admin.preflight`, once per cluster and settings."""
    key = (bootstrap, tuple(sorted(properties.items())))
    if key in _reachable:
        return
    try:
        ensure_reachable(bootstrap, client_security(properties))
    except Unreachable as e:
        fail(str(e))
    _reachable.add(key)


def admin_client(
    bootstrap: str, properties: list[str] | None = None, command_config: Path | None = None
) -> AdminClient:
    # Admin handles are producers inside librdkafka; without this, describing a missing
    # topic could auto-create it on brokers with auto.create.topics.enable=true.
    return AdminClient(
        client_config(
            bootstrap,
            properties,
            command_config=command_config,
            **{"allow.auto.create.topics": False},
        )
    )


def consumer_client(
    bootstrap: str,
    properties: list[str] | None = None,
    group: str | None = None,
    command_config: Path | None = None,
    **extra: Any,
) -> Consumer:
    """A consumer; without `group` it never joins or commits (assign-only use)."""
    if group is None:
        # confluent-kafka insists on a group.id even for assign-only consumers.
        extra = {"group.id": "moldau-cli", "enable.auto.commit": False, **extra}
    else:
        extra = {"group.id": group, **extra}
    return Consumer(client_config(bootstrap, properties, command_config=command_config, **extra))


def cluster_metadata(
    client: AdminClient | Consumer | Producer, topic: str | None = None
) -> ClusterMetadata:
    with kafka_errors():
        return client.list_topics(topic, timeout=REQUEST_TIMEOUT_S)


def topic_metadata(
    client: AdminClient | Consumer | Producer, topic: str, partitions: Iterable[int | None] = ()
) -> TopicMetadata:
    """Metadata of an existing topic that has `partitions` (None: any partition).

    Fails with UNKNOWN_TOPIC_OR_PART, up front, rather than letting a client wait for it.
    """
    meta = cluster_metadata(client, topic).topics.get(topic)
    if meta is None:
        fail(f"UNKNOWN_TOPIC_OR_PART: topic {topic!r} does not exist")
    check(meta.error, f"topic {topic!r}: ")
    for partition in partitions:
        if partition is not None and partition not in meta.partitions:
            fail(f"UNKNOWN_TOPIC_OR_PART: topic {topic!r} has no partition {partition}")
    return meta


def watermarks(consumer: Consumer, partition: TopicPartition) -> tuple[int, int]:
    """(log start offset, log end offset) of one partition."""
    with kafka_errors(f"{partition.topic}-{partition.partition}: "):
        return consumer.get_watermark_offsets(partition, timeout=REQUEST_TIMEOUT_S)


def table(*columns: str, title: str | None = None) -> Table:
    """A table ruled on a terminal, borderless (splittable on whitespace) in pipes."""
    ruled = out.is_terminal
    return Table(
        *columns,
        title=title if ruled else None,
        box=box.SIMPLE_HEAD if ruled else None,
        header_style="bold cyan" if ruled else "bold",
        title_style="bold",
    )


def print_json(data: Any) -> None:
    """One JSON document on stdout, for scripts (`--json`)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def print_kv(title: str, values: Mapping[str, Any]) -> None:
    """A one-line summary such as `Topic: t  PartitionCount: 3`."""
    out.print("  ".join([title, *(f"{k}: {v}" for k, v in values.items())]), soft_wrap=True)
