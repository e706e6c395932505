"""The `moldau` command as a user runs it: subprocesses against a real broker subprocess
(the module-scoped `broker` fixture from conftest.py)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from typer.testing import CliRunner

from moldau.cli.main import app
from moldau.testing import BrokerProcess


def moldau(
    broker: BrokerProcess | None, command: str, input: bytes = b"", ok: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `python -m moldau COMMAND` (shell-split); with ok=True, fail on a non-zero exit."""
    args = shlex.split(command)
    env = dict(os.environ)
    if broker is not None:
        env["MOLDAU_BOOTSTRAP"] = broker.bootstrap
    proc = subprocess.run(
        [sys.executable, "-m", "moldau", *args],
        input=input,
        capture_output=True,
        env=env,
        timeout=120,
    )
    result = subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )
    if ok:
        assert result.returncode == 0, f"{args}: {result.stderr}"
    return result


def failure(broker: BrokerProcess | None, command: str, code: int = 1) -> str:
    """Run a command that must fail with `code`; return its stderr."""
    result = moldau(broker, command, ok=False)
    assert result.returncode == code, (command, result.stdout, result.stderr)
    return result.stderr


def rows(stdout: str) -> list[list[str]]:
    """Cells of a printed table, header line dropped."""
    return [line.split() for line in stdout.splitlines()[1:] if line.strip()]


def produce_lines(broker: BrokerProcess, topic: str, lines: list[str], options: str = "") -> None:
    data = "".join(f"{line}\n" for line in lines).encode()
    result = moldau(broker, f"produce {topic} {options}", input=data)
    assert f"Produced {len(lines)} records" in result.stderr


def consume_all(broker: BrokerProcess, topic: str, expected: int, options: str = "") -> list[str]:
    """Records from the beginning: up to one more than expected, or until 3 s without data."""
    command = f"consume {topic} --from-beginning -n {expected + 1} --timeout-ms 3000 {options}"
    result = moldau(broker, command)
    return result.stdout.splitlines()


# --- without a broker: parsing and usage -------------------------------------------------


def test_help_lists_commands():
    stdout = moldau(None, "--help").stdout
    for command in ("server", "topics", "produce", "consume", "groups", "perf", "console"):
        assert command in stdout


@pytest.mark.parametrize(
    "command",
    [
        "topics create t --partitions 0",
        "topics create t --config no-equals-sign",
        "topics alter t",
        "consume t --offset 3",
        "consume t --group g --partition 0",
        "produce t --idempotent --acks 1",
        "produce t --compression brotli",
        "groups reset-offsets g --topic t",
        "groups reset-offsets g --topic t --to-earliest --to-latest",
        "groups reset-offsets g --topic t --to-datetime yesterday",
    ],
)
def test_usage_errors_exit_2(command: str):
    assert failure(None, command, code=2)


# --- an unreachable cluster: one line naming the address and the cause, at once ---------

EVERY_COMMAND = [
    "topics list",
    "topics describe t",
    "topics create t",
    "produce t",
    "consume t -n 1",
    "groups list",
    "groups describe g",
    "leader-election --all",
    "reassign --list",
    "cluster describe",
    "transactions list",
    "perf produce t -n 10",
    "acls list",
    "users list",
]


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


UNREACHABLE = {
    "closed-port": (closed_port, "connection refused"),
    "unknown-host": (lambda: "no-such-host.invalid:9092", "unknown host 'no-such-host.invalid'"),
}


@pytest.mark.parametrize("case", sorted(UNREACHABLE))
def test_every_command_fails_at_once_on_an_unreachable_cluster(case: str) -> None:
    """In-process (the time is the command's, not an interpreter's start-up)."""
    make_address, cause = UNREACHABLE[case]
    address = make_address()
    runner = CliRunner()
    for command in EVERY_COMMAND:
        started = time.monotonic()
        result = runner.invoke(app, [*shlex.split(command), "-b", address], input="x\n")
        took = time.monotonic() - started
        assert result.exit_code == 1, (command, result.output, result.exception)
        assert len(result.stderr.splitlines()) == 1 and not result.stdout, (command, result.stderr)
        assert f"cannot reach {address}: {cause}" in result.stderr, (command, result.stderr)
        assert took < 5, f"{command}: {took:.1f} s"


@pytest.mark.parametrize("command", ["topics list", "console --port 0"])
def test_an_unreachable_cluster_is_one_line_on_stderr_from_the_process(command: str) -> None:
    address = closed_port()
    stderr = failure(None, f"{command} -b {address}")
    assert stderr == (
        f"Error: cannot reach {address}: connection refused (is a broker listening there?)\n"
    )


# --- topics --------------------------------------------------------------------------------


