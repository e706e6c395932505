"""Two source trees side by side: what one acks=all message costs each, under the same load.

On a shared machine the CPU one message costs a broker moves with the load by ±20%
between runs of the same build (a broker woken per message starts on cold caches), so
alternating whole runs (``request_rate --only alone``) cannot show a change of a few
percent. Here both builds run at once: a 3-node cluster (RF=3, ``min.insync.replicas=2``)
from each source tree, and one confluent-kafka producer per cluster sends messages alone
(acks=all, each awaited before the next), in blocks of ``--messages / --blocks`` that
alternate between the two clusters (ABBA...), so both see the same machine at the same
time. Reported per side: the median over blocks of each broker's CPU microseconds per
message net of its idle share (measured for both at once beforehand), every block's
leader figure, and the round-trip p50/p99. Nothing is asserted; results go to
``benchmarks/results/alone_pair-<label>-<UTC time>.json``.

    git archive main src | tar -x -C /tmp/main
    python -m benchmarks.alone_pair --before /tmp/main/src --after src --messages 3000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import write_result
from benchmarks.request_rate import alone_cluster, cpu_seconds, load, percentiles

SIDES = ("before", "after")


def hold() -> None:
    """In a child started with one source tree on PYTHONPATH: a cluster and its topic,
    described on stdout as JSON, kept up until stdin closes."""
    with alone_cluster() as (c, topic, _, _, pids):
        print(json.dumps({"bootstrap": c.bootstrap_servers, "topic": topic, "pids": pids}))
        sys.stdout.flush()
        sys.stdin.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="source tree (its src directory)")
    parser.add_argument("--after", help="source tree (its src directory)")
    parser.add_argument("--messages", type=int, default=3000, help="per side")
    parser.add_argument("--blocks", type=int, default=10, help="alternations per side")
    parser.add_argument("--idle-seconds", type=float, default=4.0)
    parser.add_argument("--label", default="run")
    parser.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold:
        hold()
        return
    if not args.before or not args.after:
        parser.error("--before and --after are both needed")
    from confluent_kafka import Producer

    root = str(Path(__file__).resolve().parent.parent)
    holders = {
        side: subprocess.Popen(
            [sys.executable, "-m", "benchmarks.alone_pair", "--hold"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=root,
            env=dict(os.environ, PYTHONPATH=os.path.abspath(getattr(args, side))),
        )
        for side in SIDES
    }
    try:
        clusters: dict[str, Any] = {}
        for side, holder in holders.items():
            assert holder.stdout is not None
            clusters[side] = json.loads(holder.stdout.readline())
        producers = {
            side: Producer({"bootstrap.servers": c["bootstrap"], "acks": "all", "linger.ms": 0})
            for side, c in clusters.items()
        }
        value = b"x" * 100

        def send(side: str) -> float:
            sent = time.monotonic()
            producers[side].produce(clusters[side]["topic"], value, partition=0)
            producers[side].flush(30)
            return time.monotonic() - sent

        for side in SIDES:
            for _ in range(200):  # warm-up: connections, metadata
                send(side)

        def cpu(side: str) -> dict[str, float]:
            return {role: cpu_seconds(pid) for role, pid in clusters[side]["pids"].items()}

        start = {side: cpu(side) for side in SIDES}
        time.sleep(args.idle_seconds)
        idle = {
            side: {r: (t - start[side][r]) / args.idle_seconds for r, t in cpu(side).items()}
            for side in SIDES
        }
        per_block = args.messages // args.blocks
        samples: dict[str, list[int]] = {side: [] for side in SIDES}
        blocks: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
        before = load()
        for b in range(args.blocks):
            for side in SIDES if b % 2 == 0 else SIDES[::-1]:
                cpu_start, started = cpu(side), time.monotonic()
                samples[side] += [int(send(side) * 1e6) for _ in range(per_block)]
                elapsed = time.monotonic() - started
                blocks[side].append(
                    {
                        r: (t - cpu_start[r] - idle[side][r] * elapsed) * 1e6 / per_block
                        for r, t in cpu(side).items()
                    }
                )
        result: dict[str, Any] = {"load_before": before, "load_after": load()}
        for side in SIDES:
            result[side] = {
                "source": getattr(args, side),
                "net_cpu_us_per_msg": {
                    r: round(statistics.median(b[r] for b in blocks[side])) for r in blocks[side][0]
                },
                "leader_blocks": [round(b["leader"]) for b in blocks[side]],
                "idle_cpu_share": {r: round(share, 4) for r, share in idle[side].items()},
                **percentiles(samples[side]),
            }
        print(json.dumps(result, indent=1), flush=True)
        print(write_result(f"alone_pair-{args.label}", args, result))
    finally:
        for holder in holders.values():
            assert holder.stdin is not None
            holder.stdin.close()
        for holder in holders.values():
            holder.wait(120)


if __name__ == "__main__":
    main()
