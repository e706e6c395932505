"""The pure planning rules of the `moldau` data source: no Spark, no broker."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.spark.offsets import (
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetRange,
    check_position,
    from_json_dict,
    plan_ranges,
    rate_limit,
    to_json_dict,
)
from moldau.spark.options import OffsetSpec, parse_read_options, parse_write_options
from moldau.spark.remote_plan import split
from moldau.storage.remote.segment import RemoteLogSegmentId, RemoteLogSegmentMetadata

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_offset_json_is_sorted_numerically_and_round_trips():
    offsets = {("b", 0): 5, ("a", 10): 7, ("a", 2): 3}
    data = to_json_dict(offsets)
    assert json.dumps(data) == '{"a": {"2": 3, "10": 7}, "b": {"0": 5}}'
    assert from_json_dict(json.loads(json.dumps(data))) == offsets


def test_options_follow_spark_kafka_names_and_defaults():
    opts = parse_read_options(
        {**BASE, "kafka.security.protocol": "PLAINTEXT", "isolation.level": "read_committed"},
        streaming=True,
    )
    assert opts.client == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "PLAINTEXT",
        "isolation.level": "read_committed",
    }
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting.kind == "latest"
    assert opts.fail_on_data_loss is True and opts.include_headers is False
    assert parse_read_options(BASE, streaming=False).starting.kind == "earliest"
    plain = parse_read_options({"bootstrap.servers": "h:1", "subscribe": "a"}, streaming=False)
    assert plain.client == {"bootstrap.servers": "h:1", "isolation.level": "read_committed"}
    dirty = parse_read_options(
        {**BASE, "kafka.isolation.level": "read_uncommitted"}, streaming=False
    )
    assert dirty.client["isolation.level"] == "read_uncommitted"


@pytest.mark.parametrize(
    "bad",
    [
        {"subscribe": "a"},  # no bootstrap
        {**BASE, "subscribePattern": "a.*"},  # two subscriptions
        {**BASE, "startingOffsets": "{not json"},
        {**BASE, "endingOffsets": "earliest"},
        {**BASE, "failOnDataLoss": "maybe"},
        {**BASE, "minPartitions": "0"},
        {**BASE, "maxOffsetsPerTrigger": "10"},  # streaming only
        {**BASE, "kafka.isolation.level": "read_dirty"},
    ],
)
def test_bad_options_fail_on_the_driver(bad):
    with pytest.raises(ValueError):
        parse_read_options(bad, streaming=False)


def test_assign_and_pattern_subscriptions():
    assign = parse_read_options(
        {"bootstrap.servers": "h:1", "assign": '{"t": [1, 0], "s": [0]}'}, streaming=False
    ).subscription
    assert assign.assigned == (("s", 0), ("t", 0), ("t", 1))
    pattern = parse_read_options(
        {"bootstrap.servers": "h:1", "subscribePattern": "ev-.*"}, streaming=True
    ).subscription
    assert pattern.matches("ev-1") and not pattern.matches("xev-1")


def test_starting_offsets_json_resolves_earliest_latest_and_defaults():
    spec = OffsetSpec.parse('{"t": {"0": 23, "1": -2, "2": -1}}', "startingOffsets")
    parts = [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    low = dict.fromkeys(parts, 5)
    high = dict.fromkeys(parts, 50)
    resolved = spec.resolve(parts, low, high, {}, missing=EARLIEST)
    assert resolved == {("t", 0): 23, ("t", 1): 5, ("t", 2): 50, ("t", 3): 5}
    assert OffsetSpec("latest").resolve(parts, low, high, {}, missing=EARLIEST)[("t", 3)] == 50


def test_timestamps_resolve_through_offsets_for_times():
    opts = parse_read_options(
        {**BASE, "startingOffsetsByTimestamp": '{"a": {"0": 1000}}'}, streaming=False
    )
    parts = [("a", 0), ("a", 1)]
    assert opts.starting.timestamps_for(parts) == {("a", 0): 1000}
    low, high = {("a", 0): 0, ("a", 1): 0}, {("a", 0): 9, ("a", 1): 9}
    # offsets_for_times answered 4 for a-0; a-1 is not named, so it starts at earliest.
    assert opts.starting.resolve(parts, low, high, {("a", 0): 4}, missing=EARLIEST) == {
        ("a", 0): 4,
        ("a", 1): 0,
    }
    every = parse_read_options({**BASE, "startingTimestamp": "77"}, streaming=True).starting
    assert every.timestamps_for(parts) == {("a", 0): 77, ("a", 1): 77}
    # -1 from offsets_for_times: nothing that late yet, so start at the end.
    assert every.resolve(parts, low, high, {("a", 0): -1, ("a", 1): 3}, missing=LATEST) == {
        ("a", 0): 9,
        ("a", 1): 3,
    }


def test_one_range_per_partition_including_empty_ones():
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 4}
    end = {("t", 0): 100, ("t", 1): 10, ("t", 2): 8}
    assert plan_ranges(start, end) == [
        OffsetRange("t", 0, 0, 100),
        OffsetRange("t", 1, 10, 10),
        OffsetRange("t", 2, 4, 8),
    ]


def test_min_partitions_splits_big_ranges_proportionally_and_contiguously():
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 900, ("t", 1): 100}
    ranges = plan_ranges(start, end, min_partitions=10)
    assert len([r for r in ranges if r.partition == 0]) == 9
    assert len([r for r in ranges if r.partition == 1]) == 1
    for p in (0, 1):
        mine = [r for r in ranges if r.partition == p]
        assert mine[0].start == 0 and mine[-1].end == end[("t", p)]
        assert all(a.end == b.start for a, b in zip(mine, mine[1:], strict=False))


@given(
    backlog=st.dictionaries(st.integers(0, 7), st.integers(0, 10_000), min_size=1, max_size=8),
    limit=st.integers(1, 20_000),
)
def test_rate_limit_never_exceeds_the_limit_and_always_progresses(backlog, limit):
    start = {("t", p): 1000 for p in backlog}
    latest = {("t", p): 1000 + n for p, n in backlog.items()}
    end = rate_limit(start, latest, limit)
    taken = {tp: end[tp] - start[tp] for tp in start}
    assert all(0 <= taken[tp] <= latest[tp] - start[tp] for tp in start)
    assert sum(taken.values()) == min(limit, sum(backlog.values()))


def test_rate_limit_splits_in_proportion_to_backlog():
    start = {("t", 0): 0, ("t", 1): 0}
    end = rate_limit(start, {("t", 0): 3000, ("t", 1): 1000}, 100)
    assert end == {("t", 0): 75, ("t", 1): 25}


def test_lost_data_fails_or_skips_ahead():
    with pytest.raises(DataLossError, match="retention"):
        check_position(("t", 0), 5, 10, 20, fail_on_data_loss=True)
    assert check_position(("t", 0), 5, 10, 20, fail_on_data_loss=False) == 10
    assert check_position(("t", 0), 30, 10, 20, fail_on_data_loss=False) == 20
    assert check_position(("t", 0), 15, 10, 20, fail_on_data_loss=True) == 15


def test_write_topic_option():
    assert parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "out"}).topic == "out"
    assert parse_write_options({"kafka.bootstrap.servers": "h:1"}).topic is None


def test_write_options_are_exactly_once_unless_asked_otherwise():
    base = {"kafka.bootstrap.servers": "h:1"}
    eos = parse_write_options(base)
    assert eos.exactly_once and eos.transactional_id_prefix == "moldau-spark"
    alo = parse_write_options({**base, "deliveryGuarantee": "At-Least-Once"})
    assert not alo.exactly_once
    named = parse_write_options({**base, "transactionalIdPrefix": "etl"})
    assert named.transactional_id_prefix == "etl"
    with pytest.raises(ValueError, match="deliveryGuarantee"):
        parse_write_options({**base, "deliveryGuarantee": "exactly-twice"})


def test_direct_read_split_into_remote_segments_and_a_broker_tail() -> None:
    """`remoteStorage.directRead`: remote pieces stop at the local log start and at the
    first gap in the remote tier; the rest is one broker read; every offset once."""
    sid = RemoteLogSegmentId(uuid.uuid4(), "t", 0, uuid.uuid4())
    segs = [
        RemoteLogSegmentMetadata(sid, a, b, 0, 0, 0, 1, {0: a})
        for a, b in ((0, 9), (10, 19), (20, 29), (40, 49))
    ]
    pieces = split(OffsetRange("t", 0, 5, 60), segs, local_start=25)
    assert [(r.start, r.end, md and md.start_offset) for r, md in pieces] == [
        (5, 10, 0),
        (10, 20, 10),
        (20, 25, 20),
        (25, 60, None),
    ]
    gap = split(OffsetRange("t", 0, 12, 60), segs, local_start=45)
    assert [(r.start, r.end, md and md.start_offset) for r, md in gap] == [
        (12, 20, 10),
        (20, 30, 20),
        (30, 60, None),  # 30-39 is not in the remote tier: the broker reads from there on
    ]
    assert split(OffsetRange("t", 0, 3, 8), segs, local_start=0) == [
        (OffsetRange("t", 0, 3, 8), None)
    ]
