"""The broker's channel to the active controller follows the quorum's leadership: a
request stuck on a controller that was cut off is given up for the new one (found by the
network-partition fault test, where every broker was fenced while its heartbeat waited
30 s on the isolated controller)."""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.protocol.client import Address
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.node_to_controller import NodeToControllerChannelManager

OLD, NEW = ("10.0.0.1", 1), ("10.0.0.2", 2)


class Network:
    """The old controller never answers; the new one answers at once."""

    def __init__(self) -> None:
        self.disconnected: list[Address] = []

    async def send(self, address: Address, request: Any, version: int, **_: Any) -> Any:
        if address == OLD:
            await asyncio.Event().wait()
        return {"answered_by": address}

    def disconnect(self, address: Address) -> None:
        self.disconnected.append(address)


def test_a_request_moves_to_the_new_controller() -> None:
    async def test() -> None:
        network = Network()
        leader = {"id": 1}
        channel = NodeToControllerChannelManager(
            network,  # type: ignore[arg-type]
            {1: OLD, 2: NEW},
            lambda: leader["id"],
            timeout_ms=30_000,
        )
        call = asyncio.ensure_future(channel.call(0, 0, object()))
        await asyncio.sleep(0.3)
        assert not call.done()
        leader["id"] = 2  # the quorum elected another controller
        assert await asyncio.wait_for(call, 2) == {"answered_by": NEW}
        assert network.disconnected == [OLD]

    asyncio.run(test())


def test_no_controller_within_the_timeout_is_an_error() -> None:
    async def test() -> None:
        channel = NodeToControllerChannelManager(
            Network(),  # type: ignore[arg-type]
            {1: OLD},
            lambda: 1,
            timeout_ms=300,
        )
        try:
            await asyncio.wait_for(channel.call(0, 0, object()), 5)
        except KafkaError as e:
            assert e.code == ErrorCode.NOT_CONTROLLER
        else:
            raise AssertionError("answered without a controller")

    asyncio.run(test())
