"""KIP-1103's share-partition metrics read from a real share-partition state (the share
group service in memory, on a manual clock) at each scrape, as it is driven step by step:
acquire, accept, release, reject, lock expiry; only the leader of a partition reports."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from moldau.admin.share_in_flight import in_flight, parse, total
from moldau.clock import ManualClock
from moldau.coordinator.share.partition import AcknowledgeType as Ack
from moldau.coordinator.share.service import ShareGroupService, ShareSettings
from moldau.ids import SeededIds
from tests.metrics.helpers import Samples
from tests.metrics.test_units import Node, _Families, cluster, part, topic_image

SP = "kafka_server_sharepartitionmetrics_"
ACKS = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
ACQUIRED = "moldau_share_partition_acquired_records"
LOCK_MS = 1_000


def gauges(s: Samples, group: str = "g", topic: str = "t") -> dict[str, float]:
    labels = {"group": group, "topic": topic, "partition": "0"}
    return {
        "in_flight": s.value(SP + "inflightmessagecount", **labels),
        "batches": s.value(SP + "inflightbatchcount", **labels),
        "acquired": s.value(ACQUIRED, **labels),
        "lock_timeouts": s.value(SP + "acquisitionlocktimeout_total", **labels),
    }


def acks(s: Samples) -> dict[str, float]:
    return {t: s.value(ACKS, ackType=t) for t in ("Accept", "Release", "Reject")}


def test_share_partition_gauges_and_meters_follow_its_state(tmp_path: Path):
    node = Node(tmp_path)
    node.publisher.publish(
        cluster(topic_image("t", {0: part((1, 2, 3))}), topic_image("f", {0: part((2, 1), 2)}))
    )
    clock = ManualClock()
    shares = ShareGroupService(
        ShareSettings(record_lock_duration_ms=LOCK_MS),
        clock,
        SeededIds(1),
        lambda key: None,
        lambda group_id: {"share.auto.offset.reset": "earliest"},
    )
    assert node.take.parts.broker is not None
    node.take.parts.broker.shares = shares

    async def share_partition(topic: str):  # noqa: ANN202
        error, sp = await shares.share_partition("g", topic, 0, 0, 100)
        assert not error and sp is not None
        return sp

    sp = asyncio.run(share_partition("t"))
    asyncio.run(share_partition("f"))  # node 2 leads f-0: node 1 does not report it
    s = node.samples()
    assert gauges(s) == {"in_flight": 0, "batches": 0, "acquired": 0, "lock_timeouts": 0}
    assert acks(s) == {"Accept": 0, "Release": 0, "Reject": 0}
    assert not s.series(SP + "inflightmessagecount", "group", "topic", "partition").keys() - {
        ("g", "t", "0")
    }

    sp.acquire("m1", 9, 6, clock.now_ms())  # 0..5 to m1
    sp.acquire("m2", 9, 10, clock.now_ms())  # 6..9 to m2
    s = node.samples()
    assert gauges(s) == {"in_flight": 10, "batches": 2, "acquired": 10, "lock_timeouts": 0}
    labels = {"group": "g", "topic": "t", "partition": "0"}
    assert s.value(SP + "inflightbatchmessagecount_count", **labels) == 2
    assert s.value(SP + "inflightbatchmessagecount_sum", **labels) == 10

    assert not sp.acknowledge("m1", 0, 2, [Ack.ACCEPT])  # the start offset moves to 3
    assert not sp.acknowledge("m1", 3, 4, [Ack.RELEASE])  # available again
    assert not sp.acknowledge("m1", 5, 5, [Ack.REJECT])  # archived
    s = node.samples()
    assert gauges(s) == {"in_flight": 7, "batches": 3, "acquired": 4, "lock_timeouts": 0}
    assert acks(s) == {"Accept": 3, "Release": 2, "Reject": 1}

    clock.advance(LOCK_MS)  # m2's lock on 6..9 runs out
    shares.tick()
    s = node.samples()
    assert gauges(s) == {"in_flight": 7, "batches": 3, "acquired": 0, "lock_timeouts": 4}

    sp.acquire("m1", 9, 10, clock.now_ms())  # 3..4 and 6..9 again, in two batches
    assert not sp.acknowledge("m1", 3, 9, [1, 1, 0, 1, 1, 1, 1])  # 5 is archived: a gap
    s = node.samples()
    assert gauges(s) == {"in_flight": 0, "batches": 0, "acquired": 0, "lock_timeouts": 4}
    assert acks(s) == {"Accept": 9, "Release": 2, "Reject": 1}
    assert s.value(SP + "inflightbatchmessagecount_count", **labels) == 4


def test_share_request_meters_count_each_topic_once_per_request(tmp_path: Path):
    node = Node(tmp_path)
    stats = node.rm.topic_stats
    stats.share_requests(False, {"a", "b"}, set())
    stats.share_requests(False, {"a"}, {"a"})
    stats.share_requests(True, {"b"}, {"b"})
    s = node.samples()
    topics = "kafka_server_brokertopicmetrics_"
    fetches = s.series(topics + "totalsharefetchrequests_total", "topic")
    assert fetches == {("a",): 2, ("b",): 1}
    assert s.series(topics + "failedsharefetchrequests_total", "topic") == {("a",): 1, ("b",): 0}
    assert s.series(topics + "totalshareacknowledgementrequests_total", "topic") == {
        ("a",): 0,
        ("b",): 1,
    }
    assert s.value(topics + "totalsharefetchrequests_total") == 3  # all topics
    assert s.value(topics + "failedshareacknowledgementrequests_total") == 1


def test_in_flight_takes_each_partition_from_its_leaders_endpoint(tmp_path: Path):
    """What `groups describe` does with the scrapes: a partition's count comes from its
    leader's endpoint only; a leader that answered without the share-partition has 0; a
    leader whose endpoint was not read (or an unknown leader) gives None."""
    node = Node(tmp_path)
    node.publisher.publish(cluster(topic_image("t", {0: part((1, 2, 3))})))
    clock = ManualClock()
    shares = ShareGroupService(ShareSettings(), clock, SeededIds(1), lambda key: None)
    assert node.take.parts.broker is not None
    node.take.parts.broker.shares = shares
    error, sp = asyncio.run(shares.share_partition("g", "t", 0, 0, 0))  # latest: 0
    assert not error and sp is not None
    sp.acquire("m", 9, 4, clock.now_ms())
    text = generate_latest_text(node)
    assert parse(text, "g") == (1, {("t", 0): 4})
    assert parse(text, "other") == (1, {})
    tps = [("t", 0), ("t", 1), ("t", 2), ("u", 0)]
    leaders = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2}  # u-0: no leader known
    stale = {("t", 2): 7}  # node 3 reports t-2, which node 2 leads now
    scrapes = {1: parse(text, "g")[1], 3: stale}
    assert in_flight(tps, leaders, scrapes) == {
        ("t", 0): 4,
        ("t", 1): 0,
        ("t", 2): None,
        ("u", 0): None,
    }
    assert total(in_flight(tps[:2], leaders, scrapes).values()) == 4
    assert total(in_flight(tps, leaders, scrapes).values()) is None
    assert total([]) is None


def generate_latest_text(node: Node) -> str:
    registry = CollectorRegistry()
    registry.register(_Families(node.take()))
    return generate_latest(registry).decode()
