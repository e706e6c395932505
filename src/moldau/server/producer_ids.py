"""Producer ids for idempotent (and transactional) producers.

As Kafka's ProducerIdManager: the controller hands out blocks of ids, recorded durably in
the metadata log, so an id is never given twice, across restarts and across brokers; the
broker serves ids from its current block and asks for the next when it runs out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from moldau.server.node_to_controller import NodeToControllerChannel


class ProducerIdManager:
    def __init__(
        self, broker_id: int, channel: NodeToControllerChannel, broker_epoch: Callable[[], int]
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self._block = range(0)
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if not self._block:
                self._block = await self.channel.allocate_producer_ids(
                    self.broker_id, self.broker_epoch()
                )
            pid = self._block[0]
            self._block = self._block[1:]
            return pid
