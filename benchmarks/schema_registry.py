"""Schema registry requests per second and latency: register (a new Avro schema each time,
so every request writes a `_schemas` record and waits to read it back) and lookup by id
(`GET /schemas/ids/{id}`, a read that first catches up with `_schemas`), against
`moldau server` with `schema.registry.listeners`, from `--clients` threads with
keep-alive HTTP connections. Results in benchmarks/results/schema_registry-*.json; nothing
is asserted.

    python -m benchmarks.schema_registry [--requests 500] [--clients 4]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import write_result
from moldau.testing import BrokerProcess

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(
    conn: http.client.HTTPConnection, method: str, path: str, body: object = None
) -> object:
    conn.request(
        method,
        path,
        None if body is None else json.dumps(body),
        {"Content-Type": CONTENT_TYPE},
    )
    answer = conn.getresponse()
    data = answer.read()
    if answer.status != 200:
        raise RuntimeError(f"{method} {path}: {answer.status} {data!r}")
    return json.loads(data)


def wait_ready(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            request(http.client.HTTPConnection("127.0.0.1", port, timeout=10), "GET", "/subjects")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run(
    port: int, clients: int, requests: int, make: Callable[[int], tuple[str, str, object]]
) -> dict[str, float]:
    """`requests` requests spread over `clients` threads: throughput and latency."""
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(first: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        for i in range(first, requests, clients):
            method, path, body = make(i)
            start = time.perf_counter()
            request(conn, method, path, body)
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    ordered = sorted(latencies)
    return {
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 2),
    }


def schema(i: int) -> dict[str, str]:
    return {
        "schema": json.dumps(
            {"type": "record", "name": f"Bench{i}", "fields": [{"name": "f", "type": "long"}]}
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="requests per measurement")
    parser.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    args = parser.parse_args()
    port = free_port()
    with (
        tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir,
        BrokerProcess(Path(data_dir), {"schema.registry.listeners": f"http://127.0.0.1:{port}"}),
    ):
        wait_ready(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        request(conn, "PUT", "/config", {"compatibility": "NONE"})  # every schema is new
        request(conn, "POST", "/subjects/warmup/versions", schema(10**9))
        results = {
            "register": run(
                port,
                args.clients,
                args.requests,
                lambda i: ("POST", f"/subjects/bench-{i % 10}/versions", schema(i)),
            )
        }
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # the old one idled
        found = request(conn, "GET", "/subjects/bench-0/versions/1")
        assert isinstance(found, dict)
        results["lookup_by_id"] = run(
            port,
            args.clients,
            args.requests,
            lambda i: ("GET", f"/schemas/ids/{found['id']}", None),
        )
    path = write_result("schema_registry", args, results)
    print(json.dumps(results, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
