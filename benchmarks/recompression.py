"""What broker-side recompression (topic ``compression.type``) costs per batch.

Times ``recompress_batches``, the function the leader's append runs when a batch's codec
differs from the topic's, on batches of 1 KiB records (JSON-like text, compressible the
way real payloads are) built by a producer in the source codec. Reported per case: MB/s
of uncompressed record bytes per wall second and per CPU second of this process (the
medians over rounds; on a shared machine the CPU figure is the one to compare), and the
batch sizes before and after.
The ``producer`` case is the no-op check every append pays.

``--loop-lag`` measures what matters to a broker instead: a real broker (metrics on) takes
lz4 batches of ``--records-per-batch`` records produced by confluent-kafka to a zstd topic,
and its ``moldau_event_loop_lag_seconds`` histogram tells how long its event loop stalled
meanwhile (probes later than 50 ms, and the bucket of the worst one). Results go to
benchmarks/results/recompression-*.json; nothing is asserted.

    python -m benchmarks.recompression [--quick] [--rounds N] [--records-per-batch N]
    python -m benchmarks.recompression --loop-lag [--rounds N] [--records-per-batch N]
"""

from __future__ import annotations

import argparse
import random
import re
import socket
import statistics
import time
import urllib.request

from rich.console import Console
from rich.table import Table

from benchmarks.harness import write_result
from moldau.config.topic import LogConfig
from moldau.records.batch import recompress_batches, scan_batches
from moldau.records.compression import CODEC_BY_NAME
from moldau.records.record import build_batch
from moldau.testing import BrokerProcess

RECORD_SIZE = 1024
CASES = [  # (producer codec, topic compression.type)
    ("lz4", "zstd"),
    ("snappy", "gzip"),
    ("lz4", "producer"),
]


def payload(rnd: random.Random, i: int) -> bytes:
    """~1 KiB of JSON-like text: repeated field names, random ids and numbers."""
    fields = []
    while sum(map(len, fields)) < RECORD_SIZE - 60:
        fields.append(f'"user_{rnd.randrange(10_000)}": {{"score": {rnd.random():.6f}}}')
    return (
        (f'{{"seq": {i}, ' + ", ".join(fields) + "}")
        .encode()[:RECORD_SIZE]
        .ljust(RECORD_SIZE, b" ")
    )


def run_case(source: str, target: str, records: list[bytes], rounds: int) -> dict[str, object]:
    batch = build_batch([(None, v) for v in records], compression=CODEC_BY_NAME[source])
    config = LogConfig(compression_type=target)
    raw_bytes = len(records) * RECORD_SIZE
    timings, cpu = [], []
    out_size = len(batch)
    for _ in range(rounds):
        buf = bytearray(batch)
        infos = scan_batches(buf)
        start, start_cpu = time.perf_counter(), time.process_time()
        if config.compression_type != "producer":
            buf, infos = recompress_batches(
                buf, infos, CODEC_BY_NAME[target], config.compression_level
            )
        timings.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        out_size = len(buf)
    seconds, cpu_seconds = statistics.median(timings), statistics.median(cpu)
    return {
        "source": source,
        "target": target,
        "records": len(records),
        "record_bytes": raw_bytes,
        "batch_bytes_in": len(batch),
        "batch_bytes_out": out_size,
        "median_ms": seconds * 1000,
        "mb_per_s": raw_bytes / seconds / 1e6 if seconds else None,
        "median_cpu_ms": cpu_seconds * 1000,
        "mb_per_cpu_s": raw_bytes / cpu_seconds / 1e6 if cpu_seconds else None,
    }


_LAG_BUCKET = re.compile(r'moldau_event_loop_lag_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)')


def lag_buckets(port: int) -> dict[float, float]:
    """Cumulative counts of the broker's loop lag histogram, by upper bound."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {float(le): float(n) for le, n in _LAG_BUCKET.findall(text)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loop_lag(records: list[bytes], rounds: int) -> dict[str, object]:
    """Batches of ``records`` (lz4) produced to a zstd topic of a real broker: its loop lag."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    port, big = free_port(), str(64 << 20)
    with BrokerProcess(configs={"metrics.port": port, "message.max.bytes": big}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        config = {"compression.type": "zstd", "max.message.bytes": big}
        admin.create_topics([NewTopic("lag", 1, 1, config=config)])["lag"].result(30)
        producer = Producer(
            {
                "bootstrap.servers": b.bootstrap,
                "compression.type": "lz4",
                "linger.ms": 1000,
                "batch.size": 32 << 20,
                "batch.num.messages": 1_000_000,
                "message.max.bytes": big,
            }
        )
        producer.produce("lag", b"warm-up")
        producer.flush(30)
        before = lag_buckets(port)
        start = time.perf_counter()
        for _ in range(rounds):
            for value in records:
                producer.produce("lag", value)
            producer.flush(120)
        seconds = time.perf_counter() - start
        after = lag_buckets(port)
    delta = {le: after[le] - before.get(le, 0) for le in sorted(after)}
    total = delta[float("inf")]
    worst = min(le for le, n in delta.items() if n == total)
    return {
        "batches": rounds,
        "records_per_batch": len(records),
        "produce_seconds": seconds,
        "probes": total,
        "probes_over_50ms": total - delta[0.05],
        "probes_over_250ms": total - delta[0.25],
        "worst_lag_bucket_s": worst,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--records-per-batch", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--loop-lag", action="store_true", help="a broker's loop lag instead")
    parser.add_argument("--label", default="", help="added to the result file's name")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.records_per_batch = 3, 50
    rnd = random.Random(19)
    records = [payload(rnd, i) for i in range(args.records_per_batch)]
    if args.loop_lag:
        lag = loop_lag(records, args.rounds)
        print(lag)
        print(
            write_result(
                "recompression-loop-lag" + (f"-{args.label}" if args.label else ""), args, lag
            )
        )
        return
    results = [run_case(s, t, records, args.rounds) for s, t in CASES]
    table = Table(title="recompression of one batch of 1 KiB records")
    columns = ("case", "records", "in bytes", "out bytes", "ms", "MB/s", "CPU ms", "MB/CPU s")
    for column in columns:
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            f"{r['source']} -> {r['target']}",
            str(r["records"]),
            str(r["batch_bytes_in"]),
            str(r["batch_bytes_out"]),
            f"{r['median_ms']:.3f}",
            f"{r['mb_per_s']:.0f}" if r["mb_per_s"] else "-",
            f"{r['median_cpu_ms']:.3f}",
            f"{r['mb_per_cpu_s']:.0f}" if r["mb_per_cpu_s"] else "-",
        )
    Console().print(table)
    print(write_result("recompression", args, results))


if __name__ == "__main__":
    main()
