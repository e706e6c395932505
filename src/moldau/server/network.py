"""The asyncio edge: connections accepted within quotas, frames in, response parts out.

Memory follows what has arrived. Between frames a connection reads ahead into a buffer
shared by its event loop's connections and copies out the whole frames it got (one
``recv`` per small request); a frame that does not fit is read into its own
``bytearray`` (``BufferedProtocol``), but that buffer starts at most
:data:`INITIAL_FRAME_BUFFER` long and doubles only once the client has filled it, so a
connection that declares 100 MB and sends nothing holds 64 KiB. Every step is reserved
from the broker's :class:`MemoryPool` (``queued.max.request.bytes``) and given back when
the request has been handled; a connection that needs memory the pool does not have
stops reading until some is released. The finished frame is still one writable
``bytearray`` of exactly its size (growing reallocates in place where it can and copies
at most what has arrived), so produce batches are stamped in place as before.

Requests on one connection are processed one at a time, in order, as Kafka does; a
handler may answer later (a :class:`Later`: acks=all produce, once appended, framed and
written in the callback that completes it), and the next requests are handled while it
waits, their responses queued behind it: responses always leave in request order. A response is queued the same way when the next request has already
arrived (a client with requests in flight), so the responses of requests read in one
event-loop turn go out in one write rather than one send each.
Connections stalled mid-frame past ``socket.request.read.timeout.ms`` and idle ones past
``connections.max.idle.ms`` are closed. Responses go out with ``transport.write``; file
ranges with ``os.sendfile`` on plaintext sockets, and on TLS ones (which must encrypt
them in user space) read and written in bounded chunks, one chunk in flight at a time.
Accepting honours ``max.connections``, ``max.connections.per.ip`` and
``max.connection.creation.rate`` (see :mod:`moldau.server.connection_quotas`); TLS
handshakes run beside the accept loop, never in it.

Security lives above this layer: a connection only carries its listener's name, whether
it is TLS, a ``session`` slot for the dispatcher, a frame limit the dispatcher may lower
(SASL before authentication), and two requests from it: close once the response is out
(failed authentication) and stay muted for a while after it (quota throttling).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moldau.server.connection_quotas import ConnectionQuotas
from moldau.server.memory_pool import MemoryPool
from moldau.stats.timing import RequestTimer

if TYPE_CHECKING:
    from moldau.config.broker import BrokerConfig

log = logging.getLogger(__name__)


class Later:
    """A response owed once ``done`` completes: ``frame()`` then gives its parts. The
    connection frames and writes it in ``done``'s own callback, so an acks=all produce's
    answer costs no future and no loop turn of its own between the follower's fetch that
    completes it and its write."""

    __slots__ = ("done", "frame")

    def __init__(self, done: asyncio.Future[Any], frame: Callable[[], list[Any]]) -> None:
        self.done = done
        self.frame = frame


#: What a handler answers: the response parts (bytes-likes and sendfile ranges), the
#: response later (a :class:`Later`, or a future of the parts: the next frames are
#: handled meanwhile) or None.
Response = list[Any] | Later | asyncio.Future[list[Any]] | None
#: Handles one frame.
FrameHandler = Callable[[bytearray, "Connection"], Awaitable[Response]]
#: Called once a connection is established (its TLS handshake done), before any frame.
OpenHandler = Callable[["Connection"], None]

_MAX_QUEUED_FRAMES = 64
_BYTES = (bytes, bytearray, memoryview)
_NOT_READY: Any = object()
#: Responses a connection may owe (waiting ones and those queued behind them) before it
#: stops handling its next requests.
MAX_PENDING_RESPONSES = 32
#: File ranges go through a TLS transport in reads of at most this much.
TLS_FILE_CHUNK = 256 * 1024
#: A frame's first buffer: whole requests up to this size arrive in one allocation.
INITIAL_FRAME_BUFFER = 64 * 1024
#: Growth doubles, but by at most this much at a time.
MAX_GROWTH_STEP = 4 * 1024 * 1024
#: Between frames a connection reads this much at once into a buffer its event loop's
#: connections share, and copies out the frames it holds: a small request costs one
#: ``recv`` rather than three (its size, its body, then finding the socket empty).
READ_AHEAD = 64 * 1024
_ZEROS = memoryview(bytes(MAX_GROWTH_STEP))
_LISTEN_BACKLOG = 1024
# Why reading is paused (a bit set: reading resumes when none is left).
_QUEUE_FULL = 1
_NO_MEMORY = 2
_THROTTLED = 4


@dataclass
class NetworkLimits:
    """What every listener of one broker shares: frame size, timeouts, memory, quotas."""

    max_frame: int = 104857600
    pool: MemoryPool = field(default_factory=lambda: MemoryPool(104857600))
    quotas: ConnectionQuotas = field(default_factory=ConnectionQuotas)
    request_read_timeout_s: float | None = 30.0
    idle_timeout_s: float | None = 600.0
    _slot_freed: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> NetworkLimits:
        queued = config.int("queued.max.request.bytes")
        return cls(
            max_frame=config.int("socket.request.max.bytes"),
            pool=MemoryPool(queued if queued > 0 else None),
            quotas=ConnectionQuotas(
                max_connections=config.int("max.connections"),
                max_connections_per_ip=config.int("max.connections.per.ip"),
                per_ip_overrides=config.ip_connection_overrides,
                max_connection_creation_rate=config.int("max.connection.creation.rate"),
                inter_broker_listener=config.get("inter.broker.listener.name"),
            ),
            request_read_timeout_s=_seconds(config.int("socket.request.read.timeout.ms")),
            idle_timeout_s=_seconds(config.int("connections.max.idle.ms")),
        )

    def sweep_interval_s(self) -> float:
        timeouts = [t for t in (self.request_read_timeout_s, self.idle_timeout_s) if t]
        return min([1.0, *(t / 4 for t in timeouts)])

    async def wait_for_slot(self, listener: str) -> None:
        """Kafka's acceptor blocks at ``max.connections`` until a connection closes."""
        if self.quotas.slot_available(listener):
            return
        log.warning(
            "max.connections (%d) reached: listener %s accepts again once a connection closes",
            self.quotas.max_connections,
            listener,
        )
        while not self.quotas.slot_available(listener):
            self._slot_freed.clear()
            await self._slot_freed.wait()

    def connection_closed(self, ip: str) -> None:
        self.quotas.dec(ip)
        self._slot_freed.set()


