"""moldau.testing.broker(): a real broker process, its helpers, restart and kill."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from moldau.testing import BrokerProcess, ExternalCluster, Record, broker, running_brokers
from moldau.testing.clients import kafka_configs


def accepts_connections(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return False
    return True


def partitions_of(bootstrap: str, topic: str) -> int:
    return len(
        AdminClient({"bootstrap.servers": bootstrap})
        .list_topics(topic, timeout=10)
        .topics[topic]
        .partitions
    )


@pytest.fixture(scope="module")
def shared() -> Iterator[BrokerProcess]:
    with broker(num_partitions=2) as b:
        yield b


def test_keywords_become_kafka_properties() -> None:
    assert kafka_configs({"num_partitions": 3, "auto_create_topics_enable": False}) == {
        "num.partitions": "3",
        "auto.create.topics.enable": "false",
    }


def test_produce_and_consume_round_trip(shared: BrokerProcess) -> None:
    shared.create_topic("round-trip", partitions=3, retention_ms=3_600_000)
    acked = shared.produce(
        "round-trip",
        "text",
        b"bytes",
        ("key", "value"),
        Record(b"with headers", key=b"k", headers=(("h", b"1"),), partition=2),
    )
    assert [(r.value, r.key) for r in acked] == [
        (b"text", None),
        (b"bytes", None),
        (b"value", b"key"),
        (b"with headers", b"k"),
    ]
    assert acked[3].partition == 2
    offsets: dict[int | None, list[int | None]] = {}
    for r in acked:
        offsets.setdefault(r.partition, []).append(r.offset)
    assert all(o == list(range(len(o))) for o in offsets.values()), offsets
    consumed = shared.consume("round-trip", 4)
    assert consumed == sorted(acked, key=lambda r: (r.partition, r.offset))
    assert consumed[-1].headers == (("h", b"1"),)


def test_broker_configs_apply(shared: BrokerProcess) -> None:
    shared.produce("auto-created", "x")  # auto.create.topics.enable: num.partitions of them
    assert partitions_of(shared.bootstrap_servers, "auto-created") == 2


def test_consume_waits_for_count_then_fails_clearly(shared: BrokerProcess) -> None:
    shared.create_topic("slow")
    shared.produce("slow", "one")
    with pytest.raises(AssertionError, match=r"expected at least 2 records in 'slow', found 1"):
        shared.consume("slow", 2, timeout=0.5)
    with pytest.raises(AssertionError, match="does not exist"):
        shared.consume("never-created")


def test_data_dir_is_removed_on_exit() -> None:
    with broker() as b:
        b.produce("t", "x")
        data_dir = b.data_dir
        assert (data_dir / "t-0").is_dir()
        assert b in running_brokers()
    assert not data_dir.exists()
    assert b not in running_brokers()
    assert b.state() == "stopped"


def test_restart_keeps_port_data_and_a_connected_producer(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path) as b:
        address = b.bootstrap_servers
        first = b.produce("t", *[f"r{i}" for i in range(10)])
        producer = Producer({"bootstrap.servers": address, "acks": "all"})
        b.restart()
        assert b.bootstrap_servers == address
        delivered: list[object] = []
        producer.produce("t", b"after", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0 and delivered == [None]
        assert [r.value for r in b.consume("t")] == [r.value for r in first] + [b"after"]
        assert sum("shut down cleanly" in line for line in b.output) == 1
    assert tmp_path.exists(), "a data dir we were given is left alone"


def test_kill_is_unclean_and_acknowledged_records_survive(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path) as b:
        acked = b.produce("t", *[f"r{i}" for i in range(100)])
        proc = b.proc
        b.kill()
        assert proc is not None and proc.returncode == -signal.SIGKILL
        assert b.state() == "stopped" and not accepts_connections(f"127.0.0.1:{b.port}")
        assert not any("shut down cleanly" in line for line in b.output)
        b.start()
        assert b.consume("t", 100) == acked


def test_a_broker_that_cannot_start_says_why() -> None:
    with pytest.raises(RuntimeError, match=r"(?s)did not start.*num.partitions: 'abc' is not"):
        broker(num_partitions="abc").start()


def test_a_crashed_broker_reports_its_exit() -> None:
    with broker() as b:
        assert b.proc is not None
        os.kill(b.proc.pid, signal.SIGKILL)  # from outside, as the OOM killer would
        b.proc.wait(10)
        assert b.state() == f"exited with code {-signal.SIGKILL}"
        b.start()
        assert b.state() == "running"


def test_brokers_start_in_parallel_threads() -> None:
    brokers = [broker() for _ in range(3)]
    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(BrokerProcess.start, brokers))
        assert len({b.bootstrap_servers for b in brokers}) == 3
        for b in brokers:
            b.produce("t", b.bootstrap_servers)
        assert [[r.value for r in b.consume("t")] for b in brokers] == [
            [b.bootstrap_servers.encode()] for b in brokers
        ]
    finally:
        for b in brokers:
            b.close()


def test_async_context_manager_with_aiokafka() -> None:
    async def scenario() -> list[bytes]:
        async with broker() as b:
            producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all")
            await producer.start()
            try:
                for i in range(5):
                    await producer.send_and_wait("events", f"e{i}".encode())
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(
                "events", bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest"
            )
            await consumer.start()
            try:
                got = [m.value for m in await asyncio.wait_for(_take(consumer, 5), 30)]
            finally:
                await consumer.stop()
            assert [r.value for r in await asyncio.to_thread(b.consume, "events", 5)] == got
            return got

    assert asyncio.run(scenario()) == [f"e{i}".encode() for i in range(5)]


async def _take(consumer: AIOKafkaConsumer, n: int) -> list[object]:
    out = []
    async for message in consumer:
        out.append(message)
        if len(out) == n:
            return out
    return out


def test_brokers_do_not_outlive_a_killed_test_process(tmp_path: Path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from moldau.testing import broker
            b = broker().start()
            print(b.bootstrap_servers, b.proc.pid, flush=True)
            time.sleep(600)
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address, pid = proc.stdout.readline().split()
        assert accepts_connections(address)
    finally:
        proc.kill()  # no clean-up code runs: the fork server and the broker must go anyway
        proc.wait()
    # The thread-group leader shows as a zombie while the kernel still tears the other
    # threads down, and the listening socket closes only with the last of them.
    deadline = time.monotonic() + 30
    while (_alive(int(pid)) or accepts_connections(address)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pid)), "the broker outlived its test process"
    assert not accepts_connections(address), "the broker's port outlived its test process"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_moldau_server_ephemeral_removes_its_data_dir() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "moldau", "server", "--ephemeral"]
        + ["-o", "listeners=PLAINTEXT://127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        address = proc.stdout.readline().split()[-1]
        data_dir = Path(re.search(r"ephemeral: data in (\S+),", proc.stderr.readline())[1])
        ExternalCluster(address).produce("t", "x")
        assert (data_dir / "t-0").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    assert not data_dir.exists()
