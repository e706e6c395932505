"""The metrics' parts on real components in-process: the replica manager and its logs
driven by metadata images, the request timer on a real event loop, the snapshot hop to a
busy loop, and the families rendered as Prometheus text and parsed back."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from moldau import metrics
from moldau.clock import ManualScheduler
from moldau.config.topic import LogConfig
from moldau.controller.quorum_controller import QuorumController
from moldau.coordinator.group.config import GroupConfig
from moldau.coordinator.group.service import GroupCoordinatorService
from moldau.metadata.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from moldau.metadata.publisher import MetadataPublisher
from moldau.metrics.endpoint import LoopLagProbe, NodeCollector
from moldau.metrics.families import families
from moldau.metrics.snapshot import (
    BrokerParts,
    ControllerSnapshot,
    GroupSnapshot,
    NodeParts,
    NodeSnapshot,
    RemoteStorageSnapshot,
    ReplicaSnapshot,
    SnapshotTaker,
)
from moldau.protocol.api_keys import ApiKey
from moldau.records.record import build_batch
from moldau.replication.replica_manager import ReplicaManager
from moldau.stats.counters import Histogram, RemoteStorageStats, TopicCounts
from moldau.stats.requests import RequestStats
from moldau.stats.timing import RequestTimer, parked
from moldau.storage.log_manager import LogManager
from tests.metrics.helpers import Samples
from tests.unit.controller.test_quorum_controller import quorum_of_one

RM = "kafka_server_replicamanager_"


class _Families:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        return families(self.snapshot, int(time.time() * 1000), "9.9.9")


def render(snapshot: NodeSnapshot) -> Samples:
    """The snapshot as Prometheus text, parsed back as a scraper would."""
    registry = CollectorRegistry()
    registry.register(_Families(snapshot))
    return Samples.parse(generate_latest(registry).decode())


def topic_image(
    topic: str,
    partitions: dict[int, PartitionImage],
    min_isr: int = 1,
) -> TopicImage:
    return TopicImage(
        topic, topic.encode().ljust(16, b"-"), partitions, {"min.insync.replicas": str(min_isr)}
    )


def cluster(*topics: TopicImage, brokers: int = 3) -> MetadataImage:
    return MetadataImage(
        topics={t.name: t for t in topics},
        topics_by_id={t.topic_id: t.name for t in topics},
        brokers={b: BrokerImage(b, ()) for b in range(1, brokers + 1)},
    )


def part(
    isr: tuple[int, ...],
    leader: int = 1,
    epoch: int = 0,
    partition_epoch: int = 0,
    index: int = 0,
    replicas: tuple[int, ...] = (1, 2, 3),
) -> PartitionImage:
    return PartitionImage(index, replicas, isr, leader, epoch, partition_epoch)


class Node:
    """Node 1's replica manager, logs and group coordinator on a manual clock."""

    def __init__(self, data: Path) -> None:
        self.scheduler = ManualScheduler()
        self.publisher = MetadataPublisher(1)
        self.logs = LogManager([data], {})
        self.rm = ReplicaManager(1, self.logs, self.scheduler, self.config)
        self.publisher.add_listener(self.rm)

        async def no_topic() -> None:
            pass

        self.groups = GroupCoordinatorService(GroupConfig(), 1, self.rm, self.scheduler, no_topic)
        self.controller: QuorumController | None = None
        self.take = SnapshotTaker(
            NodeParts(
                node_id=1,
                broker=BrokerParts(self.rm, self.logs, self.groups, self.publisher),
                controller=lambda: self.controller,
                raft=None,
                requests=lambda: [RequestStats()],
                connections=lambda: {"PLAINTEXT": 2},
                loop_lag=Histogram([0.01]),
            )
        )

    def config(self, topic: str) -> LogConfig:
        t = self.publisher.image.topics.get(topic)
        return LogConfig.from_props(dict(t.configs) if t else {}, {})

    def samples(self) -> Samples:
        return render(self.take())


