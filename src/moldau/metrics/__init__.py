"""Prometheus metrics of a node, with Kafka's metric names as the JMX exporter renders them.

Hooks in the broker only count (plain ints and histogram buckets, per request or per batch,
never per record); everything else is read from the broker's own state when Prometheus
scrapes ``http://metrics.host:metrics.port/metrics``. See ``docs/internals.md``.

This module is what launchers need (``moldau cluster up``): the settings that turn the
endpoint on and the URL it serves. It imports nothing heavy: hooks import
:mod:`moldau.stats.counters` and :mod:`moldau.stats.timing` from hot modules.
"""

from __future__ import annotations

import re

PORT_KEY = "metrics.port"
HOST_KEY = "metrics.host"
DEFAULT_HOST = "127.0.0.1"

#: The line a node prints once its endpoint serves (after its ``listening on`` lines).
SERVING = re.compile(r"metrics on (http://\S+/metrics)")


def overrides(port: int, host: str = DEFAULT_HOST) -> list[str]:
    """``moldau server -o`` arguments that serve a node's metrics on ``host:port``."""
    if not 0 < port < 65536:
        raise ValueError(f"metrics port {port} is not in 1-65535")
    return [f"{PORT_KEY}={port}", f"{HOST_KEY}={host}"]


def url(host: str, port: int) -> str:
    """Where a node with these settings serves its metrics."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/metrics"


def served_url(line: str) -> str | None:
    """The URL in a node's ``metrics on URL`` line, None for any other line."""
    match = SERVING.search(line)
    return match.group(1) if match else None
