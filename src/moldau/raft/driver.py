"""The asyncio driver of one node's KRaft replica (Kafka's KafkaRaftClientDriver + RaftManager).

`RaftManager` owns the `__cluster_metadata-0` log (`FileRaftLog`), the `quorum-state` file
and a pure `RaftClient`, and only moves bytes and time for it: inbound raft RPCs come in
through `handle`, outbound ones go out on the `NetworkClient`, one timer is armed from each
step's deadline, and every step's `Effects` are carried out in order -- flush the log,
send, queue committed data and leader changes for the listener. Steps never nest: effects
produced while others are carried out (a listener appending, say) wait their turn. The
listener hears everything in the core's order; a snapshot or a large run of committed
batches is decoded in a worker thread meanwhile, so the node keeps serving.

For the controller it is a `MetadataLogWriter` (`append`, `wait_committed`,
`set_commit_callback`), so `QuorumController` runs on Raft unchanged. For the node it
decodes committed batches into metadata records for its listener, and every
`metadata.log.max.record.bytes.between.snapshots` of committed records, or once
`metadata.log.max.snapshot.interval.ms` passed with new ones (`SnapshotTrigger`), it writes
a snapshot of the committed metadata image (in a worker thread), which lets the log before
the previous snapshot go. A node too far behind loads the leader's snapshot
(FetchSnapshot) and its listener gets `handle_snapshot`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from moldau.clock import Scheduler, TimerHandle
from moldau.metadata.image import MetadataDelta, MetadataImage
from moldau.metadata.records import MetadataRecord, decode_record
from moldau.metadata.snapshot import image_to_records
from moldau.metadata.topics import METADATA_TOPIC
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.metadata_record_serde import encode_metadata_record
from moldau.raft.client import (
    Committed,
    Effects,
    LeaderAndEpoch,
    LoadSnapshot,
    NotLeaderError,
    RaftClient,
)
from moldau.raft.config import MetadataLogConfig, QuorumConfig
from moldau.raft.file_log import FileRaftLog
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    RaftResponse,
    VoteResponse,
)
from moldau.raft.records import Batches, iter_snapshot_batches, snapshot_bytes
from moldau.raft.snapshot_trigger import SnapshotTrigger
from moldau.raft.state import Leader
from moldau.raft.store import QUORUM_STATE_FILE, FileQuorumStateStore
from moldau.raft.wire import (
    SEND_VERSIONS,
    WireError,
    check_describe_quorum,
    describe_quorum_to_wire,
    error_response,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from moldau.records.record import Record, decode_records

logger = logging.getLogger(__name__)

METADATA_DIR = f"{METADATA_TOPIC}-0"
RESPONSES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
)
CommitCallback = Callable[[Sequence[MetadataRecord], int], None]
INLINE_DECODE_BYTES = 128 << 10  # committed data decoded on the loop; more goes to a thread


class RaftListener(Protocol):
    """The node's side: committed metadata in log order, and who leads."""

    def handle_commit(
        self, records: Sequence[MetadataRecord], last_offset: int, image: MetadataImage
    ) -> None:
        """Committed records up to `last_offset` (a large run of batches comes at once) and
        the committed image after them, built once (in a worker thread when large) for
        every part of the node to share."""
        ...

    def handle_snapshot(self, image: MetadataImage) -> None:
        """Replace all state with a snapshot's image (its offset is the last log offset the
        snapshot covers: its id's end offset - 1)."""
        ...

    def handle_leader_change(self, leader_id: int | None, epoch: int) -> None: ...


def not_controller(message: str) -> KafkaError:
    return KafkaError(message, ErrorCode.NOT_CONTROLLER)


def decode_metadata(records: list[Record]) -> list[MetadataRecord]:
    """The metadata records of one batch; one that does not decode (a newer release's, or
    damaged) is skipped with an error naming its offset: a node must always be able to
    start on its own data."""
    decoded = []
    for r in records:
        try:
            record = decode_record(r.key, r.value)
        except ValueError as e:
            logger.error("%s: skipping the record at offset %d: %s", METADATA_DIR, r.offset, e)
            continue
        if record is not None:
            decoded.append(record)
    return decoded


