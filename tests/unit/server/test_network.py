"""Connection framing, stepped by hand: what a frame holds follows what has arrived.

The loop's side is played by a fake transport: ``feed`` does what the event loop does
(``get_buffer``, copy, ``buffer_updated``) unless reading is paused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from moldau.server.memory_pool import MemoryPool
from moldau.server.network import (
    INITIAL_FRAME_BUFFER,
    READ_AHEAD,
    Connection,
    Later,
    NetworkLimits,
)


class FakeTransport:
    def __init__(self) -> None:
        self.reading = True
        self.closed = False
        self.written: list[bytes] = []

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else None

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))


def feed(conn: Connection, transport: FakeTransport, data: bytes) -> int:
    """Deliver ``data`` as the loop would, in get_buffer-sized pieces; returns bytes taken."""
    taken = 0
    while taken < len(data) and transport.reading and not transport.closed:
        buf = conn.get_buffer(-1)
        n = min(len(buf), len(data) - taken)
        buf[:n] = data[taken : taken + n]
        del buf  # the loop releases its view before calling get_buffer again
        conn.buffer_updated(n)
        taken += n
    return taken


def feed_counting(conn: Connection, transport: FakeTransport, data: bytes) -> int:
    """:func:`feed`, returning how many reads (``buffer_updated`` calls) it took."""
    reads = 0
    taken = 0
    while taken < len(data) and transport.reading and not transport.closed:
        buf = conn.get_buffer(-1)
        n = min(len(buf), len(data) - taken)
        buf[:n] = data[taken : taken + n]
        del buf
        conn.buffer_updated(n)
        taken += n
        reads += 1
    return reads


def framed(*bodies: bytes) -> bytes:
    return b"".join(len(b).to_bytes(4, "big") + b for b in bodies)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def connect(
    pool: MemoryPool, handler: Any = None, **limits: Any
) -> tuple[Connection, FakeTransport, list[bytearray]]:
    seen: list[bytearray] = []

    async def record(frame: bytearray, conn: Connection) -> list[Any] | None:
        seen.append(frame)
        return None

    conn = Connection(handler or record, NetworkLimits(pool=pool, **limits))
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport, seen


def test_declared_size_is_not_allocated_before_it_arrives() -> None:
    async def test() -> None:
        pool = MemoryPool(None)
        conn, transport, seen = connect(pool)
        size = 100_000_000
        payload = bytes(range(256)) * 4096  # 1 MiB of the frame
        feed(conn, transport, size.to_bytes(4, "big"))
        assert pool.used == INITIAL_FRAME_BUFFER, "only the first buffer before any data"
        for arrived in range(0, len(payload), 100_000):
            feed(conn, transport, payload[arrived : arrived + 100_000])
            have = min(arrived + 100_000, len(payload))
            assert pool.used <= max(INITIAL_FRAME_BUFFER, 2 * have)
        assert pool.used == 2 * len(payload)  # full at 1 MiB: the next step is reserved
        conn.connection_lost(None)
        assert pool.used == 0 and seen == []

    run(test)


def test_frames_arrive_whole_writable_and_exact() -> None:
    async def test() -> None:
        pool = MemoryPool(None)
        conn, transport, seen = connect(pool)
        sizes = [0, 1, 5, INITIAL_FRAME_BUFFER, INITIAL_FRAME_BUFFER + 1, 3_000_017]
        frames = [bytes((i * 7 + n) % 251 for i in range(n)) for n in sizes]
        stream = b"".join(len(f).to_bytes(4, "big") + f for f in frames)
        for i in range(0, len(stream), 70_001):  # arbitrary cuts across frames
            feed(conn, transport, stream[i : i + 70_001])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [bytes(f) for f in seen] == frames
        assert all(type(f) is bytearray and len(f) == n for f, n in zip(seen, sizes, strict=True))
        assert pool.used == 0, "every handled frame went back to the pool"

    run(test)


def test_reading_stops_while_the_pool_is_exhausted_and_resumes() -> None:
    async def test() -> None:
        pool = MemoryPool(INITIAL_FRAME_BUFFER * 2)
        hog, hog_transport, _ = connect(pool)
        feed(hog, hog_transport, (10_000_000).to_bytes(4, "big") + bytes(INITIAL_FRAME_BUFFER))
        assert pool.used == 2 * INITIAL_FRAME_BUFFER and hog_transport.reading
        conn, transport, seen = connect(pool)
        frame = b"\x00\x12" + bytes(98)
        taken = feed(conn, transport, len(frame).to_bytes(4, "big") + frame)
        assert taken == 4 and not transport.reading, "no memory: stop after the size"
        hog.connection_lost(None)  # its memory returns: the waiting connection goes on
        assert transport.reading
        feed(conn, transport, frame)
        await asyncio.sleep(0)
        assert [bytes(f) for f in seen] == [frame]

    run(test)


def test_stalled_and_idle_connections_are_closed() -> None:
    async def test() -> None:
        pool = MemoryPool(None)
        limits = {"request_read_timeout_s": 5.0, "idle_timeout_s": 60.0}
        stalled, stalled_t, _ = connect(pool, **limits)
        idle, idle_t, _ = connect(pool, **limits)
        feed(stalled, stalled_t, (1000).to_bytes(4, "big") + b"\x00\x03")
        start = stalled.last_io
        stalled.expire(start + 4.9)
        idle.expire(start + 4.9)
        assert not stalled_t.closed and not idle_t.closed
        stalled.expire(start + 5.1)
        idle.expire(start + 5.1)
        assert stalled_t.closed and not idle_t.closed, "mid-frame past the read timeout"
        idle.expire(idle.last_io + 60.1)
        assert idle_t.closed

    run(test)


def test_a_connection_waiting_on_the_pool_is_not_stalled() -> None:
    async def test() -> None:
        pool = MemoryPool(1)
        assert pool.try_reserve(1)
        conn, transport, _ = connect(pool, request_read_timeout_s=1.0)
        feed(conn, transport, (10).to_bytes(4, "big") + bytes(10))
        assert not transport.reading
        conn.expire(conn.last_io + 100)
        assert not transport.closed, "waiting on us is not the client's stall"

    run(test)


def test_frames_growing_together_past_the_pool_all_complete() -> None:
    """Two 1 MiB frames arriving side by side in a 1 MiB pool end up each holding half
    and waiting for more; the pool lets one run over, it completes, and so does the other."""

    async def test() -> None:
        mib = 1024 * 1024
        pool = MemoryPool(mib)
        conns = [connect(pool) for _ in range(2)]
        frames = [bytes([i]) * mib for i in (1, 2)]
        streams = [mib.to_bytes(4, "big") + f for f in frames]
        sent = [0, 0]
        peak = 0
        for _ in range(1000):
            if all(n == len(s) for n, s in zip(sent, streams, strict=True)):
                break
            for i, (conn, transport, _) in enumerate(conns):
                sent[i] += feed(conn, transport, streams[i][sent[i] : sent[i] + 32 * 1024])
                peak = max(peak, pool.used)
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [[bytes(f) for f in seen] for _, _, seen in conns] == [[frames[0]], [frames[1]]]
        assert pool.used == 0
        assert mib < peak <= 2 * mib, "over the limit by at most one frame"

    run(test)


def test_responses_owed_later_leave_in_request_order() -> None:
    """A handler answering with a future lets the next requests be handled meanwhile;
    their responses wait behind it, so the client reads them in the order it asked."""

    async def test() -> None:
        later: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        handled: list[bytes] = []

        async def handler(frame: bytearray, conn: Connection) -> Any:
            handled.append(bytes(frame))
            return later if frame == b"first" else [b"re:" + bytes(frame)]

        conn, transport, _ = connect(MemoryPool(None), handler)
        for body in (b"first", b"second", b"third"):
            feed(conn, transport, len(body).to_bytes(4, "big") + body)
        for _ in range(10):
            await asyncio.sleep(0)
        assert handled == [b"first", b"second", b"third"]  # not held up by the first
        assert transport.written == []  # ... whose response is owed first
        later.set_result([b"re:first"])
        for _ in range(10):
            await asyncio.sleep(0)
        # in order, and in one write: all three were ready at once
        assert transport.written == [b"re:firstre:secondre:third"]
        conn.connection_lost(None)

    run(test)


def test_responses_to_requests_read_together_leave_in_one_write() -> None:
    """Requests already queued when one is answered (a client with requests in flight):
    their responses go out together, in request order; a request arriving alone is
    answered at once."""

    async def test() -> None:
        async def handler(frame: bytearray, conn: Connection) -> Any:
            return [b"re:", bytes(frame)]

        conn, transport, _ = connect(MemoryPool(None), handler)
        for body in (b"a", b"b", b"c"):
            feed(conn, transport, len(body).to_bytes(4, "big") + body)
        for _ in range(10):
            await asyncio.sleep(0)
        assert transport.written == [b"re:are:bre:c"]
        feed(conn, transport, b"\x00\x00\x00\x01d")
        for _ in range(10):
            await asyncio.sleep(0)
        assert transport.written == [b"re:are:bre:c", b"re:d"]
        conn.connection_lost(None)

    run(test)


def test_an_owed_response_is_written_in_the_callback_that_readies_it() -> None:
    """An acks=all produce's answer leaves as its future completes, with no writer task."""

    async def test() -> None:
        later: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

        async def handler(frame: bytearray, conn: Connection) -> Any:
            return later

        conn, transport, _ = connect(MemoryPool(None), handler)
        feed(conn, transport, b"\x00\x00\x00\x01a")
        for _ in range(10):
            await asyncio.sleep(0)
        tasks = len(asyncio.all_tasks())
        later.set_result([b"re:", b"a"])
        await asyncio.sleep(0)  # only the future's own callback runs
        assert transport.written == [b"re:a"]
        assert len(asyncio.all_tasks()) == tasks  # no writer task was started
        conn.connection_lost(None)

    run(test)