def test_leader_gauges_and_isr_changes_follow_the_metadata(tmp_path: Path):
    node = Node(tmp_path)
    followed = topic_image("f", {0: part((2, 1, 3), leader=2)})
    node.publisher.publish(cluster(topic_image("t", {0: part((1, 2, 3))}, min_isr=2), followed))
    s = node.samples()
    assert s.value(RM + "partitioncount") == 2
    assert s.value(RM + "leadercount") == 1
    assert s.value(RM + "underreplicatedpartitions") == 0
    assert s.value("kafka_cluster_partition_insyncreplicascount", topic="t", partition="0") == 3
    assert s.value("kafka_cluster_partition_insyncreplicascount", topic="f", partition="0") == 0

    steps = [  # (ISR, leader epoch) -> shrinks, expands, under-replicated, at min, under min
        (((1, 2), 0), (1, 0, 1, 1, 0)),
        (((1,), 0), (2, 0, 1, 0, 1)),
        (((1, 3, 2), 0), (2, 1, 0, 0, 0)),
        (((1, 2), 1), (2, 1, 1, 1, 0)),  # a new leader epoch is an election, not a shrink
        (((3, 1), 1), (3, 2, 1, 1, 0)),  # one change that both removes and adds
    ]
    for n, ((isr, epoch), expected) in enumerate(steps, start=1):
        led = topic_image("t", {0: part(isr, epoch=epoch, partition_epoch=n)}, min_isr=2)
        node.publisher.publish(cluster(led, followed))
        s = node.samples()
        got = (
            s.value(RM + "isrshrinks_total"),
            s.value(RM + "isrexpands_total"),
            s.value(RM + "underreplicatedpartitions"),
            s.value(RM + "atminisrpartitioncount"),
            s.value(RM + "underminisrpartitioncount"),
        )
        assert got == expected, (isr, epoch)
        under = s.value("kafka_cluster_partition_underreplicated", topic="t", partition="0")
        assert under == expected[2]


def test_topic_counters_and_log_gauges_on_append_and_delete(tmp_path: Path):
    async def test() -> None:
        node = Node(tmp_path)
        node.publisher.publish(
            cluster(
                topic_image(
                    "a", {0: part((1,), replicas=(1,)), 1: part((1,), replicas=(1,), index=1)}
                ),
                topic_image("b", {}),
            )
        )
        batches = {
            ("a", 0): build_batch([(b"k", b"v" * 10)] * 3),
            ("a", 1): build_batch([(b"k", b"w")]),
        }
        for tp, batch in batches.items():
            await node.rm.append_records({tp: bytearray(batch)}, required_acks=1)
        s = node.samples()
        size = sum(len(b) for b in batches.values())
        assert s.by_topic("kafka_server_brokertopicmetrics_messagesin_total") == {"a": 4}
        assert s.by_topic("kafka_server_brokertopicmetrics_bytesin_total") == {"a": size}
        assert s.value("kafka_log_log_size", topic="a", partition="0") == len(batches[("a", 0)])
        assert s.value("kafka_log_log_logendoffset", topic="a", partition="0") == 3
        assert s.value("kafka_topic_partition_current_offset", topic="a", partition="1") == 1

        node.publisher.publish(cluster(topic_image("b", {})))  # "a" is deleted
        s = node.samples()
        assert s.by_topic("kafka_server_brokertopicmetrics_messagesin_total") == {}
        assert s.value("kafka_server_brokertopicmetrics_messagesin_total") == 4
        assert s.series("kafka_log_log_size", "topic", "partition") == {}
        assert s.value(RM + "partitioncount") == 0

    asyncio.run(test())


def test_controller_counts_offline_and_unpreferred_leaders(tmp_path: Path):
    node = Node(tmp_path)
    image = cluster(
        topic_image(
            "t",
            {
                0: part((1, 2, 3)),
                1: PartitionImage(1, (1, 2, 3), (), -1, 1, 1),  # no leader
                2: PartitionImage(2, (1, 2, 3), (2, 3), 2, 1, 1),  # not its first replica
            },
        ),
        brokers=3,
    )
    fenced = BrokerImage(3, (), fenced=True)
    image = MetadataImage(
        topics=image.topics,
        topics_by_id=image.topics_by_id,
        brokers={**image.brokers, 3: fenced},
        offset=41,
    )
    c = "kafka_controller_kafkacontroller_"
    assert node.samples().value(c + "activecontrollercount") == 0
    node.controller = QuorumController(quorum_of_one(tmp_path / "metadata"), image)
    s = node.samples()
    assert s.value(c + "activecontrollercount") == 1
    assert s.value(c + "offlinepartitionscount") == 1
    assert s.value(c + "preferredreplicaimbalancecount") == 2
    assert s.value(c + "globalpartitioncount") == 3
    assert (s.value(c + "activebrokercount"), s.value(c + "fencedbrokercount")) == (2, 1)
    assert s.value(c + "lastcommittedrecordoffset") == 41


