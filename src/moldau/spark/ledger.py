"""Which batches a write task already landed: one committed group offset per (write, task).

Task `P` of write `W` (a streaming query id, or one batch write's id) owns the consumer
group `<prefix>-W-P` and, in it, the offset of `__moldau_spark_commits` partition 0: offset
`N + 1` means "batches up to N of this task are in the output" (metadata `W:N` for people).
Spark runs micro-batches in order and only ever replays the last one, so a single number
per task is the whole history. The exactly-once sink commits that offset inside the task's
Kafka transaction (TxnOffsetCommit), so it becomes visible exactly when the rows do; the
at-least-once sink commits it after its rows are acknowledged.

A group per task, rather than records in a shared topic, keeps lookups independent of
other tasks' open transactions: a shared topic's last stable offset stalls behind any open
transaction, hiding markers committed after it. Lookups ask with `require_stable`
(librdkafka does under `read_committed`), so a pending transactional commit is waited for,
never misread as absent.
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.spark.client import TIMEOUT_S, consumer

COMMITS_TOPIC = "__moldau_spark_commits"


def ensure_topic(config: dict[str, str]) -> None:
    """Create the topic the ledger offsets refer to (brokers refuse offsets of unknown topics)."""
    admin = AdminClient(dict(config))
    futures = admin.create_topics([NewTopic(COMMITS_TOPIC, num_partitions=1)])
    try:
        futures[COMMITS_TOPIC].result(TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def task_name(prefix: str, write_id: str, task: int) -> str:
    """The task's group id, and its transactional id: the same for every attempt of it."""
    return f"{prefix}-{write_id}-{task}"


class TaskLedger:
    """The ledger entry of one task; holds a consumer of the task's group (never subscribes)."""

    def __init__(self, config: dict[str, str], prefix: str, write_id: str, task: int) -> None:
        self.write_id = write_id
        self.group = task_name(prefix, write_id, task)
        self._consumer: Consumer = consumer(
            {**config, "group.id": self.group, "isolation.level": "read_committed"}
        )

    def done(self, batch_id: int) -> bool:
        """True if batch `batch_id` (or a later one) of this task is already in the output."""
        asked = [TopicPartition(COMMITS_TOPIC, 0)]
        (answer,) = self._consumer.committed(asked, timeout=TIMEOUT_S * 4)
        if answer.error is not None:
            raise KafkaException(answer.error)
        return answer.offset > batch_id

    def entry(self, batch_id: int) -> list[TopicPartition]:
        """The offsets to commit once batch `batch_id` is written."""
        metadata = f"{self.write_id}:{batch_id}"
        return [TopicPartition(COMMITS_TOPIC, 0, batch_id + 1, metadata=metadata)]

    def group_metadata(self) -> object:
        """For `send_offsets_to_transaction` (no generation: the group is never joined)."""
        return self._consumer.consumer_group_metadata()

    def record(self, batch_id: int) -> None:
        """Commit the entry outside any transaction (the at-least-once sink)."""
        self._consumer.commit(offsets=self.entry(batch_id), asynchronous=False)

    def close(self) -> None:
        self._consumer.close()
