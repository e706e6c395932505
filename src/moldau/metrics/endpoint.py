"""A node's ``/metrics`` endpoint: prometheus-client's HTTP server in its own thread.

A scrape asks the event loop for a snapshot of plain data (one hop, bounded by a timeout:
a stuck loop costs the node's families for that scrape, never a hung scraper) and builds
the families in the server's thread. The process, platform and GC collectors of
prometheus-client come along (CPU, memory, open files).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    start_http_server,
)
from prometheus_client.core import Metric

from moldau import metrics
from moldau.config.broker import ConfigError
from moldau.metrics.families import families
from moldau.metrics.snapshot import BrokerParts, NodeParts, NodeSnapshot, SnapshotTaker
from moldau.server.dispatch import Dispatcher
from moldau.stats.counters import Histogram

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig
    from moldau.server.node import Node

log = logging.getLogger(__name__)

T = TypeVar("T")

SNAPSHOT_TIMEOUT_S = 5.0
LOOP_PROBE_INTERVAL_S = 0.25
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], timeout_s: float) -> T:
    """Run ``fn`` on ``loop`` from another thread and return its result."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as e:
            done.set_exception(e)

    loop.call_soon_threadsafe(run)
    return done.result(timeout_s)


class NodeCollector:
    """The node's families, from a snapshot taken on its event loop at each scrape."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        take: Callable[[], NodeSnapshot],
        software_version: str,
        timeout_s: float = SNAPSHOT_TIMEOUT_S,
    ) -> None:
        self.loop = loop
        self.take = take
        self.version = software_version
        self.timeout_s = timeout_s

    def describe(self) -> list[Metric]:
        return []  # names are only known from a snapshot; registering must not take one

    def collect(self) -> Iterator[Metric]:
        try:
            snapshot = on_loop(self.loop, self.take, self.timeout_s)
        except TimeoutError:
            log.warning("metrics: the event loop did not answer within %.0f s", self.timeout_s)
            return
        except RuntimeError as e:  # the loop is closed: the node is stopping
            log.info("metrics: no snapshot (%s)", e)
            return
        yield from families(snapshot, int(time.time() * 1000), self.version)


class LoopLagProbe:
    """Arms a timer every ``interval_s`` and records how late it fires: the time the loop
    spent on other work (a long handler, a blocking call, GIL contention) meanwhile."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        histogram: Histogram,
        interval_s: float = LOOP_PROBE_INTERVAL_S,
    ) -> None:
        self.loop = loop
        self.histogram = histogram
        self.interval_s = interval_s
        self._due = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._due = time.monotonic() + self.interval_s
        self._timer = self.loop.call_later(self.interval_s, self._fired)

    def _fired(self) -> None:
        self.histogram.observe(max(time.monotonic() - self._due, 0.0))
        self.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class MetricsEndpoint:
    """A running ``/metrics`` HTTP server; it serves the process' metrics from the start
    and the node's once :meth:`watch` has been given the node."""

    def __init__(self, host: str, port: int, loop: asyncio.AbstractEventLoop) -> None:
        self.host = host
        self.loop = loop
        self.registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        self.server, self.thread = start_http_server(port, host, self.registry)
        self.probe: LoopLagProbe | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    @property
    def url(self) -> str:
        return metrics.url(self.host, self.port)

    def watch(self, parts: NodeParts) -> None:
        """Serve the node's metrics too (call on its loop, once)."""
        self.registry.register(NodeCollector(self.loop, SnapshotTaker(parts), software_version()))
        self.probe = LoopLagProbe(self.loop, parts.loop_lag)
        self.probe.start()

    def watch_node(self, node: Node) -> None:
        """:meth:`watch` a started node (its broker, controller, quorum and listeners)."""
        broker = node.broker
        controller = node.controller
        acceptors = node.acceptors
        self.watch(
            NodeParts(
                node_id=node.node_id,
                broker=BrokerParts(
                    broker.replica_manager,
                    broker.log_manager,
                    broker.groups,
                    broker.publisher,
                    broker.shares,
                )
                if broker is not None
                else None,
                controller=lambda: (
                    controller.quorum if controller is not None and controller.active else None
                ),
                raft=node.raft,
                requests=lambda: {
                    id(a.handler): a.handler.request_stats
                    for a in acceptors
                    if isinstance(a.handler, Dispatcher)
                }.values(),
                connections=lambda: {a.name: len(a.connections) for a in acceptors},
                loop_lag=Histogram(LOOP_LAG_BUCKETS),
            )
        )

    def close(self) -> None:
        if self.probe is not None:
            self.probe.stop()
        self.server.shutdown()
        self.server.server_close()


def software_version() -> str:
    try:
        return version("moldau")
    except PackageNotFoundError:
        return "unknown"


def start_metrics(config: BrokerConfig) -> MetricsEndpoint | None:
    """Bind the node's metrics endpoint if ``metrics.port`` is set (call on the node's
    loop, before the node starts, so a taken port fails at once); ConfigError for a port
    out of range, OSError if it cannot be bound."""
    port = config.int(metrics.PORT_KEY)
    if port <= 0:
        return None
    if port > 65535:
        raise ConfigError(f"{metrics.PORT_KEY}: {port} is not a port (1-65535, or 0: off)")
    host = config.get(metrics.HOST_KEY)
    try:
        return MetricsEndpoint(host, port, asyncio.get_running_loop())
    except OSError as e:
        raise OSError(e.errno, f"cannot serve metrics on {host}:{port}: {e.strerror}") from e
