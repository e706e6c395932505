"""Produce throughput of the broker alone: pre-built produce frames over raw sockets.

No client library sits in the measured path: each case builds one ProduceRequest frame
(``partitions`` x a record batch of ``batch_bytes``, 1 KiB values, acks=1) once, then
sends it ``--frames`` times over ``--connections`` sockets with a window of pipelined
requests each, and reads every response. What is timed is the broker receiving frames,
validating and stamping the batches in place and appending them: the network edge's
receive path shows up here first. Besides MB/s (wall clock, sensitive to whatever else
runs on the machine) it reports the broker process's CPU seconds per GB received, which
a busy machine disturbs much less. Results go to
benchmarks/results/produce_frames-*.json; nothing is asserted.

    python -m benchmarks.produce_frames [--quick] [--megabytes N] [--connections C] [--label L]
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.harness import add_broker_args, create_topic, write_result
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages import RESPONSES
from moldau.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.messages.response_header import ResponseHeader
from moldau.records.record import build_batch

VERSION = 9  # flexible: header v2 / response header v1
VALUE = b"v" * 1024
# (partitions per frame, batch bytes): a small request, one full default batch
# (message.max.bytes is ~1 MiB), and a frame carrying eight of them.
CASES = ((1, 16 * 1024), (1, 1_000_000), (8, 1_000_000))
_SIZE = struct.Struct(">i")


def produce_frame(topic: str, partitions: int, batch_bytes: int) -> bytes:
    batch = build_batch([(None, VALUE)] * max(1, batch_bytes // (len(VALUE) + 12)))
    request = ProduceRequest(
        acks=1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[
                    PartitionProduceData(index=p, records=batch) for p in range(partitions)
                ],
            )
        ],
    )
    header = RequestHeader(ApiKey.PRODUCE, VERSION, 1, "bench")
    payload = b"".join(bytes(p) for p in [*header.encode(2), *request.encode(VERSION)])
    return _SIZE.pack(len(payload)) + payload


def check_response(frame: bytes) -> int:
    """Number of partition errors in one produce response."""
    buf = memoryview(frame)
    _, pos = ResponseHeader.decode(buf, 1)
    response, _ = RESPONSES[ApiKey.PRODUCE].decode(buf, VERSION, pos)
    return sum(p.error_code != 0 for t in response.responses for p in t.partition_responses)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def drive(bootstrap: str, frame: bytes, frames: int, window: int, errors: list[int]) -> None:
    """One connection: keep ``window`` requests in flight until ``frames`` were answered."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sent = answered = 0
        while answered < frames:
            while sent < frames and sent - answered < window:
                sock.sendall(frame)
                sent += 1
            (size,) = _SIZE.unpack(recv_exact(sock, 4))
            errors.append(check_response(recv_exact(sock, size)))
            answered += 1


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a local process so far (0 when there is none)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_case(
    bootstrap: str, pid: int | None, partitions: int, batch_bytes: int, args: argparse.Namespace
) -> dict:
    topic = create_topic(bootstrap, f"frames-p{partitions}-{batch_bytes}", partitions)
    frame = produce_frame(topic, partitions, batch_bytes)
    frames = max(args.connections, args.megabytes * 1_000_000 // len(frame))
    per_connection = frames // args.connections
    errors: list[int] = []
    drive(bootstrap, frame, 2, args.window, errors)  # warm-up: connection, topic, caches
    threads = [
        threading.Thread(target=drive, args=(bootstrap, frame, per_connection, args.window, errors))
        for _ in range(args.connections)
    ]
    cpu = cpu_seconds(pid)
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(pid) - cpu
    sent = per_connection * args.connections
    return {
        "partitions": partitions,
        "batch_bytes": batch_bytes,
        "frame_bytes": len(frame),
        "frames": sent,
        "seconds": round(seconds, 3),
        "mb_per_s": round(sent * len(frame) / seconds / 1e6, 1),
        "frames_per_s": round(sent / seconds),
        "broker_cpu_s_per_gb": round(cpu / (sent * len(frame) / 1e9), 3) if pid else None,
        "partition_errors": sum(errors),
    }


@contextmanager
def broker_process(args: argparse.Namespace) -> Iterator[tuple[str, int | None]]:
    """Like ``harness.broker``, but also the broker's pid (None for --bootstrap)."""
    if args.bootstrap:
        yield args.bootstrap, None
        return
    from moldau.testing import BrokerProcess

    overrides = dict(pair.split("=", 1) for pair in args.broker_override)
    with (
        tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir,
        BrokerProcess(Path(data_dir), overrides) as process,
    ):
        assert process.proc is not None
        yield process.bootstrap, process.proc.pid


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_broker_args(parser)
    parser.add_argument("--megabytes", type=int, default=500, help="bytes sent per case (MB)")
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--window", type=int, default=4, help="requests in flight per socket")
    parser.add_argument("--label", default="", help="free text kept with the results")
    args = parser.parse_args()
    if args.quick:
        args.megabytes = 20
    with broker_process(args) as (bootstrap, pid):
        results = [run_case(bootstrap, pid, p, b, args) for p, b in CASES]
    table = Table("partitions", "batch", "frame", "frames", "MB/s", "cpu s/GB", "errors")
    for r in results:
        table.add_row(
            str(r["partitions"]),
            f"{r['batch_bytes']:,}",
            f"{r['frame_bytes']:,}",
            f"{r['frames']:,}",
            f"{r['mb_per_s']:,}",
            str(r["broker_cpu_s_per_gb"]),
            str(r["partition_errors"]),
        )
    Console().print(table)
    print(f"wrote {write_result('produce_frames', args, results)}")


if __name__ == "__main__":
    main()
