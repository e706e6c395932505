"""An asyncio Kafka protocol client for node-to-node requests.

Brokers and controllers talk to each other with Kafka's own RPCs (Raft's Vote and Fetch,
BrokerHeartbeat, AlterPartition, replication Fetch, forwarded admin requests...). A
:class:`NetworkClient` keeps one connection per destination, pipelines requests on it
(responses are matched by correlation id), reconnects with backoff, and fails every
request in flight with ``ConnectionError`` when the connection drops, or with
``TimeoutError`` when the answer takes longer than the request timeout.

With a ``security`` (:class:`ConnectionSecurity`, e.g. ``moldau.security.client.
ClientSecurity``) connections are TLS and log in before any request is sent. A login
whose session has a lifetime (KIP-368) is renewed by connecting afresh before it ends:
the old connection finishes what is in flight on it, then closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from moldau.protocol.framing import decode_response, encode_request, response_correlation_id
from moldau.protocol.primitives import INT32

log = logging.getLogger(__name__)

Address = tuple[str, int]
# A session is renewed once this share of its lifetime has passed (Kafka's clients pick
# a random point between 85% and 95%).
REAUTH_AT = 0.85


class ConnectionSecurity(Protocol):
    """TLS and login for new connections (what the broker's listener requires)."""

    @property
    def ssl_context(self) -> ssl.SSLContext | None: ...

    async def authenticate(self, exchange: Callable[[Any, int], Awaitable[Any]]) -> int:
        """Log in with ``exchange(message, version)``; the session lifetime in ms (0: none)."""
        ...


class Connection:
    """One TCP connection with requests in flight, answered in any order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        # Kept: on Python 3.11 every get_running_loop() is a getpid() syscall.
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._read_loop())
        self.closed = False
        self.renew_at: float | None = None  # monotonic time to log in afresh
        self._retired = False

    @classmethod
    async def open(
        cls,
        address: Address,
        timeout_s: float,
        security: ConnectionSecurity | None = None,
        exchange: Callable[[Connection, Any, int], Awaitable[Any]] | None = None,
    ) -> Connection:
        tls = security.ssl_context if security is not None else None
        extra: dict[str, Any] = {"ssl": tls, "server_hostname": address[0]} if tls else {}
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(*address, **extra), timeout_s
        )
        conn = cls(reader, writer)
        if security is not None and exchange is not None:
            try:
                lifetime = await asyncio.wait_for(
                    security.authenticate(lambda m, v: exchange(conn, m, v)), timeout_s
                )
            except BaseException:
                conn.close()
                raise
            if lifetime > 0:
                conn.renew_at = time.monotonic() + REAUTH_AT * lifetime / 1000
        return conn

    def expiring(self) -> bool:
        return self.renew_at is not None and time.monotonic() >= self.renew_at

    def retire(self) -> None:
        """Take no new requests; close once those in flight are answered."""
        self._retired = True
        if not self._pending:
            self.close()

    async def _read_loop(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(4)
                (size,) = INT32.unpack(head)
                frame = memoryview(await self.reader.readexactly(size))
                pending = self._pending.pop(response_correlation_id(frame), None)
                if self._retired and not self._pending:
                    self.close()
                if pending is None:
                    continue  # the caller gave up waiting
                api_key, version, fut = pending
                if not fut.done():
                    try:
                        fut.set_result(decode_response(api_key, version, frame))
                    except Exception as e:  # a response we cannot decode
                        fut.set_exception(ConnectionError(f"bad response: {e}"))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            self._fail(ConnectionError(f"connection lost: {e}"))
        finally:
            self.close()

    def send(
        self, message: Any, version: int, correlation_id: int, client_id: str
    ) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self._loop.create_future()
        if self.closed:
            fut.set_exception(ConnectionError("connection closed"))
            return fut
        self._pending[correlation_id] = (message.API_KEY, version, fut)
        self.writer.write(encode_request(message, version, correlation_id, client_id))
        return fut

    def forget(self, correlation_id: int) -> None:
        self._pending.pop(correlation_id, None)

    def _fail(self, error: Exception) -> None:
        pending, self._pending = self._pending, {}
        for _, _, fut in pending.values():
            if not fut.done():
                fut.set_exception(error)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._fail(ConnectionError("connection closed"))
            with contextlib.suppress(Exception):
                self.writer.close()
            if asyncio.current_task() is not self._task:
                self._task.cancel()


class NetworkClient:
    """Connections to other nodes by id (or address), created on first use."""

    def __init__(
        self,
        client_id: str,
        *,
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        endpoints: Callable[[int], Address | None] | None = None,
        security: ConnectionSecurity | None = None,
    ) -> None:
        self.client_id = client_id
        self.security = security
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.endpoints = endpoints or (lambda node: None)
        self._connections: dict[Address, Connection] = {}
        self._connecting: dict[Address, asyncio.Future[Connection]] = {}
        self._correlation = itertools.count(1)

    def address(self, destination: int | Address) -> Address:
        if isinstance(destination, tuple):
            return destination
        address = self.endpoints(destination)
        if address is None:
            raise ConnectionError(f"no endpoint known for node {destination}")
        return address

    async def _connection(self, address: Address) -> Connection:
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            if not conn.expiring():
                return conn
            conn.retire()  # its login is about to end: log in on a fresh connection
        pending = self._connecting.get(address)
        if pending is None:
            pending = asyncio.ensure_future(
                Connection.open(
                    address, self.connect_timeout_ms / 1000, self.security, self._exchange
                )
            )
            # Its waiters may all be cancelled (their request timed out): the failure is
            # theirs to see, never an "exception was never retrieved" in the log.
            pending.add_done_callback(_retrieve)
            self._connecting[address] = pending
            try:
                conn = await asyncio.shield(pending)
            except (OSError, TimeoutError) as e:
                raise ConnectionError(f"cannot connect to {address[0]}:{address[1]}: {e}") from e
            finally:
                self._connecting.pop(address, None)
            self._connections[address] = conn
            return conn
        try:
            return await asyncio.shield(pending)
        except (OSError, TimeoutError) as e:
            raise ConnectionError(f"cannot connect to {address[0]}:{address[1]}: {e}") from e

    async def _exchange(self, conn: Connection, message: Any, version: int) -> Any:
        """One request on a connection being set up (its login)."""
        fut = conn.send(message, version, next(self._correlation), self.client_id)
        return await fut

    async def send(
        self,
        destination: int | Address,
        message: Any,
        version: int,
        *,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send ``message`` and return the decoded response.

        Raises ConnectionError (no endpoint, connection refused or lost) or TimeoutError."""
        address = self.address(destination)
        conn = await self._connection(address)
        correlation_id = next(self._correlation)
        fut = conn.send(message, version, correlation_id, self.client_id)
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        # A timer on the response future itself (asyncio.wait_for adds a future, a task
        # wake-up and callbacks per request: this runs once per replica fetch).
        timer = asyncio.get_running_loop().call_later(timeout, _time_out, fut)
        try:
            return await fut
        except TimeoutError:
            conn.forget(correlation_id)
            raise
        finally:
            timer.cancel()

    def disconnect(self, destination: int | Address) -> None:
        with contextlib.suppress(ConnectionError):
            conn = self._connections.pop(self.address(destination), None)
            if conn is not None:
                conn.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()


def _time_out(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
