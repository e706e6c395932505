"""Share-group throughput: 1, 4 and 16 share consumers on ONE partition.

A Moldau broker subprocess; per consumer count, a fresh one-partition topic holding
``--records`` records and a fresh share group reading it from the start
(``share.auto.offset.reset=earliest``). confluent-kafka ShareConsumers in implicit
acknowledgement mode (each poll acknowledges the previous one, commit_sync() the last) consume
until every record arrived. Reports records/s acknowledged (records over the time from
subscribe to the last consumer closed), the broker's CPU time per 1000 records (from
/proc), and duplicates (records delivered twice: 0 unless a lock expired). Nothing is
asserted.

    python -m benchmarks.share_groups [--records 50000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from benchmarks.harness import create_topic, write_result
from moldau.testing import BrokerProcess

CONSUMERS = (1, 4, 16)
TIMEOUT_S = 300.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = b"x" * 100
    for i in range(records):
        producer.produce(topic, key=b"%d" % i, value=value)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(60) != 0:
        raise RuntimeError("records were not acknowledged")


def earliest(bootstrap: str, group: str) -> None:
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def measure(bootstrap: str, pid: int, consumers: int, records: int) -> dict[str, object]:
    topic = create_topic(bootstrap, f"share-{consumers}", 1)
    group = f"{topic}-group"
    fill(bootstrap, topic, records)
    earliest(bootstrap, group)
    seen: Counter[int] = Counter()
    lock = threading.Lock()
    done = threading.Event()

    def consume() -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        try:
            while not done.is_set():
                offsets = [m.offset() for m in consumer.poll(0.2) if m.error() is None]
                with lock:
                    seen.update(offsets)
                    if len(seen) >= records:
                        done.set()
            consumer.commit_sync()  # acknowledges the last poll (close() releases it)
        finally:
            consumer.close()

    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for t in threads:
        t.start()
    finished = done.wait(TIMEOUT_S)
    done.set()
    for t in threads:
        t.join(60)
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    return {
        "consumers": consumers,
        "records": records,
        "completed": finished,
        "seconds": round(elapsed, 2),
        "records_per_s": round(len(seen) / elapsed),
        "broker_cpu_ms_per_1000_records": round(1000 * 1000 * cpu / max(len(seen), 1), 2),
        "duplicates": sum(c - 1 for c in seen.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    args = parser.parse_args()
    records = 2_000 if args.quick else args.records
    with BrokerProcess() as broker:
        assert broker.proc is not None
        results = [measure(broker.bootstrap, broker.proc.pid, n, records) for n in CONSUMERS]
    for r in results:
        print(r)
    print(write_result("share_groups", args, results))


if __name__ == "__main__":
    main()
