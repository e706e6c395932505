"""Request dispatch: frame -> header -> handler -> response frame.

Anything malformed stays contained: a frame we cannot parse closes that one connection;
a version we don't implement gets UNSUPPORTED_VERSION where the response can carry it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from moldau.metrics.requests import RequestStats
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.framing import is_flexible
from moldau.protocol.messages import REQUESTS, RESPONSES
from moldau.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from moldau.protocol.messages.request_header import RequestHeader
from moldau.protocol.primitives import INT32, ProtocolDecodeError, encoded_size
from moldau.server.error_responses import error_response
from moldau.server.handlers import HANDLERS, advertised_versions

if TYPE_CHECKING:
    from moldau.server.network import Connection
    from moldau.server.services import Services

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">hhi")


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection: Connection


class Dispatcher:
    """Dispatches a listener's requests to a handler table (the broker's API modules, or a
    controller listener's) with the context object those handlers take."""

    def __init__(
        self,
        services: Services | Any,
        handlers: Mapping[int, Any] = HANDLERS,
        advertised: Callable[[], list[ApiVersion]] = advertised_versions,
    ) -> None:
        self.services = services
        self.handlers = handlers
        self.advertised = advertised
        self.request_stats = RequestStats()

    async def __call__(self, frame: bytearray, conn: Connection) -> list[Any] | None:
        buf = memoryview(frame)
        try:
            api_key, version, correlation_id = _HEAD.unpack_from(buf, 0)
        except struct.error:
            log.warning("closing %s:%s: frame too short for a request header", *conn.peer)
            conn.close()
            return None
        handler = self.handlers.get(api_key)
        if handler is None:
            log.warning("closing %s:%s: unknown API key %d", *conn.peer, api_key)
            conn.close()
            return None
        if not handler.MIN_VERSION <= version <= handler.MAX_VERSION:
            return self._unsupported(handler, api_key, version, correlation_id, conn)
        req_cls = REQUESTS[api_key]
        flexible = is_flexible(req_cls, version)
        try:
            header, pos = RequestHeader.decode(buf, 2 if flexible else 1)
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
        ctx = RequestContext(api_key, version, correlation_id, header.client_id, conn.peer[0], conn)
        try:
            response = await handler.handle(self.services, ctx, request)
        except KafkaError as e:
            # The handler could not answer (e.g. no active controller): say so, in shape.
            log.info("%s v%d failed: %s", ApiKey(api_key).name, version, e)
            response = error_response(api_key, request, e.code, str(e))
        if response is None:
            return None
        return frame_response(api_key, version, correlation_id, response)

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


def frame_response(api_key: int, version: int, correlation_id: int, response: Any) -> list[Any]:
    """Size prefix + response header + body parts (ApiVersions always uses header v0)."""
    body = response.encode(version)
    flexible = is_flexible(RESPONSES[api_key], version) and api_key != ApiKey.API_VERSIONS
    head = INT32.pack(correlation_id) + (b"\x00" if flexible else b"")
    size = len(head) + encoded_size(body)
    body[0][0:0] = INT32.pack(size) + head
    return body
