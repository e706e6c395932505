"""Tiered storage measured through brokers, with a local SeaweedFS as the object store.

1. ``consume``: one broker; the same ``--mib`` MiB of records in a tiered topic whose
   closed segments have all left the disk and in an ordinary topic; MiB/s of a
   confluent-kafka consumer reading each from offset 0 (remote tier vs local disk).
2. ``disk``: one broker; ``--long-mib`` MiB produced to a tiered topic with
   ``local.retention.bytes`` of ``--local-mib`` MiB; the partition's bytes on the disk and
   in the bucket, sampled as it goes (local use is bounded by local retention while the
   copies keep up), once per ``--copiers`` value of
   ``remote.log.manager.copier.thread.pool.size`` (1: one upload at a time).
3. ``join``: two brokers; a partition with ``--mib`` MiB of history gets a second replica
   (``moldau reassign``); seconds until it is in the ISR and the bytes it holds, for a
   tiered topic (it fetches only the leader's local part) and an ordinary one.

Also reported: the load average before and after each part (the machine may be shared).
Results go to benchmarks/results/tiered_broker-<time>.json; nothing is asserted.

    PYTHONPATH=src python -m benchmarks.tiered_broker
    PYTHONPATH=src python -m benchmarks.tiered_broker --quick
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.harness import write_result
from moldau.testing import broker, cluster
from moldau.testing.cluster import ClusterProcess
from moldau.testing.seaweedfs import SeaweedFS

MIB = 1 << 20
VALUE = 1000  # bytes per record value
SEGMENT = 1 * MIB


def tiering_configs(store: SeaweedFS, prefix: str, copiers: int = -1) -> dict[str, str]:
    return {
        "remote.log.manager.copier.thread.pool.size": str(copiers),
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "s3",
        **store.rsm_configs("rsm.config."),
        "rsm.config.key.prefix": prefix,
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "500",
        "remote.log.metadata.topic.num.partitions": "3",
    }


def topic_configs(tiered: bool, local_bytes: int = 1) -> dict[str, str]:
    configs = {"segment.bytes": str(SEGMENT), "file.delete.delay.ms": "0"}
    if tiered:
        configs |= {
            "remote.storage.enable": "true",
            "local.retention.bytes": str(local_bytes),
            "retention.ms": "-1",
        }
    return configs


def produce(bootstrap: str, topic: str, mib: float, start: int = 0) -> int:
    """``mib`` MiB of ``VALUE``-byte records, acks=all; how many."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 20,
            "batch.size": 256 * 1024,
            "compression.type": "none",
        }
    )
    count = int(mib * MIB / VALUE)
    filler = os.urandom(VALUE - 16)
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(topic, b"%015d-" % i + filler, partition=0)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(300):
        raise RuntimeError("produce did not finish")
    return count


