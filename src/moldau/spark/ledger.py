"""Which batches a write task already landed: one committed group offset per (write, task).

Task `P` of write `W` (a streaming query id, or one batch write's id) owns the consumer
group `<prefix>-W-P` and, in it, the offset of `__moldau_spark_commits` partition 0: offset
`N + 1` with metadata `W:N:R` means "batches before N, and the first R rows of batch N, of
this task are in the output". Spark runs micro-batches in order and only ever replays the
last one, so one entry per task is the whole history. R is there because a task can commit
and still fail: when a task's upstream fails, Spark ends the Python writer's input early,
as if it were complete, and fails the task afterwards; the retry writes only the rest. The exactly-once sink commits that offset inside the task's
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
EVERYTHING = 2**62


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

    def written(self, batch_id: int) -> int:
        """Rows of batch `batch_id` this task already wrote (EVERYTHING if a later batch ran)."""
        asked = [TopicPartition(COMMITS_TOPIC, 0)]
        (answer,) = self._consumer.committed(asked, timeout=TIMEOUT_S * 4)
        if answer.error is not None:
            raise KafkaException(answer.error)
        if answer.offset > batch_id + 1:
            return EVERYTHING
        if answer.offset == batch_id + 1:
            return int((answer.metadata or "").rsplit(":", 1)[1])
        return 0

    def entry(self, batch_id: int, rows: int) -> list[TopicPartition]:
        """The offsets to commit once `rows` rows of batch `batch_id` are written."""
        metadata = f"{self.write_id}:{batch_id}:{rows}"
        return [TopicPartition(COMMITS_TOPIC, 0, batch_id + 1, metadata=metadata)]

    def group_metadata(self) -> object:
        """For `send_offsets_to_transaction` (no generation: the group is never joined)."""
        return self._consumer.consumer_group_metadata()

    def record(self, batch_id: int, rows: int) -> None:
        """Commit the entry outside any transaction (the at-least-once sink)."""
        self._consumer.commit(offsets=self.entry(batch_id, rows), asynchronous=False)

    def close(self) -> None:
        self._consumer.close()
