"""Options of the `moldau` data source, named and defaulted like Spark's Kafka source.

Jobs written for `format("kafka")` port by changing the format: the same option names mean
the same thing, and any `kafka.*` option goes to the client unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from moldau.spark.offsets import EARLIEST, LATEST, OffsetMap, parse_partition_json
from moldau.spark.remote_options import RemoteOptions, parse_remote_options
from moldau.spark.serde import ValueFormat, value_format

OffsetKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends, before it is resolved against the live log.

    `offsets` holds per-partition offsets (-2 earliest, -1 latest) or, for `timestamps`,
    per-partition epoch milliseconds; `timestamp` is one time for every partition.
    """

    kind: OffsetKind
    offsets: OffsetMap = field(default_factory=dict)
    timestamp: int | None = None

    @classmethod
    def parse(cls, text: str, what: str) -> OffsetSpec:
        lowered = text.strip().lower()
        if lowered in ("earliest", "latest"):
            return cls(lowered)  # type: ignore[arg-type]
        return cls("offsets", parse_partition_json(text, what))

    def timestamps_for(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Times to look up with `offsets_for_times` for timestamp specs (empty otherwise)."""
        if self.kind == "timestamp":
            return {tp: self.timestamp for tp in partitions}  # type: ignore[misc]
        if self.kind == "timestamps":
            return {tp: self.offsets[tp] for tp in partitions if tp in self.offsets}
        return {}

    def resolve(
        self,
        partitions: list[tuple[str, int]],
        low: OffsetMap,
        high: OffsetMap,
        by_time: OffsetMap,
        missing: int,
    ) -> OffsetMap:
        """Concrete offsets for `partitions` given their log bounds `[low, high)`.

        `by_time` holds `offsets_for_times` answers (-1: no record that late, so the end);
        partitions the spec does not name get `missing` (EARLIEST or LATEST).
        """
        out: OffsetMap = {}
        named = {"earliest": EARLIEST, "latest": LATEST}
        for tp in partitions:
            if tp in by_time:
                wanted = high[tp] if by_time[tp] < 0 else by_time[tp]
            elif self.kind in named:
                wanted = named[self.kind]
            elif self.kind == "offsets":
                wanted = self.offsets.get(tp, missing)
            else:
                wanted = missing
            out[tp] = low[tp] if wanted == EARLIEST else high[tp] if wanted == LATEST else wanted
        return out


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of `subscribe`, `subscribePattern`, `assign`."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics or any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class ReadOptions:
    client: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_s: float
    value_format: ValueFormat | None = None
    native_fetch: bool = True
    remote: RemoteOptions | None = None


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka config: every `kafka.*` option without its prefix, plus the bootstrap."""
    opts = {k.lower(): v for k, v in options.items()}
    config = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
    bootstrap = config.get("bootstrap.servers") or opts.get("bootstrap.servers")
    if not bootstrap:
        raise ValueError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    config["bootstrap.servers"] = bootstrap
    if "isolation.level" in opts:
        config["isolation.level"] = opts["isolation.level"]
    return config


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {key} must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def _positive_int(opts: Mapping[str, str], key: str) -> int | None:
    value = opts.get(key)
    if value is None:
        return None
    number = int(value)
    if number <= 0:
        raise ValueError(f"option {key} must be positive, got {value!r}")
    return number


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(given) != 1:
        raise ValueError("exactly one of subscribe, subscribePattern or assign is required")
    if given[0] == "subscribe":
        topics = tuple(sorted({t.strip() for t in opts["subscribe"].split(",") if t.strip()}))
        return Subscription(topics=topics)
    if given[0] == "subscribepattern":
        return Subscription(pattern=opts["subscribepattern"])
    data = json.loads(opts["assign"])
    assigned = tuple(sorted((t, int(p)) for t, parts in data.items() for p in parts))
    return Subscription(assigned=assigned)


def read_value_format(options: Mapping[str, str]) -> ValueFormat | None:
    """`valueFormat` of a read; `subject` defaults to `<topic>-value` for a single topic."""
    opts = {k.lower(): v for k, v in options.items()}
    if "valueformat" not in opts:
        return None
    sub = _subscription(opts)
    topics = set(sub.topics) | {t for t, _ in sub.assigned}
    return value_format(opts, topics.pop() if len(topics) == 1 and not sub.pattern else None)


def _starting(opts: Mapping[str, str], streaming: bool) -> OffsetSpec:
    if opts.get("startingoffsetsbytimestamp"):
        return OffsetSpec(
            "timestamps",
            parse_partition_json(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp"),
        )
    if opts.get("startingtimestamp"):
        return OffsetSpec("timestamp", timestamp=int(opts["startingtimestamp"]))
    default = "latest" if streaming else "earliest"
    return OffsetSpec.parse(opts.get("startingoffsets", default), "startingOffsets")


ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
READERS = ("native", "librdkafka")


def _reader(opts: Mapping[str, str]) -> str:
    """`reader`: `native` (default) decodes fetched batches in bulk where the connection is
    plaintext and headers are not asked for; `librdkafka` always consumes record by record."""
    reader = opts.get("reader", "native").strip().lower()
    if reader not in READERS:
        raise ValueError(f"option reader must be one of {READERS}, got {reader!r}")
    return reader


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate once on the driver so a typo fails the query, not a task.

    Reads are `read_committed` unless `kafka.isolation.level` says otherwise, as in Spark's
    Kafka source: the end of the log is then the last stable offset, and records of aborted
    transactions are dropped.
    """
    opts = {k.lower(): v for k, v in options.items()}
    client = client_config(opts)
    client.setdefault("isolation.level", "read_committed")
    if client["isolation.level"] not in ISOLATION_LEVELS:
        raise ValueError(f"isolation.level must be one of {ISOLATION_LEVELS}")
    ending = OffsetSpec.parse(opts.get("endingoffsets", "latest"), "endingOffsets")
    if streaming and "endingoffsets" in opts:
        raise ValueError("endingOffsets is for batch queries only")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise ValueError("maxOffsetsPerTrigger is for streaming queries only")
    if ending.kind == "earliest" or any(v == EARLIEST for v in ending.offsets.values()):
        raise ValueError("endingOffsets cannot be earliest")
    return ReadOptions(
        client=client,
        subscription=_subscription(opts),
        starting=_starting(opts, streaming),
        ending=ending,
        max_offsets_per_trigger=_positive_int(opts, "maxoffsetspertrigger"),
        min_partitions=_positive_int(opts, "minpartitions"),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=(headers := _bool(opts, "includeheaders", False)),
        poll_timeout_s=(_positive_int(opts, "kafkaconsumer.polltimeoutms") or 120_000) / 1000,
        value_format=read_value_format(opts),
        native_fetch=_reader(opts) == "native",
        remote=parse_remote_options(opts, streaming=streaming, include_headers=headers),
    )


@dataclass(frozen=True)
class WriteOptions:
    client: dict[str, str]
    topic: str | None
    exactly_once: bool
    transactional_id_prefix: str
    value_format: ValueFormat | None = None


GUARANTEES = ("exactly-once", "at-least-once")


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """The `topic` option, if given, overrides a `topic` column (as in Spark's Kafka sink).

    `valueFormat` (with `schemaRegistryUrl`, `subject` defaulting to `<topic>-value`) encodes
    a struct `value` column with the subject's latest schema.
    `deliveryGuarantee` is `exactly-once` (default: Kafka transactions) or `at-least-once`
    (idempotent producer, no transactions); `transactionalIdPrefix` namespaces the
    transactional ids and ledger groups of the exactly-once sink.
    """
    opts = {k.lower(): v for k, v in options.items()}
    guarantee = opts.get("deliveryguarantee", "exactly-once").strip().lower()
    if guarantee not in GUARANTEES:
        raise ValueError(f"option deliveryGuarantee must be one of {GUARANTEES}, got {guarantee!r}")
    return WriteOptions(
        client=client_config(opts),
        topic=opts.get("topic") or None,
        exactly_once=guarantee == "exactly-once",
        transactional_id_prefix=opts.get("transactionalidprefix", "moldau-spark"),
        value_format=value_format(opts, opts.get("topic")),
    )
