"""How a broker reaches the controller.

Admin requests a broker cannot decide alone (create/delete topics, partitions, configs,
producer-id blocks, broker registration) go to the active controller. A node that is its
own quorum calls the controller in-process; in a cluster the same calls become RPCs to
the active controller (Kafka's forwarding). Handlers only see this interface.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from moldau.controller.apis import ControllerApis
from moldau.controller.quorum_controller import ControllerResult
from moldau.metadata.records import MetadataRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)

CREATE_TOPICS_VERSION = 7


class ControllerChannel(Protocol):
    async def call(self, api_key: int, version: int, request: Any) -> Any:
        """Send ``request`` to the active controller; its response."""
        ...

    async def allocate_producer_ids(self, broker_id: int) -> range: ...

    async def create_internal_topic(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> None: ...


class LocalControllerChannel:
    """The controller of a quorum of one, called in-process."""

    def __init__(self, apis: ControllerApis) -> None:
        self.apis = apis

    async def call(self, api_key: int, version: int, request: Any) -> Any:
        return await self.apis.handle(api_key, version, request)

    async def allocate_producer_ids(self, broker_id: int) -> range:
        return await self.apis.allocate_producer_ids(broker_id)

    async def create_internal_topic(
        self, name: str, partitions: int, configs: Mapping[str, str]
    ) -> None:
        """Create a topic the broker itself needs (``__consumer_offsets``), if missing."""
        if name in self.apis.quorum.latest.topics:
            return
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=-1,
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

    async def commit(self, records: Sequence[MetadataRecord]) -> None:
        """Node-level records a quorum of one writes itself (cluster id, registration)."""
        await self.apis.quorum.write(lambda image: ControllerResult(None, list(records)))
