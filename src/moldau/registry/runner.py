"""A registry node: the store, the primary election and the HTTP server, on a thread and
event loop of their own (a broker that hosts the registry never runs registry IO on its
own loop), talking to the cluster only as a Kafka client.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import uvicorn

from moldau.registry.auth import RegistryAccess
from moldau.registry.compatibility import check
from moldau.registry.election import PrimaryElection
from moldau.registry.errors import RegistryError
from moldau.registry.formats.catalog import FORMATS
from moldau.registry.rest import build_app
from moldau.registry.service import SchemaRegistry
from moldau.registry.store import KafkaStore
from moldau.security.client import ClientSecurity

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0


def parse_listener(url: str) -> tuple[str, int]:
    """`http(s)://host:port` -> (host, port); ValueError with the reason otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
        raise ValueError(f"{url!r} is not an http(s)://HOST:PORT listener")
    return parts.hostname, parts.port


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    found = []
    for server in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad server address {server!r} (HOST:PORT)")
        found.append((host, int(port)))
    return found


class RegistryNode:
    """One registry node of the cluster at `bootstrap`, serving `listener` (an https one
    with the server context `tls`), its requests checked by `access`."""

    def __init__(
        self,
        bootstrap: str,
        listener: str,
        *,
        advertised: str | None = None,
        client_config: Mapping[str, Any] | None = None,
        security: ClientSecurity | None = None,
        eligible: bool = True,
        replication_factor: int | None = None,
        tls: ssl.SSLContext | None = None,
        access: RegistryAccess | None = None,
        forward_tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, port = parse_listener(listener)
        if listener.startswith("https:") and tls is None:
            raise ValueError(f"{listener}: https needs a keystore (ssl.keystore.location)")
        self.tls = tls
        self.access = access
        self.forward_tls = forward_tls
        self.bootstrap = bootstrap
        self.sock = socket.create_server((self.host, port))  # a taken port fails here
        self.port = self.sock.getsockname()[1]
        scheme = "https" if tls is not None else "http"
        self.url = advertised or f"{scheme}://{self.host}:{self.port}"
        self.store = KafkaStore(bootstrap, client_config, replication_factor)
        self.registry = SchemaRegistry(self.store, FORMATS, check)
        self.election = PrimaryElection(
            bootstrap_addresses(bootstrap), self.url, eligible, security=security
        )
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._ids: dict[str | None, frozenset[int]] = {}
        self._ids_offset = -1  # of the state `_ids` was computed from

    def ids_for_subject(self, subject: str | None) -> frozenset[int]:
        """Ids registered for `subject` (None: for any) as of the last record this node
        applied, for broker-side validation; thread-safe, no IO (cached until the state
        moves on)."""
        store = self.store
        with store.lock:
            if self._ids_offset != store.state.offset:
                self._ids = {}
                self._ids_offset = store.state.offset
            ids = self._ids.get(subject)
            if ids is None:
                ids = self._ids[subject] = store.state.live_ids(subject)
            return ids

    def catch_up(self, timeout: float) -> None:
        """Wait (at most `timeout`) until this node has read `_schemas` to its end offset of
        now, for broker-side validation of an id registered through another node; a store
        that cannot tell in time leaves the ids as they are."""
        try:
            self.store.catch_up(timeout)
        except RegistryError as e:
            log.info("schema registry: catching up for validation failed: %s", e.message)

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start in a thread of its own; return once it serves (raise if it cannot)."""
        self._thread = threading.Thread(target=self._run, name="schema-registry", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            raise TimeoutError(f"schema registry did not start in {timeout:.0f} s")
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:  # reported to start(), or logged once serving
            self._failure = e
            if self._started.is_set():
                log.exception("schema registry stopped")
        finally:
            self._started.set()
            loop.close()

    async def _serve(self) -> None:
        await asyncio.to_thread(self.store.start, START_TIMEOUT_S)
        election = asyncio.ensure_future(self.election.run())
        app = build_app(self.registry, self.election, self.access, self.forward_tls)
        config = uvicorn.Config(app, log_level="warning", access_log=False)
        config.load()
        config.ssl = self.tls  # uvicorn only builds contexts from files; ours is made
        self._server = uvicorn.Server(config)
        serving = asyncio.ensure_future(self._server.serve(sockets=[self.sock]))
        while not self._server.started and not serving.done():
            await asyncio.sleep(0.05)
        self._started.set()
        try:
            await serving
        finally:
            election.cancel()
            await asyncio.gather(election, return_exceptions=True)
            await asyncio.to_thread(self.store.close)

    def stop(self) -> None:
        if self._server is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(setattr, self._server, "should_exit", True)
        if self._thread is not None:
            self._thread.join(30)
        self.sock.close()
