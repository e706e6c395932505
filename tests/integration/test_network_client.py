"""The node-to-node client against a real broker: pipelined requests, timeouts, and a
connection that drops under requests in flight."""

from __future__ import annotations

import asyncio

import pytest

from moldau.protocol.client import NetworkClient
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.metadata_request import MetadataRequest
from tests.integration.helpers import FreshBroker, create_topic


def address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def test_pipelined_requests_and_a_dropped_connection(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker()
    create_topic(b.bootstrap, topic, 1)
    dest = address(b.bootstrap)

    async def run() -> None:
        client = NetworkClient("test", request_timeout_ms=5_000)
        many = await asyncio.gather(
            *(client.send(dest, MetadataRequest(topics=None), 12) for _ in range(20)),
            client.send(dest, ApiVersionsRequest(), 3),
        )
        assert all(topic in {t.name for t in r.topics} for r in many[:-1])
        assert many[-1].error_code == 0
        # A long-poll fetch is in flight when the broker dies: it fails, it does not hang.
        poll = FetchRequest(
            max_wait_ms=30_000,
            min_bytes=1,
            topics=[
                FetchTopic(
                    topic=topic,
                    partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)],
                )
            ],
        )
        waiting = asyncio.ensure_future(client.send(dest, poll, 12))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        b.kill()
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(waiting, 10)
        with pytest.raises(ConnectionError):
            await client.send(dest, ApiVersionsRequest(), 3)
        client.close()

    asyncio.run(run())


def test_request_timeout(fresh_broker: FreshBroker, topic: str) -> None:
    b = fresh_broker()
    create_topic(b.bootstrap, topic, 1)

    async def run() -> None:
        client = NetworkClient("test")
        poll = FetchRequest(
            max_wait_ms=5_000,
            min_bytes=1,
            topics=[
                FetchTopic(
                    topic=topic,
                    partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)],
                )
            ],
        )
        with pytest.raises(TimeoutError):
            await client.send(address(b.bootstrap), poll, 12, timeout_ms=300)
        # The connection stays usable; the late answer is dropped.
        assert (await client.send(address(b.bootstrap), ApiVersionsRequest(), 3)).error_code == 0
        client.close()

    asyncio.run(run())
