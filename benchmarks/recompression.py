"""What broker-side recompression (topic ``compression.type``) costs per batch.

Times ``recompress_batches``, the function the leader's append runs when a batch's codec
differs from the topic's, on batches of 1 KiB records (JSON-like text, compressible the
way real payloads are) built by a producer in the source codec. Reported per case: MB/s
of uncompressed record bytes per wall second and per CPU second of this process (the
medians over rounds; on a shared machine the CPU figure is the one to compare), and the
batch sizes before and after.
The ``producer`` case is the no-op check every append pays. Results go to
benchmarks/results/recompression-*.json; nothing is asserted.

    python -m benchmarks.recompression [--quick] [--rounds N] [--records-per-batch N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from rich.console import Console
from rich.table import Table

from benchmarks.harness import write_result
from moldau.config.topic import LogConfig
from moldau.records.batch import recompress_batches, scan_batches
from moldau.records.compression import CODEC_BY_NAME
from moldau.records.record import build_batch

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--records-per-batch", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.records_per_batch = 3, 50
    rnd = random.Random(19)
    records = [payload(rnd, i) for i in range(args.records_per_batch)]
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
