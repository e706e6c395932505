"""One huge admin request must not freeze the broker for everyone else: the replicas a
CreatePartitions of thousands brings are opened a slice at a time, while other clients
keep being served (before, 10,000 new partitions held every request for 15-30 s)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.robustness.conftest import Start

NEW_PARTITIONS = 5_000


def test_a_huge_create_partitions_does_not_stall_other_clients(start_broker: Start) -> None:
    b = start_broker()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("wide", 1, 1), NewTopic("probe", 1, 1)]).values():
        f.result(30)
    probe = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    waits: list[float] = []
    stop = threading.Event()

    def produce_all_along() -> None:
        while not stop.is_set():
            started = time.monotonic()
            probe.produce("probe", b"x")
            assert probe.flush(60) == 0
            waits.append(time.monotonic() - started)
            time.sleep(0.01)

    prober = threading.Thread(target=produce_all_along)
    prober.start()
    try:
        time.sleep(0.5)
        (done,) = admin.create_partitions([NewPartitions("wide", NEW_PARTITIONS)]).values()
        done.result(120)
        wide = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
        delivered: list[int] = []
        sample = range(0, NEW_PARTITIONS, NEW_PARTITIONS // 50)
        for p in sample:  # the last partitions opened too, and take writes
            wide.produce(
                "wide",
                b"v",
                partition=p,
                on_delivery=lambda e, m: e or delivered.append(m.partition()),
            )
        assert wide.flush(120) == 0
        assert sorted(delivered) == list(sample)
    finally:
        stop.set()
        prober.join(120)
    # Opening 5,000 logs on the event loop at once took several seconds here.
    assert len(waits) > 10 and max(waits) < 3.0, sorted(waits)[-5:]
    assert b.alive and not b.tracebacks()
