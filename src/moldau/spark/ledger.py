"""Which micro-batches a streaming query already wrote, kept in `__moldau_spark_commits`.

Spark replays a micro-batch with the same batch id when it crashed before recording the
batch as done. The sink looks the batch up here first and skips what is already written.
Each record is keyed by query id and says `{"batch": N, "task": P}` (task P of batch N is
durable) or `{"batch": N, "task": null}` (the whole batch committed). The topic has one
partition, so markers are totally ordered: all markers of batch N come after batch N-1's,
and a lookup scans backwards from the end only until it passes an older batch of the query.
"""

from __future__ import annotations

import json

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.spark.client import TIMEOUT_S, Cluster, fetch_range, produce_batches
from moldau.spark.offsets import OffsetRange

COMMITS_TOPIC = "__moldau_spark_commits"
SCAN_STEP = 1000


class CommitLedger:
    def __init__(self, config: dict[str, str], query_id: str) -> None:
        self.config = config
        self.query_id = query_id

    @staticmethod
    def ensure_topic(config: dict[str, str]) -> None:
        """Create the ledger topic once (one partition keeps the markers in order)."""
        admin = AdminClient(dict(config))
        futures = admin.create_topics([NewTopic(COMMITS_TOPIC, num_partitions=1)])
        try:
            futures[COMMITS_TOPIC].result(TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def contains(self, batch_id: int, task: int) -> bool:
        """True if task `task` of `batch_id`, or the whole batch, was already written."""
        cluster = Cluster(self.config)
        try:
            low, high = cluster.watermarks([(COMMITS_TOPIC, 0)])
        finally:
            cluster.close()
        end = high[(COMMITS_TOPIC, 0)]
        floor = low[(COMMITS_TOPIC, 0)]
        while end > floor:
            start = max(floor, end - SCAN_STEP)
            for marker in reversed(self._markers(start, end)):
                if marker["batch"] > batch_id or (
                    marker["batch"] == batch_id and marker["task"] in (None, task)
                ):
                    return True
                if marker["batch"] < batch_id:
                    return False
            end = start
        return False

    def record(self, batch_id: int, task: int | None) -> None:
        """Durably note a written task (or, with `task=None`, the committed batch)."""
        marker = json.dumps({"batch": batch_id, "task": task}).encode()
        row = pa.record_batch(
            [pa.array([self.query_id.encode()], pa.binary()), pa.array([marker], pa.binary())],
            names=["key", "value"],
        )
        produce_batches(self.config, iter([row]), COMMITS_TOPIC, [])

    def _markers(self, start: int, end: int) -> list[dict]:
        key = self.query_id.encode()
        markers: list[dict] = []
        r = OffsetRange(COMMITS_TOPIC, 0, start, end)
        for batch in fetch_range(self.config, r, include_headers=False, fail_on_data_loss=False):
            keys = batch.column("key").to_pylist()
            values = batch.column("value").to_pylist()
            markers.extend(json.loads(v) for k, v in zip(keys, values, strict=True) if k == key)
        return markers
