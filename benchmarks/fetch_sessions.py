"""Fetch cost for a consumer of many mostly idle partitions, with and without KIP-227
incremental fetch sessions.

A client fetches all partitions of a 1,000-partition topic (one record in each, already
read, so every fetch finds nothing new), back to back with ``max_wait_ms=0``, the way a
consumer of many idle partitions polls. "full" sends every partition in every request
(session id 0, epoch -1: what clients without sessions, like librdkafka, do); "sessions"
opens a session once and then sends empty incremental requests. Measured: requests per
second, the broker's CPU time per request (from /proc), and request and response sizes.

    python -m benchmarks.fetch_sessions [--partitions 1000] [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from benchmarks.harness import create_topic, write_result
from moldau.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from tests.integration.helpers import RawClient, encode_request

FETCH_VERSION = 12
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fetch_all(topic: str, partitions: int, session_id: int, epoch: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=1, partition_max_bytes=1 << 20)
                    for p in range(partitions)
                ],
            )
        ],
    )


def measure(
    bootstrap: str, pid: int, topic: str, partitions: int, requests: int, sessions: bool
) -> dict:
    full = fetch_all(topic, partitions, 0, -1)
    with RawClient(bootstrap) as raw:
        session_id, epoch = 0, -1
        if sessions:
            first = raw.request(fetch_all(topic, partitions, 0, 0), FETCH_VERSION)
            session_id, epoch = first.session_id, 1
            assert session_id != 0, "the broker did not open a fetch session"
        request_bytes = answered = 0
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        for _ in range(requests):
            request = (
                FetchRequest(session_id=session_id, session_epoch=epoch, max_wait_ms=0)
                if sessions
                else full
            )
            request_bytes += len(encode_request(request, FETCH_VERSION, 0))
            response = raw.request(request, FETCH_VERSION)
            assert response.error_code == 0
            answered += sum(len(t.partitions or []) for t in response.responses or [])
            if sessions:
                epoch += 1
        elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    return {
        "requests_per_second": round(requests / elapsed, 1),
        "broker_cpu_ms_per_request": round(1000 * cpu / requests, 3),
        "request_bytes": request_bytes // requests,
        "partitions_answered_per_response": answered / requests,
    }


def main() -> None:
    from moldau.testing import BrokerProcess

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)  # write_result reads it
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir,
        BrokerProcess(Path(data_dir)) as broker,
    ):
        assert broker.proc is not None
        topic = create_topic(broker.bootstrap, "sessions", args.partitions)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for p in range(args.partitions):
            producer.produce(topic, b"x" * 100, partition=p)
        producer.flush(30)
        results = {
            mode: measure(
                broker.bootstrap,
                broker.proc.pid,
                topic,
                args.partitions,
                args.requests,
                mode == "sessions",
            )
            for mode in ("full", "sessions")
        }
    for mode, figures in results.items():
        print(mode, figures)
    print("written to", write_result("fetch_sessions", args, results))


if __name__ == "__main__":
    main()
