"""The console's pure parts: payload rendering, charts, time series, metrics parsing,
offset-reset targets. No broker, no browser."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Info, generate_latest

from moldau.admin.offsets import reset_target
from moldau.console.app import format_positions, parse_positions
from moldau.console.charts import line_chart, nice_ceiling
from moldau.console.metrics import (
    BYTES_IN,
    GROUP_LAG,
    GROUP_OFFSET,
    MESSAGES_IN,
    PARTITION_OFFSET,
    Scrape,
)
from moldau.console.model import GroupInfo, GroupOffset, QuorumInfo, QuorumVoter
from moldau.console.registry import framed_id
from moldau.console.render import diff, parse_timestamp, pretty_schema, show, size, timestamp
from moldau.console.series import History, Rates

# --- payloads -------------------------------------------------------------------------------


def test_show_picks_json_then_text_then_hex():
    doc = {"id": 7, "name": "Zoë", "tags": ["a", "b"]}
    shown = show(json.dumps(doc).encode())
    assert shown.kind == "json" and json.loads(shown.text) == doc
    assert "\n" in shown.text and shown.preview == " ".join(shown.text.split())
    assert show(b"plain words").kind == "text"
    assert show(b"{not json").kind == "text"
    binary = bytes([0, 1, 2, 255])
    assert (show(binary).kind, show(binary).text) == ("hex", "00 01 02 ff")
    assert show(None).kind == "null"
    assert show(b"").text == "" and show(b"").kind == "text"


def test_show_forced_formats():
    assert show(b"AB", "hex").text == "41 42"
    forced = show(b"plain", "json")
    assert (forced.kind, forced.note) == ("text", "not JSON")
    assert show(b"\xff\xfe", "text").note == "not UTF-8 text"
    assert show(b'{"a": 1}', "text").kind == "text"


def test_show_truncates_long_values_without_breaking_characters():
    value = ("é" * 5000).encode()  # 10,000 bytes, two per character
    shown = show(value, limit=1001)
    assert shown.kind == "text" and shown.truncated and shown.size == 10_000
    assert shown.text == "é" * 500
    assert shown.expandable


@given(st.binary(max_size=300))
def test_show_never_fails_and_hex_round_trips(data: bytes):
    for fmt in ("auto", "text", "json", "hex"):
        shown = show(data, fmt)
        if shown.kind == "hex":
            assert bytes.fromhex(shown.text.replace(" ", "")) == data
        elif shown.kind == "text":
            assert shown.text == data.decode()


def test_timestamps_are_utc():
    assert timestamp(0) == "1970-01-01 00:00:00.000Z"
    assert timestamp(1_700_000_000_123) == "2023-11-14 22:13:20.123Z"
    assert timestamp(None) == timestamp(-1) == "-"
    assert parse_timestamp("2023-11-14T22:13:20.123") == 1_700_000_000_123
    assert parse_timestamp("2023-11-14 22:13:20Z") == 1_700_000_000_000
    assert parse_timestamp("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    with pytest.raises(ValueError):
        parse_timestamp("yesterday")


def test_sizes():
    assert [size(n) for n in (None, 0, 1023, 1536, 5 * 2**20)] == [
        "-",
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
    ]


def test_tail_positions_round_trip():
    positions = {0: 12, 3: 40, 1: 0}
    assert parse_positions(format_positions(positions)) == positions
    assert parse_positions("") == {}
    with pytest.raises(ValueError):
        parse_positions("0:x")


# --- charts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1), (0.3, 0.5), (1, 1), (1.2, 2), (2.2, 2.5), (3, 5), (7, 10), (4100, 5000)],
)
def test_nice_ceiling(value: float, top: float):
    assert nice_ceiling(value) == pytest.approx(top)


def test_line_chart_draws_each_series_to_scale():
    series = {
        "orders": [(100.0, 0.0), (101.0, 50.0), (102.0, 100.0)],
        "pay": [(100.0, 10.0), (102.0, 20.0)],
    }
    chart = line_chart(series, unit="messages/s")
    assert not chart.empty
    assert [e.name for e in chart.legend] == ["orders", "pay"]
    assert [e.last for e in chart.legend] == [100.0, 20.0]
    svg = str(chart.svg)
    paths = re.findall(r'<path d="([^"]+)"', svg)
    assert len(paths) == 2
    # "orders" rises from the bottom of the plot to its top (the axis top is 100).
    ys = [float(p.split(",")[1]) for p in re.findall(r"[ML]([\d.]+,[\d.]+)", paths[0])]
    assert ys[0] > ys[1] > ys[2]
    assert 'data-max="100"' in svg and 'data-last="20"' in svg


def test_line_chart_escapes_names_and_waits_for_two_points():
    assert line_chart({}).empty
    assert line_chart({"t": [(1.0, 5.0)]}).empty
    svg = str(line_chart({"<b>&": [(1.0, 1.0), (2.0, 2.0)]}).svg)
    assert "<b>&" not in svg and "&lt;b&gt;&amp;" in svg


# --- series ---------------------------------------------------------------------------------


def test_rates_from_counters_survive_resets():
    rates = Rates()
    assert rates.update(10.0, {("m", "t"): 100.0}) == {}
    assert rates.update(12.0, {("m", "t"): 300.0}) == {("m", "t"): 100.0}
    # The counter went down (a broker restarted): count from zero.
    assert rates.update(14.0, {("m", "t"): 40.0}) == {("m", "t"): 20.0}
    assert rates.update(14.0, {("m", "t"): 50.0}) == {}  # no time passed


def test_history_keeps_the_newest_points_and_sums_totals():
    history = History(keep=3)
    for t in range(5):
        history.add(
            float(t), {("lag", "g1", "a"): t, ("lag", "g1", "b"): 10.0, ("messages", "a"): 2.0 * t}
        )
    assert history.select("messages") == {"a": [(2.0, 4.0), (3.0, 6.0), (4.0, 8.0)]}
    assert history.select("lag", "g1")["b"] == [(2.0, 10.0), (3.0, 10.0), (4.0, 10.0)]
    assert history.select("lag") == {}  # keys are one level deeper
    assert history.totals("lag") == {"g1": [(2.0, 12.0), (3.0, 13.0), (4.0, 14.0)]}


# --- metrics --------------------------------------------------------------------------------


def _endpoint(messages: dict[str, int], sizes: dict[tuple[str, int], int], version: str) -> str:
    """Exposition text as prometheus-client writes it, with Kafka's JMX-exporter names."""
    registry = CollectorRegistry()
    counter = Counter(
        MESSAGES_IN.removesuffix("_total"), "messages in", ["topic"], registry=registry
    )
    bytes_in = Counter(BYTES_IN.removesuffix("_total"), "bytes in", registry=registry)
    for topic, n in messages.items():
        counter.labels(topic).inc(n)
        bytes_in.inc(n * 100)
    gauge = Gauge("kafka_log_log_size", "log size", ["topic", "partition"], registry=registry)
    for (topic, partition), n in sizes.items():
        gauge.labels(topic, str(partition)).set(n)
    lag = Gauge(GROUP_LAG, "lag", ["consumergroup", "topic", "partition"], registry=registry)
    lag.labels("g", "orders", "0").set(3)
    lag.labels("g", "orders", "1").set(4)
    Info("kafka_server_app", "app info", registry=registry).info({"version": version})
    return generate_latest(registry).decode()


