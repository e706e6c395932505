"""Send cases to a live broker, each on its own connection, many at a time, and check
the one thing every answer must get right: it answers the request that was sent."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Sequence

from tests.robustness.mutations import Case

_I32 = struct.Struct(">i")


async def _one(host: str, port: int, case: Case, timeout: float) -> str | None:
    """Send ``case``; returns a problem description, or None."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        return f"{case.kind} from #{case.source}: cannot connect: {e}"
    try:
        writer.write(case.wire)
        await writer.drain()
        if not case.answerable:
            await asyncio.sleep(0.01)  # let the broker start on the frame it cannot finish
            return None
        try:
            head = await asyncio.wait_for(reader.readexactly(4), timeout)
            (size,) = _I32.unpack(head)
            frame = await asyncio.wait_for(reader.readexactly(size), timeout)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            return None  # no answer (closed, or acks=0): both are fine
        expected = case.correlation_id
        got = _I32.unpack_from(frame)[0] if size >= 4 else None
        if expected is not None and got != expected:
            return (
                f"{case.kind} from #{case.source}: answered correlation id {got}, sent {expected}"
            )
        return None
    except ConnectionError:
        return None
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def replay(
    bootstrap: str, cases: Sequence[Case], *, concurrency: int = 16, timeout: float = 2.0
) -> list[str]:
    """Every case against ``bootstrap``; the problems found (empty if none)."""
    host, port = bootstrap.rsplit(":", 1)

    async def run() -> list[str]:
        gate = asyncio.Semaphore(concurrency)

        async def guarded(case: Case) -> str | None:
            async with gate:
                return await _one(host, int(port), case, timeout)

        results = await asyncio.gather(*(guarded(c) for c in cases))
        return [r for r in results if r is not None]

    return asyncio.run(run())