def _snapshot(**changes: object) -> NodeSnapshot:
    base: dict[str, object] = dict(
        node_id=1, topics={}, all_topics=TopicCounts(), replication_bytes_in=0,
        replication_bytes_out=0, raft=None,
        requests={}, replicas=(), offline_replicas=0, isr_shrinks=0, isr_expands=0,
        cleaner_last_run_end_ms=0, cleaner_last_run_seconds=0.0, uncleanable_partitions=0,
        controller=ControllerSnapshot(), last_applied_offset=-1, groups=(),
        completed_rebalances=0, connections={}, loop_lag=Histogram([1.0]).snapshot(),
    )  # fmt: skip
    base.update(changes)
    return NodeSnapshot(**base)  # type: ignore[arg-type]


def _replica(topic: str, partition: int, hw: int, leader: bool = True) -> ReplicaSnapshot:
    return ReplicaSnapshot(topic, partition, 0, 1, 0, hw, True, leader, 1, 1, 1, hw)


def test_remote_storage_families_have_kafkas_names():
    stats = RemoteStorageStats(copy_bytes=4096, copy_requests=2, fetch_bytes=300, fetch_requests=1)
    remote = RemoteStorageSnapshot(stats, {"t": (4096, 1000, 1), "u": (0, 0, 0)})
    s = render(_snapshot(remote=remote))
    m = "kafka_server_brokertopicmetrics_"
    assert s.value(m + "remotecopybytes_total") == 4096
    assert s.value(m + "remotecopyrequests_total") == 2
    assert s.value(m + "remotefetchbytes_total") == 300
    assert s.value(m + "failedremotefetchrequests_total") == 0
    assert s.series(m + "remotelogsizebytes", "topic") == {("t",): 4096, ("u",): 0}
    assert s.value(m + "remotecopylagbytes", topic="t") == 1000
    assert s.value(m + "remotecopylagsegments", topic="t") == 1


def test_lag_only_where_the_high_watermark_is_known_and_never_negative():
    s = render(
        _snapshot(
            replicas=(_replica("t", 0, 50), _replica("t", 1, 7, leader=False)),
            groups=(GroupSnapshot("g", "Stable", 2, (("t", 0, 20), ("t", 1, 9), ("u", 0, 4))),),
        )
    )
    lag = s.series("kafka_consumergroup_lag", "consumergroup", "topic", "partition")
    assert lag == {("g", "t", "0"): 30, ("g", "t", "1"): 0}  # follower's HW 7 < committed 9
    committed = s.series(
        "kafka_consumergroup_current_offset", "consumergroup", "topic", "partition"
    )
    assert committed == {("g", "t", "0"): 20, ("g", "t", "1"): 9, ("g", "u", "0"): 4}
    assert s.value("kafka_consumergroup_lag_sum", consumergroup="g", topic="t") == 30
    # Only the leader reports a partition's offsets, so series from brokers never collide.
    assert s.series("kafka_topic_partition_current_offset", "topic", "partition") == {
        ("t", "0"): 50
    }
    assert s.value("kafka_server_app_info", version="9.9.9", broker_id="1") == 1


def test_request_time_split_on_a_real_loop():
    stats = RequestStats()

    async def request() -> None:
        timer = RequestTimer()
        timer.start(time.monotonic() - 0.02)  # waited 20 ms for the loop
        stats.identify(ApiKey.FETCH, 11, _FollowerFetch(), 321)
        time.sleep(0.03)  # handler's own work
        await parked(asyncio.sleep(0.1))  # the long-poll
        # A task the request spawned parks too, but that is not the request waiting.
        await asyncio.create_task(parked(asyncio.sleep(0.2)))
        timer.handler_done()
        time.sleep(0.01)  # writing the response
        timer.response_sent()

    asyncio.run(request())
    types = stats.snapshot()
    assert set(types) == {"Fetch", "FetchFollower"}
    fetch = types["FetchFollower"]
    assert fetch.versions == {11: 1} and fetch.size.sum == 321
    queue, local, remote, send, total = (h.sum for h in fetch.times)
    assert 20 <= queue < 25
    assert 230 <= local < 300  # 30 ms of work plus the spawned task's 200 ms
    assert 100 <= remote < 200
    assert 10 <= send < 60
    assert total == pytest.approx(queue + local + remote + send)


