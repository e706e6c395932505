"""Client quotas: Kafka's precedence and sampled rates step by step, then real clients held
to their byte rates (the rate they get is within 10% of the quota), request-time quotas
reported and enforced by muting, and the KIP-546 APIs' validation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from moldau.metadata.security import quota_entity
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from moldau.protocol.messages.describe_client_quotas_request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from moldau.protocol.messages.metadata_request import MetadataRequest
from moldau.security.quotas import FETCH, PRODUCE, ClientQuotaConfig, ClientQuotas
from moldau.stats.rate import Rate
from tests.integration.helpers import RawClient
from tests.security.secure import Listeners

WINDOW_NUM = 3  # samples of one second: a 2 s minimum window, so rates settle quickly
QUOTA = 1_000_000  # bytes per second
VALUE = 1000


# --- pure parts -------------------------------------------------------------------------


def test_rate_is_kafkas_sampled_rate() -> None:
    rate = Rate(samples=3, window_ms=1000)
    rate.record(1000, 0)
    # A young rate is spread over at least samples-1 windows (Kafka's Rate.windowSize).
    assert rate.window_size_ms(0) == 2000 and rate.per_second(0) == 500
    rate.record(1000, 1500)  # a second sample; one full window elapsed, so still 2 s more
    assert rate.window_size_ms(1500) == 2500 and rate.per_second(1500) == 800
    rate.record(3000, 2600)  # a third sample: the window is now the elapsed time
    assert rate.window_size_ms(2600) == 2600 and rate.per_second(2600) == pytest.approx(5000 / 2.6)
    rate.record(0, 3100)  # the first sample has expired (3 windows old)
    assert rate.per_second(3100) == pytest.approx(4000 / 2.6)
    assert rate.per_second(10_000) == 0  # everything expired


def test_quota_precedence_is_kafkas() -> None:
    q = ClientQuotas(ClientQuotaConfig(samples=3, window_ms=1000))

    def e(**pairs: str | None) -> Any:
        return quota_entity({k.replace("_", "-"): v for k, v in pairs.items()})

    q.update({
        e(user="alice", client_id="app"): {PRODUCE: 1.0},
        e(user="alice", client_id=None): {PRODUCE: 2.0},
        e(user="alice"): {PRODUCE: 3.0},
        e(user=None, client_id="app"): {PRODUCE: 4.0},
        e(user=None): {PRODUCE: 6.0},
        e(client_id="app"): {PRODUCE: 7.0},
        e(client_id=None): {PRODUCE: 8.0, FETCH: 9.0},
    })  # fmt: skip
    assert q.quota(PRODUCE, "alice", "app") == (1.0, (PRODUCE, "alice", "app"))
    assert q.quota(PRODUCE, "alice", "other") == (2.0, (PRODUCE, "alice", "other"))
    assert q.quota(PRODUCE, "bob", "app") == (4.0, (PRODUCE, "bob", "app"))
    assert q.quota(PRODUCE, "bob", "other") == (
        6.0,
        (PRODUCE, "bob", ""),
    )  # shared by bob's clients
    assert q.quota(FETCH, "bob", "other") == (9.0, (FETCH, "", "other"))
    q.update({e(client_id="app"): {PRODUCE: 7.0}})
    assert q.quota(PRODUCE, "bob", "app") == (7.0, (PRODUCE, "", "app"))
    assert q.quota(PRODUCE, "bob", "other") is None


def test_throttle_time_is_kafkas() -> None:
    q = ClientQuotas(ClientQuotaConfig(samples=3, window_ms=1000))
    q.update({quota_entity({"client-id": "c"}): {PRODUCE: 1000.0}})
    assert q.record(PRODUCE, "u", "c", 2000, 0) == 0  # 2000 B over a 2 s window: at the quota
    # 3000 B over 2.1 s is 1429 B/s: throttled (1429 - 1000) / 1000 * 2100 ms.
    assert q.record(PRODUCE, "u", "c", 1000, 100) == 900
    assert q.record(PRODUCE, "u", "other", 10**9, 100) == 0  # no quota for that client


# --- real clients -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    broker = Listeners(
        tmp_path_factory.mktemp("quotas"),
        {"PLAINTEXT": "PLAINTEXT"},
        {"quota.window.num": str(WINDOW_NUM), "quota.window.size.seconds": "1"},
    ).start()
    yield broker
    broker.close()


def alter(raw: RawClient, entity: dict[str, str | None], ops: dict[str, float | None]) -> Any:
    response = raw.request(AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type=k, entity_name=v) for k, v in entity.items()],
        ops=[OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()],
    )]), 1)  # fmt: skip
    return response.entries[0]


def measured_rate(events: list[tuple[float, int]], start: float, end: float) -> float:
    """Bytes per second of the (time, bytes) events between ``start`` and ``end``."""
    return sum(n for t, n in events if start <= t < end) / (end - start)


def test_producer_is_held_to_its_byte_rate(quota_broker: Listeners) -> None:
    bootstrap = quota_broker.bootstrap("PLAINTEXT")
    with RawClient(bootstrap) as raw:
        assert alter(raw, {"client-id": "slow-producer"}, {PRODUCE: QUOTA}).error_code == E.NONE
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "slow-producer",
                         "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 2048})  # fmt: skip
    acked: list[tuple[float, int]] = []
    begin = time.monotonic()
    end = begin + 9
    value = b"x" * VALUE
    while time.monotonic() < end:
        try:
            producer.produce(
                "quota-produce",
                value,
                on_delivery=lambda e, m: e or acked.append((time.monotonic(), len(m.value()))),
            )
        except BufferError:
            producer.poll(0.05)
    producer.flush(30)
    # Kafka lets a new client burst for the first window; past it the rate holds the quota.
    rate = measured_rate(acked, begin + 3, end)
    assert abs(rate - QUOTA) <= 0.1 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"


def test_consumer_is_held_to_its_byte_rate(quota_broker: Listeners) -> None:
    bootstrap = quota_broker.bootstrap("PLAINTEXT")
    # Small batches: a fetch answers at least one whole batch, whatever its max bytes.
    fill = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 16384})
    for _ in range(20_000):
        fill.produce("quota-fetch", b"y" * VALUE)
        fill.poll(0)
    assert fill.flush(60) == 0
    with RawClient(bootstrap) as raw:
        assert alter(raw, {"client-id": "slow-consumer"}, {FETCH: QUOTA}).error_code == E.NONE
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "slow-consumer", "group.id": "q",
                         "enable.auto.commit": False, "fetch.max.bytes": 65536, "message.max.bytes": 65536,
                         "max.partition.fetch.bytes": 65536})  # fmt: skip
    # Small fetches: a throttled fetch is answered empty and its time is lost (as in Kafka),
    # so responses much smaller than a second's quota keep the rate close to it.
    consumer.assign([TopicPartition("quota-fetch", 0, 0)])
    got: list[tuple[float, int]] = []
    begin = time.monotonic()
    end = begin + 15  # a long window: a loaded machine delivers in bursts at its edges
    try:
        while time.monotonic() < end:
            for m in consumer.consume(500, 0.2):
                assert m.error() is None, m.error()
                got.append((time.monotonic(), len(m.value())))
    finally:
        consumer.close()
    assert len(got) < 20_000, "the whole topic came through: no throttling at all"
    rate = measured_rate(got, begin + 3, end)
    assert abs(rate - QUOTA) <= 0.15 * QUOTA, f"{rate:.0f} B/s against a quota of {QUOTA}"


def test_request_quota_throttles_and_mutes(quota_broker: Listeners) -> None:
    with RawClient(quota_broker.bootstrap("PLAINTEXT")) as raw:
        assert alter(raw, {"client-id": None}, {"request_percentage": 0.01}).error_code == E.NONE
        try:
            throttles = []
            for _ in range(5):
                before = time.monotonic()
                response = raw.request(MetadataRequest(topics=None), 12)
                throttles.append((response.throttle_time_ms, time.monotonic() - before))
            assert any(t > 0 for t, _ in throttles), throttles
            # The channel is muted after a throttled response: the next one comes late.
            for (t, _), (_, took) in zip(throttles, throttles[1:], strict=False):
                if t > 0:
                    assert took >= t / 1000 * 0.9, throttles
        finally:
            assert (
                alter(raw, {"client-id": None}, {"request_percentage": None}).error_code == E.NONE
            )


def test_client_quota_apis(quota_broker: Listeners) -> None:
    with RawClient(quota_broker.bootstrap("PLAINTEXT")) as raw:
        assert (
            alter(raw, {"user": "alice", "client-id": None}, {PRODUCE: 5e5, FETCH: 7e5}).error_code
            == E.NONE
        )
        assert alter(raw, {"user": None}, {"request_percentage": 150.0}).error_code == E.NONE
        described = raw.request(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type="user", match_type=0, match="alice")], strict=False), 1)  # fmt: skip
        assert described.error_code == E.NONE
        [entry] = described.entries
        assert {(e.entity_type, e.entity_name) for e in entry.entity} == {
            ("user", "alice"),
            ("client-id", None),
        }
        assert {v.key: v.value for v in entry.values} == {PRODUCE: 5e5, FETCH: 7e5}
        defaults = raw.request(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type="user", match_type=1, match=None)], strict=True), 1)  # fmt: skip
        assert [[v.key for v in e.values] for e in defaults.entries] == [["request_percentage"]]
        assert alter(raw, {"user": "alice", "client-id": None}, {FETCH: None}).error_code == E.NONE
        for entity, ops, message in [
            ({"user": "alice"}, {"producer_byte_rate": 1.5}, "cannot be a fractional value"),
            ({"user": "alice"}, {"producer_byte_rate": -1.0}, "must be greater than 0"),
            ({"user": "alice"}, {"no_such_quota": 1.0}, "Invalid configuration key"),
            ({"ip": "127.0.0.1", "user": "alice"}, {"connection_creation_rate": 1.0}, "IP entity"),
            ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type"),
            ({}, {"producer_byte_rate": 1.0}, "empty client quota entity"),
        ]:
            result = alter(raw, entity, ops)
            assert result.error_code == E.INVALID_REQUEST and message in result.error_message
        bad = raw.request(DescribeClientQuotasRequest(components=[
            ComponentData(entity_type="user", match_type=0, match=None)], strict=False), 1)  # fmt: skip
        assert bad.error_code == E.INVALID_REQUEST
