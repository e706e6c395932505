"""Request rate: what one produce request costs, measured with librdkafka's own tool.

Two parts, both driven by ``rdkafka_performance`` (built from Debian's librdkafka source
by ``benchmarks/build_rdkafka_performance.sh``):

- ``cluster``: a 3-node cluster (``moldau.testing.cluster``), one partition with
  replication factor 3, ``acks=all`` and ``linger.ms=0``, so nearly every message is a
  produce request of its own, at each offered rate of ``--rates``. Latency percentiles
  come from librdkafka's per-message delivery times (``-l -A FILE``, microseconds from
  ``produce()`` to the delivery report); the achieved rate is delivered messages over the
  time from start until the last delivery report.
- ``single``: one node, one partition, 100 B records, produce then consume of
  ``--records`` messages, Moldau and noida-db (a compiled Kafka-compatible broker, ``pip
  install noida-db==0.2.3``) side by side, alternately, ``--repeat`` times.
- ``pacing``: the cluster's load against one noida-db node, whose cost per request is
  next to nothing: what the load generator itself achieves at each offered rate.
  ``rdkafka_performance -r`` waits ``1/rate`` after each message, polling busily for the
  last millisecond, and never catches up a late start, so a client that loses its core
  (a loaded machine) falls behind whatever the broker does; every case reports the
  client's own CPU per message.

The machine is shared: every result carries the load average before and after it.
``--profile CASE`` records py-spy flame graphs into ``benchmarks/results/``: ``cluster``
(leader and a follower at the highest rate), ``alone`` (leader and a follower while the
messages go one at a time; its CPU figures then include py-spy's sampling) or ``single`` (the Moldau broker while it
serves the consume). Nothing is asserted; results go to
``benchmarks/results/request_rate-<label>-<UTC time>.json``.

    python -m benchmarks.request_rate [--label before] [--quick] [--only cluster,single,pacing]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.harness import RESULTS, write_result
from moldau.testing import BrokerProcess, cluster

BUILD_SCRIPT = Path(__file__).parent / "build_rdkafka_performance.sh"
# The tools' summary lines: messages and milliseconds.
RATE_LINE = re.compile(
    r"(\d+) delivered \(offset -?\d+, \d+ failed\) in (\d+)ms"
    r"|(\d+) messages \(\d+ bytes\) consumed in (\d+)ms"
)


def rdkafka_performance() -> str:
    """Path of the tool, built (once) by the build script."""
    out = subprocess.run(["sh", str(BUILD_SCRIPT)], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def percentiles(samples_us: list[int]) -> dict[str, float]:
    if not samples_us:
        return {}
    ordered = sorted(samples_us)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000, 3)

    return {"p50_ms": at(0.5), "p99_ms": at(0.99), "p999_ms": at(0.999), "max_ms": at(1.0)}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_at_rate(
    tool: str, bootstrap: str, topic: str, rate: int, seconds: float, pids: dict[str, int]
) -> dict:
    """``rate`` msg/s of 100 B for ``seconds``, acks=all, linger.ms=0, latency per message.
    ``pids``: the broker processes whose CPU time per message is reported (by role)."""
    count = int(rate * seconds)
    with tempfile.NamedTemporaryFile("r", suffix=".lat") as lat:
        before = load()
        cpu = {role: cpu_seconds(pid) for role, pid in pids.items()}
        client = _children_cpu()
        out = subprocess.run(
            [tool, "-P", "-t", topic, "-p", "0", "-b", bootstrap, "-s", "100", "-c", str(count),
             "-r", str(rate), "-a", "-1", "-l", "-A", lat.name,
             "-X", "linger.ms=0", "-X", "socket.nagle.disable=true"],
            capture_output=True, text=True, timeout=seconds * 20 + 60,
        )  # fmt: skip
        samples = [int(line) for line in lat.read().split()]
        cpu = {role: cpu_seconds(pid) - cpu[role] for role, pid in pids.items()}
        cpu["client"] = _children_cpu() - client
    found = RATE_LINE.findall(out.stdout)
    elapsed_ms = int(found[-1][1]) if found else 0
    return {
        "offered_msgs_s": rate,
        "delivered": len(samples),
        "sent": count,
        "achieved_msgs_s": round(len(samples) * 1000 / elapsed_ms) if elapsed_ms else None,
        **percentiles(samples),
        # Broker CPU per message: what a busy machine disturbs least.
        "cpu_us_per_msg": {role: round(t * 1e6 / max(len(samples), 1)) for role, t in cpu.items()},
        "load_before": before,
        "load_after": load(),
        "exit": out.returncode,
    }


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the tool, once it has exited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_pacing(tool: str, args: argparse.Namespace) -> list[dict]:
    results = []
    with noida() as (bootstrap, _):
        topic = f"pacing-{uuid.uuid4().hex[:8]}"
        produce_at_rate(tool, bootstrap, topic, 200, 2, {})  # warm-up: creates the topic
        for rate in args.rates:
            result = produce_at_rate(tool, bootstrap, topic, rate, args.seconds, {})
            print(f"pacing rate {rate}: {result}", flush=True)
            results.append(result)
    return results


def run_cluster(tool: str, args: argparse.Namespace) -> list[dict]:
    results = []
    with cluster(nodes=3, min_insync_replicas=2) as c:
        topic = c.create_topic(f"rate-{uuid.uuid4().hex[:8]}", 1, replication_factor=3)
        leader = c.leader(topic)
        follower = next(i for i in c.nodes if i != leader)
        pids = {"leader": c.node(leader).proc.pid, "follower": c.node(follower).proc.pid}
        produce_at_rate(tool, c.bootstrap_servers, topic, 200, 2, pids)  # warm-up: connections
        for rate in args.rates:
            with py_spy(args, "cluster", rate == max(args.rates), c, leader, follower):
                result = produce_at_rate(tool, c.bootstrap_servers, topic, rate, args.seconds, pids)
            print(f"cluster rate {rate}: {result}", flush=True)
            results.append(result)
    return results


@contextmanager
def alone_cluster() -> Iterator[tuple[Any, str, int, list[int], dict[str, int]]]:
    """A 3-node cluster with one RF=3 partition: the cluster, the topic, its leader, its
    followers and the pid of each ("leader", "follower1", "follower2")."""
    with cluster(nodes=3, min_insync_replicas=2) as c:
        topic = c.create_topic(f"alone-{uuid.uuid4().hex[:8]}", 1, replication_factor=3)
        leader = c.leader(topic)
        followers = [i for i in c.nodes if i != leader]
        pids = {"leader": c.node(leader).proc.pid}
        pids |= {f"follower{n}": c.node(i).proc.pid for n, i in enumerate(followers, 1)}
        yield c, topic, leader, followers, pids


def run_alone(args: argparse.Namespace) -> dict:
    """``--alone`` messages produced one at a time (acks=all, each awaited before the next):
    every message is exactly one produce request and one fetch per follower, whatever
    the machine's load, so the brokers' CPU per message is their cost per request set.
    Latency is each message's round trip as confluent-kafka sees it."""
    from confluent_kafka import Producer

    with alone_cluster() as (c, topic, leader, followers, pids):
        producer = Producer(
            {"bootstrap.servers": c.bootstrap_servers, "acks": "all", "linger.ms": 0}
        )
        try:
            value = b"x" * 100
            for _ in range(200):  # warm-up: connections, metadata
                producer.produce(topic, value, partition=0)
                producer.flush(30)
            # What the brokers burn doing nothing (heartbeats, the controller quorum...): at a
            # few hundred messages a second it is a good part of the CPU per message.
            idle = {role: cpu_seconds(pid) for role, pid in pids.items()}
            time.sleep(args.idle_seconds)
            idle = {
                role: (cpu_seconds(pid) - idle[role]) / args.idle_seconds
                for role, pid in pids.items()
            }
            before, cpu = load(), {role: cpu_seconds(pid) for role, pid in pids.items()}
            samples, failed = [], []
            with py_spy(args, "alone", True, c, leader, followers[0]):
                started = time.monotonic()
                for _ in range(args.alone):
                    sent = time.monotonic()
                    producer.produce(
                        topic, value, partition=0, on_delivery=lambda e, m: e and failed.append(e)
                    )
                    producer.flush(30)
                    samples.append(int((time.monotonic() - sent) * 1e6))
                elapsed = time.monotonic() - started
            cpu = {role: cpu_seconds(pid) - cpu[role] for role, pid in pids.items()}
            result = {
                "messages": args.alone,
                "failed": len(failed),
                "msgs_s": round(args.alone / elapsed),
                **percentiles(samples),
                "cpu_us_per_msg": {role: round(t * 1e6 / args.alone) for role, t in cpu.items()},
                "idle_cpu_share": {role: round(share, 4) for role, share in idle.items()},
                # Less the idle share over the run's time: the cost of the requests themselves.
                "net_cpu_us_per_msg": {
                    role: round((t - idle[role] * elapsed) * 1e6 / args.alone)
                    for role, t in cpu.items()
                },
                "load_before": before,
                "load_after": load(),
            }
        finally:
            # Gone with its cluster, not at the next garbage collection: a client left
            # behind reconnects to the dead nodes every second for the rest of the run.
            producer.flush(30)
            del producer
    print(f"alone: {result}", flush=True)
    return result


