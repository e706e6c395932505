"""A real broker's /metrics against a workload of real clients whose effects are known.

Two topics get records of known sizes from confluent-kafka; one group reads everything and
commits known positions then leaves, another stays subscribed. The scrape must agree with
the workload and with what the Kafka protocol says (high watermarks, committed offsets).
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from moldau import metrics
from moldau.testing import BrokerProcess
from tests.metrics.helpers import Samples, free_port

ORDERS, PAYMENTS, IDLE = "orders", "payments", "idle"
ORDER_PARTITIONS = 3
ROUNDS = 4
PER_ROUND = 50
PER_PARTITION = ROUNDS * PER_ROUND
ORDER_VALUE = 100  # bytes
PAYMENT_COUNT = 40
PAYMENT_VALUE = 1000
KEY = 8
BILLING_COMMITS = {0: 200, 1: 120, 2: 0}  # billing's committed offsets: lag 0, 80, 200
REQUEST_PARTS = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems")
M = "kafka_network_requestmetrics_"


def _consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def _consume(consumer: Consumer, count: int, timeout_s: float = 30) -> int:
    got, deadline = 0, time.monotonic() + timeout_s
    while got < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got += 1
    return got


@pytest.fixture(scope="module")
def workload(metered: tuple[BrokerProcess, str]) -> Iterator[dict[str, object]]:
    """Produce, consume, commit; the audit consumer stays in its group until the end."""
    broker, url = metered
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic(ORDERS, ORDER_PARTITIONS, 1), NewTopic(PAYMENTS, 1, 1), NewTopic(IDLE, 1, 1)]
    )
    for f in futures.values():
        f.result(30)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5,
         "compression.type": "none"}
    )  # fmt: skip
    concurrent: list[Samples] = []  # taken while records flow
    after_round: list[Samples] = []  # taken once each round is acknowledged
    stop = threading.Event()

    def scrape_meanwhile() -> None:
        while not stop.is_set():
            concurrent.append(Samples.scrape(url))

    scraper = threading.Thread(target=scrape_meanwhile)
    scraper.start()
    try:
        for r in range(ROUNDS):
            for i in range(r * PER_ROUND, (r + 1) * PER_ROUND):
                for p in range(ORDER_PARTITIONS):
                    producer.produce(ORDERS, b"v" * ORDER_VALUE, b"%08d" % i, partition=p)
            assert producer.flush(30) == 0
            after_round.append(Samples.scrape(url))
        for i in range(PAYMENT_COUNT):
            producer.produce(PAYMENTS, b"p" * PAYMENT_VALUE, b"%08d" % i)
        assert producer.flush(30) == 0
    finally:
        stop.set()
        scraper.join()
    del producer

    billing = _consumer(broker.bootstrap, "billing")
    billing.subscribe([ORDERS])
    assert _consume(billing, ORDER_PARTITIONS * PER_PARTITION) == ORDER_PARTITIONS * PER_PARTITION
    billing.commit(
        offsets=[TopicPartition(ORDERS, p, o) for p, o in BILLING_COMMITS.items()],
        asynchronous=False,
    )
    billing.close()

    audit = _consumer(broker.bootstrap, "audit")
    audit.subscribe([PAYMENTS])
    assert _consume(audit, PAYMENT_COUNT) == PAYMENT_COUNT
    audit.commit(asynchronous=False)
    # Long-polls on an empty topic: fetches parked in the purgatory (remote time).
    idle = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "idle-reader",
         "fetch.wait.max.ms": 300, "enable.auto.commit": False}
    )  # fmt: skip
    idle.assign([TopicPartition(IDLE, 0, 0)])
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        idle.poll(0.1)
    idle.close()
    yield {"admin": admin, "concurrent": concurrent, "after_round": after_round}
    audit.close()


@pytest.fixture(scope="module")
def scraped(metered: tuple[BrokerProcess, str], workload: dict[str, object]) -> Samples:
    return Samples.scrape(metered[1])


def test_messages_and_bytes_in_and_out_per_topic(scraped: Samples):
    messages = scraped.by_topic("kafka_server_brokertopicmetrics_messagesin_total")
    assert messages[ORDERS] == ORDER_PARTITIONS * PER_PARTITION
    assert messages[PAYMENTS] == PAYMENT_COUNT
    assert messages.get(IDLE, 0) == 0
    assert scraped.value("kafka_server_brokertopicmetrics_messagesin_total") == sum(
        messages.values()
    )  # the all-topics series (with the coordinator's own writes)

    bytes_in = scraped.by_topic("kafka_server_brokertopicmetrics_bytesin_total")
    sizes = scraped.series("kafka_log_log_size", "topic", "partition")
    for topic, count, value in (
        (ORDERS, ORDER_PARTITIONS * PER_PARTITION, ORDER_VALUE),
        (PAYMENTS, PAYMENT_COUNT, PAYMENT_VALUE),
    ):
        payload = count * (KEY + value)
        # v2 batches: a 61-byte header per batch, a few bytes of framing per record.
        assert payload < bytes_in[topic] < payload + 61 * count + 12 * count
        # Batches are stored byte for byte as they arrived.
        assert bytes_in[topic] == sum(v for (t, _), v in sizes.items() if t == topic)

    # Each group read each record once: what went out is what came in.
    bytes_out = scraped.by_topic("kafka_server_brokertopicmetrics_bytesout_total")
    assert bytes_out[ORDERS] == bytes_in[ORDERS]
    assert bytes_out[PAYMENTS] == bytes_in[PAYMENTS]
    assert scraped.value("kafka_server_brokertopicmetrics_replicationbytesout_total") == 0


def test_scrapes_during_the_workload_follow_it(workload: dict[str, object]):
    def orders_in(scrapes: object) -> list[float]:
        assert isinstance(scrapes, list)
        name = "kafka_server_brokertopicmetrics_messagesin_total"
        return [s.by_topic(name).get(ORDERS, 0) for s in scrapes]

    # Each round was acknowledged (acks=all) before its scrape: counted exactly.
    per_round = ORDER_PARTITIONS * PER_ROUND
    assert orders_in(workload["after_round"]) == [per_round * (r + 1) for r in range(ROUNDS)]
    meanwhile = orders_in(workload["concurrent"])
    assert meanwhile and meanwhile == sorted(meanwhile)
    assert meanwhile[-1] <= ORDER_PARTITIONS * PER_PARTITION


def test_request_counts_and_time_split_per_api(scraped: Samples):
    requests: dict[str, float] = {}
    for (name, _version), n in scraped.series(M + "requests_total", "request", "version").items():
        requests[name] = requests.get(name, 0) + n
    for api in (
        "ApiVersions", "Metadata", "CreateTopics", "Produce", "Fetch", "FetchConsumer",
        "FindCoordinator", "JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch", "LeaveGroup",
    ):  # fmt: skip
        assert requests.get(api, 0) > 0, api
    assert "FetchFollower" not in requests
    assert requests["Fetch"] == requests["FetchConsumer"]
    for api, count in requests.items():
        total = scraped.value(M + "totaltimems_count", request=api)
        assert total == count, api
        parts = sum(scraped.value(M + f"{part}_sum", request=api) for part in REQUEST_PARTS)
        assert math.isclose(parts, scraped.value(M + "totaltimems_sum", request=api), rel_tol=1e-6)
        assert scraped.value(M + "requestbytes_count", request=api) == count
    # Idle long-polls waited in the purgatory for fetch.wait.max.ms (300 ms): remote time.
    slow_remote = count_above(scraped, M + "remotetimems", 250, request="FetchConsumer")
    assert slow_remote >= 3
    assert count_above(scraped, M + "localtimems", 250, request="FetchConsumer") == 0


def count_above(s: Samples, histogram: str, bound: float, **labels: str) -> float:
    buckets = {float(le): v for (le, *_), v in _buckets(s, histogram, labels).items()}
    at_bound = max(v for le, v in buckets.items() if le <= bound)
    return buckets[math.inf] - at_bound


def _buckets(s: Samples, histogram: str, labels: dict[str, str]) -> dict[tuple[str, ...], float]:
    names = ("le", *labels)
    return {
        k: v
        for k, v in s.series(histogram + "_bucket", *names).items()
        if k[1:] == tuple(labels.values())
    }


def test_consumer_lag_is_high_watermark_minus_committed(scraped: Samples, workload):
    admin = workload["admin"]
    assert isinstance(admin, AdminClient)
    wanted = [TopicPartition(ORDERS, p) for p in range(ORDER_PARTITIONS)]
    group = ConsumerGroupTopicPartitions("billing", wanted)
    offsets = admin.list_consumer_group_offsets([group])["billing"].result(30)
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
    latest = admin.list_offsets({tp: OffsetSpec.latest() for tp in wanted})
    ends = {tp.partition: future.result(30).offset for tp, future in latest.items()}
    assert committed == BILLING_COMMITS
    lag = scraped.series("kafka_consumergroup_lag", "consumergroup", "topic", "partition")
    for p in range(ORDER_PARTITIONS):
        assert (
            lag[("billing", ORDERS, str(p))]
            == ends[p] - committed[p]
            == PER_PARTITION - BILLING_COMMITS[p]
        )
    assert lag[("audit", PAYMENTS, "0")] == 0
    assert scraped.value(
        "kafka_consumergroup_lag_sum", consumergroup="billing", topic=ORDERS
    ) == sum(PER_PARTITION - c for c in BILLING_COMMITS.values())
    current = scraped.series("kafka_topic_partition_current_offset", "topic", "partition")
    assert {p: current[(ORDERS, str(p))] for p in range(ORDER_PARTITIONS)} == ends
    assert scraped.value("kafka_consumergroup_members", consumergroup="billing") == 0
    assert scraped.value("kafka_consumergroup_members", consumergroup="audit") == 1


def test_groups_by_state_and_rebalances(scraped: Samples):
    g = "kafka_coordinator_group_groupmetadatamanager_"
    assert scraped.value(g + "numgroups") == 2  # billing and audit (idle-reader only assigned)
    assert scraped.value(g + "numgroupsempty") == 1  # billing left
    assert scraped.value(g + "numgroupsstable") == 1  # audit is still in
    assert scraped.value(g + "numoffsets") == ORDER_PARTITIONS + 1
    rebalances = "kafka_server_group_coordinator_metrics_group_completed_rebalance_total"
    assert scraped.value(rebalances) == 2


def test_replicas_logs_and_controller(scraped: Samples):
    r = "kafka_server_replicamanager_"
    partitions = ORDER_PARTITIONS + 1 + 1 + 1  # orders, payments, idle, __consumer_offsets-0
    assert scraped.value(r + "partitioncount") == partitions
    assert scraped.value(r + "leadercount") == partitions
    assert scraped.value(r + "underreplicatedpartitions") == 0
    assert scraped.value(r + "offlinereplicacount") == 0
    assert scraped.value("kafka_log_logmanager_offlinelogdirectorycount") == 0
    ends = scraped.series("kafka_log_log_logendoffset", "topic", "partition")
    assert {p: ends[(ORDERS, str(p))] for p in range(ORDER_PARTITIONS)} == dict.fromkeys(
        range(ORDER_PARTITIONS), PER_PARTITION
    )
    assert scraped.value("kafka_log_log_logstartoffset", topic=ORDERS, partition="0") == 0
    assert scraped.value("kafka_log_log_numlogsegments", topic=PAYMENTS, partition="0") == 1
    c = "kafka_controller_kafkacontroller_"
    assert scraped.value(c + "activecontrollercount") == 1
    assert scraped.value(c + "globaltopiccount") == 4
    assert scraped.value(c + "globalpartitioncount") == partitions
    assert scraped.value(c + "offlinepartitionscount") == 0
    assert scraped.value(c + "activebrokercount") == 1
    committed = scraped.value(c + "lastcommittedrecordoffset")
    assert committed > 0
    assert (
        scraped.value("kafka_server_broker_metadata_metrics_last_applied_record_offset")
        == committed
    )
    assert scraped.value("moldau_event_loop_lag_seconds_count") > 0
    assert scraped.value("process_open_fds") > 0


def test_connections_per_listener_follow_the_clients(metered: tuple[BrokerProcess, str]):
    broker, url = metered
    conns = "kafka_server_socket_server_metrics_connection_count"

    def count() -> float:
        return Samples.scrape(url).value(conns, listener="PLAINTEXT")

    def wait_until(ok, what: str) -> None:
        deadline = time.monotonic() + 30
        while not ok(count()):
            assert time.monotonic() < deadline, what
            time.sleep(0.1)

    before = count()
    clients = [Producer({"bootstrap.servers": broker.bootstrap}) for _ in range(3)]
    for client in clients:
        client.list_topics(timeout=10)  # connected
    wait_until(lambda n: n >= before + 3, "connections of new clients not counted")
    for client in clients:
        client.close()  # librdkafka closes every connection of the client
    wait_until(lambda n: n <= before, "connections of closed clients still counted")


def test_no_endpoint_without_metrics_port():
    with BrokerProcess() as broker:
        time.sleep(0.2)
        assert not any(metrics.served_url(line) for line in broker.output)


def test_a_taken_port_is_a_clear_error():
    with socket_bound() as port:
        done = subprocess.run(
            [sys.executable, "-m", "moldau", "server", "--ephemeral",
             "-o", "listeners=PLAINTEXT://127.0.0.1:0", "-o", f"metrics.port={port}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr


class socket_bound:
    """A loopback port held (listening) for the duration of a with block."""

    def __enter__(self) -> int:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen()
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
