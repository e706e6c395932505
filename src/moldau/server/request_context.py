"""What a handler knows about the request it handles: API, version, who sent it, on which
listener. Its own module so that handlers name it without importing the dispatcher that
imports them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.security.acl import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from moldau.server.network import Connection


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection: Connection
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    principal: KafkaPrincipal = ANONYMOUS
    size: int = 0  # the request's bytes (produce quotas count them)
    throttle_ms: int = 0  # set by handlers whose client went over a byte-rate quota


class Pending:
    """A response that comes later, returned by a handler whose side effects are done.

    acks=all produce appends at once, then waits for the followers: the connection reads
    and handles its next requests meanwhile (their responses still go out in order), so a
    client with several requests in flight is not held to one replication round trip per
    request. Only a handler whose effects on state all happened before it returns may
    answer this way: later requests on the connection run before ``done`` completes.

    ``respond()`` builds the response once ``done`` is: a future (not a coroutine) so
    that the response is framed in the callback of whatever completes it, with no task
    of its own to schedule and wake."""

    __slots__ = ("done", "respond")

    def __init__(self, done: asyncio.Future[Any], respond: Callable[[], Any]) -> None:
        self.done = done
        self.respond = respond

    def then(self, frame: Callable[[Any], list[Any]]) -> asyncio.Future[list[Any]]:
        """The framed response, as a future set in ``done``'s callback."""
        out: asyncio.Future[list[Any]] = self.done.get_loop().create_future()

        def framed(done: asyncio.Future[Any]) -> None:
            if out.done():  # cancelled: the connection closed
                return
            try:
                out.set_result(frame(self.respond()))
            except Exception as e:  # handed to the writer, which logs it and closes
                out.set_exception(e)

        self.done.add_done_callback(framed)
        return out
