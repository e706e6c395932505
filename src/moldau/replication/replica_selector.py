"""KIP-392: which replica a consumer should fetch from (Kafka's ``ReplicaSelector``).

``replica.selector.class`` is empty by default (consumers read from the leader); Kafka's
``RackAwareReplicaSelector`` sends a consumer whose ``client.rack`` names a rack without
the leader to an in-sync follower of that rack. The leader answers such a fetch with
``preferred_read_replica`` and no records; the follower then serves the consumer up to its
high watermark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.replication.partition import Partition


def preferred_read_replica(
    partition: Partition,
    racks: Mapping[int, str],
    client_rack: str,
    fetch_offset: int,
    now_ms: int,
) -> int | None:
    """The follower a consumer in ``client_rack`` should read from, None for the leader.

    As Kafka's RackAwareReplicaSelector: candidates are the leader and the in-sync
    followers whose log holds ``fetch_offset``; the leader wins when it is in the client's
    rack, else the rack's follower with the highest log end offset (then the most recently
    caught up)."""
    if not client_rack or racks.get(partition.local_id) == client_rack:
        return None
    candidates = [
        r
        for r in partition.remote.values()
        if racks.get(r.broker_id) == client_rack
        and r.broker_id in partition.isr
        and r.log_start_offset <= fetch_offset <= r.log_end_offset
    ]
    if not candidates:
        return None
    best = max(candidates, key=lambda r: (r.log_end_offset, r.last_caught_up_time_ms - now_ms))
    return best.broker_id