def test_small_frames_read_together_take_one_read() -> None:
    """Read ahead: several whole frames arriving together cost one read, and each comes
    out as its own exact, writable buffer holding its size of the pool until handled."""

    async def test() -> None:
        pool = MemoryPool(None)
        conn, transport, seen = connect(pool)
        bodies = [b"", b"a", bytes(range(200)), b"xyz" * 1000]
        assert feed_counting(conn, transport, framed(*bodies)) == 1
        for _ in range(5):
            await asyncio.sleep(0)
        assert [bytes(f) for f in seen] == bodies
        assert all(type(f) is bytearray for f in seen)
        assert pool.used == 0
        conn.connection_lost(None)

    run(test)


def test_frames_cut_anywhere_across_reads_come_out_whole() -> None:
    """A size cut after 1-3 bytes, a body cut mid-way, a frame larger than the read-ahead
    buffer: every cut of the stream gives the same frames."""

    async def test() -> None:
        bodies = [b"first", b"", b"\x01" * 10, bytes(READ_AHEAD + 5000), b"last"]
        stream = framed(*bodies)
        for cuts in ([1], [2], [3], [4], [7], [11, 12, 13], [READ_AHEAD - 2], [30, READ_AHEAD]):
            pool = MemoryPool(None)
            conn, transport, seen = connect(pool)
            start = 0
            for cut in [*cuts, len(stream)]:
                feed(conn, transport, stream[start:cut])
                start = cut
            for _ in range(10):
                await asyncio.sleep(0)
            assert [bytes(f) for f in seen] == bodies, cuts
            assert pool.used == 0
            conn.connection_lost(None)

    run(test)


