"""`_schemas` as the registry's store: a consumer thread applies every record to the state,
a producer appends new ones.

Reads wait until the state holds the topic's end offset (asked of the partition leader
when the read starts); writes wait until their own records came back through the
consumer. Both give read-your-writes on every node, whoever wrote.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.registry.errors import RegistryError
from moldau.registry.records import TOPIC, Key, decode_value, encode_value
from moldau.registry.service import Record
from moldau.registry.state import RegistryState

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0  # Confluent's kafkastore.timeout.ms is 500 ms; a loaded cluster needs more
WATERMARK_TRY_S = 5.0
REPLICATION_FACTOR = 3  # Confluent's kafkastore.topic.replication.factor


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {detail}")


def timeout_error(detail: str) -> RegistryError:
    return RegistryError(500, 50002, f"Operation timed out: {detail}")


class KafkaStore:
    """The state of one `_schemas` topic, kept up to date by a thread of its own."""

    def __init__(
        self,
        bootstrap: str,
        client_config: Mapping[str, Any] | None = None,
        replication_factor: int | None = None,
        topic: str = TOPIC,
    ) -> None:
        """`_schemas` is created with `replication_factor` replicas (waiting for that many
        brokers); None: Confluent's 3, or fewer if the cluster has fewer brokers."""
        self.topic = topic
        self.replication_factor = replication_factor
        self.config = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.state = RegistryState()
        self.lock = threading.RLock()
        self._applied = threading.Condition(self.lock)
        self._next_offset = 0  # of the next record the state has not applied
        self._stopping = threading.Event()
        self._producer: Producer | None = None
        self._watermarks: Consumer | None = None
        self._watermarks_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # why the consumer thread stopped, if it did

    def start(self, timeout: float = TIMEOUT_S) -> None:
        """Create the topic if needed, start consuming it and wait until caught up."""
        self._ensure_topic(timeout)
        self._producer = Producer(
            {**self.config, "acks": "all", "enable.idempotence": True, "linger.ms": 0}
        )
        self._watermarks = self._watermark_client()
        self._thread = threading.Thread(target=self._consume, name="registry-store", daemon=True)
        self._thread.start()
        self.catch_up(timeout)

    def _ensure_topic(self, timeout: float) -> None:
        admin = AdminClient(self.config)
        deadline = time.monotonic() + timeout
        while True:
            try:
                metadata = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
                if self.topic in metadata.topics and not metadata.topics[self.topic].error:
                    return
                replicas = self.replication_factor or min(REPLICATION_FACTOR, len(metadata.brokers))
                new = NewTopic(self.topic, 1, replicas, config={"cleanup.policy": "compact"})
                admin.create_topics([new])[self.topic].result(timeout)
                return
            except KafkaException as e:
                error = e.args[0] if e.args else None
                if (
                    isinstance(error, KafkaError)
                    and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
                ):
                    return
                if time.monotonic() > deadline:
                    raise store_error(f"cannot create {self.topic}: {e}") from None
                time.sleep(0.5)

    def _watermark_client(self) -> Consumer:
        return Consumer({**self.config, "group.id": "_schemas-watermarks"})

    def _consume(self) -> None:
        consumer = Consumer(
            {
                **self.config,
                "group.id": "_schemas-reader",  # never joins: the partition is assigned
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 100,
            }
        )
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        try:
            while not self._stopping.is_set():
                # poll() returns at the first record (consume() would wait out its timeout
                # for a full batch), then whatever else is already there comes too
                first = consumer.poll(0.2)
                if first is not None:
                    self._apply([first, *consumer.consume(500, timeout=0)])
        except Exception as e:  # the registry cannot serve without its state: say why
            log.exception("schema registry: consuming %s failed", self.topic)
            self.error = str(e)
        finally:
            consumer.close()

    def _apply(self, messages: list[Any]) -> None:
        with self._applied:
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        self._next_offset = max(self._next_offset, m.offset())
                    else:
                        log.warning("schema registry: reading %s: %s", self.topic, error)
                    continue
                key = Key.decode(m.key()) if m.key() is not None else None
                self.state.apply(m.offset(), key, decode_value(m.value()))
                self._next_offset = m.offset() + 1
            self._applied.notify_all()

    def _wait_for(self, offset: int, deadline: float) -> None:
        with self._applied:
            while self._next_offset < offset:
                if self.error is not None:
                    raise store_error(self.error)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise timeout_error(f"{self.topic} not read up to offset {offset}")
                self._applied.wait(left)

    def catch_up(self, timeout: float = TIMEOUT_S) -> None:
        if self._watermarks is None:
            raise store_error("the store is not started")
        deadline = time.monotonic() + timeout
        while True:  # short tries: a leader that just died must not take the whole timeout
            try:
                with self._watermarks_lock:
                    if self._watermarks is None:
                        raise store_error(self.error or "the store is closed")
                    _, high = self._watermarks.get_watermark_offsets(
                        TopicPartition(self.topic, 0), timeout=WATERMARK_TRY_S
                    )
                break
            except KafkaException as e:
                # a new client asks the metadata afresh: one that asked a leader that died
                # may keep asking it
                with self._watermarks_lock:
                    if self._watermarks is not None:
                        self._watermarks.close()
                        self._watermarks = self._watermark_client()
                if time.monotonic() + WATERMARK_TRY_S > deadline:
                    raise timeout_error(f"end offset of {self.topic}: {e}") from None
        self._wait_for(high, deadline)

    def write(self, records: Sequence[Record], timeout: float = TIMEOUT_S) -> None:
        if self._producer is None:
            raise store_error("the store is not started")
        deadline = time.monotonic() + timeout
        offsets: list[int] = []
        failures: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                offsets.append(msg.offset())

        for key, value in records:
            self._producer.produce(
                self.topic, encode_value(value), key.encode(), partition=0, on_delivery=delivered
            )
        left = self._producer.flush(timeout)
        if failures or left:
            raise store_error(failures[0] if failures else "write timed out")
        self._wait_for(max(offsets) + 1, deadline)

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._producer is not None:
            self._producer.flush(5)
        with self._watermarks_lock:
            if self._watermarks is not None:
                self._watermarks.close()
                self._watermarks = None
