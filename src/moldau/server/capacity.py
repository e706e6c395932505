"""Whether this broker can hold the partitions a request would add, asked before the
controller commits them, so metadata never names a partition this broker could not
create (descriptors, memory maps and disk are checked by the log manager)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from moldau.protocol.errors import KafkaError

if TYPE_CHECKING:
    from moldau.server.services import Services


def local_share(services: Services, partitions: int, replication_factor: int) -> int:
    """How many of ``partitions`` x ``replication_factor`` replicas land here (all of
    them on a single broker; an even share in a cluster)."""
    live = sum(1 for b in services.image.brokers.values() if b.alive) or 1
    return math.ceil(max(partitions, 0) * max(replication_factor, 1) / live)


def capacity_error(services: Services, new_replicas: int) -> KafkaError | None:
    try:
        services.replica_manager.log_manager.check_capacity(new_replicas)
    except KafkaError as e:
        return e
    return None
