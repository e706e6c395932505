"""Many, idle, stalled and greedy connections: memory follows what has arrived, and
Kafka's connection limits and timeouts hold, while a normal client is served."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest

from tests.integration.helpers import (
    METADATA_VERSION,
    PRODUCE_VERSION,
    RawClient,
    Rec,
    assert_log_matches,
    batch_of,
    consume_confluent,
    create_topic,
    encode_request,
    framed,
    make_records,
    metadata_request,
    produce_request,
    roundtrip_ok,
)
from tests.robustness.conftest import Broker, Start

MiB = 1024 * 1024


def rss_mb(b: Broker) -> float:
    assert b.proc is not None
    with open(f"/proc/{b.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def connect(b: Broker, n: int) -> list[socket.socket]:
    return [socket.create_connection((b.host, b.port), timeout=10) for _ in range(n)]


def stall(sock: socket.socket, declared: int, sent: int) -> None:
    """Start a frame of ``declared`` bytes (a Metadata request header) and stop after ``sent``."""
    head = b"\x00\x03\x00\x0c\x00\x00\x00\x07"
    sock.sendall(declared.to_bytes(4, "big") + head + bytes(sent - len(head)))


def served_within(b: Broker, topic: str, seconds: float) -> float:
    """A Metadata request on a new connection is answered; returns how long it took."""
    start = time.monotonic()
    with RawClient(b.bootstrap, timeout=seconds) as raw:
        (t,) = raw.request(metadata_request([topic]), METADATA_VERSION).topics
    took = time.monotonic() - start
    assert t.name == topic and t.error_code == 0
    return took


@contextmanager
def closing_all(socks: list[socket.socket]) -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        for s in socks:
            stack.enter_context(s)
        yield socks


@pytest.mark.slow
def test_idle_and_stalled_connections_keep_memory_bounded(start_broker: Start, topic: str) -> None:
    """300 idle connections and 50 that each declare a 100 MB frame and send 512 KiB of
    it: RSS stays under 300 MB (declared sizes would be 5 GB) and a normal client is
    served within a second throughout."""
    b = start_broker()
    create_topic(b.bootstrap, topic, 2)
    baseline = rss_mb(b)
    peak = baseline
    with closing_all(connect(b, 300)) as idle, closing_all(connect(b, 50)) as stalled:
        for s in stalled:
            stall(s, 100 * MiB, 512 * 1024)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            peak = max(peak, rss_mb(b))
            assert served_within(b, topic, 5) < 1.0, "a normal client waited over a second"
            time.sleep(0.1)
        roundtrip_ok(b.bootstrap, topic, seed=1)
        peak = max(peak, rss_mb(b))
        assert all(s.fileno() >= 0 for s in idle + stalled)
    assert peak < 300, f"RSS reached {peak:.0f} MB (from {baseline:.0f} MB)"
    assert b.alive and not b.tracebacks()


def test_reading_waits_for_request_memory_then_resumes(start_broker: Start, topic: str) -> None:
    """queued.max.request.bytes at 1 MiB: a client holding it all with a partial frame
    makes the next request wait (the broker stops reading) until that memory returns."""
    b = start_broker({"queued.max.request.bytes": str(MiB), "socket.request.max.bytes": str(MiB)})
    create_topic(b.bootstrap, topic, 1)
    request = framed(encode_request(metadata_request([topic]), METADATA_VERSION, 1))
    with socket.create_connection((b.host, b.port)) as hog, RawClient(b.bootstrap) as waiter:
        stall(hog, MiB, 600 * 1024)  # the buffer has grown to 1 MiB: the pool is spent
        time.sleep(0.3)
        waiter.send_bytes(request)
        waiter.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiter.sock.recv(1)
        waiter.sock.settimeout(10)
        hog.close()
        frame = waiter.recv_frame()
    assert frame is not None and frame[:4] == (1).to_bytes(4, "big")
    assert served_within(b, topic, 5) < 5
    assert b.alive and not b.tracebacks()


def test_many_large_requests_through_a_small_pool(start_broker: Start, topic: str) -> None:
    """Eight producers trickle ~1 MB produce requests side by side through a 1 MiB pool:
    their frames grow together until all of them wait for memory, and still every
    request is answered and every record is in the log."""
    b = start_broker({"queued.max.request.bytes": str(MiB), "socket.request.max.bytes": str(MiB)})
    create_topic(b.bootstrap, topic, 8)
    values = make_records(8 * 3 * 220, seed=5, headers=False)  # ~150 B values: ~40 KB/batch
    records = [Rec(None, r.value) for r in values]  # no keys: partitions are chosen here
    sent: dict[int, list[Rec]] = {}
    failures: list[str] = []

    def producer(p: int) -> None:
        try:
            with RawClient(b.bootstrap, timeout=60) as raw:
                for i in range(3):
                    chunk = records[(p * 3 + i) * 220 : (p * 3 + i + 1) * 220]
                    payload = encode_request(
                        produce_request(topic, {p: batch_of(chunk)}), PRODUCE_VERSION, i + 1
                    )
                    frame = framed(payload + bytes(900_000))  # padding: ignored trailing bytes
                    for at in range(0, len(frame), 16 * 1024):
                        raw.send_bytes(frame[at : at + 16 * 1024])
                        time.sleep(0.001)
                    response = raw.recv_frame()
                    assert response is not None, "connection closed"
                    assert response[:4] == (i + 1).to_bytes(4, "big")
                    sent.setdefault(p, []).extend(chunk)
        except Exception as e:  # noqa: BLE001 - reported below, with the partition
            failures.append(f"producer {p}: {e!r}")

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    expected = [r for p in range(8) for r in sent[p]]
    assert_log_matches(expected, consume_confluent(b.bootstrap, topic), check_headers=False)
    assert b.alive and not b.tracebacks()


def test_stalled_and_idle_connections_are_closed(start_broker: Start, topic: str) -> None:
    b = start_broker({"socket.request.read.timeout.ms": "500", "connections.max.idle.ms": "2000"})
    create_topic(b.bootstrap, topic, 1)
    with (
        RawClient(b.bootstrap) as stalled,
        RawClient(b.bootstrap) as idle,
        RawClient(b.bootstrap) as busy,
    ):
        stall(stalled.sock, 1000, 20)
        assert stalled.is_closed_by_peer(timeout=5), "stalled mid-frame, still open"
        assert not idle.is_closed_by_peer(timeout=0.5), "idle closed too early"
        for _ in range(6):  # 3 s of traffic: never idle
            busy.request(metadata_request([topic]), METADATA_VERSION)
            time.sleep(0.5)
        assert idle.is_closed_by_peer(timeout=5), "idle past connections.max.idle.ms"
        busy.request(metadata_request([topic]), METADATA_VERSION)
    assert any("stalled mid-frame" in line for line in b.output)
    assert b.alive and not b.tracebacks()


def test_max_connections_per_ip_and_overrides(start_broker: Start, topic: str) -> None:
    b = start_broker(
        {"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.2:4"}
    )
    create_topic(b.bootstrap, topic, 1)
    with RawClient(b.bootstrap) as first, RawClient(b.bootstrap) as second:
        with RawClient(b.bootstrap) as third:
            assert third.is_closed_by_peer(timeout=5), "a third connection from 127.0.0.1"
        for raw in (first, second):
            raw.request(metadata_request([topic]), METADATA_VERSION)
        others = [socket.create_connection((b.host, b.port), source_address=("127.0.0.2", 0))]
        others += [
            socket.create_connection((b.host, b.port), source_address=("127.0.0.2", 0))
            for _ in range(4)
        ]
        with closing_all(others):
            for s in others[:4]:
                s.sendall(framed(encode_request(metadata_request([topic]), METADATA_VERSION)))
                assert len(s.recv(4)) == 4, "127.0.0.2 may have 4 connections"
            others[4].settimeout(5)
            assert others[4].recv(1) == b"", "a fifth from 127.0.0.2"
    assert any("Rejected connection from 127.0.0.1" in line for line in b.output)
    time.sleep(0.2)  # closes are counted on the broker's side
    assert served_within(b, topic, 5) < 5


def test_max_connections_waits_for_a_free_slot(start_broker: Start, topic: str) -> None:
    """As Kafka's acceptor: at max.connections new connections wait (in the backlog)
    until one closes, instead of being refused."""
    b = start_broker({"max.connections": "3"})
    create_topic(b.bootstrap, topic, 1)
    time.sleep(0.5)  # the admin client's connections are gone
    request = framed(encode_request(metadata_request([topic]), METADATA_VERSION, 5))
    with closing_all(connect(b, 3)) as held, RawClient(b.bootstrap) as waiting:
        for s in held:
            s.sendall(request)
            assert len(s.recv(4)) == 4
        waiting.send_bytes(request)
        waiting.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiting.sock.recv(1)
        held[0].close()
        waiting.sock.settimeout(10)
        frame = waiting.recv_frame()
        assert frame is not None and frame[:4] == (5).to_bytes(4, "big")
    assert any("max.connections (3) reached" in line for line in b.output)


def test_max_connection_creation_rate(start_broker: Start, topic: str) -> None:
    """max.connection.creation.rate=5: 15 connections take at least two seconds to be
    accepted, and every one of them is served."""
    b = start_broker({"max.connection.creation.rate": "5"})
    create_topic(b.bootstrap, topic, 1)
    time.sleep(1.1)  # a fresh rate window
    answered: list[float] = []
    start = time.monotonic()

    def client() -> None:
        served_within(b, topic, 30)
        answered.append(time.monotonic() - start)

    threads = [threading.Thread(target=client) for _ in range(15)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answered) == 15
    assert max(answered) >= 1.8, f"15 connections at 5/s served in {max(answered):.2f} s"