@contextmanager
def py_spy(args: argparse.Namespace, case: str, now: bool, c: Any, *nodes: int) -> Iterator[None]:
    """py-spy flame graphs of ``nodes`` (leader first) while the body runs."""
    if args.profile != case or not now:
        yield
        return
    recorders = []
    for role, node in zip(("leader", "follower"), nodes, strict=False):
        svg = RESULTS / f"request_rate-{args.label}-{case}-{role}.svg"
        pid = c.node(node).proc.pid
        recorders.append(
            subprocess.Popen(
                ["py-spy", "record", "-o", str(svg), "--pid", str(pid), "--rate", "200"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(2)
            recorder.wait(60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def noida() -> Iterator[tuple[str, int]]:
    """noida-db's Kafka service on a free port with a fresh data directory: its bootstrap
    address and process group."""
    port = free_port()
    data = tempfile.mkdtemp(prefix="noida-")
    proc = subprocess.Popen(
        ["noida-db", "start", "--host", "127.0.0.1", "--only", "kafka",
         "--kafka-port", str(port), "--data-dir", data],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("noida-db did not start") from None
                time.sleep(0.2)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the command is a wrapper of the server
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def throughput(tool: str, argv: list[str], broker_cpu: Callable[[], float]) -> dict:
    """rdkafka_performance's own rate, the end-to-end one and the broker's CPU.

    The tool's consume rate counts from the first message received, so a broker that
    answers one fetch with the whole log has its whole transfer left out of it;
    ``wall_msgs_s`` (messages over the tool's run time, connection and start included)
    counts it. ``broker_cpu_s_per_m`` is the broker's CPU seconds (``broker_cpu()``, so far)
    per million messages: the figure a busy machine disturbs least; the tool's own CPU is
    reported the same way."""
    before = load()
    cpu = broker_cpu()
    client = _children_cpu()
    started = time.monotonic()
    out = subprocess.run([tool, *argv], capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - started
    cpu = broker_cpu() - cpu
    client = _children_cpu() - client
    found = RATE_LINE.findall(out.stdout)
    if not found:
        raise RuntimeError(f"no summary from rdkafka_performance: {out.stdout[-500:]}")
    msgs, ms = (int(x) for x in found[-1] if x)
    return {
        "msgs": msgs,
        "msgs_s": round(msgs * 1000 / max(ms, 1)),
        "wall_msgs_s": round(msgs / wall),
        "broker_cpu_s_per_m": round(cpu * 1e6 / max(msgs, 1), 3),
        # The tool's CPU over its run time: near 1 or more, the client is the limit.
        "client_cpu_s_per_m": round(client * 1e6 / max(msgs, 1), 3),
        "client_cores_busy": round(client / wall, 2),
        "load_before": before,
        "load_after": load(),
    }


def group_cpu_seconds(pgid: int) -> float:
    """User plus system CPU time so far of the live processes in process group ``pgid``
    (noida-db's command is a wrapper of its server)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


# Fetch limits past the whole log: what noida-db answers whatever the limits, so with
# these both brokers' consume clocks start once everything is transferred and decoded.
WHOLE_LOG_FETCH = ["-X", "fetch.message.max.bytes=500000000", "-X", "fetch.max.bytes=500000000"]


def single(
    tool: str,
    bootstrap: str,
    records: int,
    broker_cpu: Callable[[], float],
    profile: dict[str, Any] | None = None,
    whole_log: bool = False,
) -> dict:
    """Produce then consume ``records`` of 100 B on one partition (auto-created topic).
    ``profile``: py-spy recorders per side (``produce``/``consume``); ``whole_log``: the
    consumer asks for the whole log in one fetch (:data:`WHOLE_LOG_FETCH`)."""
    topic = f"single-{uuid.uuid4().hex[:8]}"
    common = ["-t", topic, "-p", "0", "-b", bootstrap, "-c", str(records)]
    profile = profile or {}
    with profile.get("produce") or _nothing():
        produce = throughput(
            tool,
            ["-P", *common, "-s", "100", "-X", "queue.buffering.max.messages=1000000"],
            broker_cpu,
        )
    time.sleep(1)
    with profile.get("consume") or _nothing():
        # noida-db answers a fetch with the whole log, whatever its fetch limits.
        consume = throughput(
            tool,
            [
                "-C",
                *common,
                "-o",
                "beginning",
                "-X",
                "receive.message.max.bytes=1000000000",
                *(WHOLE_LOG_FETCH if whole_log else []),
            ],
            broker_cpu,
        )
    return {"produce": produce, "consume": consume}


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def run_single(tool: str, args: argparse.Namespace) -> dict:
    """Moldau and noida-db in turns, the order swapped every pair (ABBA), so a load that
    rises or falls through the run favours neither."""
    runs: dict[str, list[dict]] = {"moldau": [], "noida": []}
    with BrokerProcess(configs={"num.partitions": "1"}) as broker:
        assert broker.proc is not None
        pid = broker.proc.pid

        def run_moldau(i: int) -> dict:
            profile = None
            if args.profile == "single" and i == args.repeat - 1:
                profile = {
                    side: _single_profile(args, pid, side) for side in ("produce", "consume")
                }
            cpu = partial(cpu_seconds, pid)
            return single(tool, broker.bootstrap, args.records, cpu, profile, args.whole_log_fetch)

        def run_noida(i: int) -> dict:
            with noida() as (bootstrap, pgid):
                cpu = partial(group_cpu_seconds, pgid)
                return single(tool, bootstrap, args.records, cpu, whole_log=args.whole_log_fetch)

        for i in range(args.repeat):
            order = [("moldau", run_moldau), ("noida", run_noida)]
            for side, run in order if i % 2 == 0 else order[::-1]:
                runs[side].append(run(i))
                print(f"{side}: {runs[side][-1]}", flush=True)
    summary = {}
    for side in ("produce", "consume"):
        for key in ("msgs_s", "wall_msgs_s", "broker_cpu_s_per_m"):
            moldau = statistics.median(r[side][key] for r in runs["moldau"])
            other = statistics.median(r[side][key] for r in runs["noida"])
            summary[f"{side}_{key}"] = {
                "moldau": moldau,
                "noida": other,
                "ratio": round(moldau / other, 2),
            }
    return {"runs": runs, "median": summary}


@contextmanager
def _single_profile(args: argparse.Namespace, pid: int, side: str) -> Iterator[None]:
    svg = RESULTS / f"request_rate-{args.label}-single-{side}.svg"
    recorder = subprocess.Popen(
        ["py-spy", "record", "-o", str(svg), "--pid", str(pid), "--rate", "200"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    try:
        yield
    finally:
        recorder.send_signal(2)
        recorder.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rates", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 5000, 10000]
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="per offered rate")
    parser.add_argument("--records", type=int, default=2_000_000, help="single-node case")
    parser.add_argument(
        "--whole-log-fetch",
        action="store_true",
        help="single: the consumer's fetch limits past the whole log, for both brokers",
    )
    parser.add_argument("--repeat", type=int, default=2, help="single-node runs per broker")
    parser.add_argument("--alone", type=int, default=3000, help="alone case: messages")
    parser.add_argument(
        "--idle-seconds", type=float, default=5.0, help="alone case: idle CPU measured this long"
    )
    parser.add_argument(
        "--only",
        type=lambda s: s.split(","),
        help="cases, comma-separated: cluster,single,pacing,alone",
    )
    parser.add_argument("--profile", choices=("cluster", "single", "alone"))
    parser.add_argument("--label", default="run", help="names the result (e.g. before/after)")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rates, args.seconds, args.records, args.repeat = [500], 2.0, 50_000, 1
    results: dict[str, Any] = {"load_start": load()}
    if args.only and "alone" in args.only:
        results["alone"] = run_alone(args)
    if args.only and set(args.only) <= {"alone"}:
        results["load_end"] = load()
        print(write_result(f"request_rate-{args.label}", args, results))
        return
    tool = rdkafka_performance()
    if not args.only or "cluster" in args.only:
        results["cluster"] = run_cluster(tool, args)
    if not args.only or "single" in args.only:
        results["single"] = run_single(tool, args)
    if not args.only or "pacing" in args.only:
        results["pacing"] = run_pacing(tool, args)
    results["load_end"] = load()
    path = write_result(f"request_rate-{args.label}", args, results)
    print(path)
    if "cluster" in results and "pacing" in results:
        plot(results, path.with_suffix(".svg"))
        print(path.with_suffix(".svg"))


def plot(results: dict, path: Path) -> None:
    """Delivery latency (p50, p99) and achieved rate against the offered rate: the
    Moldau cluster and the same load against noida-db."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (latency, achieved) = plt.subplots(1, 2, figsize=(12, 4.5))
    sides = [("Moldau, 3 nodes RF=3", results["cluster"]), ("noida-db, 1 node", results["pacing"])]
    for name, runs in sides:
        x = [r["offered_msgs_s"] for r in runs]
        for key, style in (("p50_ms", "o-"), ("p99_ms", "s--")):
            latency.plot(x, [r.get(key) for r in runs], style, label=f"{name} {key[:3]}")
        achieved.plot(x, [r["achieved_msgs_s"] for r in runs], "o-", label=name)
    achieved.plot(x, x, ":", color="grey", label="offered")
    latency.set(xscale="log", yscale="log", xlabel="offered msg/s", ylabel="delivery latency (ms)")
    achieved.set(xscale="log", yscale="log", xlabel="offered msg/s", ylabel="achieved msg/s")
    loads = f"load average {results['load_start'][0]} to {results['load_end'][0]} on 2 cores"
    fig.suptitle(f"acks=all, linger.ms=0, 100 B, rdkafka_performance ({loads})")
    for ax in (latency, achieved):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
