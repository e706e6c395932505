"""Acting where a partition's leader is: in-process when this node leads it, else with a
request to the leader's inter-broker listener (transaction markers, KIP-890 checks)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from moldau.metadata.image import MetadataImage
from moldau.protocol.client import NetworkClient

T = TypeVar("T")


class LeaderRouter:
    def __init__(
        self,
        node_id: int,
        image: Callable[[], MetadataImage],
        network: NetworkClient,
        listener: str | None,
    ) -> None:
        self.node_id = node_id
        self.image = image
        self.network = network
        self.listener = listener

    async def call(
        self,
        leader: int,
        local: Callable[[], Awaitable[T]],
        request: Callable[[], tuple[Any, int]],
        answer: Callable[[Any], T],
        unreachable: Callable[[], T],
        *,
        timeout_ms: int | None = None,
    ) -> T:
        """``local()`` on the leader itself; elsewhere ``answer`` to the response to
        ``request()`` (message, version), or ``unreachable()`` when the leader has no
        endpoint. A network failure raises ConnectionError or TimeoutError."""
        if leader == self.node_id:
            return await local()
        broker = self.image().brokers.get(leader)
        address = broker.address(self.listener) if broker is not None else None
        if address is None:
            return unreachable()
        message, version = request()
        return answer(await self.network.send(address, message, version, timeout_ms=timeout_ms))
