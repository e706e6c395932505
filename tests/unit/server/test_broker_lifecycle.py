"""The broker's controlled shutdown and its own event loop: time the loop was blocked
(an in-process controller deciding the fence of 50,000 partitions) is not the
controller's silence, so the broker still waits for the answer that lets it stop."""

from __future__ import annotations

import asyncio
import time

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from moldau.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from moldau.server.broker_lifecycle import BrokerLifecycle
from moldau.server.node_to_controller import NodeToControllerChannel

SESSION_TIMEOUT_MS = 400


class BusyController(NodeToControllerChannel):
    """Answers at once, except the heartbeat asking to shut down: that one blocks the
    event loop past the session timeout (``block_s``), then commits and allows it."""

    def __init__(self, block_s: float | None) -> None:
        self.block_s = block_s

    async def call(self, api_key: int, version: int, request: object) -> object:
        if api_key == ApiKey.BROKER_REGISTRATION:
            return BrokerRegistrationResponse(broker_epoch=7)
        if not getattr(request, "want_shut_down", False):
            return BrokerHeartbeatResponse(is_fenced=False)
        if self.block_s is None:
            await asyncio.sleep(3600)  # a controller that never answers again
        time.sleep(self.block_s)  # deciding the fence on this process's loop
        await asyncio.sleep(0.05)  # the commit
        return BrokerHeartbeatResponse(is_fenced=True, should_shut_down=True)


async def shut_down(channel: BusyController) -> tuple[bool, float]:
    lifecycle = BrokerLifecycle(
        1, "cluster", channel, lambda: 0, session_timeout_ms=SESSION_TIMEOUT_MS
    )
    lifecycle.start([("PLAINTEXT", "127.0.0.1", 9092)])
    await lifecycle.unfenced.wait()
    started = time.monotonic()
    allowed = await lifecycle.controlled_shutdown(30)
    return allowed, time.monotonic() - started


def test_a_loop_blocked_past_the_session_timeout_still_waits_for_the_controller() -> None:
    allowed, _ = asyncio.run(shut_down(BusyController(block_s=3 * SESSION_TIMEOUT_MS / 1000)))
    assert allowed


def test_a_silent_controller_is_still_given_up_after_the_session_timeout() -> None:
    allowed, took = asyncio.run(shut_down(BusyController(block_s=None)))
    assert not allowed and took < 5
