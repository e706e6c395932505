"""How a broker reaches the active controller.

Admin requests a broker cannot decide alone (create/delete topics, partitions, configs,
elections, reassignments), its own lifecycle (registration, heartbeats), ISR changes and
producer-id blocks go to the active controller. A node that is its own quorum calls the
controller in-process; in a cluster the same requests are RPCs to whichever controller
leads the quorum, retried on NOT_CONTROLLER or a lost connection until it answers
(Kafka's forwarding and controller channel). Handlers only see this interface.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from moldau.controller.apis import ControllerApis
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from moldau.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)

log = logging.getLogger(__name__)

CREATE_TOPICS_VERSION = 7
ALLOCATE_PRODUCER_IDS_VERSION = 0
RETRY_BACKOFF_S = 0.05
CONTROLLER_CHECK_S = 0.1  # how often a waiting request checks who leads the quorum


class NodeToControllerChannel:
    """How a broker reaches the active controller (Kafka's NodeToControllerChannel): what
    every channel offers on top of ``call``."""

    async def call(self, api_key: int, version: int, request: Any) -> Any:
        """Send ``request`` to the active controller; its response."""
        raise NotImplementedError

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> range:
        request = AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        response = await self.call(
            ApiKey.ALLOCATE_PRODUCER_IDS, ALLOCATE_PRODUCER_IDS_VERSION, request
        )
        if response.error_code != ErrorCode.NONE:
            raise KafkaError("no producer ids from the controller", ErrorCode(response.error_code))
        start = response.producer_id_start
        return range(start, start + response.producer_id_len)

    async def create_internal_topic(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> None:
        """Create a topic the broker itself needs (``__consumer_offsets``)."""
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
                )
            ]
        )
        response = await self.call(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, request)
        result = response.topics[0]
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise KafkaError(
                f"cannot create {name}: {result.error_message}", ErrorCode(result.error_code)
            )


class InProcessControllerChannel(NodeToControllerChannel):
    """The controller of a quorum of one, called in-process."""

    def __init__(self, apis: ControllerApis) -> None:
        self.apis = apis

    async def call(self, api_key: int, version: int, request: Any) -> Any:
        return await self.apis.handle(api_key, version, request)


class NodeToControllerChannelManager(NodeToControllerChannel):
    """RPCs to the active controller of a KRaft quorum, found from the Raft leader and
    retried until it answers (Kafka's NodeToControllerChannelManager)."""

    def __init__(
        self,
        network: NetworkClient,
        voters: Mapping[int, Address],
        active_controller: Callable[[], int | None],
        *,
        timeout_ms: int = 30_000,
    ) -> None:
        self.network = network
        self.voters = dict(voters)
        self.active_controller = active_controller
        self.timeout_ms = timeout_ms

    async def call(self, api_key: int, version: int, request: Any) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        while True:
            leader = self.active_controller()
            if leader is not None and leader in self.voters:
                try:
                    response = await self._send(leader, request, version, deadline)
                    if getattr(response, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                        return response
                except (ConnectionError, TimeoutError) as e:
                    log.debug("controller %d unreachable: %s", leader, e)
            if loop.time() >= deadline:
                raise KafkaError("no active controller answered", ErrorCode.NOT_CONTROLLER)
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _send(self, leader: int, request: Any, version: int, deadline: float) -> Any:
        """One attempt, given up as soon as another controller leads the quorum: a request
        to a controller cut off from the network would otherwise wait out the whole
        timeout (and a broker's heartbeats with it, until the new controller fences it).
        The connection to the old controller is dropped, as Kafka's channel does."""
        loop = asyncio.get_running_loop()
        address = self.voters[leader]
        attempt = asyncio.ensure_future(
            self.network.send(address, request, version, timeout_ms=self.timeout_ms)
        )
        try:
            while True:
                done, _ = await asyncio.wait({attempt}, timeout=CONTROLLER_CHECK_S)
                if done:
                    return attempt.result()
                if self.active_controller() != leader or loop.time() >= deadline:
                    self.network.disconnect(address)
                    raise TimeoutError(f"controller {leader} did not answer before it changed")
        finally:
            if not attempt.done():
                attempt.cancel()