class _FollowerFetch:
    replica_id = 2


def test_an_unnamed_request_is_not_recorded():
    stats = RequestStats()

    async def request() -> None:
        timer = RequestTimer()
        timer.start(time.monotonic())
        timer.response_sent()  # a frame closed before it was named

    asyncio.run(request())
    assert stats.snapshot() == {}


@pytest.fixture
def loop_thread() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_a_busy_loop_costs_a_scrape_its_families_not_a_hang(loop_thread: asyncio.AbstractEventLoop):
    collector = NodeCollector(loop_thread, _snapshot, "1", timeout_s=0.2)
    assert any(m.name == "kafka_server_replicamanager_partitioncount" for m in collector.collect())
    loop_thread.call_soon_threadsafe(time.sleep, 1.0)
    started = time.monotonic()
    assert list(collector.collect()) == []
    assert time.monotonic() - started < 0.5


def test_loop_lag_probe_sees_a_blocked_loop(loop_thread: asyncio.AbstractEventLoop):
    lag = Histogram([0.1, 0.2])
    probe = LoopLagProbe(loop_thread, lag, interval_s=0.05)
    loop_thread.call_soon_threadsafe(probe.start)
    time.sleep(0.3)
    loop_thread.call_soon_threadsafe(time.sleep, 0.4)
    time.sleep(0.7)
    loop_thread.call_soon_threadsafe(probe.stop)
    snapshot = lag.snapshot()
    assert snapshot.count >= 5
    assert snapshot.counts[-1] >= 1  # one timer fired at least 200 ms late
    assert snapshot.counts[0] >= 3  # the others on time


def test_cleaner_stats_after_a_pass(tmp_path: Path):
    logs = LogManager([tmp_path], {})
    before = logs.cleaner_stats.last_run_end_ms
    time.sleep(0.01)
    logs.get_or_create_log("c", 0, LogConfig.from_props({"cleanup.policy": "compact"}, {}))
    logs.run_cleaner({("c", 0): 0})
    assert logs.cleaner_stats.last_run_end_ms > before
    assert logs.cleaner_stats.uncleanable_partitions == 0


def test_launcher_helpers():
    assert metrics.overrides(9404) == ["metrics.port=9404", "metrics.host=127.0.0.1"]
    assert metrics.url("::1", 9404) == "http://[::1]:9404/metrics"
    assert metrics.served_url("metrics on http://127.0.0.1:9404/metrics") == (
        "http://127.0.0.1:9404/metrics"
    )
    assert metrics.served_url("listening on 127.0.0.1:9092") is None
    with pytest.raises(ValueError):
        metrics.overrides(0)


def test_a_controller_only_node_serves_its_requests_and_connections():
    """No broker parts (process.roles=controller): the broker's families are zeros, the
    requests of every dispatcher are summed, as Kafka's are per process."""
    a, b = RequestStats(), RequestStats()

    async def serve(stats: RequestStats, requests: int) -> None:  # as a connection's task
        timer = RequestTimer()
        for _ in range(requests):
            timer.start(time.monotonic())
            stats.identify(ApiKey.API_VERSIONS, 3, None, 40)
            timer.handler_done()
            timer.response_sent()

    asyncio.run(serve(a, 2))
    asyncio.run(serve(b, 3))
    take = SnapshotTaker(
        NodeParts(
            node_id=3000,
            broker=None,
            controller=lambda: None,
            raft=None,
            requests=lambda: [a, b],
            connections=lambda: {"CONTROLLER": 4},
            loop_lag=Histogram([0.01]),
        )
    )
    s = render(take())
    assert s.requests("ApiVersions") == 5
    assert (
        s.value("kafka_server_socket_server_metrics_connection_count", listener="CONTROLLER") == 4
    )
    assert s.value(RM + "partitioncount") == 0
    assert s.value("kafka_controller_kafkacontroller_activecontrollercount") == 0