def consume_seconds(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * MIB,
            "max.partition.fetch.bytes": 8 * MIB,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen, started = 0, time.perf_counter()
    deadline = time.monotonic() + 600
    while seen < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: read {seen} of {count}")
        for msg in consumer.consume(500, timeout=0.2):
            if msg.error() is None:
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def partition_dir(data_dir: Path, topic: str) -> Path | None:
    return next(iter(data_dir.rglob(f"{topic}-0")), None)


def local_bytes(data_dir: Path, topic: str) -> int:
    """Disk blocks in use (as du counts: index files are sparse until written)."""
    found = partition_dir(data_dir, topic)
    return sum(p.stat().st_blocks * 512 for p in found.iterdir() if p.is_file()) if found else 0


def local_segments(data_dir: Path, topic: str) -> int:
    found = partition_dir(data_dir, topic)
    return len(list(found.glob("*.log"))) if found else 0


def remote_bytes(store: SeaweedFS, prefix: str) -> int:
    pages = store.client().get_paginator("list_objects_v2")
    return sum(
        o["Size"]
        for page in pages.paginate(Bucket=store.bucket, Prefix=prefix)
        for o in page.get("Contents", ())
    )


def wait(condition: Any, what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def consume_part(store: SeaweedFS, mib: float) -> dict[str, Any]:
    with broker(**{k.replace(".", "_"): v for k, v in tiering_configs(store, "c/").items()}) as b:
        b.create_topic(
            "remote", 1, **{k.replace(".", "_"): v for k, v in topic_configs(True).items()}
        )
        b.create_topic(
            "local", 1, **{k.replace(".", "_"): v for k, v in topic_configs(False).items()}
        )
        count = produce(b.bootstrap, "remote", mib)
        produce(b.bootstrap, "local", mib)
        wait(lambda: local_segments(b.data_dir, "remote") <= 1, "every closed segment tiered")
        before = load()
        remote_s = consume_seconds(b.bootstrap, "remote", count)
        local_s = consume_seconds(b.bootstrap, "local", count)
        return {
            "mib": mib,
            "records": count,
            "remote_tier_mib_s": round(mib / remote_s, 1),
            "local_tier_mib_s": round(mib / local_s, 1),
            "remote_s": round(remote_s, 2),
            "local_s": round(local_s, 2),
            "load_before": before,
            "load_after": load(),
        }


def disk_part(
    store: SeaweedFS, total_mib: float, local_mib: float, step_mib: float, copiers: int
) -> dict:
    configs = tiering_configs(store, f"d{copiers}/", copiers)
    with broker(**{k.replace(".", "_"): v for k, v in configs.items()}) as b:
        tc = topic_configs(True, int(local_mib * MIB))
        b.create_topic("long", 1, **{k.replace(".", "_"): v for k, v in tc.items()})
        samples, produced, started, before = [], 0, time.monotonic(), load()
        while produced < total_mib:
            produce(b.bootstrap, "long", step_mib, start=int(produced * MIB / VALUE))
            produced += step_mib
            samples.append(
                {
                    "produced_mib": produced,
                    "local_mib": round(local_bytes(b.data_dir, "long") / MIB, 2),
                    "remote_mib": round(remote_bytes(store, f"d{copiers}/") / MIB, 2),
                    "at_s": round(time.monotonic() - started, 1),
                }
            )
        # then the copies catch up and local retention brings the disk back down
        produced_at = time.monotonic()
        wait(
            lambda: local_segments(b.data_dir, "long") <= local_mib * MIB / SEGMENT + 2,
            "local retention",
        )
        return {
            "produce_mib_s": round(total_mib / (produced_at - started), 1),
            "copied_mib_s": round(
                remote_bytes(store, f"d{copiers}/") / MIB / (time.monotonic() - started), 1
            ),
            "settled_after_s": round(time.monotonic() - produced_at, 1),
            "settled_local_mib": round(local_bytes(b.data_dir, "long") / MIB, 2),
            "local_retention_mib": local_mib,
            "copier_threads": copiers,
            "segment_mib": SEGMENT / MIB,
            "max_local_mib": max(s["local_mib"] for s in samples),
            "samples": samples,
            "load_before": before,
            "load_after": load(),
        }


def reassign(c: ClusterProcess, topic: str, replicas: str) -> None:
    args = ["reassign", "--topic", topic, "--partition", "0", "--replicas", replicas]
    args += ["--wait", "--timeout", "600", "--bootstrap-server", c.bootstrap_servers]
    subprocess.run([sys.executable, "-m", "moldau", *args], check=True, capture_output=True)


def join_part(store: SeaweedFS, mib: float) -> dict[str, Any]:
    configs = tiering_configs(store, "j/")
    results: dict[str, Any] = {"mib": mib}
    with cluster(nodes=2, **{k.replace(".", "_"): v for k, v in configs.items()}) as c:
        for name, tiered in (("tiered", True), ("ordinary", False)):
            tc = topic_configs(tiered)
            c.create_topic(
                name, 1, replication_factor=1, **{k.replace(".", "_"): v for k, v in tc.items()}
            )
            (old,) = c.partition(name)["replicas"]
            new = next(n for n in c.nodes if n != old)
            produce(c.bootstrap_servers, name, mib)
            if tiered:
                old_dir = c.node(old).data_dir
                wait(
                    lambda d=old_dir, n=name: local_segments(d, n) <= 1,
                    "every closed segment tiered",
                )
            before = load()
            started = time.perf_counter()
            reassign(c, name, f"{old},{new}")
            c.wait_until(lambda: new in c.partition(name)["isr"], timeout=600)  # noqa: B023
            results[name] = {
                "join_s": round(time.perf_counter() - started, 2),
                "new_replica_local_mib": round(local_bytes(c.node(new).data_dir, name) / MIB, 2),
                "load_before": before,
                "load_after": load(),
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=48, help="history for consume and join")
    parser.add_argument("--long-mib", type=float, default=96, help="the long produce run")
    parser.add_argument("--local-mib", type=float, default=4, help="its local.retention.bytes")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    parser.add_argument("--parts", default="consume,disk,join")
    parser.add_argument(
        "--copiers",
        default="1,-1",
        help="remote.log.manager.copier.thread.pool.size values for disk (-1: the default)",
    )
    args = parser.parse_args()
    if args.quick:
        args.mib, args.long_mib, args.local_mib = 4, 8, 2
    parts = set(args.parts.split(","))
    results: dict[str, Any] = {}
    with SeaweedFS() as store:
        if "consume" in parts:
            results["consume"] = consume_part(store, args.mib)
            print("consume", results["consume"])
        if "disk" in parts:
            step = max(args.long_mib / 16, 1)
            for copiers in map(int, args.copiers.split(",")):
                run = disk_part(store, args.long_mib, args.local_mib, step, copiers)
                results[f"disk_copiers_{copiers}"] = run
                print("disk", {k: v for k, v in run.items() if k != "samples"})
        if "join" in parts:
            results["join"] = join_part(store, args.mib)
            print("join", results["join"])
    print(write_result("tiered_broker", args, results))


if __name__ == "__main__":
    main()
