"""Replica placement, checked against the design documents' worked examples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.controller.placement import broker_order, place
from moldau.protocol.errors import ErrorCode, KafkaError


def two_topics(racks: dict[int, str | None]) -> list[list[int]]:
    """WE-01/WE-02: two topics of 2 partitions, replication factor 2, on an empty cluster
    (the second topic's leaders continue the cluster-wide cursor)."""
    first = place(racks, 2, 2, start=0)
    second = place(racks, 2, 2, start=len(first))
    return first + second


def test_we01_round_robin_without_racks() -> None:
    assert two_topics(dict.fromkeys([1, 2, 3, 4])) == [[1, 2], [2, 3], [3, 4], [4, 1]]


def test_we02_rack_aware() -> None:
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    assert broker_order(racks) == [1, 3, 2, 4]
    assignment = two_topics(racks)
    assert assignment == [[1, 3], [3, 2], [2, 4], [4, 1]]
    assert all({racks[b] for b in replicas} == {"r1", "r2"} for replicas in assignment)
    assert sorted(replicas[0] for replicas in assignment) == [1, 2, 3, 4]


def test_too_few_brokers() -> None:
    with pytest.raises(KafkaError) as e:
        place({1: None, 2: None}, 1, 3)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


@given(
    st.dictionaries(st.integers(0, 20), st.sampled_from([None, "a", "b", "c"]), min_size=1),
    st.integers(1, 30),
    st.integers(0, 100),
    st.data(),
)
def test_placement_invariants(racks, partitions, start, data) -> None:
    if any(r is None for r in racks.values()) and any(r is not None for r in racks.values()):
        racks = {b: r or "a" for b, r in racks.items()}
    rf = data.draw(st.integers(1, len(racks)))
    assignment = place(racks, partitions, rf, start)
    assert len(assignment) == partitions
    for replicas in assignment:
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(racks)
        # As many racks as the replication factor allows.
        assert len({racks[b] for b in replicas}) == min(rf, len(set(racks.values())))
    leaders = [replicas[0] for replicas in assignment]
    counts = [leaders.count(b) for b in racks]
    assert max(counts) - min(counts) <= 1 or partitions < len(racks)