def test_scrape_sums_counters_and_takes_the_largest_replica_size():
    broker1 = _endpoint({"orders": 10, "pay": 1}, {("orders", 0): 500}, "4.1.0")
    broker2 = _endpoint({"orders": 5}, {("orders", 0): 480, ("orders", 1): 70}, "4.1.0")
    scrape = Scrape.parse([broker1, broker2])
    assert scrape.per_topic(MESSAGES_IN) == {"orders": 15.0, "pay": 1.0}
    assert scrape.per_topic(BYTES_IN) == {}  # the unlabelled aggregate is not a topic
    assert scrape.log_sizes() == {("orders", 0): 500, ("orders", 1): 70}
    assert scrape.group_lag() == {"g": {"orders": 7.0}}  # 3 + 4, reported by both endpoints
    assert scrape.version() == "4.1.0"
    assert scrape.reports_lag() and not Scrape.parse([]).reports_lag()


def test_lag_of_partitions_the_coordinator_does_not_host_comes_from_offsets():
    """In a cluster the group's coordinator knows the committed offsets but may not host
    the partitions: their high watermarks come from their leaders' endpoints."""
    coordinator, leader = CollectorRegistry(), CollectorRegistry()
    gtp = ["consumergroup", "topic", "partition"]
    lag = Gauge(GROUP_LAG, "lag", gtp, registry=coordinator)
    committed = Gauge(GROUP_OFFSET, "committed", gtp, registry=coordinator)
    lag.labels("g", "orders", "0").set(5)
    committed.labels("g", "orders", "0").set(95)
    committed.labels("g", "orders", "1").set(40)
    committed.labels("g", "orders", "2").set(80)  # past what the leader reports: no lag
    ends = Gauge(PARTITION_OFFSET, "hw", ["topic", "partition"], registry=leader)
    ends.labels("orders", "1").set(70)
    ends.labels("orders", "2").set(75)
    scrape = Scrape.parse(generate_latest(r).decode() for r in (coordinator, leader))
    assert scrape.group_lag() == {"g": {"orders": 5.0 + 30.0 + 0.0}}
    assert Scrape.parse([generate_latest(coordinator).decode()]).group_lag() == {
        "g": {"orders": 5.0}  # no leader endpoint: only what the coordinator knows
    }


