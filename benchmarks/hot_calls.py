"""What one produce or fetch request costs the broker, call by call, in this process.

The single-partition side by side (``request_rate --only single``) shows the broker
using a fraction of a core while ``rdkafka_performance`` runs; this measures the pieces
of the per-request path in isolation, so the cost of each can be read without a client
or a loaded machine's scheduling in the way: decoding the request as the dispatcher does
(header and body), encoding and framing the response, validating a produced batch
(headers and CRC-32C), growing a produce frame's receive buffer as the network edge
does, writing the batch to a file, and sendfile of a fetched range to a socket. Figures
are microseconds per call (best of ``--rounds``). The request shapes are librdkafka
2.0.2's: Produce v7 and Fetch v11, one partition, 100 B records in batches of
``--batch-records``. Nothing is asserted; results go to
``benchmarks/results/hot_calls-<UTC time>.json``.

    python -m benchmarks.hot_calls [--batch-records 3500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from crc32c import crc32c

from benchmarks.harness import write_result
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from moldau.protocol.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from moldau.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from moldau.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from moldau.protocol.messages.request_header import RequestHeader
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch
from moldau.server.dispatch import frame_response
from moldau.server.memory_pool import MemoryPool
from moldau.server.network import Connection, NetworkLimits

PRODUCE_VERSION, FETCH_VERSION = 7, 11  # what librdkafka 2.0.2 sends
TOPIC = "single-0123abcd"


def per_call_us(fn: Callable[[], Any], calls: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return round(best / calls * 1e6, 2)


def request(header: RequestHeader, body: Any, version: int) -> memoryview:
    """A request frame as the dispatcher gets it (no size prefix)."""
    return memoryview(b"".join(bytes(p) for p in [*header.encode(1), *body.encode(version)]))


class _Transport:
    """The event loop's side of a connection, for feeding a frame by hand."""

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


def receive_frame_us(frame: bytes, calls: int, rounds: int) -> float:
    """A frame read as uvloop reads it (``get_buffer``, copy, ``buffer_updated``) in
    64 KiB pieces, as loopback delivers them: the buffer growth and the copies."""

    async def measure() -> float:
        async def nothing(frame: bytearray, conn: Connection) -> None:
            return None

        conn = Connection(nothing, NetworkLimits(pool=MemoryPool(None)))
        conn.connection_made(_Transport())
        data = memoryview(len(frame).to_bytes(4, "big") + frame)

        def feed() -> None:
            taken = 0
            while taken < len(data):
                buf = conn.get_buffer(-1)
                n = min(len(buf), len(data) - taken, 64 * 1024)
                buf[:n] = data[taken : taken + n]
                del buf
                conn.buffer_updated(n)
                taken += n
            conn._frames.clear()  # what the handler would take (and the pool release)
            conn.pool.release(len(frame))

        result = per_call_us(feed, calls, rounds)
        conn.connection_lost(None)
        return result

    return asyncio.run(measure())


def sendfile_us(size: int, calls: int, rounds: int) -> float:
    """``os.sendfile`` of ``size`` bytes of a file to a loopback socket whose peer reads
    them (the kernel's copy into the receiver is counted, as on the broker)."""
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(size))
        f.flush()
        server = socket.create_server(("127.0.0.1", 0))
        out = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        stop = threading.Event()

        def drain() -> None:
            while not stop.is_set() and peer.recv(1 << 20):
                pass

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()

        def send() -> None:
            offset, left = 0, size
            while left:
                sent = os.sendfile(out.fileno(), f.fileno(), offset, left)
                offset += sent
                left -= sent

        try:
            return per_call_us(send, calls, rounds)
        finally:
            stop.set()
            out.close()
            reader.join(5)
            peer.close()
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-records", type=int, default=3500, help="100 B records a batch")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    batch = bytes(build_batch([(None, b"v" * 100)] * args.batch_records))
    produce = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(0, batch)])],
    )
    produce_frame = request(
        RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "rdkafka"), produce, PRODUCE_VERSION
    )
    fetch = FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        session_id=0,
        session_epoch=-1,
        topics=[FetchTopic(TOPIC, partitions=[FetchPartition(0, -1, 123456, -1, -1, 1 << 20)])],
    )
    fetch_frame = request(
        RequestHeader(ApiKey.FETCH, FETCH_VERSION, 1, "rdkafka"), fetch, FETCH_VERSION
    )
    fetch_response = FetchResponse(
        responses=[
            FetchableTopicResponse(
                TOPIC, partitions=[PartitionData(0, high_watermark=1_000_000, records=b"")]
            )
        ]
    )
    produce_response = ProduceResponse(
        responses=[TopicProduceResponse(TOPIC, [PartitionProduceResponse(0, base_offset=5)])]
    )
    rounds = args.rounds

    def decode(frame: memoryview, cls: Any, version: int) -> Callable[[], Any]:
        return lambda: cls.decode(frame, version, RequestHeader.decode(frame, 1)[1])

    with tempfile.TemporaryFile() as log:
        fd = log.fileno()

        def append() -> None:
            os.write(fd, batch)
            if os.lseek(fd, 0, os.SEEK_CUR) > 256 << 20:
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)

        calls_us = {
            "produce_decode": per_call_us(
                decode(produce_frame, ProduceRequest, PRODUCE_VERSION), 20000, rounds
            ),
            "produce_response_frame": per_call_us(
                lambda: frame_response(ApiKey.PRODUCE, PRODUCE_VERSION, 1, produce_response),
                20000,
                rounds,
            ),
            "fetch_decode": per_call_us(
                decode(fetch_frame, FetchRequest, FETCH_VERSION), 20000, rounds
            ),
            "fetch_response_frame": per_call_us(
                lambda: frame_response(ApiKey.FETCH, FETCH_VERSION, 1, fetch_response),
                20000,
                rounds,
            ),
            "scan_batches": per_call_us(lambda: scan_batches(batch), 500, rounds),
            "crc32c_of_batch": per_call_us(lambda: crc32c(batch), 500, rounds),
            "receive_frame": receive_frame_us(bytes(produce_frame), 200, rounds),
            "write_batch_to_file": per_call_us(append, 200, rounds),
            "sendfile_1mib_loopback": sendfile_us(1 << 20, 200, rounds),
        }
    results = {
        "batch_bytes": len(batch),
        "batch_records": args.batch_records,
        "us_per_call": calls_us,
        "crc32c_hardware": __import__("crc32c").hardware_based,
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    for name, us in calls_us.items():
        print(f"{name:28} {us:10.2f} µs")
    print(write_result("hot_calls", args, results))


if __name__ == "__main__":
    main()
