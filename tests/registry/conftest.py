"""Brokers with the schema registry inside (`schema.registry.listeners`)."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from moldau.testing import BrokerProcess

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body) of one request."""
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": CONTENT_TYPE},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.headers["Content-Type"].startswith(CONTENT_TYPE)
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_ready(url: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Until the registry answers /subjects."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if call(url + "/subjects")[0] == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no schema registry at {url} after {timeout:.0f} s")
        time.sleep(0.2)


class RegistryBroker:
    """A broker and the URL of its registry."""

    def __init__(self, data_dir: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        self.broker = BrokerProcess(data_dir, {"schema.registry.listeners": self.url})

    def start(self) -> RegistryBroker:
        self.broker.start()
        wait_ready(self.url)
        return self
