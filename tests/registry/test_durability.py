"""The registry's state lives in `_schemas`: a broker restart keeps subjects and ids, and on
a 3-node cluster writes survive the primary's kill -9 with fresh ids while old ids still
resolve on every node."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from moldau.testing.cluster import ClusterProcess
from tests.registry.conftest import RegistryBroker, call, free_port, wait_ready

FAILOVER_TIMEOUT_S = 90.0


def avro_record(name: str) -> dict[str, str]:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": []})}


def register(url: str, subject: str, body: dict[str, str]) -> int:
    status, answer = call(f"{url}/subjects/{subject}/versions", "POST", body)
    assert status == 200, answer
    return int(answer["id"])


def test_restart_keeps_subjects_and_ids(tmp_path: Path) -> None:
    node = RegistryBroker(tmp_path / "broker").start()
    try:
        ids = {
            s: register(node.url, s, avro_record(s.replace("-", "_")))
            for s in ("a-value", "b-value")
        }
        assert call(node.url + "/config/a-value", "PUT", {"compatibility": "FULL"})[0] == 200
        node.broker.restart()
        wait_ready(node.url)
        assert call(node.url + "/subjects")[1] == ["a-value", "b-value"]
        for subject, schema_id in ids.items():
            assert call(f"{node.url}/subjects/{subject}/versions/1")[1]["id"] == schema_id
            assert call(f"{node.url}/schemas/ids/{schema_id}")[0] == 200
        assert call(node.url + "/config/a-value")[1] == {"compatibilityLevel": "FULL"}
        assert register(node.url, "c-value", avro_record("c")) == max(ids.values()) + 1
    finally:
        node.broker.close()


def primary_node(c: ClusterProcess, urls: dict[int, str]) -> int:
    """The node whose registry last said it is the primary."""

    def elected() -> int | None:
        found = None
        for node_id, node in c.nodes.items():
            if not node.running:
                continue
            node.settle_output()
            for line in node.output:
                if "schema registry: generation" in line and "(this node)" in line:
                    found = node_id
        return found

    return c.wait_until(elected, timeout=FAILOVER_TIMEOUT_S)


@pytest.mark.slow
def test_primary_failover_on_three_nodes() -> None:
    c = ClusterProcess(nodes=3)
    urls = {}
    for node_id, node in c.nodes.items():
        urls[node_id] = f"http://127.0.0.1:{free_port()}"
        node.configs["schema.registry.listeners"] = urls[node_id]
    with c:
        for url in urls.values():
            wait_ready(url)
        primary = primary_node(c, urls)
        other = next(i for i in urls if i != primary)
        first = register(urls[other], "orders-value", avro_record("Order"))  # forwarded
        second = register(urls[primary], "users-value", avro_record("User"))
        assert second == first + 1
        for url in urls.values():  # every node reads what the primary wrote
            assert call(f"{url}/schemas/ids/{first}")[0] == 200

        c.kill(primary)
        survivors = [i for i in urls if i != primary]
        deadline = time.monotonic() + FAILOVER_TIMEOUT_S
        while True:  # writes fail only until a new primary is elected
            status, answer = call(
                f"{urls[survivors[0]]}/subjects/after-value/versions", "POST", avro_record("After")
            )
            if status == 200:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.5)
        third = int(answer["id"])
        assert third > second  # never an id handed out before
        assert register(urls[survivors[1]], "later-value", avro_record("Later")) == third + 1

        c.start_node(primary)
        wait_ready(urls[primary])
        for url in urls.values():
            for schema_id, subject in (
                (first, "orders-value"),
                (second, "users-value"),
                (third, "after-value"),
            ):
                status, versions = call(f"{url}/schemas/ids/{schema_id}/versions")
                assert (status, versions) == (200, [{"subject": subject, "version": 1}])
