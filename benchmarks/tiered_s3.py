"""Throughput of the ``s3`` remote storage manager against a local SeaweedFS server.

Copies a segment of ``--mib`` MiB of random bytes (with small index files, as a real copy
has) ``--runs`` times through ``copy_log_segment_data``, reads each back whole with
``fetch_log_segment`` and in ``--range-kib`` KiB ranged reads (as consumer fetches do), and
deletes it. Reported per run: MiB/s for the copy, the whole read and the ranged reads,
and the process CPU seconds per GiB copied. SeaweedFS runs on the same machine, so the
figures bound the client and the local store, not a network.

    PYTHONPATH=src python -m benchmarks.tiered_s3
    PYTHONPATH=src python -m benchmarks.tiered_s3 --mib 8 --runs 1   # quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.harness import write_result
from moldau.storage.remote.segment import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from moldau.storage.remote.storage_manager import load_remote_storage_manager
from moldau.testing.seaweedfs import SeaweedFS

MIB = 1 << 20


def segment_files(directory: Path, size: int) -> LogSegmentData:
    files = {}
    for suffix, length in ((".log", size), (".index", 10 * 1024), (".timeindex", 15 * 1024)):
        path = directory / f"00000000000000000000{suffix}"
        with open(path, "wb") as f:
            for _ in range(0, length, MIB):
                f.write(os.urandom(min(MIB, length)))
            f.truncate(length)
        files[suffix] = path
    return LogSegmentData(
        files[".log"], files[".index"], files[".timeindex"], None, None, b"0\n1\n0 0\n"
    )


def run_once(rsm, data: LogSegmentData, size: int, range_bytes: int) -> dict[str, float]:
    tp = TopicIdPartition(uuid.uuid4(), "bench", 0)
    md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate(tp), 0, 999, 0, 0, 0, size, {0: 0})
    cpu, started = time.process_time(), time.perf_counter()
    rsm.copy_log_segment_data(md, data)
    copy_s, copy_cpu = time.perf_counter() - started, time.process_time() - cpu
    started = time.perf_counter()
    whole = rsm.fetch_log_segment(md, 0)
    read_s = time.perf_counter() - started
    assert len(whole) == size
    started = time.perf_counter()
    for position in range(0, size, range_bytes):
        rsm.fetch_log_segment(md, position, min(position + range_bytes, size) - 1)
    ranged_s = time.perf_counter() - started
    rsm.delete_log_segment_data(md)
    mib = size / MIB
    return {
        "copy_mib_s": mib / copy_s,
        "read_mib_s": mib / read_s,
        "ranged_read_mib_s": mib / ranged_s,
        "copy_cpu_s_per_gib": copy_cpu * 1024 / mib,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="segment size in MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--range-kib", type=int, default=1024, help="ranged read size")
    parser.add_argument("--part-mib", type=int, default=25, help="multipart part size")
    args = parser.parse_args()
    size = args.mib * MIB
    with SeaweedFS() as store, tempfile.TemporaryDirectory() as tmp:
        configs = {
            **store.rsm_configs(),
            "storage.s3.multipart.upload.part.size": str(args.part_mib * MIB),
        }
        rsm = load_remote_storage_manager("s3", configs)
        data = segment_files(Path(tmp), size)
        runs = [run_once(rsm, data, size, args.range_kib * 1024) for _ in range(args.runs)]
        rsm.close()
    results = {
        key: {"median": statistics.median(r[key] for r in runs), "runs": [r[key] for r in runs]}
        for key in runs[0]
    }
    for key, value in results.items():
        print(
            f"{key:>22}: {value['median']:8.1f}  (runs: {', '.join(f'{v:.1f}' for v in value['runs'])})"
        )
    print(write_result("tiered_s3", args, results))


if __name__ == "__main__":
    main()
