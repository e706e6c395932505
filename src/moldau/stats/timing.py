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
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from time import monotonic
from typing import Any, TypeVar

T = TypeVar("T")


#: Where a timed request is recorded (``RequestTypeStats.observe``): version, size, then the
#: queue, local, remote, send and total times in milliseconds.
RequestRecorder = Callable[[int, int, float, float, float, float, float], None]


_current: ContextVar[RequestTimer | None] = ContextVar("moldau_request_timer", default=None)


class RequestTimer:
    """The timestamps (``time.monotonic`` seconds) of the request a connection's task is
    handling; one per connection, created on its task, reused for each request."""

    __slots__ = (
        "received",
        "dequeued",
        "handled",
        "remote",
        "task",
        "recorders",
        "version",
        "size",
    )

    def __init__(self) -> None:
        self.task: Task[Any] | None = current_task()
        self.received = self.dequeued = self.handled = self.remote = 0.0
        # Where to record, set when the dispatcher names the request: unnamed ones are not.
        self.recorders: tuple[RequestRecorder, ...] = ()
        self.version = self.size = 0
        _current.set(self)

    def start(self, received: float) -> None:
        """The request received at ``received`` is taken up now."""
        self.received = received
        self.dequeued = monotonic()
        self.remote = 0.0
        self.recorders = ()

    def handler_done(self) -> None:
        self.handled = monotonic()

    def detach(self) -> RequestTimer:
        """The current request's times in a timer of its own, which records it once its
        response (:class:`~moldau.server.request_context.Pending`) is sent; this timer
        records nothing for it and goes on to the connection's next request."""
        copy = RequestTimer.__new__(RequestTimer)
        copy.task = None
        copy.received, copy.dequeued, copy.handled = self.received, self.dequeued, self.handled
        copy.remote, copy.recorders = self.remote, self.recorders
        copy.version, copy.size = self.version, self.size
        self.recorders = ()
        return copy

    def response_ready(self) -> None:
        """A detached request's response is ready: the wait for it was remote time."""
        now = monotonic()
        self.remote += now - self.handled
        self.handled = now

    def response_sent(self) -> float:
        """The response is written (or there is none): record the request; returns now."""
        sent = monotonic()
        if self.recorders:
            remote, handled = self.remote, self.handled
            local = handled - self.dequeued - remote
            for record in self.recorders:
                record(
                    self.version,
                    self.size,
                    1000 * (self.dequeued - self.received),
                    1000 * local if local > 0 else 0.0,
                    1000 * remote,
                    1000 * (sent - handled),
                    1000 * (sent - self.received),
                )
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