def test_an_oversized_frame_found_while_reading_ahead_closes_the_connection() -> None:
    async def test() -> None:
        pool = MemoryPool(None)
        conn, transport, seen = connect(pool, max_frame=1000)
        feed(conn, transport, framed(b"ok") + (1001).to_bytes(4, "big") + bytes(50))
        assert transport.closed
        conn.connection_lost(None)
        assert pool.used == 0
        conn, transport, seen = connect(pool, max_frame=1000)
        feed(conn, transport, (-5).to_bytes(4, "big", signed=True) + framed(b"next"))
        assert transport.closed, "a negative size closes too"
        conn.connection_lost(None)
        assert pool.used == 0

    run(test)


def test_a_pool_short_of_room_reads_exactly() -> None:
    """Without room for a full read-ahead buffer's frames, a connection reads a frame's
    size and then its body into the frame's own buffer, as when memory is short."""

    async def test() -> None:
        pool = MemoryPool(2 * READ_AHEAD + 10)
        assert pool.try_reserve(20)
        conn, transport, seen = connect(pool)
        assert feed_counting(conn, transport, framed(b"a", b"b")) == 4
        for _ in range(5):
            await asyncio.sleep(0)
        assert [bytes(f) for f in seen] == [b"a", b"b"]
        assert pool.used == 20

    run(test)


def test_a_later_response_is_framed_and_written_in_its_futures_callback() -> None:
    """A :class:`Later` is framed once its future completes and written in that very
    callback; one that cannot be framed closes the connection."""

    async def test() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        framings: list[int] = []

        def frame() -> list[Any]:
            framings.append(1)
            return [b"re:a"]

        async def handler(frame_: bytearray, conn: Connection) -> Any:
            return Later(done, frame) if frame_ == b"a" else [b"re:" + bytes(frame_)]

        conn, transport, _ = connect(MemoryPool(None), handler)
        feed(conn, transport, framed(b"a", b"b"))
        for _ in range(10):
            await asyncio.sleep(0)
        assert transport.written == [] and framings == []
        done.set_result(None)
        await asyncio.sleep(0)  # only the future's own callback runs
        assert transport.written == [b"re:are:b"] and framings == [1]
        conn.connection_lost(None)

        broken: asyncio.Future[None] = loop.create_future()

        def fails() -> list[Any]:
            raise ValueError("cannot frame")

        async def failing(frame_: bytearray, conn: Connection) -> Any:
            return Later(broken, fails)

        conn, transport, _ = connect(MemoryPool(None), failing)
        feed(conn, transport, framed(b"a"))
        for _ in range(5):
            await asyncio.sleep(0)
        broken.set_result(None)
        for _ in range(10):
            await asyncio.sleep(0)
        assert transport.closed and transport.written == []
        conn.connection_lost(None)

        waiting: asyncio.Future[None] = loop.create_future()

        async def waits(frame_: bytearray, conn: Connection) -> Any:
            return Later(waiting, lambda: [b"never"])

        conn, transport, _ = connect(MemoryPool(None), waits)
        feed(conn, transport, framed(b"a"))
        for _ in range(5):
            await asyncio.sleep(0)
        conn.connection_lost(None)
        assert waiting.cancelled(), "what the response waited for is called off"

    run(test)
