"""A Moldau node: a broker, a controller, or both, and the listeners that reach them.

Every node replicates the metadata log (``__cluster_metadata-0``) with Raft; two ways to
configure it, as Kafka's configs say:

- no ``controller.quorum.voters``: a single node that is its own controller quorum, a
  Raft quorum of one (ARCHITECTURE.md, principle 4): it elects itself at once, commits
  once a batch is appended and fsynced, and its broker calls its controller in-process.
  A ``__cluster_metadata-0`` written by earlier releases' local metadata log (epoch-0
  batches) is taken over as it is.
- KRaft: ``process.roles`` (``broker``, ``controller`` or both), ``node.id`` and
  ``controller.quorum.voters``. Controllers replicate the metadata log with Raft and the
  leader's controller decides; every node follows the committed log (brokers as
  observers). Brokers register with and heartbeat to the active controller over its
  listener (``controller.listener.names``); clients use the other listeners.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from moldau.clock import AsyncioScheduler
from moldau.config.broker import BrokerConfig, ConfigError, Listener
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.metadata.security import ScramCredential
from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.config import MetadataLogConfig, QuorumConfig, VoterAddress
from moldau.raft.driver import RaftManager
from moldau.security.access import Access
from moldau.security.client import ClientSecurity
from moldau.security.listeners import listener_security
from moldau.security.scram import ScramMechanism
from moldau.server.broker import Broker
from moldau.server.controller_server import ControllerServer
from moldau.server.dispatch import Dispatcher
from moldau.server.network import Acceptor, NetworkLimits, start_listener
from moldau.server.node_to_controller import (
    InProcessControllerChannel,
    NodeToControllerChannelManager,
)
from moldau.storage.log_dir_lock import LogDirLocks
from moldau.storage.meta_properties import ensure_formatted

log = logging.getLogger(__name__)

SERVER_MAX_STARTUP_TIME_MS = "server.max.startup.time.ms"
NO_LIMIT_MS = 2**63 - 1  # Kafka's default, Long.MAX_VALUE: wait as long as it takes


def parse_voters(value: str) -> dict[int, Address]:
    """``controller.quorum.voters``: ``id@host:port,...``."""
    voters: dict[int, Address] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        node, sep, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not node.isdigit() or not port.isdigit():
            raise ConfigError(f"controller.quorum.voters: '{item}' is not of the form ID@HOST:PORT")
        voters[int(node)] = (host.strip("[]"), int(port))
    return voters


def cluster_id_for(voters: dict[int, Address]) -> str:
    """The cluster id fresh nodes of one quorum agree on without talking: derived from the
    voter set (``cluster.id`` or ``moldau storage format`` choose one explicitly)."""
    text = ",".join(f"{n}@{h}:{p}" for n, (h, p) in sorted(voters.items()))
    digest = hashlib.sha256(text.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class Node:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.scheduler = AsyncioScheduler()
        self.voters = parse_voters(config.get("controller.quorum.voters"))
        roles = {r.strip() for r in config.get("process.roles").split(",") if r.strip()}
        if not roles <= {"broker", "controller"} or not roles:
            raise ConfigError(f"process.roles: '{config.get('process.roles')}' is not valid")
        self.kraft = bool(self.voters)
        self.is_broker = "broker" in roles or not self.kraft
        self.is_controller = "controller" in roles or not self.kraft
        if self.kraft and self.is_controller and self.node_id not in self.voters:
            raise ConfigError(
                f"node {self.node_id} has the controller role but is not in "
                "controller.quorum.voters"
            )
        names = {n.strip() for n in config.get("controller.listener.names").split(",")}
        self.controller_listeners = [li for li in config.listeners if li.name in names]
        self.broker_listeners = [li for li in config.listeners if li.name not in names]
        if self.kraft and self.is_controller and not self.controller_listeners:
            raise ConfigError("a controller needs a listener named in controller.listener.names")
        if not self.kraft:
            self.broker_listeners = list(config.listeners)
            self.controller_listeners = []
        # Each listener's TLS and SASL; how this node logs in to controllers' listeners.
        self.security = {li.name: listener_security(config, li.name) for li in config.listeners}
        self.controller_security = ClientSecurity.controller(config) if self.kraft else None
        self.network = NetworkClient(
            f"moldau-node-{self.node_id}", security=self.controller_security
        )
        self.raft_network: NetworkClient | None = None
        self.failed = asyncio.Event()  # the metadata replica stopped: the node must stop
        self.broker: Broker | None = None
        self.controller: ControllerServer | None = None
        self.raft: RaftManager | None = None
        self._servers: list[Acceptor] = []
        self._locks: LogDirLocks | None = None
        self.starting = "nothing (not started)"  # what the start waits for, for its errors
        self._broker_closed = False

    # -- start ---------------------------------------------------------------------------
    def lock_log_dirs(self) -> None:
        """Lock every log dir (the metadata log's included) before anything reads or
        writes them, or raise LogDirLockedError: the first thing a node does."""
        if self._locks is None:
            self._locks = LogDirLocks.acquire(self.config.log_dirs)

    async def start(self) -> list[Listener]:
        """Start every part and bind the listeners; returns the bound addresses once the
        broker (if any) is registered, unfenced and serving. Past
        ``server.max.startup.time.ms`` it raises a KafkaError saying what it still waited
        for. Cancelled, or failed, part way: `stop` stops whatever had started."""
        limit_ms = self.config.int(SERVER_MAX_STARTUP_TIME_MS)
        deadline = asyncio.timeout(None if limit_ms >= NO_LIMIT_MS else limit_ms / 1000)
        try:
            async with deadline:
                return await self._start()
        except TimeoutError:
            if not deadline.expired():
                raise
            raise KafkaError(
                f"not started within {SERVER_MAX_STARTUP_TIME_MS} ({limit_ms} ms): "
                f"still waiting for {self.starting}",
                ErrorCode.BROKER_NOT_AVAILABLE,
            ) from None

    async def _start(self) -> list[Listener]:
        c = self.config
        self.lock_log_dirs()
        wanted = c.get("cluster.id") or (cluster_id_for(self.voters) if self.kraft else None)
        cluster_id = ensure_formatted(c.log_dirs, self.node_id, wanted)
        limits = NetworkLimits.from_config(c)
        await self._start_raft(cluster_id, MetadataImage().with_cluster_id(cluster_id))
        self.starting = "the listeners to bind"
        bound = await self._bind(limits)
        if self.raft is not None:
            self.starting = "the metadata log to open"
            await self.raft.start()
        if self.broker is not None:
            self.starting = "the broker to be registered and unfenced by the controller"
            advertised = c.advertised or [b for b in bound if b.name not in self._controller_names]
            await self.broker.register(
                [
                    Listener(a.name, a.host or "127.0.0.1", a.port or self._port_of(bound, a.name))
                    for a in advertised
                ]
            )
            self.broker.start_background()
        self.starting = "nothing (started)"
        # What start-up built (the metadata image, the logs) lives as long as the node:
        # keep it out of every later garbage collection, which otherwise walks it all.
        gc.freeze()
        return bound

    async def _start_raft(self, cluster_id: str, image: MetadataImage) -> None:
        """The metadata log replica, and the controller and broker that follow it. A single
        node is a quorum of one: it votes for itself at once, nobody connects to it (no
        controller listener), and its broker calls its controller in-process."""
        c = self.config
        config = QuorumConfig.from_props(c.props)
        if not self.kraft:
            config = replace(config, voters={self.node_id: VoterAddress("localhost", 0)})
        # Raft has its own connections: a parked raft Fetch would otherwise hold up the
        # broker's heartbeats queued behind it on the same connection.
        self.raft_network = NetworkClient(
            f"moldau-raft-{self.node_id}", security=self.controller_security
        )
        self.raft = RaftManager(
            self.node_id,
            cluster_id,
            config,
            c.log_dirs[0],
            self.raft_network,
            self.scheduler,
            self,
            log_config=MetadataLogConfig.from_props(c.props),
            on_fatal=self._fatal,
        )
        if self.is_controller:
            self.controller = ControllerServer(
                c, cluster_id, self.raft, image, self.scheduler, active=False
            )
        if self.is_broker:
            raft = self.raft
            channel = (
                NodeToControllerChannelManager(self.network, self.voters, lambda: raft.leader()[0])
                if self.kraft
                else InProcessControllerChannel(self._controller().apis)
            )
            self.broker = Broker(
                c, self.scheduler, channel, cluster_id, lambda: raft.client.high_watermark
            )
            self.broker.start(image)

    def _controller(self) -> ControllerServer:
        assert self.controller is not None  # a single node has both roles
        return self.controller

    @property
    def acceptors(self) -> list[Acceptor]:
        """The bound listeners (their connections and dispatchers), for the metrics."""
        return list(self._servers)

    @property
    def _controller_names(self) -> set[str]:
        return {li.name for li in self.controller_listeners}

    @staticmethod
    def _port_of(bound: Sequence[Listener], name: str) -> int:
        return next(b.port for b in bound if b.name == name)

    async def _bind(self, limits: NetworkLimits) -> list[Listener]:
        bound: list[Listener] = []
        handlers: list[tuple[Listener, Any]] = []
        security: dict[str, Any] = {"listeners": self.security, "credentials": self._scram}
        if self.broker is not None:
            services = Dispatcher(
                self.broker.services,
                quotas=self.broker.quotas,
                serving=self.broker.serving,
                **security,
            )
            handlers += [(li, services) for li in self.broker_listeners]
        if self.controller_listeners:
            from moldau.server.controller_listener import controller_listener_dispatcher

            assert self.raft is not None
            access = Access.from_config(self.config)
            dispatcher = controller_listener_dispatcher(
                self.raft, self.controller, access, self._image, **security
            )
            handlers += [(li, dispatcher) for li in self.controller_listeners]
        for listener, dispatcher in handlers:
            server = await start_listener(
                listener.host,
                listener.port,
                dispatcher,
                limits,
                listener.name,
                self.security[listener.name].ssl_context,
                dispatcher.connection_opened,
            )
            self._servers.append(server)
            host, port = server.sockets[0].getsockname()[:2]
            bound.append(Listener(listener.name, listener.host or host, port))
        return bound

    def _image(self) -> MetadataImage | None:
        """The metadata this node serves: SCRAM credentials and ACLs are read from it."""
        if self.broker is not None:
            return self.broker.publisher.image
        if self.controller is not None:
            return self.controller.quorum.committed
        return None

    def _scram(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        image = self._image()
        return None if image is None else image.security.scram_credential(user, mechanism.type)

    # -- RaftManager's listener: the committed metadata log, in order --------------------
    def handle_commit(
        self, records: Sequence[MetadataRecord], last_offset: int, image: MetadataImage
    ) -> None:
        if self.controller is not None:
            self.controller.handle_commit(records, last_offset, image)
        if self.broker is not None and not self._broker_closed:
            self.broker.loader.handle_commit(records, last_offset, image)

    def handle_snapshot(self, image: MetadataImage) -> None:
        if self.broker is not None and not self._broker_closed:
            self.broker.loader.load_snapshot(image)
        if self.controller is not None:
            self.controller.load_snapshot(image)

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None:
        if self.controller is None:
            return
        if leader_id == self.node_id:
            self.controller.activate(self.raft.leader_contact if self.raft else None)
        else:
            self.controller.deactivate()

    def _fatal(self, error: BaseException) -> None:
        log.critical("the metadata log replica failed, stopping the node: %s", error)
        self.failed.set()

    # -- stop ------------------------------------------------------------------------
    async def stop(self) -> None:
        """Controlled shutdown of the broker, then every part closes in order. The
        metadata log is snapshotted meanwhile (in a worker thread), so the next start loads
        one image instead of replaying every record since the last snapshot. After a start
        cut short, only what had started stops: each part's close is a no-op for what it
        never opened (logs never loaded keep their checkpoints as the last run left them)."""
        if self.broker is not None:
            await self.broker.controlled_shutdown()
        snapshot = asyncio.ensure_future(self.raft.create_snapshot()) if self.raft else None
        for server in self._servers:
            server.close()
        if self.broker is not None:
            # As Kafka's broker removes its metadata publishers first: what the metadata
            # log commits from here on (it runs until the end of the stop) must not host
            # or open a log once the logs are closed.
            self._broker_closed = True
            log.info("closing the logs")
            self.broker.shutdown()
        if self.controller is not None:
            self.controller.deactivate()
        if snapshot is not None:
            await snapshot
        if self.raft is not None:
            await self.raft.shutdown(self.raft.config.request_timeout_ms / 1000)
        self.scheduler.close()
        self.network.close()
        if self.raft_network is not None:
            self.raft_network.close()
        if self._locks is not None:
            self._locks.release()
            self._locks = None
