"""The fault tests' clients: idempotent acks=all producers and group consumers, running
continuously in threads (librdkafka through confluent-kafka) and recording into a
:class:`~tests.faults.checker.History` every send, acknowledgement, failure and poll.

Each producer writes its records round robin over the partitions; its ``seq``-th record
to a partition carries the value ``producer/partition:seq`` (the checker verifies per-partition send
order from it). Consumers are members of one group that commits offsets automatically;
a new assignment starts a new session (consumption may restart from the committed offset).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from tests.faults.checker import Ack, Failure, History, Poll, value_of

PRODUCER_CONFIG = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "request.timeout.ms": 5_000,  # also the broker's wait for acks=all
    "message.timeout.ms": 90_000,  # records outlive the faults and are then acknowledged
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 500,
    "reconnect.backoff.max.ms": 500,
    "topic.metadata.refresh.interval.ms": 2_000,
}
CONSUMER_CONFIG = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 500,
    "session.timeout.ms": 6_000,
    "heartbeat.interval.ms": 1_000,
    "isolation.level": "read_uncommitted",  # bounded by the HW alone
    "fetch.wait.max.ms": 100,
    "reconnect.backoff.max.ms": 500,
    "topic.metadata.refresh.interval.ms": 2_000,
}


def quiet(config: dict[str, Any]) -> dict[str, Any]:
    """librdkafka logs every refused connection to stderr: keep them out of test output."""
    return {**config, "logger": _NullLogger(), "log_level": 0}


class _NullLogger:
    def log(self, *args: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class Recorder:
    """The shared history, appended to from client threads."""

    def __init__(self) -> None:
        self.history = History()
        self.lock = threading.Lock()
        self.errors: list[str] = []  # client errors (informational)
        self.sent_at: dict[str, float] = {}  # value -> when it was handed to the client

    def sent(self, partition: int, value: str) -> None:
        now = time.monotonic()
        with self.lock:
            self.history.sent.append((partition, value))
            self.sent_at[value] = now

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        now = time.monotonic()
        value = msg.value().decode()
        with self.lock:
            if err is None:
                self.history.acks.append(Ack(msg.partition(), msg.offset(), value, now))
            else:
                self.history.failures.append(Failure(msg.partition(), value, err.name(), now))

    def delivered_raw(self, outcome: Ack | Failure) -> None:
        with self.lock:
            if isinstance(outcome, Ack):
                self.history.acks.append(outcome)
            else:
                self.history.failures.append(outcome)

    def polled(self, consumer: str, session: int, msg: Message) -> None:
        poll = Poll(
            consumer,
            session,
            msg.partition(),
            msg.offset(),
            msg.value().decode(),
            time.monotonic(),
        )
        with self.lock:
            self.history.polls.append(poll)

    def acks_since(self, t: float, partitions: set[int] | None = None) -> list[Ack]:
        with self.lock:
            return [
                a
                for a in self.history.acks
                if a.time >= t and (partitions is None or a.partition in partitions)
            ]

    def acks_of_sent_since(self, t: float, partitions: set[int] | None = None) -> list[Ack]:
        """Acknowledgements of records sent at ``t`` or later (not of older ones whose
        acknowledgement merely arrived then)."""
        with self.lock:
            return [
                a
                for a in self.history.acks
                if self.sent_at.get(a.value, 0.0) >= t
                and (partitions is None or a.partition in partitions)
            ]


@dataclass
class ProducerThread:
    name: str
    bootstrap: str
    topic: str
    partitions: int
    rate: float  # records per second
    recorder: Recorder
    stop: threading.Event = field(default_factory=threading.Event)
    flush_timeout: float = 120.0  # for what is still undelivered when it stops
    flushed_left: int = -1  # records still undelivered after the final flush
    fatal: str | None = None  # the producer's fatal error, if it had one (it stops then)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=f"producer-{self.name}", daemon=True)
        thread.start()
        return thread

    def _run(self) -> None:
        producer = Producer(quiet({"bootstrap.servers": self.bootstrap, **PRODUCER_CONFIG}))
        try:
            self._produce(producer)
        except KafkaException as e:
            error = e.args[0]
            if not error.fatal():
                raise
            self.fatal = error.name()  # e.g. a sequence gap after an unclean election
            producer.purge()  # what it still holds fails now, not at message.timeout.ms
        deadline = time.monotonic() + self.flush_timeout
        while True:
            try:
                self.flushed_left = producer.flush(max(0.0, deadline - time.monotonic()))
                return
            except (KafkaException, SystemError):
                # A fatal producer raises its error again while it serves the delivery
                # callbacks of what it failed (recorded as failures): go on serving them.
                self.flushed_left = len(producer)
                if not self.flushed_left or time.monotonic() >= deadline:
                    return

    def _produce(self, producer: Producer) -> None:
        seqs: dict[int, int] = defaultdict(int)
        n = 0
        start = time.monotonic()
        while not self.stop.is_set():
            partition = n % self.partitions
            value = value_of(self.name, partition, seqs[partition])
            try:
                producer.produce(
                    self.topic,
                    value=value.encode(),
                    key=self.name.encode(),
                    partition=partition,
                    on_delivery=self.recorder.delivered,
                )
            except BufferError:
                producer.poll(0.05)
                continue
            self.recorder.sent(partition, value)
            seqs[partition] += 1
            n += 1
            producer.poll(0)
            delay = start + n / self.rate - time.monotonic()
            if delay > 0:
                producer.poll(delay)


@dataclass
class ConsumerThread:
    name: str
    bootstrap: str
    topic: str
    group: str
    recorder: Recorder
    stop: threading.Event = field(default_factory=threading.Event)
    session: int = 0

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name=f"consumer-{self.name}", daemon=True)
        thread.start()
        return thread

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.session += 1

    def _run(self) -> None:
        consumer = Consumer(
            quiet(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.group,
                    "client.id": self.name,
                    **CONSUMER_CONFIG,
                }
            )
        )
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_assign)
        try:
            while not self.stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is None:
                        self.recorder.polled(self.name, self.session, msg)
                    elif msg.error().code() != KafkaError._PARTITION_EOF:
                        with self.recorder.lock:
                            self.recorder.errors.append(f"{self.name}: {msg.error()}")
        finally:
            consumer.close()


class Workload:
    """Producers and consumers of one topic, started and stopped together."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        producers: int = 2,
        consumers: int = 2,
        rate: float = 100.0,
    ) -> None:
        self.recorder = Recorder()
        group = f"faults-{uuid.uuid4().hex[:8]}"
        self.producers = [
            ProducerThread(f"p{i}", bootstrap, topic, partitions, rate, self.recorder)
            for i in range(producers)
        ]
        self.consumers = [
            ConsumerThread(f"c{i}", bootstrap, topic, group, self.recorder)
            for i in range(consumers)
        ]
        self._threads: list[threading.Thread] = []

    @property
    def history(self) -> History:
        return self.recorder.history

    def start(self) -> None:
        self._threads = [c.start() for c in self.consumers] + [p.start() for p in self.producers]
        _live.add(self)

    def abort(self) -> None:
        """A test failed: stop every client at once, whatever is undelivered."""
        for p in self.producers:
            p.flush_timeout = 0.5
        self.stop_producers(10.0)
        self.stop_consumers(10.0)

    def stop_producers(self, timeout: float = 150.0) -> None:
        """Stop sending and wait until every record sent so far is acknowledged or failed."""
        for p in self.producers:
            p.stop.set()
        for thread in self._threads[len(self.consumers) :]:
            thread.join(timeout)

    def stop_consumers(self, timeout: float = 30.0) -> None:
        for c in self.consumers:
            c.stop.set()
        for thread in self._threads[: len(self.consumers)]:
            thread.join(timeout)
        _live.discard(self)

    def wait_consumed(self, high_watermarks: dict[int, int], timeout: float) -> bool:
        """True once the consumers together have seen every partition up to its HW."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.recorder.lock:
                reached: dict[int, int] = {}
                for poll in self.recorder.history.polls:
                    reached[poll.partition] = max(reached.get(poll.partition, -1), poll.offset)
            if all(reached.get(p, -1) >= hw - 1 for p, hw in high_watermarks.items()):
                return True
            time.sleep(0.2)
        return False


_live: set[Workload] = set()  # started, consumers not stopped yet


def abort_all() -> None:
    """Stop every workload still running (a fixture's teardown, before the nodes)."""
    for workload in list(_live):
        workload.abort()


def read_final(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> tuple[dict[int, list[tuple[int, str]]], dict[int, int]]:
    """Every partition's records from its start to its high watermark, with a fresh
    consumer outside any group: the log as it finally is."""
    consumer = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"final-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
                "enable.partition.eof": True,
            }
        )
    )
    try:
        hws = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
        done = {p for p, hw in hws.items() if hw == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read incomplete: {len(done)} of {partitions} done")
            for msg in consumer.consume(1000, 0.5):
                p = msg.partition()
                if msg.error() is None:
                    records[p].append((msg.offset(), msg.value().decode()))
                    if msg.offset() >= hws[p] - 1:
                        done.add(p)
                elif msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= hws[p]:
                    done.add(p)
        return records, hws
    finally:
        consumer.close()
