"""What a broker pays per partition, connection and group (issue 14).

For each size (default 1,000 / 10,000 / 50,000 partitions, in topics of 10 partitions,
one record each) a fresh broker is started and measured:

- create time (CreateTopics of 100 topics per request),
- the broker's open descriptors, memory maps and RSS after creation, after producing and
  after each restart,
- produce throughput with one record for every partition: confluent-kafka, and raw
  ProduceRequests of 1,000 partitions each (the broker alone, no client or metadata);
  then the same number of records to one partition with the same client settings (the
  issue's ratio: spread over every partition against one), and raw produce again
  (the logs exist now: what the broker pays per partition and request),
- Metadata (all topics) response time and size, on a raw connection,
- clean restart (SIGTERM, then start until listening) and restart after kill -9,
- a spot check after kill -9 that sampled partitions still hold the record the broker
  acknowledged (raw produce), and how many client records failed (timed out).

Then, on a broker with 1,000 partitions: ``--connections`` idle connections (each sent one
ApiVersions) and ``--groups`` groups with committed offsets; descriptors, RSS and request
latency with them, and a clean restart that reloads the groups.

Results go to ``benchmarks/results/scale-*.json`` and a plot of cost against size to
``scale-*.png`` (``--plot RESULT.json`` redraws one); nothing is asserted.

    python -m benchmarks.scale [--sizes 1000,10000,50000] [--connections 10000] [--groups 10000]
    python -m benchmarks.scale --restarts 50000 --data-dir DIR [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.harness import RESULTS, write_result
from moldau.protocol.messages.api_versions_request import ApiVersionsRequest
from moldau.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from moldau.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
)
from moldau.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from moldau.records.record import build_batch
from moldau.testing import BrokerProcess
from tests.integration.helpers import RawClient, encode_request, framed, metadata_request

PARTITIONS_PER_TOPIC = 10
TOPICS_PER_REQUEST = 100
METADATA_VERSION = 12
OFFSET_COMMIT_VERSION = 8
OFFSET_FETCH_VERSION = 7
PRODUCE_VERSION = 9
SAMPLE = 100  # partitions checked after kill -9
RAW_RECORD = (b"raw", b"acknowledged by the broker")
_SIZE = struct.Struct(">i")


def broker_stats(broker: BrokerProcess) -> dict[str, float]:
    """Open descriptors, memory map regions and RSS (MB) of the broker process."""
    assert broker.proc is not None
    pid = broker.proc.pid
    fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    maps = sum(1 for _ in open(f"/proc/{pid}/maps", "rb"))  # noqa: SIM115 - read once
    rss_kb = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    return {"fds": fds, "maps": maps, "rss_mb": round(rss_kb / 1024, 1)}


def timed(fn: Callable[[], Any]) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(names), TOPICS_PER_REQUEST):
        batch = [NewTopic(n, PARTITIONS_PER_TOPIC, 1) for n in names[i : i + TOPICS_PER_REQUEST]]
        for future in admin.create_topics(batch, operation_timeout=600).values():
            future.result(timeout=600)


def produce_one_each(
    bootstrap: str, names: list[str], *, one_partition: bool = False
) -> tuple[float, int]:
    """One record to every partition (``one_partition``: as many records, all to partition
    0 of the first topic); returns records/s (until all are acknowledged or failed) and
    how many failed (e.g. timed out waiting for metadata)."""
    failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        failed += err is not None

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "queue.buffering.max.messages": 1_000_000,
            "topic.metadata.refresh.interval.ms": 600_000,
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(timeout=120)  # metadata first: measure produce, not discovery
    start = time.monotonic()
    for name in names:
        for p in range(PARTITIONS_PER_TOPIC):
            value = b"%s:%d" % (name.encode(), p)
            if one_partition:
                producer.produce(names[0], value, partition=0)
            else:
                producer.produce(name, value, partition=p)
        producer.poll(0)
    remaining = producer.flush(900)
    elapsed = time.monotonic() - start
    if remaining:
        raise RuntimeError(f"{remaining} records neither acknowledged nor failed")
    return len(names) * PARTITIONS_PER_TOPIC / elapsed, failed


def raw_produce(bootstrap: str, names: list[str]) -> float:
    """One record to every partition in ProduceRequests of 100 topics (1,000 partitions)
    on one connection, acks=1: the broker's cost without a client's; returns records/s."""
    record = build_batch([RAW_RECORD])
    requests = [
        ProduceRequest(
            acks=1,
            timeout_ms=30000,
            topic_data=[
                TopicProduceData(
                    name=name,
                    partition_data=[
                        PartitionProduceData(index=p, records=record)
                        for p in range(PARTITIONS_PER_TOPIC)
                    ],
                )
                for name in names[i : i + TOPICS_PER_REQUEST]
            ],
        )
        for i in range(0, len(names), TOPICS_PER_REQUEST)
    ]
    with RawClient(bootstrap, timeout=600) as raw:
        start = time.monotonic()
        for request in requests:
            response = raw.request(request, PRODUCE_VERSION)
            assert all(p.error_code == 0 for t in response.responses for p in t.partition_responses)
        elapsed = time.monotonic() - start
    return len(names) * PARTITIONS_PER_TOPIC / elapsed


def metadata_time(bootstrap: str, repeat: int = 3) -> tuple[float, int]:
    """Median seconds for a Metadata request for all topics (until the whole response
    arrived, not decoded) and the response size."""
    times, size = [], 0
    with RawClient(bootstrap, timeout=600) as raw:
        for i in range(repeat):
            payload = framed(encode_request(metadata_request(None), METADATA_VERSION, i + 1))
            start = time.monotonic()
            raw.send_bytes(payload)
            frame = raw.recv_frame()
            times.append(time.monotonic() - start)
            size = len(frame or b"")
    return statistics.median(times), size


def spot_check(bootstrap: str, names: list[str], rnd: random.Random) -> str:
    """How many of SAMPLE random partitions still hold the record the raw produce had
    acknowledged."""
    everything = [(t, p) for t in names for p in range(PARTITIONS_PER_TOPIC)]
    picks = rnd.sample(everything, min(SAMPLE, len(everything)))
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "scale-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in picks])
    found = set()
    deadline = time.monotonic() + 300
    while len(found) < len(picks) and time.monotonic() < deadline:
        for msg in consumer.consume(1000, timeout=1.0):
            if msg.error() is None and (msg.key(), msg.value()) == RAW_RECORD:
                found.add((msg.topic(), msg.partition()))
    consumer.close()
    return f"{len(found)}/{len(picks)}"


@contextmanager
def started(data_dir: Path, overrides: dict[str, str]) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(data_dir, overrides, startup_timeout=1800)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop(timeout=600)


def cpu_seconds(broker: BrokerProcess) -> float:
    """User + system CPU the broker process has used (the machine is shared: wall times
    alone mislead)."""
    assert broker.proc is not None
    return proc_cpu_seconds(broker.proc.pid)


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` (all its threads), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def restart_time(
    broker: BrokerProcess, *, kill: bool, profile: Path | None = None
) -> dict[str, float]:
    """Seconds to stop, to listen, to serve (the broker is unfenced: its logs are loaded
    and its metadata is current) and until every replica is open (the slices after a
    large change), and the broker's CPU seconds when it serves (and, clean, when it was
    asked to stop). ``profile``: py-spy flame graphs of the stop and of the start to
    ``<profile>-stop.svg`` and ``<profile>-start.svg``."""
    stop_cpu_s = cpu_seconds(broker)
    spy = _py_spy(broker, profile, "stop") if profile and not kill else None
    stop_s = timed(broker.kill) if kill else timed(lambda: broker.stop(timeout=600))
    if spy is not None:
        spy.wait()
    seen = broker.lines_seen
    start = time.monotonic()
    listening = broker.launch()
    spy = _py_spy(broker, profile, "start") if profile else None
    broker.wait_listening(listening)
    start_s = time.monotonic() - start
    serving_s = _until_logged(broker, seen, "is serving", start)
    serving_cpu_s = cpu_seconds(broker)
    if spy is not None:
        spy.send_signal(signal.SIGINT)  # py-spy writes the flame graph and exits
        spy.wait()
    return {
        "stop_s": round(stop_s, 2),
        "cpu_s_before_stop": round(stop_cpu_s, 2),
        "start_s": round(start_s, 2),
        "serving_s": round(serving_s, 2),
        "serving_cpu_s": round(serving_cpu_s, 2),
        "replicas_open_s": round(
            _until_logged(broker, seen, "the new replicas are open", start), 2
        ),
        "load_1m": round(os.getloadavg()[0], 1),
    }


def _py_spy(broker: BrokerProcess, profile: Path, what: str) -> subprocess.Popen[bytes]:
    assert broker.proc is not None
    return subprocess.Popen(
        ["py-spy", "record", "--pid", str(broker.proc.pid), "--rate", "100", "--nonblocking"]
        + ["--output", f"{profile}-{what}.svg"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _until_logged(broker: BrokerProcess, seen: int, text: str, start: float) -> float:
    """Seconds from ``start`` until the broker logged ``text`` (after its first ``seen``
    lines of output)."""
    while True:
        new = list(broker.output)[-(broker.lines_seen - seen) :] if broker.lines_seen > seen else []
        if any(text in line for line in new):
            return time.monotonic() - start
        if time.monotonic() - start > 1800:
            return -1.0
        time.sleep(0.05)


def measure_size(partitions: int, overrides: dict[str, str], rnd: random.Random) -> dict:
    names = [f"scale-{i:05d}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    out: dict[str, Any] = {"partitions": len(names) * PARTITIONS_PER_TOPIC}
    with (
        tempfile.TemporaryDirectory(prefix="moldau-scale-") as tmp,
        started(Path(tmp), overrides) as broker,
    ):
        out["empty"] = broker_stats(broker)
        create_s = timed(lambda: create_topics(broker.bootstrap, names))
        out["create_s"] = round(create_s, 2)
        out["create_ms_per_partition"] = round(1000 * create_s / out["partitions"], 3)
        out["created"] = broker_stats(broker)
        rate, failed = produce_one_each(broker.bootstrap, names)
        out["produce_records_per_s"], out["produce_failed"] = round(rate), failed
        out["produced"] = broker_stats(broker)
        out["raw_produce_records_per_s"] = round(raw_produce(broker.bootstrap, names))
        out["load_1m_after_produce"] = round(os.getloadavg()[0], 1)
        rate, _ = produce_one_each(broker.bootstrap, names, one_partition=True)
        out["produce_one_partition_records_per_s"] = round(rate)
        out["spread_to_one_partition"] = round(out["produce_records_per_s"] / rate, 3)
        out["raw_produce_again_records_per_s"] = round(raw_produce(broker.bootstrap, names))
        seconds, size = metadata_time(broker.bootstrap)
        out["metadata_ms"], out["metadata_bytes"] = round(1000 * seconds, 1), size
        out["clean_restart"] = restart_time(broker, kill=False)
        out["after_clean_restart"] = broker_stats(broker)
        seconds, _ = metadata_time(broker.bootstrap, repeat=1)
        out["metadata_ms_after_restart"] = round(1000 * seconds, 1)
        out["kill9_restart"] = restart_time(broker, kill=True)
        out["after_kill9_restart"] = broker_stats(broker)
        out["spot_check_after_kill9"] = spot_check(broker.bootstrap, names, rnd)
    return out


def measure_restarts(
    partitions: int, data_dir: Path, overrides: dict[str, str], rnd: random.Random, profile: bool
) -> dict:
    """Clean restart and restart after kill -9 on a data dir kept between runs (made on the
    first run: topics, and one acknowledged record in each of the first 1,000 partitions,
    which the spot checks look for)."""
    names = [f"scale-{i:05d}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    produced = names[: 1000 // PARTITIONS_PER_TOPIC]
    out: dict[str, Any] = {"partitions": partitions, "data_dir": str(data_dir)}
    made = data_dir / "made"
    stem = RESULTS / f"scale-restart-{partitions}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    broker = BrokerProcess(data_dir / "logs", overrides, startup_timeout=1800)
    broker.start()
    try:
        if not made.exists():
            seen = broker.lines_seen
            start = time.monotonic()
            create_topics(broker.bootstrap, names)
            out["create_s"] = round(time.monotonic() - start, 2)
            _until_logged(broker, seen, "the new replicas are open", start)
            out["all_logs_created_s"] = round(time.monotonic() - start, 2)
            raw_produce(broker.bootstrap, produced)
            made.write_text("")
        else:
            _until_logged(broker, 0, "is serving", time.monotonic())
        out["spot_check_before"] = spot_check(broker.bootstrap, produced, rnd)
        out["clean_restart"] = restart_time(
            broker, kill=False, profile=stem.with_name(stem.name + "-clean") if profile else None
        )
        out["spot_check_after_clean_restart"] = spot_check(broker.bootstrap, produced, rnd)
        out["kill9_restart"] = restart_time(broker, kill=True)
        out["spot_check_after_kill9"] = spot_check(broker.bootstrap, produced, rnd)
        out["cpu_s_before_last_stop"] = round(cpu_seconds(broker), 2)
        out["last_clean_stop_s"] = round(timed(lambda: broker.stop(timeout=600)), 2)
        out["load_1m"] = round(os.getloadavg()[0], 1)
    finally:
        broker.stop(timeout=600)
    return out


def small_request_latency(bootstrap: str, topic: str, repeat: int = 50) -> dict[str, float]:
    """Median ms of a one-record produce (acks=1) and of a one-topic Metadata request."""
    produce, meta = [], []
    with RawClient(bootstrap, timeout=60) as raw:
        for _ in range(repeat):
            request = ProduceRequest(
                acks=1,
                timeout_ms=30000,
                topic_data=[
                    TopicProduceData(
                        name=topic,
                        partition_data=[
                            PartitionProduceData(index=0, records=build_batch([(b"k", b"v")]))
                        ],
                    )
                ],
            )
            start = time.monotonic()
            raw.request(request, PRODUCE_VERSION)
            produce.append(time.monotonic() - start)
            start = time.monotonic()
            raw.request(metadata_request([topic]), METADATA_VERSION)
            meta.append(time.monotonic() - start)
    return {
        "produce_ms": round(1000 * statistics.median(produce), 3),
        "metadata_ms": round(1000 * statistics.median(meta), 3),
    }


def measure_connections_and_groups(args: argparse.Namespace, overrides: dict[str, str]) -> dict:
    names = [f"base-{i:03d}" for i in range(100)]
    out: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="moldau-scale-") as tmp,
        started(Path(tmp), overrides) as broker,
    ):
        create_topics(broker.bootstrap, names)
        out["baseline"] = {
            **broker_stats(broker),
            **small_request_latency(broker.bootstrap, names[0]),
        }
        host, port = broker.bootstrap.rsplit(":", 1)
        sockets: list[socket.socket] = []
        hello = framed(encode_request(ApiVersionsRequest(), 0))
        start = time.monotonic()
        try:
            for _ in range(args.connections):
                s = socket.create_connection((host, int(port)), timeout=60)
                s.sendall(hello)
                sockets.append(s)
            for s in sockets:
                (size,) = _SIZE.unpack(_recv_exact(s, 4))
                _recv_exact(s, size)
            out["connections"] = {
                "count": len(sockets),
                "open_s": round(time.monotonic() - start, 2),
                **broker_stats(broker),
                **small_request_latency(broker.bootstrap, names[0]),
            }
        except OSError as e:
            out["connections"] = {"count": len(sockets), "error": str(e), **broker_stats(broker)}
        finally:
            for s in sockets:
                s.close()
        time.sleep(2)
        out["connections_closed"] = broker_stats(broker)

        start = time.monotonic()
        with RawClient(broker.bootstrap, timeout=120) as raw:
            for g in range(args.groups):
                commit = OffsetCommitRequest(
                    group_id=f"group-{g:05d}",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    topics=[
                        OffsetCommitRequestTopic(
                            name=names[g % len(names)],
                            partitions=[
                                OffsetCommitRequestPartition(
                                    partition_index=g % PARTITIONS_PER_TOPIC, committed_offset=g
                                )
                            ],
                        )
                    ],
                )
                response = raw.request(commit, OFFSET_COMMIT_VERSION)
                assert response.topics[0].partitions[0].error_code == 0
        commit_s = time.monotonic() - start
        fetch = OffsetFetchRequest(
            group_id="group-00007",
            topics=[OffsetFetchRequestTopic(name=names[7], partition_indexes=[7])],
        )
        fetch_times = []
        with RawClient(broker.bootstrap, timeout=120) as raw:
            for _ in range(50):
                start = time.monotonic()
                raw.request(fetch, OFFSET_FETCH_VERSION)
                fetch_times.append(time.monotonic() - start)
        out["groups"] = {
            "count": args.groups,
            "commit_s": round(commit_s, 2),
            "commits_per_s": round(args.groups / commit_s),
            "offset_fetch_ms": round(1000 * statistics.median(fetch_times), 3),
            **broker_stats(broker),
            **small_request_latency(broker.bootstrap, names[0]),
        }
        out["groups_clean_restart"] = restart_time(broker, kill=False)
        out["groups_after_restart"] = broker_stats(broker)
    return out


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed by the broker")
        buf += chunk
    return bytes(buf)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = results["sizes"]
    x = [r["partitions"] for r in sizes]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    panels = [
        ("create time per partition (ms)", [("create", lambda r: r["create_ms_per_partition"])]),
        (
            "broker descriptors / memory maps",
            [
                ("fds after produce", lambda r: r["produced"]["fds"]),
                ("fds after clean restart", lambda r: r["after_clean_restart"]["fds"]),
                ("fds after kill -9 restart", lambda r: r["after_kill9_restart"]["fds"]),
                ("maps after produce", lambda r: r["produced"]["maps"]),
            ],
        ),
        (
            "broker RSS (MB)",
            [
                ("after produce", lambda r: r["produced"]["rss_mb"]),
                ("after clean restart", lambda r: r["after_clean_restart"]["rss_mb"]),
            ],
        ),
        ("Metadata, all topics (ms)", [("full response", lambda r: r["metadata_ms"])]),
        (
            "restart (s)",
            [
                ("clean: start", lambda r: r["clean_restart"]["start_s"]),
                ("clean: stop", lambda r: r["clean_restart"]["stop_s"]),
                ("after kill -9: start", lambda r: r["kill9_restart"]["start_s"]),
            ],
        ),
        (
            "produce, one record per partition (records/s)",
            [
                ("confluent-kafka", lambda r: r["produce_records_per_s"]),
                ("raw, 1,000 partitions a request", lambda r: r["raw_produce_records_per_s"]),
            ],
        ),
    ]
    for ax, (title, series) in zip(axes.flat, panels, strict=True):
        for label, value in series:
            ax.plot(x, [value(r) for r in sizes], marker="o", label=label or None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("partitions")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if any(label for label, _ in series):
            ax.legend(fontsize=8)
    fig.suptitle("Moldau: cost against partitions on one broker (log-log; linear = slope 1)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000", help="partition counts")
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--broker-override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot", type=Path, metavar="RESULT.json", help="only redraw a result")
    parser.add_argument("--restarts", type=int, metavar="SIZE", help="only restarts at SIZE")
    parser.add_argument("--data-dir", type=Path, help="--restarts: the data dir, kept")
    parser.add_argument("--profile", action="store_true", help="--restarts: py-spy graphs")
    parser.add_argument("--label", default="", help="--restarts: what this run measures")
    args = parser.parse_args()
    if args.plot:
        plot(json.loads(args.plot.read_text())["results"], args.plot.with_suffix(".png"))
        return
    args.bootstrap = None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 10,000 client sockets
    overrides = {
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.num.partitions": "50",
        **dict(pair.split("=", 1) for pair in args.broker_override),
    }
    rnd = random.Random(args.seed)
    if args.restarts:
        if args.data_dir is None:
            parser.error("--restarts needs --data-dir")
        args.data_dir.mkdir(parents=True, exist_ok=True)
        result = measure_restarts(args.restarts, args.data_dir, overrides, rnd, args.profile)
        print(result, flush=True)
        args.data_dir = str(args.data_dir)
        print(write_result(f"scale-restart-{args.restarts}", args, result))
        return
    results: dict[str, Any] = {"sizes": []}
    for size in (int(s) for s in args.sizes.split(",")):
        results["sizes"].append(measure_size(size, overrides, rnd))
        print(results["sizes"][-1], flush=True)
    if args.connections or args.groups:
        results["connections_and_groups"] = measure_connections_and_groups(args, overrides)
        print(results["connections_and_groups"], flush=True)
    path = write_result("scale", args, results)
    png = RESULTS / (path.stem + ".png")
    plot(results, png)
    print(path, png)


if __name__ == "__main__":
    main()
