"""A failing log dir (Kafka's LogDirFailureChannel) on a 3-node cluster under load.

Node 1 has two log dirs. While confluent-kafka produces (acks=all), its second dir is
replaced by a file (as root, chmod would not stop the broker; a dir that disappears
does): the next checkpoint write there fails with an I/O error, the dir goes offline on
node 1, the partitions it held lose node 1 as leader and ISR member, the partitions of
its first dir keep node 1, DescribeLogDirs reports KAFKA_STORAGE_ERROR, and every
acknowledged record is still there, once, in order."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.integration.helpers import (
    DEADLINE_S,
    Acked,
    Rec,
    assert_log_matches,
    confluent_producer,
    consume_confluent,
    make_records,
)
from tests.metrics.helpers import Samples

pytestmark = pytest.mark.slow

TOPIC = "jbod-failure"
PARTITIONS = 6
KAFKA_STORAGE_ERROR = 56


def log_dirs_of(admin: KafkaAdminClient, broker: int) -> dict[str, dict[str, Any]]:
    (described,) = admin.describe_log_dirs(brokers=[broker])
    return {d["log_dir"]: d for d in described["log_dirs"]}


def wait_until(condition: Any, what: str, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return result


def test_a_failed_log_dir_goes_offline_and_the_rest_keeps_serving(tmp_path: Path) -> None:
    cluster = ClusterProcess(
        3,
        configs={
            **TEST_DEFAULTS,
            # replica.lag.time.max.ms stays at Kafka's 30 s: the leaders must stop waiting
            # for node 1 as soon as the new ISRs are applied, not when it lags too long.
            "replica.high.watermark.checkpoint.interval.ms": "300",
        },
        data_dir=tmp_path / "cluster",
        metrics=True,
    )
    node1 = cluster.nodes[1]
    second = tmp_path / "node1-second-dir"
    node1.configs["log.dirs"] = f"{node1.data_dir},{second}"
    with cluster.start():
        cluster.create_topic(TOPIC, PARTITIONS, replication_factor=3)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        dirs = log_dirs_of(admin, 1)
        in_second = {
            p["partition_index"]
            for t in dirs[str(second)]["topics"]
            if t["name"] == TOPIC
            for p in t["partitions"]
        }
        in_first = set(range(PARTITIONS)) - in_second
        assert in_second and in_first, dirs
        led_in_first = {p for p in in_first if cluster.leader(TOPIC, p) == 1}

        records = make_records(20_000, seed=7)
        acked: Acked = {}
        errors: list[str] = []
        sent: list[Rec] = []
        stop = threading.Event()

        def produce() -> None:
            producer = confluent_producer(
                cluster.bootstrap_servers, acks="all", **{"enable.idempotence": True}
            )

            def on_delivery(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    acked[msg.value()] = (msg.partition(), msg.offset())

            for r in records:
                if stop.is_set():
                    break
                producer.produce(
                    TOPIC,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    on_delivery=on_delivery,
                )
                sent.append(r)
                producer.poll(0)
                time.sleep(0.001)
            producer.flush(DEADLINE_S)

        thread = threading.Thread(target=produce)
        thread.start()
        try:
            wait_until(lambda: len(acked) > 1000, "records acknowledged before the failure")
            second.rename(second.with_name(second.name + ".gone"))
            second.write_bytes(b"not a directory any more")

            wait_until(
                lambda: log_dirs_of(admin, 1)[str(second)]["error_code"] == KAFKA_STORAGE_ERROR,
                "DescribeLogDirs reporting the failed dir",
            )

            def moved_away() -> bool:
                parts = [cluster.partition(TOPIC, p) for p in in_second]
                return all(p["leader"] not in (1, -1) and 1 not in p["isr"] for p in parts)

            # The failed replicas take themselves out of the ISRs (no lag timeout involved).
            wait_until(moved_away, "node 1 out of the failed dir's partitions", timeout=15)

            def acked_per_failed_partition() -> Counter[int]:
                return Counter(p for p, _ in list(acked.values()) if p in in_second)

            acked_then = acked_per_failed_partition()

            def each_moved_on() -> bool:
                now = acked_per_failed_partition()
                return all(now[p] > acked_then[p] + 50 for p in in_second)

            # Each of them, well within replica.lag.time.max.ms: a leader still counting
            # node 1 as a replica about to join the ISR would hold its high watermark
            # until then.
            wait_until(
                each_moved_on,
                "records acknowledged afterwards in each of the failed dir's partitions",
                timeout=15,
            )
        finally:
            stop.set()
            thread.join(DEADLINE_S)

        # The healthy dir's partitions kept node 1 (leader where it led them, in the ISR).
        for p in in_first:
            part = cluster.partition(TOPIC, p)
            assert 1 in part["isr"], part
            if p in led_in_first:
                assert part["leader"] == 1, part
        assert 1 in cluster.serving()
        offline_dirs = Samples.scrape(cluster.metrics_url(1)).value(
            "kafka_log_logmanager_offlinelogdirectorycount"
        )
        assert offline_dirs == 1
        assert not errors, errors[:5]
        produced = [r for r in sent if r.value in acked]
        assert_log_matches(
            produced, consume_confluent(cluster.bootstrap_servers, TOPIC), acked=acked
        )
        admin.close()
