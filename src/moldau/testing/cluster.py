"""A real local Moldau cluster for tests: ``moldau.testing.cluster()``.

::

    from moldau.testing import cluster

    with cluster(nodes=3, racks=["r1", "r1", "r2"]) as c:    # or: async with cluster() as c:
        c.create_topic("orders", partitions=6)                # replication factor 3
        c.produce("orders", "a", "b")
        c.kill(c.leader("orders", 0))                          # kill -9 of a node
        assert sorted(r.value for r in c.consume("orders", 2, timeout=30)) == [b"a", b"b"]
        c.start_node(1)                                        # back, same ports and data

Every node is a combined broker and controller (``process.roles=broker,controller``), a
voter of one KRaft quorum, laid out as ``moldau cluster up`` lays them out
(:class:`~moldau.cli.cluster.LocalCluster`), and runs as a
:class:`~moldau.testing.BrokerProcess` forked from the fork server, so a cluster starts
in about the time its quorum takes to elect a leader.
"""

from __future__ import annotations

import asyncio
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from moldau.testing.clients import ClientHelpers, kafka_configs
from moldau.testing.process import TEST_DEFAULTS, BrokerProcess

T = TypeVar("T")
NodeRef = int | BrokerProcess
STARTUP_TIMEOUT_S = 60.0


