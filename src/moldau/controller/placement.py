"""Replica placement: which brokers hold a new partition's replicas, leader first.

As the design documents describe (and Kafka's classic assignment does):

- brokers are sorted by id; with racks, the racks are sorted and the brokers are taken
  alternately from each rack (rack A's first, rack B's first, rack A's second, ...), so
  neighbours in the order sit in different racks;
- leaders go round robin over that order, continuing across topics (a cluster-wide cursor:
  the number of partitions placed so far), so leaders stay balanced;
- a partition's followers take the next brokers after its leader, preferring brokers in
  racks the partition does not use yet, so each partition spans as many racks as it can.

Only live (unfenced) brokers are candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from moldau.protocol.errors import ErrorCode, KafkaError


def broker_order(racks: Mapping[int, str | None]) -> list[int]:
    """Brokers in placement order: by id, or alternating over sorted racks."""
    if all(rack is None for rack in racks.values()):
        return sorted(racks)
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack or "", []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    return [col[i] for i in range(max(map(len, columns))) for col in columns if i < len(col)]


def place(
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    start: int = 0,
) -> list[list[int]]:
    """Replica lists (leader first) for ``partitions`` new partitions.

    ``racks`` maps each live broker to its rack (or None); ``start`` is the cluster-wide
    leader cursor. Raises INVALID_REPLICATION_FACTOR when there are too few brokers."""
    if replication_factor > len(racks):
        raise KafkaError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(racks)} broker(s) are registered.",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    order = broker_order(racks)
    n = len(order)
    return [_replicas(order, racks, (start + p) % n, replication_factor) for p in range(partitions)]


def _replicas(
    order: Sequence[int], racks: Mapping[int, str | None], first: int, count: int
) -> list[int]:
    chosen = [order[first]]
    used_racks = {racks[order[first]]}
    all_racks = set(racks.values())
    n = len(order)
    for step in range(1, n):
        if len(chosen) == count:
            break
        candidate = order[(first + step) % n]
        rack = racks[candidate]
        if rack in used_racks and used_racks != all_racks:
            continue  # a rack this partition does not use yet comes first
        chosen.append(candidate)
        used_racks.add(rack)
    for step in range(1, n):  # racks exhausted: any broker not yet chosen
        if len(chosen) == count:
            break
        candidate = order[(first + step) % n]
        if candidate not in chosen:
            chosen.append(candidate)
    return chosen