# --- offsets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "value", "at_time", "expected"),
    [
        ("earliest", None, -1, 10),
        ("latest", None, -1, 50),
        ("offset", 30, -1, 30),
        ("offset", 99, -1, 50),  # clamped to the log end
        ("offset", 0, -1, 10),  # clamped to the log start
        ("shift", -5, -1, 15),
        ("shift", -100, -1, 10),
        ("timestamp", 0, 42, 42),
        ("timestamp", 0, -1, 50),  # nothing that late: the log end
    ],
)
def test_reset_target(strategy: str, value: int | None, at_time: int, expected: int):
    target = reset_target(strategy, current=20, low=10, high=50, value=value, at_time=at_time)
    assert target == expected


def test_reset_target_refusals():
    with pytest.raises(ValueError, match="no committed offset"):
        reset_target("shift", current=None, low=0, high=5, value=1, at_time=-1)
    with pytest.raises(ValueError, match="unknown reset strategy"):
        reset_target("sideways", current=0, low=0, high=5, value=1, at_time=-1)


def test_group_lag_is_high_watermark_minus_committed():
    offsets = (
        GroupOffset("a", 0, committed=7, end_offset=10, owner=None),
        GroupOffset("a", 1, committed=None, end_offset=4, owner="m1"),
        GroupOffset("b", 0, committed=12, end_offset=10, owner=None),  # ahead: never negative
    )
    group = GroupInfo("g", "EMPTY", offsets=offsets)
    assert [o.lag for o in offsets] == [3, None, 0]
    assert group.lag == 3 and group.lag_by_topic() == {"a": 3, "b": 0}
    assert group.topics == ("a", "b")


def test_line_chart_width_is_clamped_to_a_sane_range():
    points = {"t": [(1.0, 1.0), (2.0, 2.0)]}
    assert 'viewBox="0 0 1000 220"' in str(line_chart(points, width=1000).svg)
    assert 'viewBox="0 0 300 220"' in str(line_chart(points, width=10).svg)
    assert 'viewBox="0 0 1600 220"' in str(line_chart({}, width=10**6).svg)


def test_quorum_from_a_cluster_description():
    described = {
        "leader": 2,
        "epoch": 5,
        "high_watermark": 40,
        "voters": [
            {"id": 1, "log_end_offset": 38, "lag": 2},
            {"id": 2, "log_end_offset": 40, "lag": 0},
        ],
        "observers": [{"id": 7, "log_end_offset": 40, "lag": 0}],
    }
    quorum = QuorumInfo.from_described(described)
    assert quorum == QuorumInfo(
        2, 5, 40, (QuorumVoter(1, 38, 2), QuorumVoter(2, 40, 0)), (QuorumVoter(7, 40, 0),)
    )
    assert QuorumInfo.from_described({"error": 35}) is None  # UNSUPPORTED_VERSION
    assert QuorumInfo.from_described({}) is None


def test_schema_diff_and_framing() -> None:
    old = pretty_schema('{"type":"record","name":"U","fields":[{"name":"a","type":"int"}]}', "AVRO")
    new = pretty_schema(
        '{"type":"record","name":"U","fields":[{"name":"a","type":"int"},'
        '{"name":"b","type":"string","default":""}]}',
        "AVRO",
    )
    lines = diff(old, new, "v1", "v2")
    assert [k for k, _ in lines[:3]] == ["file", "file", "hunk"]
    added = [line for kind, line in lines if kind == "add"]
    assert any('"name": "b"' in line for line in added)
    assert all(not line.startswith("+") for kind, line in lines if kind in ("same", "del"))
    assert diff(old, old, "v1", "v1") == []
    assert pretty_schema("syntax = 'proto3';", "PROTOBUF") == "syntax = 'proto3';"
    assert framed_id(b"\0\0\0\1\2body") == 258
    assert framed_id(b"\1\0\0\1\2") is None and framed_id(b"\0\0") is None
    assert framed_id(None) is None
