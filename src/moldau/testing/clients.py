"""Client-side helpers for assertions, against any Kafka-protocol cluster.

They use confluent-kafka (a Moldau dependency), imported on first use so that loading the
pytest plugin stays cheap. ``produce`` waits for every acknowledgement; ``consume`` reads
without a consumer group (``assign``), so it never disturbs the groups under test.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Record:
    """A record as produced or consumed; ``partition``, ``offset`` and ``timestamp`` are
    filled in by the broker's answer (produce) or the log (consume)."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None


RecordLike = Record | bytes | str | tuple[bytes | str | None, bytes | str | None]


def kafka_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Python keywords to Kafka properties: ``num_partitions=3`` is ``num.partitions=3``
    (Kafka's config names have no underscores), ``True`` is ``true``."""
    out = {}
    for key, value in configs.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out[key.replace("_", ".")] = text
    return out


def _as_bytes(data: bytes | str | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _as_record(item: RecordLike) -> Record:
    if isinstance(item, Record):
        return item
    if isinstance(item, tuple):
        key, value = item
        return Record(_as_bytes(value), _as_bytes(key))
    return Record(_as_bytes(item))


class ClientHelpers:
    """Create topics, produce and consume for assertions, at :attr:`bootstrap_servers`."""

    @property
    def bootstrap_servers(self) -> str:
        raise NotImplementedError

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int = -1,
        timeout: float = DEFAULT_TIMEOUT_S,
        **configs: Any,
    ) -> str:
        """Create ``name`` (topic configs as keywords, ``cleanup_policy="compact"``) with the
        cluster's default replication factor (or ``replication_factor``); returns once every
        partition has a leader."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        topic = NewTopic(
            name, partitions, replication_factor=replication_factor, config=kafka_configs(configs)
        )
        admin.create_topics([topic], operation_timeout=timeout)[name].result(timeout)
        deadline = time.monotonic() + timeout
        while True:
            meta = admin.list_topics(name, timeout=timeout).topics.get(name)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has no leaders after {timeout} s")
            time.sleep(0.02)

    def delete_topic(self, name: str, *, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        admin.delete_topics([name], operation_timeout=timeout)[name].result(timeout)

    def produce(
        self, topic: str, *records: RecordLike, timeout: float = DEFAULT_TIMEOUT_S
    ) -> list[Record]:
        """Produce with acks=all and wait for every acknowledgement. A record is a value
        (``bytes`` or ``str``), a ``(key, value)`` pair, or a :class:`Record` (headers,
        partition, timestamp). Returns them as acknowledged: partition and offset set."""
        from confluent_kafka import Producer

        wanted = [_as_record(r) for r in records]
        acked: dict[int, Record] = {}
        errors: list[str] = []
        producer = Producer(
            {"bootstrap.servers": self.bootstrap_servers, "acks": "all", "linger.ms": 0}
        )

        def on_delivery(index: int, err: Any, msg: Any) -> None:  # confluent_kafka.Message
            if err is not None:
                errors.append(str(err))
                return
            r = wanted[index]
            acked[index] = Record(
                r.value, r.key, r.headers, msg.partition(), msg.offset(), msg.timestamp()[1]
            )

        for index, r in enumerate(wanted):
            while True:
                try:
                    producer.produce(
                        topic,
                        value=r.value,
                        key=r.key,
                        headers=list(r.headers),
                        partition=-1 if r.partition is None else r.partition,
                        timestamp=r.timestamp or 0,
                        on_delivery=functools.partial(on_delivery, index),
                    )
                    break
                except BufferError:  # the client's queue is full: let it send
                    producer.poll(0.1)
        left = producer.flush(timeout)
        if errors or left:
            raise RuntimeError(
                f"produce to {topic!r}: {len(acked)} of {len(wanted)} acknowledged; "
                f"{left} still waiting after {timeout} s; errors: {errors[:3]}"
            )
        return [acked[i] for i in range(len(wanted))]

    def consume(
        self, topic: str, count: int | None = None, *, timeout: float = DEFAULT_TIMEOUT_S
    ) -> list[Record]:
        """Every record of ``topic``, in (partition, offset) order, read from the log start
        (no consumer group). With ``count``, first wait until the topic holds at least that
        many (or fail after ``timeout``); returns what is below the high watermarks then."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        deadline = time.monotonic() + timeout
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": "moldau-testing",  # required by the client; never joined
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            ends = self._wait_for_records(consumer, topic, count, deadline, timeout)
            pending = {p for p, (low, high) in ends.items() if high > low}
            consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in pending])
            records: list[Record] = []
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{topic!r}: read {len(records)} records, partitions {sorted(pending)} "
                        f"not read to their high watermark within {timeout} s"
                    )
                for msg in consumer.consume(1000, timeout=min(left, 0.2)):
                    p, offset, error = msg.partition() or 0, msg.offset() or 0, msg.error()
                    high = ends[p][1]
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(f"consume from {topic!r}: {error}")
                        if offset >= high:  # the end, past any control records
                            pending.discard(p)
                        continue
                    if offset < high:
                        headers = cast(list[tuple[str, bytes | None]], msg.headers() or [])
                        timestamp = msg.timestamp()[1]
                        records.append(
                            Record(msg.value(), msg.key(), tuple(headers), p, offset, timestamp)
                        )
                    if offset + 1 >= high:
                        pending.discard(p)
            return sorted(records, key=lambda r: (r.partition, r.offset))
        finally:
            consumer.close()

    @staticmethod
    def _wait_for_records(
        consumer: Any, topic: str, count: int | None, deadline: float, timeout: float
    ) -> dict[int, tuple[int, int]]:
        """partition -> (log start offset, high watermark), once ``count`` are there.

        A partition without a live leader (its node was just killed, the controller has not
        fenced it yet) times out a lookup: asked again until the deadline.
        """
        from confluent_kafka import KafkaException, TopicPartition

        while True:
            ends: dict[int, tuple[int, int]] = {}
            unanswered = ""  # the message: an exception would pin the callers' frames
            try:
                step = max(0.1, min(deadline - time.monotonic(), 2.0))
                meta = consumer.list_topics(topic, timeout=step).topics.get(topic)
                if meta is not None and meta.error is None:
                    ends = {
                        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=step)
                        for p in meta.partitions
                    }
            except KafkaException as exc:
                unanswered, ends = str(exc), {}
            found = sum(high - low for low, high in ends.values())
            if ends and (count is None or found >= count):
                return ends
            if count is None and not unanswered:
                raise AssertionError(f"topic {topic!r} does not exist")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"expected at least {count} records in {topic!r}, found {found} after "
                    f"{timeout} s" + (f" ({unanswered})" if unanswered else "")
                )
            time.sleep(0.05)


class ExternalCluster(ClientHelpers):
    """A running Kafka-protocol cluster (Moldau, Apache Kafka, ...) at ``bootstrap_servers``."""

    def __init__(self, bootstrap_servers: str) -> None:
        self._bootstrap_servers = bootstrap_servers

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap_servers

    def __repr__(self) -> str:
        return f"ExternalCluster({self._bootstrap_servers!r})"
