"""Request dispatch: frame -> header -> handler -> response frame.

Anything malformed stays contained: a frame we cannot parse closes that one connection;
a version we don't implement gets UNSUPPORTED_VERSION where the response can carry it.

Security comes first: each connection gets a :class:`~moldau.security.session.Session`
for its listener (its TLS principal, its SASL progress), which refuses what may not be
sent yet (the connection is closed, as Kafka closes it); the request context carries the
listener, protocol and principal that handlers authorize; quotas throttle afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.error_responses import error_response
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.framing import is_flexible
from moldau.protocol.messages import REQUESTS, RESPONSES
from moldau.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.primitives import INT32, ProtocolDecodeError, encoded_size
from moldau.security.listeners import ListenerSecurity
from moldau.security.quotas import REQUEST, ClientQuotas
from moldau.security.session import CredentialLookup, Session, open_session
from moldau.server.handlers import HANDLERS, advertised_versions
from moldau.server.network import Later, Response
from moldau.server.request_context import Pending, RequestContext
from moldau.stats.requests import RequestStats

if TYPE_CHECKING:
    from moldau.server.network import Connection
    from moldau.server.services import Services

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">hhi")


# Versions from which clients throttle themselves (KIP-219): to older ones the broker
# holds the response back for the throttle time instead.
_CLIENT_THROTTLES_FROM: dict[int, int] = {ApiKey.PRODUCE: 6, ApiKey.FETCH: 8}


class Dispatcher:
    """Dispatches a listener's requests to a handler table (the broker's API modules, or a
    controller listener's) with the context object those handlers take.

    ``listeners`` are the security of each listener (PLAINTEXT when missing),
    ``credentials`` finds SCRAM credentials (read at each login), ``quotas`` throttles."""

    def __init__(
        self,
        services: Services | Any,
        handlers: Mapping[int, Any] = HANDLERS,
        advertised: Callable[[], list[ApiVersion]] = advertised_versions,
        *,
        listeners: Mapping[str, ListenerSecurity] | None = None,
        credentials: CredentialLookup | None = None,
        quotas: ClientQuotas | None = None,
        serving: asyncio.Event | None = None,
    ) -> None:
        self.services = services
        # Set once the broker may answer (registered, caught up, unfenced): until then its
        # requests wait, as Kafka enables request processing only then; a restarted broker
        # would otherwise answer from the metadata it had before it stopped.
        self.serving = serving
        self.handlers = handlers
        self.advertised = advertised
        self.request_stats = RequestStats()
        self.listeners = dict(listeners or {})
        self.credentials: CredentialLookup = credentials or (lambda user, mechanism: None)
        self.quotas = quotas or ClientQuotas()

    def connection_opened(self, conn: Connection) -> None:
        """Give a new connection its session now: a SASL listener bounds even its first
        frame to ``sasl.server.max.receive.size``."""
        self._session(conn)

    def _session(self, conn: Connection) -> Session:
        if conn.session is None:
            listener = self.listeners.get(conn.listener)
            if listener is None:
                listener = ListenerSecurity.plaintext(conn.listener)
            conn.session = open_session(listener, conn.transport, self.credentials)
            if not conn.session.authenticated:
                conn.max_frame = min(conn.max_frame, listener.max_receive)
        return conn.session

    async def __call__(self, frame: bytearray, conn: Connection) -> Response:
        if self.serving is not None and not self.serving.is_set():
            await self.serving.wait()
        session = self._session(conn)
        if session.raw_tokens:
            return self._raw_token(session, frame, conn)
        buf = memoryview(frame)
        try:
            api_key, version, correlation_id = _HEAD.unpack_from(buf, 0)
        except struct.error:
            log.warning("closing %s:%s: frame too short for a request header", *conn.peer)
            conn.close()
            return None
        refusal = session.refusal(api_key)
        if refusal is not None:
            log.info("Failed authentication with %s (%s)", conn.peer[0], refusal)
            conn.close()
            return None
        handler = self.handlers.get(api_key)
        if handler is None:
            log.warning("closing %s:%s: unknown API key %d", *conn.peer, api_key)
            conn.close()
            return None
        if not handler.MIN_VERSION <= version <= handler.MAX_VERSION:
            return self._unsupported(handler, api_key, version, correlation_id, conn)
        req_cls, header_version, _ = _codecs(api_key, version)
        try:
            header, pos = RequestHeader.decode(buf, header_version)
            request, _ = req_cls.decode(buf, version, pos)  # trailing bytes are tolerated
        except ProtocolDecodeError as e:
            log.warning(
                "closing %s:%s: malformed %s v%d request: %s",
                *conn.peer,
                ApiKey(api_key).name,
                version,
                e,
            )
            conn.close()
            return None
        self.request_stats.identify(api_key, version, request, len(frame))
        ctx = RequestContext(
            api_key,
            version,
            correlation_id,
            header.client_id,
            conn.peer[0],
            conn,
            session.listener.name,
            session.listener.protocol,  # a StrEnum: its value as it is
            session.principal,
            len(frame),
        )
        started = time.thread_time_ns() if self.quotas.enabled(REQUEST) else 0
        try:
            response = await handler.handle(self.services, ctx, request)
        except KafkaError as e:
            # The handler could not answer (e.g. no active controller): say so, in shape.
            log.info("%s v%d failed: %s", ApiKey(api_key).name, version, e)
            response = error_response(api_key, request, e.code, str(e))
        if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            self._after_sasl(session, conn)
        if started:
            ctx.throttle_ms = max(ctx.throttle_ms, self._request_throttle(ctx, started))
        if response is None:  # acks=0: no response, but a throttled client is still muted
            conn.throttle(ctx.throttle_ms)
            return None
        if isinstance(response, Pending):
            if ctx.throttle_ms:
                return asyncio.ensure_future(self._later(ctx, response))
            respond = response.respond
            return Later(
                response.done, lambda: frame_response(api_key, version, correlation_id, respond())
            )
        if ctx.throttle_ms:
            await self._throttle(ctx, response)
        return frame_response(api_key, version, correlation_id, response)

    async def _later(self, ctx: RequestContext, pending: Pending) -> list[Any]:
        """The framed response of a handler that answered with :class:`Pending`."""
        await pending.done
        response = pending.respond()
        if ctx.throttle_ms:
            await self._throttle(ctx, response)
        return frame_response(ctx.api_key, ctx.api_version, ctx.correlation_id, response)

    def _request_throttle(self, ctx: RequestContext, started_ns: int) -> int:
        """Request time quota: CPU time of this request, in percent of one thread."""
        percent_seconds = (time.thread_time_ns() - started_ns) * 100 / 1e9
        return self.quotas.record_request(REQUEST, ctx, percent_seconds, int(time.time() * 1000))

    @staticmethod
    async def _throttle(ctx: RequestContext, response: Any) -> None:
        if hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms, ctx.throttle_ms)
        if ctx.api_version < _CLIENT_THROTTLES_FROM.get(ctx.api_key, 0):
            await asyncio.sleep(ctx.throttle_ms / 1000)
        else:
            ctx.connection.throttle(ctx.throttle_ms)

    def _after_sasl(self, session: Session, conn: Connection) -> None:
        if session.failure is not None:
            log.info("Failed authentication with %s (%s)", conn.peer[0], session.failure)
            conn.close_after_write()
        elif session.authenticated:
            conn.max_frame = conn.limits.max_frame

    def _raw_token(self, session: Session, frame: bytearray, conn: Connection) -> list[Any] | None:
        """A token of the legacy SASL exchange (after SaslHandshake v0): answered bare."""
        reply = session.raw_token(bytes(frame))
        if reply is None:
            log.info("Failed authentication with %s (%s)", conn.peer[0], session.failure)
            conn.close()
            return None
        self._after_sasl(session, conn)
        return [INT32.pack(len(reply)) + reply]

    def _unsupported(
        self, handler: ModuleType, api_key: int, version: int, correlation_id: int, conn: Connection
    ) -> list[Any] | None:
        if api_key == ApiKey.API_VERSIONS:
            # A client newer than us: answer in v0, which every client can read (KIP-511).
            response = ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=self.advertised()
            )
            return frame_response(api_key, 0, correlation_id, response)
        log.warning(
            "closing %s:%s: %s v%d is not supported (we implement v%d-v%d)",
            *conn.peer,
            ApiKey(api_key).name,
            version,
            handler.MIN_VERSION,
            handler.MAX_VERSION,
        )
        conn.close()
        return None


_CODECS: dict[tuple[int, int], tuple[Any, int, bytes]] = {}


def _codecs(api_key: int, version: int) -> tuple[Any, int, bytes]:
    """Per API and version, looked up once: the request class, its header version, and
    what the response header carries after the correlation id (ApiVersions always uses
    header v0: no tagged fields)."""
    found = _CODECS.get((api_key, version))
    if found is None:
        req_cls = REQUESTS[api_key]
        flexible = is_flexible(RESPONSES[api_key], version) and api_key != ApiKey.API_VERSIONS
        found = _CODECS[api_key, version] = (
            req_cls,
            2 if is_flexible(req_cls, version) else 1,
            b"\x00" if flexible else b"",
        )
    return found


def frame_response(api_key: int, version: int, correlation_id: int, response: Any) -> list[Any]:
    """Size prefix + response header + body parts."""
    body = response.encode(version)
    tail = _codecs(api_key, version)[2]
    size = 4 + len(tail) + encoded_size(body)
    body[0][0:0] = _SIZE_AND_ID.pack(size, correlation_id) + tail
    return body


_SIZE_AND_ID = struct.Struct(">ii")
