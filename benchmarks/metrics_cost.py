"""What the metrics cost: produce throughput and broker CPU with metrics on and off.

Brokers run side by side (``python -m moldau server --ephemeral``): "off" without
``metrics.port`` (the hooks still count), "on" with it and scraped every
``--scrape-interval`` seconds (much more often than Prometheus' usual 15 s, so collection
shows), and with ``--baseline-src`` a "baseline" run from other sources, e.g. a checkout
without the hooks. Rounds alternate the order, so a busy machine disturbs all alike.
Cases:

- ``tiny_requests``: raw Produce frames of one 1 KiB record each (two connections, four in
  flight each): the most requests per byte, where per-request hooks weigh most;
- ``librdkafka_100B``: confluent-kafka producing 100-byte records, tuned as in
  ``produce_consume`` (large batches, acks=1).

Reported per case and broker: rate and the broker's CPU time per request or per record,
the median over rounds, and the scrapes' duration and size. Results go to
benchmarks/results/metrics_cost-*.json; nothing is asserted.

    python -m benchmarks.metrics_cost [--quick] [--rounds N] [--scrape-interval S]
                                      [--baseline-src ../main/src]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import timeit
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.harness import create_topic, write_result
from benchmarks.produce_consume import POOL, produce_librdkafka
from benchmarks.produce_frames import cpu_seconds, drive, produce_frame
from moldau import metrics
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.produce_request import ProduceRequest
from moldau.replication.replica_manager import FetchRequestPartition, FetchResult
from moldau.stats.counters import TopicStats
from moldau.stats.requests import RequestStats
from moldau.stats.timing import RequestTimer, parked
from moldau.storage.local_log import LogReadResult

VALUE = 100  # librdkafka's records
SRC = Path(metrics.__file__).parents[2]  # this checkout's sources


@dataclass
class Node:
    """A broker started by ``python -m moldau server`` with its own PYTHONPATH."""

    name: str
    proc: subprocess.Popen[str]
    bootstrap: str

    @classmethod
    def start(cls, name: str, src: Path, overrides: list[str]) -> Node:
        command = [sys.executable, "-m", "moldau", "server", "--ephemeral"]
        for o in ["listeners=PLAINTEXT://127.0.0.1:0", *overrides]:
            command += ["-o", o]
        env = dict(os.environ, PYTHONPATH=str(src))
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("listening on "):
                return cls(name, proc, line.split()[-1])
        raise RuntimeError(f"broker {name} did not start")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


class Scraper:
    """Scrapes a metrics URL every ``interval`` seconds, timing each scrape."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.seconds: list[float] = []
        self.sizes: list[int] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=30) as response:
                    self.sizes.append(len(response.read()))
            except OSError:
                self.failures += 1
                continue
            self.seconds.append(time.perf_counter() - started)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def brokers(args: argparse.Namespace) -> Iterator[tuple[list[Node], Scraper]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodes = []
    scraper = None
    try:
        if args.baseline_src:
            nodes.append(Node.start("baseline", Path(args.baseline_src), []))
        nodes.append(Node.start("off", SRC, []))
        nodes.append(Node.start("on", SRC, metrics.overrides(port)))
        scraper = Scraper(metrics.url("127.0.0.1", port), args.scrape_interval)
        yield nodes, scraper
    finally:
        if scraper is not None:
            scraper.stop()
        for node in nodes:
            node.stop()


def tiny_requests(broker: Node, args: argparse.Namespace) -> dict[str, float]:
    topic = create_topic(broker.bootstrap, "tiny", 1)
    frame = produce_frame(topic, 1, 1)  # one record per batch
    errors: list[int] = []
    drive(broker.bootstrap, frame, 10, 4, errors)
    per_connection = args.frames // 2
    threads = [
        threading.Thread(target=drive, args=(broker.bootstrap, frame, per_connection, 4, errors))
        for _ in range(2)
    ]
    return _timed(broker, lambda: _run_all(threads), 2 * per_connection, sum(errors))


def librdkafka(broker: Node, args: argparse.Namespace) -> dict[str, float]:
    topic = create_topic(broker.bootstrap, "rdk", 1)
    values = [bytes([i % 251]) * VALUE for i in range(POOL)]
    rate = None

    def run() -> None:
        nonlocal rate
        rate = produce_librdkafka(broker.bootstrap, topic, values, args.records, "1")

    result = _timed(broker, run, args.records, 0)
    assert rate is not None
    result["errors"] = rate.errors
    return result


def _run_all(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _timed(broker: Node, run: Callable[[], None], units: int, errors: int) -> dict:
    cpu = cpu_seconds(broker.proc.pid)
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(broker.proc.pid) - cpu
    return {
        "per_s": round(units / seconds),
        "broker_cpu_us_per_unit": round(1e6 * cpu / units, 2),
        "seconds": round(seconds, 2),
        "errors": errors,
    }


CASES = {"tiny_requests": tiny_requests, "librdkafka_100B": librdkafka}


def hook_costs(n: int = 200_000) -> dict[str, float]:
    """Microseconds per call of the hooks, in-process (what every broker pays, on or off)."""
    stats, topics = RequestStats(), TopicStats()
    request = ProduceRequest(acks=1, timeout_ms=1)
    partitions = [FetchRequestPartition("t", 0, 0, 1 << 20)]
    results = [FetchResult(records=LogReadResult([], 100, 0, 1))]

    async def measure() -> dict[str, float]:
        timer = RequestTimer()

        def one_request() -> None:
            timer.start(time.monotonic())
            stats.identify(ApiKey.PRODUCE, 9, request, 1000)
            timer.handler_done()
            timer.response_sent()

        async def wait(parking: bool) -> None:
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(None)
            await (parked(fut) if parking else fut)

        costs = {
            "request_timer_and_record": timeit.timeit(one_request, number=n),
            "append_batch": timeit.timeit(lambda: topics.appended("t", 1000, 0, 9), number=n),
            "fetch_response_1_partition": timeit.timeit(
                lambda: topics.fetched(False, partitions, results), number=n
            ),
        }
        started = time.perf_counter()
        for _ in range(n // 10):
            await wait(True)
        parked_s = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(n // 10):
            await wait(False)
        costs["parked_wait_extra"] = (parked_s - (time.perf_counter() - started)) * 10
        return {k: round(1e6 * v / n, 3) for k, v in costs.items()}

    return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=100_000, help="tiny requests per round")
    parser.add_argument("--records", type=int, default=1_000_000, help="librdkafka records")
    parser.add_argument("--scrape-interval", type=float, default=1.0)
    parser.add_argument(
        "--baseline-src",
        help="also measure a broker run from these sources (e.g. a checkout without the hooks)",
    )
    parser.add_argument("--label", default="", help="free text kept with the results")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.frames, args.records = 1, 2_000, 20_000
    runs: dict[str, dict[str, list[dict]]] = {c: {} for c in CASES}
    with brokers(args) as (nodes, scraper):
        for r in range(args.rounds):
            for case, fn in CASES.items():
                for node in nodes if r % 2 == 0 else reversed(nodes):
                    runs[case].setdefault(node.name, []).append(fn(node, args))
        scrapes = {
            "count": len(scraper.seconds),
            "median_ms": round(1000 * statistics.median(scraper.seconds), 2)
            if scraper.seconds
            else None,
            "max_ms": round(1000 * max(scraper.seconds), 2) if scraper.seconds else None,
            "bytes": scraper.sizes[-1] if scraper.sizes else None,
            "failures": scraper.failures,
        }
    summary = {
        case: {
            which: {
                "per_s": statistics.median(r["per_s"] for r in results),
                "broker_cpu_us_per_unit": statistics.median(
                    r["broker_cpu_us_per_unit"] for r in results
                ),
            }
            for which, results in by_broker.items()
        }
        for case, by_broker in runs.items()
    }
    table = Table("case", "broker", "rate /s (median)", "broker CPU µs per unit", "vs first")
    for case, by_broker in summary.items():
        first = next(iter(by_broker.values()))
        for which, row in by_broker.items():
            change = row["per_s"] / first["per_s"] - 1 if first["per_s"] else 0
            table.add_row(
                case,
                which,
                f"{row['per_s']:,.0f}",
                f"{row['broker_cpu_us_per_unit']}",
                "" if row is first else f"{change:+.1%} rate",
            )
    hooks = hook_costs()
    Console().print(table)
    Console().print(f"scrapes: {scrapes}")
    Console().print(f"hooks, µs per call: {hooks}")
    result = {
        "summary": summary,
        "runs": runs,
        "scrapes": scrapes,
        "hooks_us": hooks,
        "label": args.label,
    }
    print(f"wrote {write_result('metrics_cost', args, result)}")


if __name__ == "__main__":
    main()
