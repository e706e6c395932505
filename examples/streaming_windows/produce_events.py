"""Produce JSON purchase events with event times (some out of order) into a topic."""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

USERS = [f"user-{i}" for i in range(5)]


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
    except Exception as exc:  # noqa: BLE001 - an existing topic is fine
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


def produce_events(bootstrap: str, topic: str, count: int, minutes: int, seed: int = 7) -> None:
    """`count` events spread over `minutes` minutes of event time ending now; about one in
    ten arrives up to 20 s late, which the job's watermark still accepts."""
    ensure_topic(bootstrap, topic, 3)
    rng = random.Random(seed)
    start = datetime.now(UTC) - timedelta(minutes=minutes)
    step = minutes * 60 / count
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        late = rng.uniform(0, 20) if rng.random() < 0.1 else 0.0
        event_time = start + timedelta(seconds=i * step - late)
        user = rng.choice(USERS)
        event = {
            "user": user,
            "amount": round(rng.uniform(1, 100), 2),
            "event_time": event_time.isoformat(),
        }
        producer.produce(topic, json.dumps(event).encode(), user.encode())
        producer.poll(0)
    producer.flush(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="purchases")
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--minutes", type=int, default=10)
    args = parser.parse_args()
    produce_events(args.bootstrap_server, args.topic, args.count, args.minutes)
    print(f"produced {args.count} events to {args.topic}")


if __name__ == "__main__":
    main()
