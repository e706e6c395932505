"""The broker's side of its registration with the controller (Kafka's BrokerLifecycleManager).

A broker registers on start (a new incarnation id each time), is fenced until its
heartbeat reports the metadata it has caught up to, then heartbeats every
``broker.heartbeat.interval.ms``. A controller that no longer knows the broker's epoch
(STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED: the broker was away too long, or the
controller was replaced) gets a fresh registration. On a controlled shutdown the broker
asks to shut down and keeps heartbeating until the controller has moved its leaderships
away and says it may stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from moldau.config.broker import BrokerConfig
from moldau.ids import SYSTEM_IDS, IdSource
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from moldau.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from moldau.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Listener,
)
from moldau.server.node_to_controller import NodeToControllerChannel
from moldau.storage.meta_properties import directory_uuid

log = logging.getLogger(__name__)

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
RETRY_BACKOFF_S = 0.1
SHUTDOWN_POLL_S = 0.05


class BrokerLifecycle:
    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        channel: NodeToControllerChannel,
        metadata_offset: Callable[[], int],
        *,
        rack: str | None = None,
        heartbeat_interval_ms: int = 2_000,
        session_timeout_ms: int = 9_000,
        ids: IdSource = SYSTEM_IDS,
        log_dir_ids: Sequence[bytes] = (),
        offline_log_dir_ids: Callable[[], list[bytes]] = list,
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.channel = channel
        self.metadata_offset = metadata_offset
        self.rack = rack
        # KIP-858: the directory ids of every log dir, and of those offline now.
        self.log_dir_ids = list(log_dir_ids)
        self.offline_log_dir_ids = offline_log_dir_ids
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.session_timeout_s = session_timeout_ms / 1000
        self.incarnation_id = ids.uuid4().bytes
        self.listeners: list[Listener] = []
        self.epoch = -1
        self.fenced = True
        self.unfenced = asyncio.Event()
        self._shutting_down = False
        self._shut_down_allowed = asyncio.Event()
        self._wake = asyncio.Event()  # the next heartbeat goes out now
        self._last_answer = -float("inf")  # loop time of the controller's last answer
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_config(
        cls,
        config: BrokerConfig,
        cluster_id: str,
        channel: NodeToControllerChannel,
        metadata_offset: Callable[[], int],
        offline_log_dirs: Callable[[], Collection[Path]] = tuple,
    ) -> BrokerLifecycle:
        dir_ids = {d: directory_uuid(d) for d in config.log_dirs}
        return cls(
            config.node_id,
            cluster_id,
            channel,
            metadata_offset,
            rack=config.get("broker.rack") or None,
            heartbeat_interval_ms=config.int("broker.heartbeat.interval.ms"),
            session_timeout_ms=config.int("broker.session.timeout.ms"),
            log_dir_ids=[i for i in dir_ids.values() if i is not None],
            offline_log_dir_ids=lambda: [
                i for d, i in dir_ids.items() if i is not None and d in offline_log_dirs()
            ],
        )

    def heartbeat_now(self) -> None:
        """Send the next heartbeat at once (e.g. a log dir went offline)."""
        self._wake.set()

    def start(self, endpoints: Sequence[tuple[str, str, int]]) -> None:
        """Register with the listeners clients reach (name, host, port), then heartbeat."""
        self.listeners = [Listener(name=n, host=h, port=p) for n, h, p in endpoints]
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away; True once it says
        the broker may stop, False when giving up (after ``timeout_s``, or with no answer
        from any controller for a session timeout): the broker stops anyway."""
        self._shutting_down = True
        self._wake.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            while not self._shut_down_allowed.is_set():
                now = loop.time()
                if now >= deadline:
                    return False
                if now - self._last_answer > max(self.session_timeout_s, SHUTDOWN_POLL_S):
                    log.warning(
                        "no controller answered for %.1f s: nothing can move this broker's "
                        "leaderships; stopping without them moved",
                        self.session_timeout_s,
                    )
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._shut_down_allowed.wait(), SHUTDOWN_POLL_S)
            return True
        finally:
            self.close()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        while True:
            try:
                if self.epoch < 0:
                    if await self._register():
                        continue  # the first heartbeat goes out at once
                else:
                    await self._heartbeat()
            except (ConnectionError, TimeoutError, KafkaError) as e:
                # No controller answered for the channel's whole timeout (a quorum without
                # a leader, or cut off from it): keep trying, or this broker never
                # heartbeats again and stays fenced for good.
                log.debug("controller unreachable: %s", e)
                await self._sleep(RETRY_BACKOFF_S)
                continue
            if self._shutting_down:
                await self._sleep(SHUTDOWN_POLL_S)
            elif self.epoch >= 0 and self.fenced:
                await self._sleep(min(self.heartbeat_interval_s, RETRY_BACKOFF_S))
            elif self.epoch >= 0:
                await self._sleep(self.heartbeat_interval_s)

    async def _sleep(self, seconds: float) -> None:
        """Wait until the next heartbeat is due, or :meth:`controlled_shutdown` wants it."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def _register(self) -> bool:
        request = BrokerRegistrationRequest(
            broker_id=self.broker_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=self.listeners,
            rack=self.rack,
            log_dirs=self.log_dir_ids,
            previous_broker_epoch=self.epoch,
        )
        response = await self.channel.call(
            ApiKey.BROKER_REGISTRATION, REGISTRATION_VERSION, request
        )
        self._last_answer = asyncio.get_running_loop().time()
        if response.error_code != ErrorCode.NONE:
            log.error("broker registration refused: %s", ErrorCode(response.error_code).name)
            await asyncio.sleep(RETRY_BACKOFF_S * 10)
            return False
        self.epoch = response.broker_epoch
        log.info(
            "registered with the controller as broker %d, epoch %d", self.broker_id, self.epoch
        )
        return True

    async def _heartbeat(self) -> None:
        request = BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.epoch,
            current_metadata_offset=self.metadata_offset(),
            want_fence=False,
            want_shut_down=self._shutting_down,
            offline_log_dirs=self.offline_log_dir_ids(),
        )
        response: BrokerHeartbeatResponse = await self.channel.call(
            ApiKey.BROKER_HEARTBEAT, HEARTBEAT_VERSION, request
        )
        self._last_answer = asyncio.get_running_loop().time()
        if response.error_code in (
            ErrorCode.STALE_BROKER_EPOCH,
            ErrorCode.BROKER_ID_NOT_REGISTERED,
        ):
            log.warning("the controller lost this broker's registration; registering again")
            self.epoch = -1
            self.fenced = True
            self.unfenced.clear()
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("heartbeat failed: %s", ErrorCode(response.error_code).name)
            return
        if self.fenced and not response.is_fenced:
            log.info("unfenced: broker %d is serving", self.broker_id)
            self.unfenced.set()
        self.fenced = response.is_fenced
        if response.should_shut_down:
            self._shut_down_allowed.set()
