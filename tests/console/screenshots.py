"""Screenshots of the console's main pages for docs/console/: a three-node cluster (two
racks, every node's metrics) with demo traffic, the console, Chromium. Run from the repository root: `python -m tests.console.screenshots`."""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import sync_playwright

from moldau.testing import ClusterProcess
from moldau.testing.process import TEST_DEFAULTS
from tests.console.conftest import CHROMIUM, CHROMIUM_ARGS, start_console, stop_console

PAGES = {
    "overview": "/",
    "topics": "/topics",
    "topic": "/topics/orders",
    "messages": "/topics/orders/messages",
    "configs": "/topics/orders/configs",
    "groups": "/groups",
    "group": "/groups/billing",
}


def traffic(bootstrap: str, stop: threading.Event) -> None:
    """Orders in waves, steady payments, a few binary audit records."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    rng = random.Random(7)
    started = time.monotonic()
    n = 0
    while not stop.is_set():
        t = time.monotonic() - started
        for _ in range(int(60 + 50 * math.sin(t / 3))):
            order = {
                "order_id": f"o-{n:06d}",
                "customer": f"c-{rng.randrange(400):03d}",
                "total": round(rng.uniform(5, 250), 2),
                "currency": "EUR",
                "items": [{"sku": f"SKU-{rng.randrange(90):02d}", "qty": rng.randrange(1, 4)}],
            }
            producer.produce(
                "orders",
                json.dumps(order).encode(),
                order["customer"].encode(),
                headers=[("source", b"web-shop"), ("schema", b"order.v2")],
            )
            n += 1
        for _ in range(25):
            producer.produce("payments", f"payment {n} settled".encode(), f"p-{n % 97}".encode())
        if n % 7 == 0:
            producer.produce("audit-log", bytes(rng.randrange(256) for _ in range(24)), b"blob")
        producer.poll(0)
        stop.wait(0.2)
    producer.flush(10)


def slow_consumer(bootstrap: str, stop: threading.Event) -> None:
    """Group `billing` reads orders a little slower than they arrive, then catches up."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
            "client.id": "billing-service",
        }
    )
    consumer.subscribe(["orders"])
    started = time.monotonic()
    while not stop.is_set():
        t = time.monotonic() - started
        consumer.consume(40 if t < 12 else 400, timeout=0.5)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/console"))
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of traffic first")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as data:
        configs = {**TEST_DEFAULTS, "num.partitions": "3"}
        with ClusterProcess(
            3, ["r1", "r1", "r2"], configs, data_dir=Path(data), metrics=True
        ) as cluster:
            bootstrap = cluster.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [
                NewTopic("orders", 6, 3, config={"retention.ms": "604800000"}),
                NewTopic("payments", 3, 3, config={"cleanup.policy": "compact"}),
                NewTopic("audit-log", 1, 3),
            ]
            for future in admin.create_topics(topics).values():
                future.result()
            endpoints = [
                a for i in sorted(cluster.nodes) for a in ("--metrics", cluster.metrics_url(i))
            ]
            console = start_console(bootstrap, "--sample-interval", "1", *endpoints)
            stop = threading.Event()
            workers = [
                threading.Thread(target=traffic, args=(bootstrap, stop)),
                threading.Thread(target=slow_consumer, args=(bootstrap, stop)),
            ]
            try:
                for worker in workers:
                    worker.start()
                time.sleep(args.warmup)
                shoot(console.page_url(""), args.out)
            finally:
                stop.set()
                for worker in workers:
                    worker.join()
                stop_console(console)


def shoot(base: str, out: Path) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
        for name, path in PAGES.items():
            page.goto(base + path)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(800)
            if name == "messages":
                page.locator("#records tr.record td.value summary").first.click()
            page.screenshot(path=str(out / f"{name}.png"), full_page=name != "messages")
            print(f"wrote {out / name}.png")
        browser.close()


if __name__ == "__main__":
    main()
