"""Where a request's time goes, split as Kafka's RequestChannel splits it.

- queue: from the request's arrival (or the previous response on its connection, since
  Kafka reads a connection's next request only then) until the event loop takes it up;
- local: the handler's own work;
- remote: time parked waiting for something else (acks=all replication, a fetch's
  long-poll, a JoinGroup waiting for the other members): every such wait is wrapped in
  :func:`parked`;
- send: writing the response (including waiting for the client to read it).

The network layer starts a :class:`RequestTimer` per request and the dispatcher names it;
the timer travels in a context variable, so the code in between needs no parameter for it.
"""

from __future__ import annotations

from asyncio import Task, current_task
from collections.abc import Awaitable
from contextvars import ContextVar
from time import monotonic
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class RequestSink(Protocol):
    def record(self, timer: RequestTimer, sent: float) -> None: ...


_current: ContextVar[RequestTimer | None] = ContextVar("moldau_request_timer", default=None)


class RequestTimer:
    """One request's timestamps (``time.monotonic`` seconds); recorded once sent."""

    __slots__ = (
        "received",
        "dequeued",
        "handled",
        "remote",
        "task",
        "sink",
        "api_key",
        "version",
        "size",
        "follower",
    )

    def __init__(self, received: float) -> None:
        self.received = received
        self.dequeued = self.handled = monotonic()
        self.remote = 0.0
        self.task: Task[Any] | None = current_task()
        self.sink: RequestSink | None = None  # set by `identify`; unnamed requests are not kept
        self.api_key = -1
        self.version = -1
        self.size = 0
        self.follower = False

    @classmethod
    def start(cls, received: float) -> RequestTimer:
        """The request received at ``received`` is taken up now (by the current task)."""
        timer = cls(received)
        _current.set(timer)
        return timer

    def handler_done(self) -> None:
        self.handled = monotonic()

    def response_sent(self) -> float:
        """The response is written (or there is none): record the request; returns now."""
        sent = monotonic()
        if self.sink is not None:
            self.sink.record(self, sent)
        return sent


def current_timer() -> RequestTimer | None:
    return _current.get()


async def parked(waiting: Awaitable[T]) -> T:
    """Await what the current request is parked on; the wait counts as its remote time.

    Only the request's own task counts: a task it spawned inherits the context variable
    but not the request."""
    timer = _current.get()
    if timer is None or timer.task is not current_task():
        return await waiting
    started = monotonic()
    try:
        return await waiting
    finally:
        timer.remote += monotonic() - started