def encode_snapshot(image: MetadataImage, epoch: int, last_timestamp: int) -> bytes:
    """A snapshot file's bytes for `image` (runs in a worker thread: the image is frozen)."""
    values = [encode_metadata_record(r) for r in image_to_records(image)]
    return snapshot_bytes(values, epoch, last_timestamp)


def read_snapshot_records(data: bytes) -> list[MetadataRecord]:
    out: list[MetadataRecord] = []
    for records in iter_snapshot_batches(data):
        out.extend(decode_metadata(records))
    return out


@dataclass(frozen=True, slots=True)
class SnapshotData:
    """A snapshot to load, read when the core asked for it (the file may go later)."""

    snapshot_id: OffsetAndEpoch
    data: bytes


@dataclass(frozen=True, slots=True)
class Decoded:
    """Committed data ready for the listener, and the committed image after it. Computed
    from frozen inputs, so large ones are decoded in a worker thread."""

    batches: list[tuple[list[MetadataRecord], int]]  # (records, last offset)
    image: MetadataImage
    end_offset: int
    last_epoch: int
    last_timestamp: int
    log_bytes: int
    is_snapshot: bool = False


def decode_committed(item: Committed, image: MetadataImage, epoch: int, timestamp: int) -> Decoded:
    batches = item.records
    assert isinstance(batches, Batches)
    view = memoryview(batches.data)
    delta = MetadataDelta(image)
    out: list[tuple[list[MetadataRecord], int]] = []
    for info in batches.infos:
        epoch = info.partition_leader_epoch
        timestamp = max(timestamp, info.max_timestamp)
        if info.is_control:
            continue
        records = decode_metadata(decode_records(view[info.position : info.end_position]))
        if records:
            for record in records:
                delta.replay(record)
            out.append((records, info.last_offset))
    if out:
        image = delta.apply(out[-1][1])
    return Decoded(out, image, item.end_offset, epoch, timestamp, batches.size)


def decode_snapshot(snapshot: SnapshotData, empty: MetadataImage) -> Decoded:
    """The snapshot's image, replayed in one pass onto `empty` (an image with only the
    cluster id)."""
    started = time.perf_counter()
    records = read_snapshot_records(snapshot.data)
    snapshot_id = snapshot.snapshot_id
    delta = MetadataDelta(empty)
    for record in records:
        delta.replay(record)
    last = snapshot_id.offset - 1
    logger.info(
        "%s: loaded snapshot %s (%d bytes, %d records) in %.3fs",
        METADATA_DIR,
        snapshot_id,
        len(snapshot.data),
        len(records),
        time.perf_counter() - started,
    )
    return Decoded(
        [(records, last)], delta.apply(last), snapshot_id.offset, snapshot_id.epoch, -1, 0, True
    )


def _close_opened(opening: asyncio.Future[FileRaftLog]) -> None:
    if not opening.cancelled() and opening.exception() is None:
        opening.result().close()