def test_topic_lifecycle(broker: BrokerProcess):
    moldau(broker, "topics create cli-life --partitions 3 --config retention.ms=123456")
    assert ["cli-life", "3"] in rows(moldau(broker, "topics list").stdout)

    described = moldau(broker, "topics describe cli-life").stdout
    assert "PartitionCount: 3" in described
    assert "retention.ms=123456" in described
    assert [r[0] for r in rows(described.split("\n", 1)[1])] == ["0", "1", "2"]

    moldau(broker, "topics alter cli-life --partitions 5 --config cleanup.policy=compact")
    described = moldau(broker, "topics describe cli-life").stdout
    assert "PartitionCount: 5" in described
    assert "cleanup.policy=compact" in described

    moldau(broker, "topics alter cli-life --delete-config retention.ms")
    assert "retention.ms" not in moldau(broker, "topics describe cli-life").stdout

    moldau(broker, "topics delete cli-life")
    assert "cli-life" not in moldau(broker, "topics list").stdout


def test_topic_errors_are_one_clear_line(broker: BrokerProcess):
    moldau(broker, "topics create cli-errors --partitions 2")
    cases = {
        "topics create cli-errors --partitions 1": "TOPIC_ALREADY_EXISTS",
        "topics describe cli-missing": "UNKNOWN_TOPIC_OR_PART",
        "topics delete cli-missing": "UNKNOWN_TOPIC_OR_PART",
        "topics alter cli-errors --partitions 1": "INVALID_PARTITIONS",
        "topics create cli-bad-config --config retention.ms=soon": "INVALID_CONFIG",
        "consume cli-missing --timeout-ms 100": "UNKNOWN_TOPIC_OR_PART",
        "consume cli-errors --partition 7 --timeout-ms 100": "UNKNOWN_TOPIC_OR_PART",
        "produce cli-errors --partition 7": "UNKNOWN_TOPIC_OR_PART",
    }
    for command, error_name in cases.items():
        stderr = failure(broker, command)
        assert error_name in stderr, (command, stderr)
        assert len(stderr.strip().splitlines()) == 1, (command, stderr)
    moldau(broker, "topics create cli-errors --partitions 1 --if-not-exists")


# --- produce / consume ------------------------------------------------------------------------


def test_produce_consume_keys_headers_exactly(broker: BrokerProcess):
    moldau(broker, "topics create cli-roundtrip --partitions 3")
    sent = [(f"key-{i % 7}", f"value {i} ünïcode [x]") for i in range(300)] + [("empty", "")]
    lines = [f"{key}\t{value}" for key, value in sent]
    produce_lines(broker, "cli-roundtrip", lines, r"--key-separator '\t' -H origin=cli -H n=1")
    options = "--print-key --print-headers --print-offset"
    printed = consume_all(broker, "cli-roundtrip", len(sent), options)
    by_partition: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for line in printed:
        partition, offset, headers, key, value = line.split("\t")
        assert headers == "origin:cli,n:1"
        by_partition[int(partition.removeprefix("Partition:"))].append(
            (int(offset.removeprefix("Offset:")), key, value)
        )
    received = []
    for records in by_partition.values():
        assert [offset for offset, _, _ in records] == list(range(len(records)))
        received += [(key, value) for _, key, value in records]
    assert sorted(received) == sorted(sent)
    # One key lands in one partition, so per key the order of sending is kept.
    for key in {k for k, _ in sent}:
        assert [v for k, v in received if k == key] == [v for k, v in sent if k == key]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_compressed_file_to_partition(
    broker: BrokerProcess, tmp_path: Path, compression: str
):
    topic = f"cli-{compression}"
    moldau(broker, f"topics create {topic} --partitions 2")
    values = [f"{compression}-{i}" * (i % 5 + 1) for i in range(500)]
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"{v}\n" for v in values))
    options = f"--partition 1 --compression {compression} --acks all --idempotent"
    result = moldau(broker, f"produce {topic} --file {source} {options}")
    assert "Produced 500 records" in result.stderr
    printed = consume_all(broker, topic, len(values), "--print-offset")
    assert printed == [f"Partition:1\tOffset:{i}\t{v}" for i, v in enumerate(values)]
    tail = moldau(broker, f"consume {topic} -p 1 --offset 495 -n 5").stdout
    assert tail.splitlines() == values[495:]


def test_produce_without_separator_gives_null_key(broker: BrokerProcess):
    moldau(broker, "topics create cli-nullkey --partitions 1")
    produce_lines(broker, "cli-nullkey", ["a=1", "plain"], "--key-separator =")
    assert consume_all(broker, "cli-nullkey", 2, "--print-key") == ["a\t1", "null\tplain"]


# --- groups ---------------------------------------------------------------------------------


