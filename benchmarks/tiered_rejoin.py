"""How long a replica that was away takes to rejoin the ISR, N segments behind.

One 3-node cluster (``moldau.testing.cluster()``) tiering to a ``file`` store. For each N,
two RF=3 topics with 4000-byte segments: a tiered one (local retention of one byte, so the
other replicas keep only what is not copied yet) and a local one. A follower is killed
(-9), N segments are produced (acks=all) and, for the tiered topic, copied and dropped from
the other disks; then the follower is started again. Measured from the moment its process
listens until the leader's ISR has it again: the tiered replica rebuilds its state from the
remote tier (KIP-405) and fetches only the local tail, the local one fetches all N
segments.

Results go to benchmarks/results/tiered_rejoin-*.json; nothing is asserted.

    python -m benchmarks.tiered_rejoin [--segments 10 40 160] [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.harness import write_result
from moldau.storage.remote.metadata_records import REMOTE_LOG_METADATA_TOPIC
from moldau.testing.cluster import ClusterProcess

SEGMENT_BYTES = 4000
RECORDS_PER_SEGMENT = 20  # 20 records of ~130 bytes: one produce request fills a segment
GIVE_UP_S = 300.0


def wait(condition: Any, what: str, timeout: float = GIVE_UP_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.05)


def local_start(c: ClusterProcess, node: int, topic: str) -> int:
    bases = [int(p.name.split(".")[0]) for p in c.node(node).data_dir.rglob(f"{topic}-0/*.log")]
    return min(bases, default=-1)


def produce(c: ClusterProcess, topic: str, segments: int) -> int:
    """``segments`` produce requests of one segment's worth each; records acknowledged."""
    acked = 0
    for n in range(segments):
        values = [f"{topic}-{n:05d}-{i:02d}-".encode() * 6 for i in range(RECORDS_PER_SEGMENT)]
        acked += len(c.produce(topic, *values, timeout=60))
    return acked


def metadata_on_every_node(c: ClusterProcess) -> None:
    """__remote_log_metadata is created with as many replicas as brokers are up at the
    time: give it all three, so that the killed node is never its only replica."""
    wait(lambda: REMOTE_LOG_METADATA_TOPIC in c.describe()["topics"], "the metadata topic")
    if len(c.partition(REMOTE_LOG_METADATA_TOPIC, 0)["replicas"]) < len(c.nodes):
        replicas = ",".join(map(str, c.nodes))
        subprocess.run(
            [sys.executable, "-m", "moldau", "reassign", "--topic", REMOTE_LOG_METADATA_TOPIC]
            + ["--partition", "0", "--replicas", replicas, "--wait", "--timeout", "90"]
            + ["--bootstrap-server", c.bootstrap_servers],
            check=True,
            capture_output=True,
        )


def rejoin(c: ClusterProcess, topic: str, segments: int, tiered: bool) -> dict[str, Any]:
    configs: dict[str, str] = {"segment_bytes": str(SEGMENT_BYTES), "retention_ms": "-1"}
    if tiered:
        configs |= {
            "remote_storage_enable": "true",
            "local_retention_bytes": "1",
            "file_delete_delay_ms": "0",
        }
    c.create_topic(topic, 1, replication_factor=3, min_insync_replicas="2", **configs)
    produce(c, topic, 2)
    leader = c.leader(topic)
    away = next(n for n in c.nodes if n != leader)
    c.kill(away)
    behind = produce(c, topic, segments)
    if tiered:
        wait(
            lambda: all(local_start(c, n, topic) >= behind for n in c.nodes if n != away),
            "the missed segments to leave the other disks",
        )
    launched = time.monotonic()
    c.start_node(away)
    listening = time.monotonic()
    wait(lambda: away in c.partition(topic)["isr"], "the replica to rejoin")
    rejoined = time.monotonic()
    return {
        "topic": topic,
        "tiered": tiered,
        "segments_behind": segments,
        "records_behind": behind,
        "start_s": round(listening - launched, 2),
        "rejoin_after_listening_s": round(rejoined - listening, 2),
        "local_start_of_the_replica": local_start(c, away, topic),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, nargs="+", default=[10, 40, 160])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    counts = [3, 10] if args.quick else args.segments
    results = []
    with tempfile.TemporaryDirectory(prefix="tiered-rejoin-") as remote:
        configs = {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "file",
            "rsm.config.dir": remote,
            "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "200",
            "remote.log.metadata.topic.num.partitions": "1",
        }
        with ClusterProcess(3, configs=configs) as c:
            metadata_on_every_node(c)
            for n in counts:
                for tiered in (True, False):
                    name = f"{'tiered' if tiered else 'local'}-{n}"
                    result = rejoin(c, name, n, tiered)
                    print(result, flush=True)
                    results.append(result)
    print(write_result("tiered_rejoin", args, results))


if __name__ == "__main__":
    main()