class RaftManager:
    """One node's replica of the metadata log: a voter if listed in the quorum, else an
    observer (a broker-only node)."""

    def __init__(
        self,
        node_id: int,
        cluster_id: str | None,
        quorum_config: QuorumConfig,
        log_dir: Path,
        network: NetworkClient,
        scheduler: Scheduler,
        listener: RaftListener,
        *,
        log_config: MetadataLogConfig | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.config = quorum_config
        self.log_config = log_config or MetadataLogConfig()
        self.dir = log_dir / METADATA_DIR
        self._network = network
        self._scheduler = scheduler
        self._listener = listener
        self._on_fatal = on_fatal
        self._rng = rng or random.Random()
        self._client: RaftClient | None = None
        self._log: FileRaftLog | None = None
        self._commit_callback: CommitCallback = lambda records, offset: None
        self._timer: TimerHandle | None = None
        self._queue: deque[Effects] = deque()
        self._draining = False
        self._inbound: dict[tuple[int, int], asyncio.Future[RaftResponse | None]] = {}
        self._inbound_ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        # Committed data, snapshots and leader changes for the listener, in the core's order.
        self._applying: deque[Committed | SnapshotData | LeaderAndEpoch] = deque()
        self._decoding: asyncio.Task[None] | None = None
        self._leader = LeaderAndEpoch(None, 0)  # as last reported to the listener
        self._applied_end = 0  # end offset of what the listener has been given
        self._applied_epoch = 0
        self._last_timestamp = -1
        self._empty = MetadataImage(cluster_id=cluster_id or "")
        self._image = self._empty
        self._snapshots = SnapshotTrigger(
            self.log_config.max_record_bytes_between_snapshots,
            self.log_config.max_snapshot_interval_ms,
            self._now(),
        )
        self._snapshot_timer: TimerHandle | None = None
        self._snapshotting = False
        self.closed = False
        self.failure: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open (recovering) the log and the quorum state, then join the quorum. Cancelled
        meanwhile (a stop during the start), the open runs to its end in its thread and
        the log it opened is closed: a recovery is never left half done."""
        opening = asyncio.ensure_future(
            asyncio.to_thread(FileRaftLog.open, self.dir, self.log_config)
        )
        try:
            log = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(_close_opened)
            raise
        try:
            store = FileQuorumStateStore(self.dir / QUORUM_STATE_FILE, self.config.voter_ids)
            self._client = RaftClient(
                self.node_id,
                self.config,
                log,
                store,
                self._rng,
                self._now(),
                cluster_id=self.cluster_id,
            )
        except BaseException:
            log.close()
            raise
        self._log = log
        self._step(lambda client, now: client.tick(now))

    def close(self) -> None:
        """Stop at once (no resignation: use `resign` first for a graceful hand-off)."""
        if self.closed:
            return
        self.closed = True
        for timer in (self._timer, self._snapshot_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._snapshot_timer = None
        for task in list(self._tasks):
            task.cancel()
        self._applying.clear()
        inbound, self._inbound = self._inbound, {}
        for fut in inbound.values():
            if not fut.done():
                fut.set_result(None)
        self._fail_waiters("the metadata log is closed")
        if self._log is not None:
            self._log.close()

    # ------------------------------------------------------------------ views

    @property
    def client(self) -> RaftClient:
        if self._client is None:
            raise RuntimeError("RaftManager.start() has not run")
        return self._client

    def leader(self) -> tuple[int | None, int]:
        """The quorum's leader as this node knows it, and the epoch."""
        if self._client is None:
            return None, 0
        return self._client.leader_id, self._client.epoch

    @property
    def leader_contact(self) -> tuple[int, int] | None:
        """(leader id, clock ms) of the last fetch answer a leader of the quorum gave this
        node: a new controller knows how long its predecessor has been silent."""
        return None if self._client is None else self._client.leader_contact

    @property
    def is_leader(self) -> bool:
        """Leader of the current epoch with everything before it applied: may write."""
        client = self._client
        return (
            client is not None
            and not self.closed
            and self._leader.leader_id == self.node_id
            and isinstance(client.state, Leader)
            and client.epoch == self._leader.epoch
        )

    @property
    def committed_offset(self) -> int:
        """The last offset handed to the listener (-1 before anything)."""
        return self._applied_end - 1

    @property
    def image(self) -> MetadataImage:
        """The committed metadata image, as this node's snapshots would hold it."""
        return self._image

    # ------------------------------------------------------------------ MetadataLogWriter

    def set_commit_callback(self, callback: CommitCallback) -> None:
        self._commit_callback = callback

    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append one batch as the leader; returns its last offset (not yet committed)."""
        if not self.is_leader:
            raise not_controller(f"node {self.node_id} is not the active controller")
        if not records:
            raise ValueError("nothing to append")
        client = self.client
        values = [encode_metadata_record(r) for r in records]
        try:
            effects = client.append(self._leader.epoch, values, self._now())
            appended = effects.appended
            assert appended is not None
            self._run(effects)
        except NotLeaderError as e:
            raise not_controller(str(e)) from None
        except Exception as e:  # a log that cannot be written: the replica stops
            self._fatal(e)
            raise
        return appended.last_offset

    async def wait_committed(self, offset: int) -> None:
        """Return once `offset` is committed and applied; NOT_CONTROLLER if this node loses
        the leadership it appended under first."""
        if offset < self._applied_end:
            return
        if not self.is_leader:
            raise not_controller(f"node {self.node_id} is no longer the active controller")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, self._leader.epoch, fut))
        await fut

    async def shutdown(self, timeout_s: float) -> None:
        """Stop gracefully (Kafka's graceful shutdown): a leader resigns first, so the other
        voters elect a successor at once instead of after a fetch timeout, and stays until
        it hears of one (or ``timeout_s``, when no successor can win); then `close`. The
        only voter has no one to hand over to and closes at once (as Kafka's)."""
        client = self._client
        only_voter = self.config.voter_ids == {self.node_id}
        if (
            client is not None
            and not self.closed
            and not only_voter
            and isinstance(client.state, Leader)
        ):
            self.resign()
            deadline = time.monotonic() + timeout_s
            while not self.closed and time.monotonic() < deadline:
                if client.leader_id is not None and client.leader_id != self.node_id:
                    break
                await asyncio.sleep(0.01)
        self.close()

    def resign(self) -> None:
        """Hand leadership off (controlled shutdown): EndQuorumEpoch to the other voters."""
        client = self._client
        if client is not None and isinstance(client.state, Leader):
            self._step(lambda c, now: c.resign(c.epoch, now))

    async def create_snapshot(self) -> OffsetAndEpoch | None:
        """Snapshot the committed image now; None if one is being written or the latest
        snapshot already covers everything applied."""
        task = self._start_snapshot()
        return None if task is None else await task

    def _start_snapshot(self) -> asyncio.Task[OffsetAndEpoch | None] | None:
        log = self._log
        if self._snapshotting or log is None or self.closed or self._applied_end == 0:
            return None
        snapshot_id = OffsetAndEpoch(self._applied_end, self._applied_epoch)
        latest = log.latest_snapshot_id()
        self._snapshots.reset(self._now())
        if latest is not None and latest.offset >= snapshot_id.offset:
            return None
        self._snapshotting = True
        return self._spawn(self._write_snapshot(snapshot_id, self._image, self._last_timestamp))

    async def _write_snapshot(
        self, snapshot_id: OffsetAndEpoch, image: MetadataImage, last_timestamp: int
    ) -> OffsetAndEpoch | None:
        try:
            data = await asyncio.to_thread(
                encode_snapshot, image, snapshot_id.epoch, last_timestamp
            )
            if self.closed or self._client is None:
                return None
            try:
                self._run(self._client.create_snapshot(snapshot_id, data, self._now()))
            except ValueError as e:  # the log moved on meanwhile (a downloaded snapshot)
                logger.warning("%s: snapshot %s not written: %s", METADATA_DIR, snapshot_id, e)
                return None
            except Exception as e:
                self._fatal(e)
                return None
            return snapshot_id
        finally:
            self._snapshotting = False
            self._maybe_snapshot()  # what was committed meanwhile may be due already

    # ------------------------------------------------------------------ inbound RPCs

    async def handle(self, api_key: int, version: int, request: Any) -> Any:
        """Answer an inbound raft RPC (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of
        `__cluster_metadata`, FetchSnapshot, DescribeQuorum) with the response object."""
        if api_key == ApiKey.DESCRIBE_QUORUM:
            return self._describe_quorum(request)
        try:
            source, core = request_from_wire(api_key, version, request)
        except WireError as e:
            logger.warning("%s: refusing a raft request: %s", METADATA_DIR, e)
            return error_response(api_key, version, ErrorCode.INVALID_REQUEST)
        if self._client is None or self.closed:
            return error_response(api_key, version, ErrorCode.BROKER_NOT_AVAILABLE)
        correlation_id = next(self._inbound_ids)
        fut: asyncio.Future[RaftResponse | None] = asyncio.get_running_loop().create_future()
        self._inbound[(source, correlation_id)] = fut
        self._step(lambda client, now: client.handle_request(source, correlation_id, core, now))
        response = await fut
        if response is None:
            return error_response(api_key, version, ErrorCode.BROKER_NOT_AVAILABLE)
        return response_to_wire(api_key, version, response)

    def _describe_quorum(self, request: Any) -> Any:
        try:
            check_describe_quorum(request)
        except WireError:
            return error_response(ApiKey.DESCRIBE_QUORUM, 0, ErrorCode.INVALID_REQUEST)
        if self._client is None or self.closed:
            return describe_quorum_to_wire(None, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            info = self._client.describe_quorum(self._now())
        except NotLeaderError:
            return describe_quorum_to_wire(None, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return describe_quorum_to_wire(info, ErrorCode.NONE)

    # ------------------------------------------------------------------ stepping

    def _now(self) -> int:
        return self._scheduler.clock.now_ms()

    def _step(self, event: Callable[[RaftClient, int], Effects]) -> None:
        """Feed one event to the core and carry out its effects; any failure stops the
        replica (Raft cannot go on from a half-done step)."""
        if self.closed or self._client is None:
            return
        try:
            self._run(event(self._client, self._now()))
        except Exception as e:
            self._fatal(e)

    def _fatal(self, error: BaseException) -> None:
        logger.critical("%s: the raft replica stops: %s", METADATA_DIR, error, exc_info=error)
        self.failure = error
        self.close()
        if self._on_fatal is not None:
            self._on_fatal(error)

    def _run(self, effects: Effects) -> None:
        self._queue.append(effects)
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue and not self.closed:
                self._carry_out(self._queue.popleft())
        finally:
            self._draining = False
            self._queue.clear()

    def _carry_out(self, effects: Effects) -> None:
        assert self._log is not None
        self._log.flush()
        for out in effects.outbound:
            message = out.message
            if isinstance(message, RESPONSES):
                fut = self._inbound.pop((out.destination, out.correlation_id), None)
                if fut is not None and not fut.done():
                    fut.set_result(message)
            else:
                api_key, request = request_to_wire(message)
                self._spawn(self._exchange(out.destination, out.correlation_id, api_key, request))
        for item in effects.apply:
            self._applying.append(
                self._read_snapshot(item) if isinstance(item, LoadSnapshot) else item
            )
        if effects.leader_change is not None:
            self._applying.append(effects.leader_change)
        self._drain_applies()
        self._settle_waiters()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if effects.deadline_ms is not None:
            self._timer = self._scheduler.call_at(effects.deadline_ms, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._step(lambda client, now: client.tick(now))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _notify(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:
            logger.exception("%s: metadata listener %s failed", METADATA_DIR, callback)

    # ------------------------------------------------------------------ outbound RPCs

    async def _exchange(
        self, destination: int, correlation_id: int, api_key: ApiKey, request: Any
    ) -> None:
        voter = self.config.voters[destination]
        try:
            wire = await self._network.send(
                (voter.host, voter.port),
                request,
                SEND_VERSIONS[api_key],
                timeout_ms=self.config.request_timeout_ms,
            )
            response = response_from_wire(api_key, wire)
        except (ConnectionError, TimeoutError, OSError, KafkaError) as e:
            if isinstance(e, KafkaError):
                logger.warning(
                    "%s: %s from node %d: %s", METADATA_DIR, api_key.name, destination, e
                )
            self._step(lambda client, now: client.request_failed(destination, correlation_id, now))
            return
        self._step(
            lambda client, now: client.handle_response(destination, correlation_id, response, now)
        )

    # ------------------------------------------------------------------ committed data

    def _read_snapshot(self, load: LoadSnapshot) -> SnapshotData:
        assert self._log is not None
        snapshot = self._log.read_snapshot(load.snapshot_id)
        if snapshot is None:
            raise FileNotFoundError(f"snapshot {load.snapshot_id} to load is gone")
        return SnapshotData(load.snapshot_id, snapshot.read_all())

    def _drain_applies(self) -> None:
        """Hand what the core committed to the listener, in order; a snapshot or a large
        batch run is decoded in a worker thread meanwhile (the node keeps serving)."""
        while self._applying and self._decoding is None and not self.closed:
            item = self._applying[0]
            if isinstance(item, LeaderAndEpoch):
                self._applying.popleft()
                self._leader = item
                self._notify(self._listener.handle_leader_change, item.leader_id, item.epoch)
            elif (
                isinstance(item, Committed)
                and isinstance(item.records, Batches)
                and item.records.size <= INLINE_DECODE_BYTES
            ):
                self._applying.popleft()
                self._publish(self._decode(item))
            else:
                self._decoding = self._spawn(self._decode_off_loop(item))

    def _decode(self, item: Committed | SnapshotData) -> Decoded:
        if isinstance(item, SnapshotData):
            return decode_snapshot(item, self._empty)
        return decode_committed(item, self._image, self._applied_epoch, self._last_timestamp)

    async def _decode_off_loop(self, item: Committed | SnapshotData) -> None:
        try:
            decoded = await asyncio.to_thread(self._decode, item)
        except Exception as e:
            self._decoding = None
            self._fatal(e)
            return
        self._decoding = None
        if self.closed:
            return
        self._applying.popleft()
        self._publish(decoded)
        self._drain_applies()
        self._settle_waiters()

    def _publish(self, decoded: Decoded) -> None:
        self._image = decoded.image
        self._applied_end = decoded.end_offset
        self._applied_epoch = decoded.last_epoch
        self._last_timestamp = max(self._last_timestamp, decoded.last_timestamp)
        if decoded.is_snapshot:
            self._snapshots.reset(self._now())
            self._notify(self._listener.handle_snapshot, decoded.image)
            return
        for records, last in decoded.batches:
            self._notify(self._commit_callback, records, last)
        if decoded.batches:
            records = [r for batch, _ in decoded.batches for r in batch]
            last = decoded.batches[-1][1]
            self._notify(self._listener.handle_commit, records, last, decoded.image)
        self._snapshots.published(decoded.log_bytes)
        self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        """Snapshot if a trigger is due, else arm the timer of the time-based one."""
        if self.closed or self._snapshotting:
            return  # the snapshot being written asks again once it is done
        now = self._now()
        reason = self._snapshots.due(now)
        if reason is not None:
            logger.info("%s: snapshotting the metadata log (%s trigger)", METADATA_DIR, reason)
            self._start_snapshot()
            return
        deadline = self._snapshots.deadline_ms()
        if deadline is not None and self._snapshot_timer is None:
            self._snapshot_timer = self._scheduler.call_at(deadline, self._snapshot_timer_fired)

    def _snapshot_timer_fired(self) -> None:
        self._snapshot_timer = None
        self._maybe_snapshot()

    def _settle_waiters(self) -> None:
        """Answer `wait_committed` callers: committed, or leadership lost."""
        if not self._waiters:
            return
        client = self._client
        epoch = client.epoch if client is not None and isinstance(client.state, Leader) else -1
        pending = []
        for offset, waiter_epoch, fut in self._waiters:
            if fut.done():
                continue
            if offset < self._applied_end:
                fut.set_result(None)
            elif waiter_epoch != epoch or self.closed:
                fut.set_exception(not_controller(f"leadership of epoch {waiter_epoch} was lost"))
            else:
                pending.append((offset, waiter_epoch, fut))
        self._waiters = pending

    def _fail_waiters(self, reason: str) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_exception(not_controller(reason))