def _seconds(ms: int) -> float | None:
    """A timeout in seconds; negative milliseconds (Kafka's -1) mean never."""
    return None if ms < 0 else ms / 1000


class _ReadAhead(threading.local):
    """The read-ahead buffer of this thread's event loop: the loop calls ``get_buffer``,
    reads and calls ``buffer_updated`` in one go, and the frames are copied out there, so
    every connection of the loop can read into the same one."""

    def __init__(self) -> None:
        self.buffer = bytearray(READ_AHEAD)
        self.view = memoryview(self.buffer)


_read_ahead = _ReadAhead()


class Connection(asyncio.BufferedProtocol):
    """One client connection: framing within the memory pool, in-order processing, writing."""

    def __init__(
        self,
        handler: FrameHandler,
        limits: NetworkLimits,
        on_close: Callable[[Connection], None] | None = None,
        *,
        listener: str = "PLAINTEXT",
        tls: bool = False,
        on_open: OpenHandler | None = None,
    ) -> None:
        self.handler = handler
        self.on_open = on_open
        self.limits = limits
        self.pool = limits.pool
        self.on_close = on_close
        self.listener = listener
        self.tls = tls
        self.max_frame = limits.max_frame
        self.session: Any = None  # the dispatcher's per-connection security state
        self._close_after_write = False
        self._mute_ms = 0  # after the current response: read nothing for this long
        self.transport: asyncio.Transport | None = None
        self.peer = ("", 0)
        self._header = bytearray(4)
        self._ahead = False  # the loop reads into the shared read-ahead buffer
        self._size = -1  # declared size of the frame being read; -1 while reading its header
        self._frame = bytearray()
        self._filled = 0
        self._reserved = 0  # pool bytes held for the frame being read: its buffer's size
        self._wanted = 0  # the buffer size waited for while the pool is exhausted
        self._frames: deque[bytearray] = deque()  # whole frames, each holding len() pool bytes
        self._arrivals: deque[float] = deque()  # when each of _frames was complete
        # Set when a frame arrives or the connection closes, while the task waits for that.
        self._wakeup: asyncio.Future[None] | None = None
        self._closed = False
        self._paused = 0
        self._busy = False  # a request is being handled or its response written
        self.last_io = time.monotonic()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._dup_fd = -1
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop  # the loop it was made on
        # Responses owed in order, once one came as a future: written as they become
        # ready (_response_ready), by the writer task when that must wait.
        self._pending: deque[tuple[Response, RequestTimer]] = deque()
        self._pending_space = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._flush_soon = False  # a write of the owed responses is scheduled

    # -- asyncio.BufferedProtocol ------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = (peer[0], peer[1])
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Paused whenever anything is buffered: "can write" then means "buffer empty",
        # which is what sendfile needs to keep the byte order. (TLS transports pause at
        # size >= high, plain ones at size > high: 1 and 0 both mean "anything".)
        high = 1 if self.tls else 0
        transport.set_write_buffer_limits(high=high, low=0)  # type: ignore[attr-defined]
        if self.on_open is not None:
            self.on_open(self)
        # Kept: on Python 3.11 every get_running_loop() is a getpid() syscall.
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._process())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._size < 0:
            # Read ahead only when the pool could hold every frame of a full buffer plus
            # the first step of one more; short of that, the exact reads of a frame's size
            # then its body keep a connection without memory from taking more bytes.
            available = self.pool.available
            self._ahead = available is None or available >= 2 * READ_AHEAD
            if self._ahead:
                return _read_ahead.view
            return memoryview(self._header)[self._filled :]
        frame = self._frame
        if len(frame) < self._reserved:
            # Grown here, not in buffer_updated: the loop still holds the last view then.
            frame += _ZEROS[: self._reserved - len(frame)]
        return memoryview(frame)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_io = time.monotonic()
        if self._ahead:
            self._ahead = False
            self._split(nbytes)
            return
        self._filled += nbytes
        if self._size < 0:
            if self._filled == 4:
                self._start_frame(int.from_bytes(self._header, "big", signed=True))
        elif self._filled == self._size:
            self._finish_frame()
        elif self._filled == self._reserved:
            grown = min(self._size, 2 * self._reserved, self._reserved + MAX_GROWTH_STEP)
            self._reserve(grown)

    def _split(self, nbytes: int) -> None:
        """Take the frames out of ``nbytes`` read ahead: whole ones are copied out as they
        are; a frame cut at the end starts its own buffer as if read directly (it is
        smaller than that buffer's first step), a size cut short waits in the header."""
        data = _read_ahead.view
        pos = 0
        while pos < nbytes and not self._closed:
            if self._size >= 0:  # a frame started here: the rest of this read is its start
                rest = nbytes - pos
                self._frame += data[pos:nbytes]
                self._filled = rest
                return
            take = min(4 - self._filled, nbytes - pos)
            self._header[self._filled : self._filled + take] = data[pos : pos + take]
            self._filled += take
            pos += take
            if self._filled < 4:
                return
            size = int.from_bytes(self._header, "big", signed=True)
            if 0 <= size <= nbytes - pos and size <= self.max_frame:
                self.pool.try_reserve(size)  # get_buffer checked there is room
                self._frame = bytearray(data[pos : pos + size])
                self._size = size
                pos += size
                self._finish_frame()
            else:
                self._start_frame(size)

    def _start_frame(self, size: int) -> None:
        if size < 0 or size > self.max_frame:
            tls_hello = self._header[0] == 0x16 and self._header[1] == 0x03 and not self.tls
            log.warning(
                "closing %s:%s on listener %s: frame of %d bytes exceeds %s (%d)%s",
                *self.peer,
                self.listener,
                size,
                "socket.request.max.bytes"
                if self.max_frame == self.limits.max_frame
                else "sasl.server.max.receive.size",
                self.max_frame,
                "; it looks like a TLS handshake: the client speaks SSL to a listener without it"
                if tls_hello
                else "",
            )
            self.close()
            return
        self._size, self._filled, self._frame = size, 0, bytearray()
        if size == 0:
            self._finish_frame()
        else:
            self._reserve(min(size, INITIAL_FRAME_BUFFER))

    def _reserve(self, buffer_size: int) -> None:
        """Hold pool memory for a buffer of ``buffer_size``, or stop reading until we can."""
        if self.pool.try_reserve(buffer_size - self._reserved):
            self._reserved = buffer_size
            return
        self._wanted = buffer_size
        self._pause(_NO_MEMORY)
        self.pool.wait(buffer_size - self._reserved, self._reserved, self._memory_granted)

    def _memory_granted(self) -> None:
        self._reserved = self._wanted
        self._resume(_NO_MEMORY)

    def _finish_frame(self) -> None:
        self._frames.append(self._frame)  # its len() is what it holds of the pool
        self._arrivals.append(self.last_io)
        self._size, self._filled, self._reserved, self._frame = -1, 0, 0, bytearray()
        self._wake()
        if len(self._frames) >= _MAX_QUEUED_FRAMES:
            self._pause(_QUEUE_FULL)

    def _wake(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    def _pause(self, reason: int) -> None:
        if not self._paused and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self._paused |= reason

    def _resume(self, reason: int) -> None:
        if not self._paused & reason:
            return
        self._paused &= ~reason
        if not self._paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            self.last_io = time.monotonic()  # waiting on us is no stall of the client's

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wake()
        self._can_write.set()
        self._pending_space.set()
        for parts, _ in self._pending:
            if isinstance(parts, Later):
                parts.done.cancel()
            elif isinstance(parts, asyncio.Future):
                parts.cancel()
        self._release_dup()
        self.pool.cancel(self._memory_granted)
        held = self._reserved + sum(len(f) for f in self._frames)
        self._reserved = 0
        self._frames.clear()
        self._arrivals.clear()
        self._frame = bytearray()
        if held:
            self.pool.release(held)
        if self.on_close is not None:
            self.on_close(self)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- timeouts -----------------------------------------------------------------
    def expire(self, now: float) -> None:
        """Close this connection if its request stalled mid-frame or it sat idle too long."""
        if self._closed or self._paused:
            return
        quiet = now - self.last_io
        if self._size >= 0 or self._filled:
            timeout = self.limits.request_read_timeout_s
            if timeout is not None and quiet > timeout:
                log.warning(
                    "closing %s:%s: request stalled mid-frame (%d of %d bytes, nothing for %.1f s;"
                    " socket.request.read.timeout.ms)",
                    *self.peer,
                    self._filled,
                    self._size if self._size >= 0 else 4,
                    quiet,
                )
                self.close()
        elif not self._busy and not self._frames and not self._pending:
            timeout = self.limits.idle_timeout_s
            if timeout is not None and quiet > timeout:
                log.debug("closing %s:%s: idle for %.1f s", *self.peer, quiet)
                self.close()

    # -- processing ---------------------------------------------------------------
    async def _process(self) -> None:
        timer = RequestTimer()  # this connection's, reused for each request
        sent = 0.0  # when the previous response was written
        try:
            while not self._closed:
                if not self._frames:
                    self._wakeup = self._loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                frame = self._frames.popleft()
                # Kafka reads a connection's next request once the last one is answered.
                timer.start(max(self._arrivals.popleft(), sent))
                if len(self._frames) < _MAX_QUEUED_FRAMES // 2:
                    self._resume(_QUEUE_FULL)
                self._busy = True
                try:
                    parts = await self.handler(frame, self)
                finally:
                    self.pool.release(len(frame))
                    del frame
                timer.handler_done()
                # Owed too when the next request is already here: the responses of
                # requests read together leave together, in one write.
                if (
                    isinstance(parts, (Later, asyncio.Future))
                    or self._pending
                    or (parts and self._frames)
                ):
                    await self._owe(parts, timer.detach())
                    sent = time.monotonic()
                else:
                    if parts is not None and not self._closed:
                        await self._write(parts)
                    sent = timer.response_sent()
                if self._close_after_write:
                    while self._pending and not self._closed:
                        await self._drained()
                    break
                if self._mute_ms:
                    await self._muted()
                self._busy = False
                self.last_io = time.monotonic()
        except ConnectionError:
            pass
        except Exception:
            log.exception("connection %s:%s failed; closing it", *self.peer)
        finally:
            self.close()

    async def _owe(self, parts: Response, timer: RequestTimer) -> None:
        """Queue a response behind those still owed (:data:`MAX_PENDING_RESPONSES` at
        most), to be written in request order."""
        while len(self._pending) >= MAX_PENDING_RESPONSES and not self._closed:
            await self._drained()
        self._pending.append((parts, timer))
        later = parts.done if isinstance(parts, Later) else parts
        if isinstance(later, asyncio.Future) and not later.done():
            later.add_done_callback(self._response_ready)
        elif not self._flush_soon:
            # After the requests read with this one are handled: their responses together.
            self._flush_soon = True
            self._loop.call_soon(self._response_ready, None)

    def _resolve(self, i: int) -> list[Any] | None:
        """The parts of the ``i``-th owed response, or :data:`_NOT_READY`; raises what
        made it fail. A response that came later is framed once and kept framed."""
        parts, timer = self._pending[i]
        if parts is None or isinstance(parts, list):
            return parts
        if isinstance(parts, Later):
            if not parts.done.done():
                return _NOT_READY
            parts.done.result()  # raises if it failed or was cancelled
            framed = parts.frame()
        else:
            assert isinstance(parts, asyncio.Future)
            if not parts.done():
                return _NOT_READY
            framed = parts.result()
        timer.response_ready()
        self._pending[i] = (framed, timer)
        return framed

    def _ready(self) -> tuple[list[Any], int]:
        """The parts of the owed responses ready at the head of the queue, and how many
        responses they are; raises if the first not ready yet failed."""
        ready: list[Any] = []
        count = 0
        while count < len(self._pending):
            parts = self._resolve(count)
            if parts is _NOT_READY:
                break
            if parts:
                ready += parts
            count += 1
        return ready, count

    def _response_ready(self, _: object) -> None:
        """Write the owed responses ready at the head of the queue right here when they
        are all bytes and the socket is taking them (an acks=all produce's answer is
        framed and leaves in the callback of the future that completes it: no task, no
        wake-up); anything else (file ranges, a full socket buffer, a failed response)
        goes to the writer task."""
        self._flush_soon = False
        pending = self._pending
        if self._writer is not None or self._closed or not pending:
            return
        try:
            ready, count = self._ready()
            failed = False
        except (Exception, asyncio.CancelledError):
            ready, count, failed = [], 0, True  # the writer says why and closes
        if (
            count
            and self._can_write.is_set()
            and self.transport is not None
            and all(isinstance(p, _BYTES) for p in ready)
        ):
            if ready:
                try:
                    self.transport.write(ready[0] if len(ready) == 1 else b"".join(ready))
                except (ConnectionError, RuntimeError) as e:  # closing under us
                    log.debug("connection %s:%s: write failed: %s", *self.peer, e)
                    self.close()
                    return
            for _ in range(count):
                pending.popleft()[1].response_sent()
            self._pending_space.set()
            count = 0
        if count or failed:  # ready but not written here
            self._writer = self._loop.create_task(self._write_pending())

    async def _drained(self) -> None:
        self._pending_space.clear()
        await self._pending_space.wait()

    async def _write_pending(self) -> None:
        """Write owed responses in order: every one ready at the head goes out in one
        write (acks=all produce responses are often released together by one HW move)."""
        pending = self._pending
        try:
            while pending and not self._closed:
                head = pending[0][0]
                later = head.done if isinstance(head, Later) else head
                if isinstance(later, asyncio.Future):
                    await later  # raises if it failed: the connection closes
                ready, count = self._ready()
                await self._write(ready)
                for _ in range(count):
                    pending.popleft()[1].response_sent()
                self._pending_space.set()
        except ConnectionError:
            self.close()
        except Exception:
            log.exception("connection %s:%s failed; closing it", *self.peer)
            self.close()
        finally:
            self._writer = None
            self._pending_space.set()

    def close_after_write(self) -> None:
        """Close once the response being handled is written (and read nothing more)."""
        self._close_after_write = True

    def throttle(self, ms: int) -> None:
        """After the response being handled, read nothing for ``ms`` (Kafka mutes a
        throttled client's channel; KIP-219)."""
        self._mute_ms = max(self._mute_ms, ms)

    async def _muted(self) -> None:
        ms, self._mute_ms = self._mute_ms, 0
        self._pause(_THROTTLED)
        try:
            await asyncio.sleep(ms / 1000)
        finally:
            self._resume(_THROTTLED)

    async def _write(self, parts: list[Any]) -> None:
        """Write response parts: consecutive bytes in one ``write`` (on a socket each
        write is a send syscall, which on loopback also does the receiver's work), file
        ranges with sendfile (or chunked, on TLS) once the bytes before them are out."""
        transport = self.transport
        assert transport is not None
        joined: list[Any] = []
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                joined.append(part)
                continue
            if joined:
                transport.write(b"".join(joined))
                joined = []
            send = self._send_chunks if self.tls else self._sendfile
            for r in part.ranges:
                await send(r.file, r.position, r.size)
        if joined:
            transport.write(joined[0] if len(joined) == 1 else b"".join(joined))
        if not self._can_write.is_set():
            await self._can_write.wait()

    async def _send_chunks(self, file: Any, offset: int, count: int) -> None:
        """A file range through the TLS transport, which encrypts in user space: read at
        most :data:`TLS_FILE_CHUNK` at a time, and only once the previous chunk has left
        the transport's buffer, so a connection holds one chunk whatever the range."""
        transport = self.transport
        assert transport is not None
        fd = file.fileno()
        while count > 0 and not self._closed:
            await self._can_write.wait()
            chunk = os.pread(fd, min(count, TLS_FILE_CHUNK), offset)
            if not chunk:
                raise ConnectionResetError("file shorter than the range to send")
            transport.write(chunk)
            offset += len(chunk)
            count -= len(chunk)

    async def _sendfile(self, file: Any, offset: int, count: int) -> None:
        """Zero-copy send of a file range once everything before it has left the buffer."""
        transport = self.transport
        assert transport is not None
        await self._can_write.wait()
        sock = transport.get_extra_info("socket")
        fd = sock.fileno()
        in_fd = file.fileno()
        while count > 0 and not self._closed:
            try:
                sent = os.sendfile(fd, in_fd, offset, count)
            except BlockingIOError:
                await self._writable()
                continue
            except OSError as e:
                if e.errno in (errno.EPIPE, errno.ECONNRESET, errno.EBADF):
                    raise ConnectionResetError(str(e)) from e
                raise
            if sent == 0:
                raise ConnectionResetError("sendfile sent nothing: file shorter than range")
            offset += sent
            count -= sent

    async def _writable(self) -> None:
        """Wait until the socket can take more bytes.

        The event loop owns the socket's fd, so we watch a duplicate of it instead.
        """
        loop = asyncio.get_running_loop()
        if self._dup_fd < 0:
            assert self.transport is not None
            self._dup_fd = os.dup(self.transport.get_extra_info("socket").fileno())
        fut: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        loop.add_writer(self._dup_fd, ready)
        try:
            await fut
        finally:
            loop.remove_writer(self._dup_fd)

    def _release_dup(self) -> None:
        if self._dup_fd >= 0:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_writer(self._dup_fd)
            os.close(self._dup_fd)
            self._dup_fd = -1

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._wake()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class Acceptor:
    """One listening socket: accepts within the quotas and times its connections out."""

    def __init__(
        self,
        sock: socket.socket,
        name: str,
        handler: FrameHandler,
        limits: NetworkLimits,
        ssl_context: ssl.SSLContext | None = None,
        on_open: OpenHandler | None = None,
    ) -> None:
        self.sockets = [sock]
        self.on_open = on_open
        self.name = name
        self.handler = handler
        self.limits = limits
        self.ssl_context = ssl_context
        self.connections: dict[Connection, str] = {}  # -> the client address quotas count
        self._handshakes: set[asyncio.Task[None]] = set()
        limits.quotas.add_listener(name)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._accept_loop()), loop.create_task(self._sweep())]

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        listening = self.sockets[0]
        quotas = self.limits.quotas
        while True:
            await self.limits.wait_for_slot(self.name)
            delay = quotas.throttle_s(self.name, time.monotonic())
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            try:
                sock, address = await loop.sock_accept(listening)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.error("listener %s cannot accept (%s); retrying in 1 s", self.name, e)
                    await asyncio.sleep(1)
                continue
            ip = address[0]
            if not quotas.inc(self.name, ip, time.monotonic()):
                log.info(
                    "Rejected connection from %s, address already has the configured maximum "
                    "of %d connections.",
                    ip,
                    quotas.limit_for(ip),
                )
                sock.close()
                continue
            if self.ssl_context is None:
                await self._start(sock, ip)
            else:  # a TLS handshake takes round trips: never hold up accepting for one
                task = loop.create_task(self._start(sock, ip))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)

    async def _start(self, sock: socket.socket, ip: str) -> None:
        conn = Connection(
            self.handler,
            self.limits,
            self._forget,
            listener=self.name,
            tls=self.ssl_context is not None,
            on_open=self.on_open,
        )
        self.connections[conn] = ip
        tls: dict[str, Any] = {}
        if self.ssl_context is not None:
            timeout = self.limits.request_read_timeout_s or 60.0
            tls = {"ssl": self.ssl_context, "ssl_handshake_timeout": timeout}
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: conn, sock, **tls)
        except (OSError, TimeoutError) as e:
            if self.ssl_context is not None:
                # Kafka's wording, so operators find it where they look for it.
                reason = str(e) or type(e).__name__  # e.g. ConnectionResetError
                log.info("Failed authentication with %s (SSL handshake failed: %s)", ip, reason)
            else:
                log.info("connection from %s failed before it started: %s", ip, e)
            sock.close()
            if conn.transport is None:
                self._forget(conn)

    def _forget(self, conn: Connection) -> None:
        ip = self.connections.pop(conn, None)
        if ip is not None:
            self.limits.connection_closed(ip)

    async def _sweep(self) -> None:
        interval = self.limits.sweep_interval_s()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                conn.expire(now)

    def close(self) -> None:
        """Stop accepting (connections already open are left to finish)."""
        for task in [*self._tasks, *self._handshakes]:
            task.cancel()
        for sock in self.sockets:
            sock.close()


