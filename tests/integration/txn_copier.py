"""A consume-transform-produce loop (confluent-kafka), run as a process the tests kill.

``python -m tests.integration.txn_copier BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID``
reads INPUT under read_committed in GROUP (static membership, so a restarted copy takes
its partitions over at once), writes each value upper-cased to the same partition of
OUTPUT, and commits the consumed offsets in the same transaction. It runs until killed;
it prints ``committed N`` after each transaction.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer

BATCH = 25


def main(bootstrap: str, source: str, sink: str, group: str, transactional_id: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": transactional_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10_000,
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(60)
    consumer.subscribe([source])
    while True:
        messages = [m for m in consumer.consume(BATCH, timeout=0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for m in messages:
            producer.produce(sink, value=m.value().upper(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
        )
        producer.commit_transaction(60)
        print(f"committed {len(messages)}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