class ClusterProcess(ClientHelpers):
    """N combined KRaft nodes on 127.0.0.1, node ids 1..N.

    Ports are chosen once, so a node that is restarted (``restart``, ``start_node`` after
    ``kill``) comes back at the same addresses with its data. ``configs`` are server
    properties for every node. Without ``data_dir`` the data lives in a temporary
    directory that ``close()`` removes. ``hosts`` gives each node an address of its own to
    bind and advertise, and ``network_namespaces`` the namespace (``ip netns add``) each
    node runs in: the fault tests cut the network between nodes that way.
    """

    def __init__(
        self,
        nodes: int = 3,
        racks: Iterable[str] | None = None,
        configs: Mapping[str, object] | None = None,
        *,
        data_dir: Path | str | None = None,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        metrics: bool = False,
        hosts: Iterable[str] | None = None,
        network_namespaces: Iterable[str] | None = None,
    ) -> None:
        """``metrics`` serves each node's Prometheus metrics (:meth:`metrics_url`)."""
        from moldau.cli.local_cluster import LocalCluster

        rack_list = list(racks) if racks is not None else None
        host_list = list(hosts) if hosts is not None else None
        namespaces = list(network_namespaces) if network_namespaces is not None else None
        for what, given in (("racks", rack_list), ("hosts", host_list), ("namespaces", namespaces)):
            if given is not None and len(given) != nodes:
                raise ValueError(f"{len(given)} {what} for {nodes} nodes")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="moldau-cluster-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        overrides = {k: str(v) for k, v in (configs or {}).items()}
        self.layout = LocalCluster(
            nodes,
            self.data_dir,
            racks=rack_list,
            metrics=metrics,
            overrides=overrides,
            hosts=host_list,
        )
        self.startup_timeout = startup_timeout
        self.nodes: dict[int, BrokerProcess] = {}
        self.paused: set[int] = set()
        for spec in self.layout.nodes:
            node = BrokerProcess(
                spec.data_dir,
                self.layout.properties(spec),
                startup_timeout=startup_timeout,
                network_namespace=namespaces[spec.node_id - 1] if namespaces else None,
            )
            # known before it listens: bootstrap_servers works
            node.host, node.port = spec.host, spec.client_port
            self.nodes[spec.node_id] = node

    # -- addresses -------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """Every node's client listener (clients skip the ones that are down)."""
        return self.layout.bootstrap_servers

    @property
    def cluster_id(self) -> str:
        return self.layout.cluster_id

    def node(self, ref: NodeRef) -> BrokerProcess:
        """A node by id (1..N)."""
        if isinstance(ref, BrokerProcess):
            return ref
        try:
            return self.nodes[ref]
        except KeyError:
            raise KeyError(f"no node {ref} (nodes are {sorted(self.nodes)})") from None

    def node_id(self, ref: NodeRef) -> int:
        node = self.node(ref)
        return next(i for i, n in self.nodes.items() if n is node)

    def metrics_url(self, ref: NodeRef) -> str:
        """Where a node serves its metrics (a cluster started with ``metrics=True``)."""
        from moldau import metrics

        port = self.layout.nodes[self.node_id(ref) - 1].metrics_port
        if port is None:
            raise RuntimeError("the cluster was started without metrics=True")
        return metrics.url("127.0.0.1", port)

    def running(self) -> list[int]:
        """Ids of the nodes whose process is running (paused ones included)."""
        return [i for i, n in self.nodes.items() if n.running]

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> ClusterProcess:
        """Start every node that is not running and return once all of them serve (a KRaft
        node listens once the quorum has a leader and registered it)."""
        self._launch([i for i, n in self.nodes.items() if not n.running])
        return self

    def start_node(self, ref: NodeRef) -> BrokerProcess:
        """Start one node again (after ``kill`` or ``stop``): same ports, same data."""
        self._launch([self.node_id(ref)])
        return self.node(ref)

    def heal(self) -> ClusterProcess:
        """Bring every node back: resume the paused ones, start the stopped ones."""
        for i in sorted(self.paused):
            self.resume(i)
        return self.start()

    def _launch(self, ids: list[int]) -> None:
        launched = []
        try:
            for i in ids:
                launched.append((self.nodes[i], self.nodes[i].launch()))
            for node, listening in launched:
                node.wait_listening(listening)
        except BaseException:
            for node, _ in launched:
                node.kill()
            raise

    def stop(self, ref: NodeRef, timeout: float = 40.0) -> int | None:
        """SIGTERM one node and wait: a controlled shutdown (its leaderships move first).
        Returns its exit code."""
        self.resume(ref)
        return self.node(ref).stop(timeout)

    def kill(self, ref: NodeRef) -> None:
        """kill -9 of one node (paused or not)."""
        self.paused.discard(self.node_id(ref))
        self.node(ref).kill()

    def restart(self, ref: NodeRef) -> BrokerProcess:
        """Controlled shutdown of one node, then start it again."""
        self.stop(ref)
        return self.start_node(ref)

    def pause(self, ref: NodeRef) -> None:
        """SIGSTOP: the node stops heartbeating and answering, with its sockets open."""
        self._signal(ref, signal.SIGSTOP)
        self.paused.add(self.node_id(ref))

    def resume(self, ref: NodeRef) -> None:
        """SIGCONT after :meth:`pause`."""
        self.paused.discard(self.node_id(ref))
        if self.node(ref).running:
            self._signal(ref, signal.SIGCONT)

    def _signal(self, ref: NodeRef, sig: int) -> None:
        node = self.node(ref)
        if node.proc is None:
            raise RuntimeError(f"node {self.node_id(ref)} is not running")
        node.proc.send_signal(sig)

    def close(self) -> None:
        """Stop every node (all at once) and remove the data if it is ours."""
        for i in sorted(self.paused):
            self.resume(i)  # a paused node must see its SIGTERM
        for node in self.nodes.values():
            if node.proc is not None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            node.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    # -- the cluster's state ---------------------------------------------------------
    def describe(self, ref: NodeRef | None = None) -> dict[str, Any]:
        """What ``moldau cluster describe --json`` shows: brokers (fenced or not), the
        quorum (leader, epoch, voters' lag) and every partition's leader, replicas, ISR
        and offline replicas, as node ``ref`` (or the first running node) sees them."""
        from moldau.admin.cluster import describe_cluster

        if ref is not None:
            servers = self.node(ref).bootstrap_servers
        else:
            servers = ",".join(self.nodes[i].bootstrap_servers for i in self.serving())
        return _run(describe_cluster(servers or self.bootstrap_servers))

    def serving(self) -> list[int]:
        """Ids of the nodes running and not paused."""
        return [i for i in self.running() if i not in self.paused]

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        replication_factor: int = -1,
        timeout: float = 30.0,
        **configs: Any,
    ) -> str:
        """As :meth:`ClientHelpers.create_topic`, and returns once every serving node's
        metadata has the topic with a leader for each partition."""
        super().create_topic(
            name, partitions, replication_factor=replication_factor, timeout=timeout, **configs
        )

        def everywhere() -> bool:
            for i in self.serving():
                parts = self.describe(i)["topics"].get(name, [])
                if len(parts) != partitions or any(p["leader"] < 0 for p in parts):
                    return False
            return True

        self.wait_until(everywhere, timeout)
        return name

    def controller(self) -> int | None:
        """The active controller's node id (None while the quorum has no leader)."""
        quorum = self.describe()["quorum"]
        leader = quorum.get("leader", -1)
        return leader if isinstance(leader, int) and leader >= 0 else None

    def partition(self, topic: str, partition: int = 0) -> dict[str, Any]:
        """``{"leader", "replicas", "isr", "offline"}`` of one partition."""
        for p in self.describe()["topics"].get(topic, []):
            if p["partition"] == partition:
                return dict(p)
        raise KeyError(f"{topic}-{partition} is not in the cluster's metadata")

    def leader(self, topic: str, partition: int = 0) -> int:
        """The node id leading ``topic-partition`` (-1: none)."""
        return int(self.partition(topic, partition)["leader"])

    @staticmethod
    def wait_until(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.1) -> T:
        """Poll ``condition`` until it returns something truthy (returned); errors raised
        meanwhile (a node restarting) count as not yet. AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        # The message only: an exception kept here would keep this frame and its callers'
        # (their clients) alive in a reference cycle until the next collection.
        last: str | None = None
        while True:
            try:
                value = condition()
                if value:
                    return value
            except (ConnectionError, TimeoutError, OSError, KeyError) as e:
                last = str(e)
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout} s (last error: {last})")
            time.sleep(interval)

    def __repr__(self) -> str:
        states = ", ".join(f"{i}: {n.state()}" for i, n in self.nodes.items())
        return f"<ClusterProcess {self.bootstrap_servers} ({states})>"

    # -- context managers ------------------------------------------------------------
    def __enter__(self) -> ClusterProcess:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> ClusterProcess:
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.close)


def _run(coro: Any) -> Any:
    """Run a coroutine from blocking code, also when called from inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def cluster(nodes: int = 3, racks: Iterable[str] | None = None, **configs: Any) -> ClusterProcess:
    """A local cluster to use as ``with cluster() as c:`` or ``async with cluster() as c:``.

    ``racks`` gives each node's ``broker.rack`` (``["r1", "r1", "r2"]``). Keywords are
    server properties for every node, as for :func:`~moldau.testing.broker` (dots as
    underscores), on top of :data:`~moldau.testing.process.TEST_DEFAULTS`; the default and
    offsets-topic replication factor is ``min(3, nodes)``.
    """
    return ClusterProcess(nodes, racks, {**TEST_DEFAULTS, **kafka_configs(configs)})