def _bind(host: str, port: int) -> socket.socket:
    if not host:
        dualstack = socket.has_dualstack_ipv6()
        family = socket.AF_INET6 if dualstack else socket.AF_INET
        return socket.create_server(
            ("", port), family=family, backlog=_LISTEN_BACKLOG, dualstack_ipv6=dualstack
        )
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return socket.create_server(address[:2], family=family, backlog=_LISTEN_BACKLOG)


def keep_frame_memory_mapped() -> None:
    """Stop glibc from handing freed frame memory straight back to the kernel.

    By default glibc trims the heap top beyond 128 KiB and serves blocks over 128 KiB
    with fresh mmaps (raising both thresholds only as it sees large blocks freed). Frames
    that grow then cost a page fault per 4 KiB, every frame: measured, 1 MB produce
    frames took ~1.6x the CPU. Blocks up to 32 MiB come from the heap and up to 64 MiB of
    freed heap stays mapped for the next frames instead. No-op without glibc's mallopt.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 64 << 20)


_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3


async def start_listener(
    host: str,
    port: int,
    handler: FrameHandler,
    limits: NetworkLimits,
    name: str = "PLAINTEXT",
    ssl_context: ssl.SSLContext | None = None,
    on_open: OpenHandler | None = None,
) -> Acceptor:
    """Listen on ``host:port`` (all interfaces if empty); ``limits`` is shared by listeners.
    With ``ssl_context`` every connection is TLS; ``on_open`` sees each new connection."""
    keep_frame_memory_mapped()
    sock = _bind(host, port)
    sock.setblocking(False)
    return Acceptor(sock, name, handler, limits, ssl_context, on_open)
