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
    that the response is framed and written in the callback of whatever completes it
    (the dispatcher hands it on as a :class:`~moldau.server.network.Later`), with no
    task of its own to schedule and wake."""

    __slots__ = ("done", "respond")

    def __init__(self, done: asyncio.Future[Any], respond: Callable[[], Any]) -> None:
        self.done = done
        self.respond = respond