def group_consumer(broker: BrokerProcess, group: str, topic: str, count: int) -> Consumer:
    """A confluent-kafka group member that consumed `count` records and committed them."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received = 0
    deadline = time.monotonic() + 60
    while received < count and time.monotonic() < deadline:
        for message in consumer.consume(count - received, timeout=1):
            assert message.error() is None, message.error()
            received += 1
    assert received == count
    consumer.commit(asynchronous=False)
    return consumer


def lag_rows(broker: BrokerProcess, group: str) -> dict[int, tuple[int, int, int]]:
    """partition -> (current offset, log end offset, lag) from `groups describe`."""
    table = moldau(broker, f"groups describe {group}").stdout.split("\n", 1)[1]
    return {int(r[1]): (int(r[2]), int(r[3]), int(r[4])) for r in rows(table) if r[0] != "-"}


def test_groups_describe_reset_delete(broker: BrokerProcess):
    topic, group = "cli-groups", "cli-lag"
    moldau(broker, f"topics create {topic} --partitions 2")
    keyed = r"--key-separator '\t'"
    produce_lines(broker, topic, [f"k{i}\tv{i}" for i in range(100)], keyed)
    group_consumer(broker, group, topic, 100).close()
    produce_lines(broker, topic, [f"k{i}\tmore{i}" for i in range(10)], keyed)

    assert group in moldau(broker, "groups list").stdout
    lag = lag_rows(broker, group)
    assert sorted(lag) == [0, 1]
    assert sum(current for current, _, _ in lag.values()) == 100
    assert sum(end for _, end, _ in lag.values()) == 110
    assert all(end - current == n for current, end, n in lag.values())

    plan = moldau(broker, f"groups reset-offsets {group} --topic {topic} --to-earliest")
    assert "Dry run" in plan.stderr
    assert [r[-1] for r in rows(plan.stdout)] == ["0", "0"]
    assert lag_rows(broker, group) == lag

    moldau(broker, f"groups reset-offsets {group} --topic {topic}:1 --to-offset 3 --execute")
    after = lag_rows(broker, group)
    assert after[0] == lag[0]
    assert after[1][0] == 3

    moldau(broker, f"groups reset-offsets {group} --topic {topic} --shift-by -1000 --execute")
    assert {p: current for p, (current, _, _) in lag_rows(broker, group).items()} == {0: 0, 1: 0}

    moldau(broker, f"groups delete {group}")
    assert "GROUP_ID_NOT_FOUND" in failure(broker, f"groups describe {group}")


def test_reset_refused_on_active_group(broker: BrokerProcess):
    topic, group = "cli-active", "cli-active-group"
    moldau(broker, f"topics create {topic} --partitions 1")
    produce_lines(broker, topic, ["x", "y"])
    consumer = group_consumer(broker, group, topic, 2)
    try:
        command = f"groups reset-offsets {group} -t {topic} --to-earliest --execute"
        assert "inactive" in failure(broker, command)
        table = moldau(broker, f"groups describe {group}").stdout.split("\n", 1)[1]
        [row] = rows(table)
        assert row[:3] == [topic, "0", "2"]
        assert row[5] != "-"  # owned by the live member
    finally:
        consumer.close()


def test_cli_group_consumer_commits(broker: BrokerProcess):
    topic, group = "cli-group-consume", "cli-console"
    moldau(broker, f"topics create {topic} --partitions 1")
    produce_lines(broker, topic, [str(i) for i in range(20)])
    first = moldau(broker, f"consume {topic} -g {group} --from-beginning -n 12").stdout
    assert first.splitlines() == [str(i) for i in range(12)]
    assert lag_rows(broker, group) == {0: (12, 20, 8)}
    rest = moldau(broker, f"consume {topic} -g {group} -n 9 --timeout-ms 3000").stdout
    assert rest.splitlines() == [str(i) for i in range(12, 20)]


# --- --json ----------------------------------------------------------------------------------


def test_topics_and_groups_json(broker: BrokerProcess):
    topic, group = "cli-json", "cli-json-group"
    moldau(broker, f"topics create {topic} --partitions 2 --config retention.ms=4242")
    listed = json.loads(moldau(broker, "topics list --json").stdout)
    assert {"topic": topic, "partitions": 2, "internal": False} in listed
    [described] = json.loads(moldau(broker, f"topics describe {topic} --json").stdout)
    assert described["partition_count"] == 2
    assert described["configs"] == {"retention.ms": "4242"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
    assert all(p["leader"] in p["replicas"] and p["isr"] for p in described["partitions"])

    produce_lines(broker, topic, [f"k{i}\tv{i}" for i in range(30)], r"--key-separator '\t'")
    group_consumer(broker, group, topic, 30).close()
    produce_lines(broker, topic, ["late"], "--partition 1")
    groups = json.loads(moldau(broker, "groups list --json").stdout)
    assert {"group": group, "type": "classic", "state": "EMPTY", "simple": False} in groups
    described = json.loads(moldau(broker, f"groups describe {group} --json").stdout)
    assert (described["group"], described["state"], described["members"]) == (group, "EMPTY", [])
    offsets = {o["partition"]: o for o in described["offsets"]}
    assert sum(o["current_offset"] for o in offsets.values()) == 30
    assert sum(o["log_end_offset"] for o in offsets.values()) == 31
    assert [o["lag"] for o in sorted(offsets.values(), key=lambda o: o["partition"])] == [0, 1]

    plan = json.loads(
        moldau(broker, f"groups reset-offsets {group} -t {topic} --to-earliest --json").stdout
    )
    assert plan["executed"] is False
    assert [(p["partition"], p["new_offset"]) for p in plan["plan"]] == [(0, 0), (1, 0)]


def test_command_config_file_reaches_the_client(broker: BrokerProcess, tmp_path: Path):
    """Client properties come from --command-config (where SASL/TLS settings will go)."""
    good = tmp_path / "client.properties"
    good.write_text("# a comment\nclient.id=from-file\nsocket.timeout.ms: 20000\n")
    moldau(broker, f"topics create cli-ccfg --partitions 4 --command-config {good}")
    listed = json.loads(moldau(broker, f"topics list --json --command-config {good}").stdout)
    assert {"topic": "cli-ccfg", "partitions": 4, "internal": False} in listed
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=NOT_A_PROTOCOL\n")
    stderr = failure(broker, f"topics list --command-config {bad}")
    assert "security.protocol" in stderr


# --- perf -----------------------------------------------------------------------------------


def test_throttle_and_percentiles():
    from moldau.cli.perf import Throttle, percentile

    throttle = Throttle(rate=100, start=10.0)
    assert throttle.delay(sent=50, now=10.2) == pytest.approx(0.3)  # 50 records are 0.5 s
    assert throttle.delay(sent=50, now=11.0) == 0.0  # behind schedule: no sleep
    assert Throttle(rate=-1, start=0).delay(10**9, 0) == 0.0
    ordered = [float(i) for i in range(1, 101)]
    assert [percentile(ordered, f) for f in (0.5, 0.95, 0.99, 1.0)] == [51.0, 96.0, 100.0, 100.0]
    assert percentile([], 0.5) == 0.0


def test_perf_produce_then_consume(broker: BrokerProcess):
    topic, records, size = "cli-perf", 20_000, 200
    produced = json.loads(
        moldau(
            broker,
            f"perf produce {topic} --partitions 3 -n {records} --record-size {size} "
            "--acks all --compression lz4 --batch-size 65536 --linger-ms 2 --json",
        ).stdout
    )
    assert (produced["records"], produced["failed"]) == (records, 0)
    latency = produced["latency_ms"]
    assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert latency["avg"] <= latency["max"]
    expected_mb_s = records * size / produced["seconds"] / 2**20
    assert produced["mb_per_sec"] == pytest.approx(expected_mb_s, rel=0.01, abs=0.01)

    described = json.loads(moldau(broker, f"topics describe {topic} --json").stdout)
    assert described[0]["partition_count"] == 3
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-perf-check"})
    try:
        total = sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(3)
        )
    finally:
        consumer.close()
    assert total == records

    consumed = json.loads(moldau(broker, f"perf consume {topic} -n {records} --json").stdout)
    assert consumed["records"] == records
    assert consumed["mb"] == round(records * size / 2**20, 2)
    assert 0 < consumed["first_record_ms"] <= consumed["seconds"] * 1000
    grouped = moldau(broker, f"perf consume {topic} -n {records} --group cli-perf-group --json")
    summary = json.loads(grouped.stdout)
    assert summary["records"] == records and summary["rebalance_ms"] > 0
    lag = lag_rows(broker, "cli-perf-group")
    assert sum(current for current, _, _ in lag.values()) == records  # auto-committed


def test_perf_produce_respects_the_throughput_cap(broker: BrokerProcess):
    result = moldau(broker, "perf produce cli-perf-cap --partitions 1 -n 1500 --throughput 1000")
    cells = dict(row[:2] for row in rows(result.stdout))
    assert cells["records"] == "1,500"
    # 1,500 records at no more than 1,000/s take at least 1.5 s, minus the first second's burst.
    assert float(cells["seconds"]) >= 1.4
    assert float(cells["records_per_sec"].replace(",", "")) <= 1100


def test_perf_errors(broker: BrokerProcess):
    assert "UNKNOWN_TOPIC_OR_PART" in failure(broker, "perf produce cli-perf-missing -n 10")
    assert "UNKNOWN_TOPIC_OR_PART" in failure(broker, "perf consume cli-perf-missing -n 10")
    assert failure(broker, "perf produce t -n 0", code=2)
