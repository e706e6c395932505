"""Start-up: time from starting a broker to the first acknowledged record.

Each measurement starts a broker, then creates a confluent-kafka producer (acks=all,
linger.ms=0) and produces one record to a topic that does not exist yet (auto-created),
timing until its delivery report. Cases:

- ``cli``: a new ``python -m moldau server`` process (what ``moldau server`` and the
  test harness before ``moldau.testing`` did), every run in a fresh interpreter.
- ``broker_cold``: ``moldau.testing.broker()`` as the first broker of a fresh test
  process: it starts the fork server, which imports the broker, then forks one.
- ``broker_warm``: later ``broker()`` calls in that process (forked right away).
- ``restart``: ``restart()`` of a running broker (clean stop + start, same port).
- ``crash_restart``: ``kill()`` (kill -9) then ``start()`` of a broker that took records:
  it recovers its logs and, its own controller, registers at once (no wait for the dead
  incarnation's session).

``listening_ms`` is when ``broker()`` returned (or the process printed its address),
``first_produce_ms`` when the record was acknowledged. Bytecode caching matters for
the fresh interpreters: the result records whether it was on. Writes
benchmarks/results/startup-<time>.json; asserts nothing.

    python -m benchmarks.startup [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.harness import write_result

_LISTENING = re.compile(r"listening on (\S+:\d+)")


def first_produce(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list[object] = []
    producer.produce(topic, b"first", on_delivery=lambda err, _: errors.append(err))
    if producer.flush(30) or errors != [None]:
        raise RuntimeError(f"the first record was not acknowledged: {errors}")


def cli_run() -> dict[str, float]:
    """One `python -m moldau server` in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="moldau-bench-") as data_dir:
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "moldau", "server", "-o", "listeners=PLAINTEXT://127.0.0.1:0"]
            + ["-o", f"log.dirs={data_dir}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            match = None
            for line in proc.stdout:
                if match := _LISTENING.search(line):
                    break
            if match is None:
                raise RuntimeError("moldau server did not start")
            listening = time.monotonic()
            first_produce(match.group(1), "startup")
            done = time.monotonic()
        finally:
            proc.terminate()
            proc.wait()
    return {"listening_ms": (listening - start) * 1000, "first_produce_ms": (done - start) * 1000}


def child(warm_runs: int) -> None:
    """In a fresh interpreter: the first broker (cold), more (warm), restarts; prints JSON."""
    import confluent_kafka  # noqa: F401  (the test's own imports are not the broker's)

    from moldau.testing import broker

    def timings(start: float, listening: float, done: float) -> dict[str, float]:
        return {
            "listening_ms": (listening - start) * 1000,
            "first_produce_ms": (done - start) * 1000,
        }

    def start_broker() -> dict[str, float]:
        start = time.monotonic()
        with broker() as b:
            listening = time.monotonic()
            first_produce(b.bootstrap_servers, "startup")
            return timings(start, listening, time.monotonic())

    def restart_broker() -> dict[str, float]:
        with broker() as b:
            start = time.monotonic()
            b.restart()
            listening = time.monotonic()
            first_produce(b.bootstrap_servers, "startup")
            return timings(start, listening, time.monotonic())

    def crash_restart_broker() -> dict[str, float]:
        with broker() as b:
            first_produce(b.bootstrap_servers, "startup")
            b.kill()
            start = time.monotonic()
            b.start()
            listening = time.monotonic()
            first_produce(b.bootstrap_servers, "startup")
            return timings(start, listening, time.monotonic())

    cold = start_broker()
    warm = [start_broker() for _ in range(warm_runs)]
    restart = [restart_broker() for _ in range(warm_runs)]
    crash = [crash_restart_broker() for _ in range(warm_runs)]
    print(json.dumps({"cold": cold, "warm": warm, "restart": restart, "crash": crash}))


def summary(runs: list[dict[str, float]]) -> dict[str, object]:
    return {
        key: {
            "median": round(statistics.median(r[key] for r in runs), 1),
            "min": round(min(r[key] for r in runs), 1),
            "runs": [round(r[key], 1) for r in runs],
        }
        for key in ("listening_ms", "first_produce_ms")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per case")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="2 runs")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=["cli", "broker"],
        default=["cli", "broker"],
        help="cli: `python -m moldau server`; broker: moldau.testing.broker() cold, warm, "
        "restart, crash_restart",
    )
    args = parser.parse_args()
    if args.child:
        child(args.runs)
        return
    if args.quick:
        args.runs = 2
    results: dict[str, object] = {
        "bytecode_cache": not sys.flags.dont_write_bytecode,
        "cpu_load_1min_before": os.getloadavg()[0],
    }
    if "cli" in args.cases:
        results["cli"] = summary([cli_run() for _ in range(args.runs)])
    if "broker" in args.cases:
        cold, warm, restart, crash = [], [], [], []
        for _ in range(args.runs):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.startup", "--child", "--runs", "3"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs = json.loads(out.splitlines()[-1])
            cold.append(runs["cold"])
            warm += runs["warm"]
            restart += runs["restart"]
            crash += runs["crash"]
        results |= {
            "broker_cold": summary(cold),
            "broker_warm": summary(warm),
            "restart": summary(restart),
            "crash_restart": summary(crash),
        }
    results["cpu_load_1min_after"] = os.getloadavg()[0]
    path = write_result("startup", args, results)
    print(json.dumps(results, indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
