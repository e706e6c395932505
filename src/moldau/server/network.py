"""The asyncio edge: frames in, response parts out, file ranges by sendfile.

Each connection reads straight into a per-frame ``bytearray`` (``BufferedProtocol``), so
produce payloads arrive writable and are stamped in place without another copy. Requests
on one connection are processed one at a time, in order, as Kafka does.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

#: Handles one frame; returns the response parts (bytes-likes and sendfile ranges) or None.
FrameHandler = Callable[[bytearray, "Connection"], Awaitable[list[Any] | None]]

_MAX_QUEUED_FRAMES = 64


class Connection(asyncio.BufferedProtocol):
    """One client connection: framing, in-order processing and writing."""

    def __init__(self, handler: FrameHandler, max_frame: int) -> None:
        self.handler = handler
        self.max_frame = max_frame
        self.transport: asyncio.Transport | None = None
        self.peer = ("", 0)
        self._header = bytearray(4)
        self._frame: bytearray | None = None
        self._filled = 0
        self._frames: deque[bytearray] = deque()
        self._wakeup = asyncio.Event()
        self._closed = False
        self._paused_reading = False
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._dup_fd = -1
        self._task: asyncio.Task[None] | None = None

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
        # which is what sendfile needs to keep the byte order.
        transport.set_write_buffer_limits(high=0, low=0)
        self._task = asyncio.get_running_loop().create_task(self._process())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            return memoryview(self._header)[self._filled :]
        return memoryview(self._frame)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._frame is None:
            if self._filled < 4:
                return
            size = int.from_bytes(self._header, "big", signed=True)
            if size < 0 or size > self.max_frame:
                log.warning(
                    "closing %s:%s: frame of %d bytes exceeds socket.request.max.bytes (%d)",
                    *self.peer,
                    size,
                    self.max_frame,
                )
                self.close()
                return
            self._frame = bytearray(size)
            self._filled = 0
            if size:
                return
        elif self._filled < len(self._frame):
            return
        self._frames.append(self._frame)
        self._frame = None
        self._filled = 0
        self._wakeup.set()
        if len(self._frames) >= _MAX_QUEUED_FRAMES and self.transport is not None:
            self.transport.pause_reading()
            self._paused_reading = True

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._wakeup.set()
        self._can_write.set()
        self._release_dup()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- processing ---------------------------------------------------------------
    async def _process(self) -> None:
        try:
            while not self._closed:
                if not self._frames:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                frame = self._frames.popleft()
                if self._paused_reading and len(self._frames) < _MAX_QUEUED_FRAMES // 2:
                    assert self.transport is not None
                    self.transport.resume_reading()
                    self._paused_reading = False
                parts = await self.handler(frame, self)
                if parts is not None and not self._closed:
                    await self._write(parts)
        except ConnectionError:
            pass
        except Exception:
            log.exception("connection %s:%s failed; closing it", *self.peer)
        finally:
            self.close()

    async def _write(self, parts: list[Any]) -> None:
        transport = self.transport
        assert transport is not None
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                if part:
                    transport.write(part)
            else:
                for r in part.ranges:
                    await self._sendfile(r.file, r.position, r.size)
        if not self._can_write.is_set():
            await self._can_write.wait()

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
        fut = loop.create_future()
        loop.add_writer(self._dup_fd, lambda: fut.done() or fut.set_result(None))
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
            self._wakeup.set()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


async def start_listener(
    host: str, port: int, handler: FrameHandler, max_frame: int
) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: Connection(handler, max_frame),
        host=host or None,
        port=port,
        reuse_address=True,
        backlog=1024,
    )
