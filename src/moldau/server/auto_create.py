"""Auto topic creation (``auto.create.topics.enable``): a client naming a missing topic
in Metadata or Produce creates it with the broker's defaults, through the controller.
Internal topics and illegal names are never created this way."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from moldau.metadata.topics import is_internal, topic_name_error
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest

if TYPE_CHECKING:
    from moldau.server.services import Services

CREATE_TOPICS_VERSION = 7


async def auto_create_topics(services: Services, names: Iterable[str]) -> None:
    """Create the topics of ``names`` that are missing, legal and not internal. Errors
    (e.g. a concurrent creation) show up as the topic's state in the caller's answer."""
    image = services.image
    missing = sorted(
        {
            n
            for n in names
            if n not in image.topics and not is_internal(n) and not topic_name_error(n)
        }
    )
    # The setting is parsed from its string: only when there is something to create (a
    # produce or metadata request of existing topics, the usual case, skips it).
    if not missing or not services.config.bool("auto.create.topics.enable"):
        return
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=n, num_partitions=-1, replication_factor=-1) for n in missing],
        timeout_ms=30_000,
    )
    await services.controller.call(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, request)
