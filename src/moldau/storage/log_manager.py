"""All partition logs of a broker across its ``log.dirs``.

Synchronous and pure of timers: the broker calls ``run_retention``, ``run_cleaner``,
``flush_due`` and ``checkpoint`` periodically; the cleaner, flushes and checkpoints may
run in worker threads while the event loop appends and reads (each takes its own lock,
and a log only locks to swap segments). Per log dir it keeps Kafka's recovery-point,
log-start-offset, cleaner-offset and replication-offset (high watermark) checkpoints and
a clean-shutdown marker. Loading registers each local log and opens it at its first use
(``UnifiedLog.lazy``: tens of thousands of partitions start in seconds); after a clean
shutdown that open reads only the active segment's tail, after a crash it recovers only
what was not flushed, and compaction does not redo work. Tiered logs open at load
(``num.recovery.threads.per.data.dir`` threads per dir).

JBOD: a new partition goes to the online dir holding the fewest partitions (or the one
an AlterReplicaLogDirs asked for); a replica moves between dirs through a *future* log
(``alter_log_dirs``) that is swapped in once it has caught up. An I/O error in a dir is
reported to ``failures`` (Kafka's LogDirFailureChannel) and ``fail_dir`` takes the dir
offline: its logs are dropped (their partitions are offline here), nothing is written
there any more, the other dirs go on.

Capacity: descriptors are a budget (``resources.DescriptorBudget``), not a per-partition
cost. ``create_logs`` checks the partition limit, descriptors, memory maps and disk before
making anything and removes what it made if any partition fails, so the broker can
create a topic's logs before committing its metadata and the two always agree.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from moldau.config.topic import LogConfig
from moldau.protocol.errors import ErrorCode, KafkaError, StorageError
from moldau.stats.counters import CleanerStats
from moldau.storage.alter_log_dirs import (
    COPY_BYTES_PER_STEP,
    catch_up,
    future_dir_name,
    parse_future_dir_name,
)
from moldau.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TopicPartition,
    fsync_dir,
    read_checkpoint,
    sync_filesystems,
    write_checkpoint,
)
from moldau.storage.cleaner import clean_log
from moldau.storage.files import StorageCaches
from moldau.storage.local_log import CleaningAbortedError
from moldau.storage.log_dir_failure import LogDirFailureChannel, is_dir_failure
from moldau.storage.partition_metadata import (
    read_topic_id,
    sync_topic_id,
    topic_id_str,
    write_topic_id,
)
from moldau.storage.resources import (
    DESCRIPTOR_RESERVE,
    MAP_RESERVE,
    DescriptorBudget,
    DiskSpace,
    max_memory_maps,
    memory_maps,
    open_descriptors,
    open_files_limit,
    storage_error,
)
from moldau.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
DEFAULT_RECOVERY_THREADS = 2  # num.recovery.threads.per.data.dir (Kafka 4's default)
# Partition dirs owned by someone else (the KRaft metadata log), never loaded as topics.
RESERVED_DIRS = frozenset({"__cluster_metadata-0"})
# What a new, empty partition takes on disk: its directory and files, with room to spare.
BYTES_PER_PARTITION = 64 << 10
INODES_PER_PARTITION = 8
DISK_RESERVE_BYTES = 8 << 20  # free space a disk keeps before it takes new partitions
# Descriptors, maps and disk are looked at again after this long (a creation that still
# runs short meanwhile fails on its own OSError, cleanly).
RESOURCE_CHECK_INTERVAL_S = 1.0
# Copy steps a swap may take on the event loop to copy what arrived since the last step.
SWAP_CATCH_UP_STEPS = 4


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``<topic>-<partition>`` split on the last dash (topics may contain dashes)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


@dataclass(frozen=True, slots=True)
class ReplicaInDir:
    """One replica's log in a log dir, for DescribeLogDirs."""

    topic_partition: TopicPartition
    size_bytes: int
    log_end_offset: int
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: Path
    error: str | None  # why the dir is offline; None when online
    total_bytes: int
    usable_bytes: int
    replicas: list[ReplicaInDir]


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config_props: Mapping[str, str],
        *,
        clock: Callable[[], float] = time.time,
        budget: DescriptorBudget | None = None,
        recovery_threads: int = DEFAULT_RECOVERY_THREADS,
        caches: StorageCaches | None = None,
        remote_storage_system_enable: bool = False,
        cleaner_map_entries: int | None = None,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.remote_storage_system_enable = remote_storage_system_enable
        # Keys one cleaning pass may map (log.cleaner.dedupe.buffer.size); None: unbounded
        self.cleaner_map_entries = cleaner_map_entries
        self.default_props = dict(default_config_props)
        self.default_config = LogConfig.from_props({}, self.default_props)
        self.clock = clock
        self.budget = budget or DescriptorBudget.derive(open_files_limit())
        self.recovery_threads = max(1, recovery_threads)
        self.caches = caches or StorageCaches(self.budget.open_files_max)
        # Mutated by the event loop only; worker threads iterate list() snapshots, which
        # the GIL makes atomic.
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._hosted = {d: 0 for d in self.log_dirs}  # partitions per log dir
        self._offline: dict[TopicPartition, str] = {}  # failed to load: why
        # Replicas moving to another dir: the future log and its dir.
        self._future: dict[TopicPartition, UnifiedLog] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        # Where AlterReplicaLogDirs wants a replica not hosted yet (Kafka's preferredLogDirs).
        self._preferred_dir: dict[TopicPartition, Path] = {}
        self.failures = LogDirFailureChannel()
        self._offline_dirs: dict[Path, str] = {}  # failed log dirs: why
        self._pending_deletes: list[tuple[int, UnifiedLog]] = []
        # Log dirs whose partition.metadata awaits its fsync (the event loop appends, a
        # worker thread pops: a deque is safe for that).
        self._unsynced_topic_ids: deque[Path] = deque()
        # The topic id each log's partition.metadata was found to hold (or was given), with
        # the log it was read for: a leadership change need not read the file again.
        self._topic_ids: dict[TopicPartition, tuple[UnifiedLog, bytes]] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()  # cleaning failed: skipped till restart
        self._cleaner_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()
        self._copy_lock = threading.Lock()  # future logs' copy steps vs shutdown
        self._stopping = threading.Event()
        self._closed = False  # shut down: no log is created, no checkpoint written again
        self._resources_checked = -RESOURCE_CHECK_INTERVAL_S  # monotonic time of a pass
        self.cleaner_stats = CleanerStats()
        for log_dir in self.log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                self._offline_dirs[log_dir] = e.strerror or str(e)

    def config_for(self, topic_overrides: Mapping[str, str]) -> LogConfig:
        """A topic's LogConfig from its overrides over this broker's defaults."""
        return LogConfig.from_props(topic_overrides, self.default_props)

    def remote_log_enabled(self, config: LogConfig) -> bool:
        """Kafka's remoteLogEnabled: the broker has tiered storage and the topic opts in."""
        return self.remote_storage_system_enable and config.remote_storage_enable

    # -- loading -------------------------------------------------------------------
    def load_logs(
        self,
        topic_configs: Callable[[str], Mapping[str, str]] = lambda topic: {},
        *,
        keep: Callable[[TopicPartition], bool] | None = None,
    ) -> None:
        """Open every ``<topic>-<partition>`` dir, recovering from the checkpoints.

        ``topic_configs(topic)`` returns the topic's config overrides (topic keys).
        Partition dirs for which ``keep`` is false are strays (their topic was deleted, or
        never committed) and are deleted. A log that cannot be opened is logged and left
        offline instead of stopping the broker.
        """
        futures: list[tuple[TopicPartition, Path, Path]] = []
        for log_dir in self.online_dirs:
            try:
                futures += self._load_dir(log_dir, topic_configs, keep)
            except OSError as e:
                logger.error("log dir %s cannot be read and is offline: %s", log_dir, e)
                self.fail_dir(log_dir, e.strerror or str(e))
        for tp, path, log_dir in futures:
            self._load_future(tp, path, log_dir, topic_configs(tp[0]))

    def _load_future(
        self, tp: TopicPartition, path: Path, log_dir: Path, topic_config: Mapping[str, str]
    ) -> None:
        """Resume a move cut short by a restart; a future log without its current log was
        being swapped in (the current goes only once the future has caught up and is
        durable), so it becomes the current log."""
        config = self.config_for(topic_config)
        try:
            if tp in self._logs or tp in self._offline:
                log = UnifiedLog.open(path, config, clock=self.clock, caches=self.caches)
                self._future[tp], self._future_dir_of[tp] = log, log_dir
                self._hosted[log_dir] += 1
                return
            if self._offline_dirs:  # the current log may be in the offline dir: keep both
                logger.error("%s: a dir is offline; the future log is left as it is", path)
                return
            current = log_dir / log_dir_name(*tp)
            path.rename(current)
            fsync_dir(log_dir)
            self._add(
                tp, UnifiedLog.open(current, config, clock=self.clock, caches=self.caches), log_dir
            )
        except (OSError, KafkaError) as e:
            logger.error("%s: cannot open the future log, dropping it: %s", path, e)
            shutil.rmtree(path, ignore_errors=True)

    def _list_dir(
        self, log_dir: Path, keep: Callable[[TopicPartition], bool] | None
    ) -> tuple[dict[TopicPartition, Path], list[tuple[TopicPartition, Path, Path]]]:
        """The dir's partition logs and future logs; removes leftovers of deletions and
        strays (``keep`` false)."""
        found: dict[TopicPartition, Path] = {}
        future_logs: list[tuple[TopicPartition, Path, Path]] = []
        # scandir's entries know their type from the listing: no stat per partition dir
        with os.scandir(log_dir) as listing:
            dirs = sorted(entry.name for entry in listing if entry.is_dir())
        for name in dirs:
            path = log_dir / name
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)  # deletion cut short by a restart
                continue
            future_of = parse_future_dir_name(name)
            if future_of is not None:
                future_tp = parse_log_dir_name(future_of)
                if future_tp is not None and (keep is None or keep(future_tp)):
                    future_logs.append((future_tp, path, log_dir))
                else:
                    _remove_dir(path)
                continue
            tp = parse_log_dir_name(name)
            if tp is None or name in RESERVED_DIRS:
                continue
            if tp in self._logs or tp in found:
                raise StorageError(f"{name} exists in more than one log dir ({log_dir})")
            if keep is not None and not keep(tp):
                logger.warning("%s: no such partition in the metadata; deleting it", name)
                _remove_dir(path)
                continue
            found[tp] = path
        return found, future_logs

    def _configs_by_topic(
        self, topic_configs: Callable[[str], Mapping[str, str]]
    ) -> Callable[[str], LogConfig]:
        """Each topic's config, parsed once per distinct set of overrides (most topics have
        none: 50,000 partitions in 5,000 topics parse one)."""
        by_overrides: dict[tuple[tuple[str, str], ...], LogConfig] = {}

        @functools.cache
        def config_of(topic: str) -> LogConfig:
            overrides = topic_configs(topic)
            key = tuple(sorted(overrides.items()))
            config = by_overrides.get(key)
            if config is None:
                config = by_overrides[key] = self.config_for(overrides)
            return config

        return config_of

    def _load_dir(
        self,
        log_dir: Path,
        topic_configs: Callable[[str], Mapping[str, str]],
        keep: Callable[[TopicPartition], bool] | None,
    ) -> list[tuple[TopicPartition, Path, Path]]:
        """Open the dir's logs; returns its future logs (opened once every current log is)."""
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = _read_checkpoint_or_empty(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = _read_checkpoint_or_empty(log_dir / LOG_START_OFFSET_CHECKPOINT)
        cleaner_offsets = _read_checkpoint_or_empty(log_dir / CLEANER_OFFSET_CHECKPOINT)
        found, future_logs = self._list_dir(log_dir, keep)
        config_of = self._configs_by_topic(topic_configs)

        def open_log(tp: TopicPartition, path: Path) -> UnifiedLog:
            config = config_of(tp[0])
            return UnifiedLog.open(
                path,
                config,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp),
                clean_shutdown=clean and tp in recovery_points,
                clock=self.clock,
                caches=self.caches,
                remote_log_enabled=self.remote_log_enabled(config),
            )

        # Local logs are only registered: each opens (and recovers, after a crash) at its
        # first use. Tiered ones open now: their log start comes from the remote tier.
        lazy = {
            tp: UnifiedLog.lazy(
                path,
                config_of(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp),
                clean_shutdown=clean and tp in recovery_points,
                clock=self.clock,
                caches=self.caches,
            )
            for tp, path in found.items()
            if not self.remote_log_enabled(config_of(tp[0]))
        }
        for tp, log in lazy.items():
            self._add(tp, log, log_dir)
        started = time.monotonic()
        with ThreadPoolExecutor(self.recovery_threads, "log-recovery") as pool:
            futures = [
                (tp, pool.submit(open_log, tp, path))
                for tp, path in found.items()
                if tp not in lazy
            ]
            for tp, future in futures:
                try:
                    self._add(tp, future.result(), log_dir)
                except (OSError, KafkaError) as e:
                    reason = str(e) if isinstance(e, KafkaError) else e.strerror or str(e)
                    logger.error("%s-%d cannot be opened and stays offline: %s", *tp, reason)
                    self._offline[tp] = reason
        self._cleaner_offsets.update(
            (tp, offset)
            for tp, offset in cleaner_offsets.items()
            if tp in found and tp in self._logs
        )
        logger.info(
            "loaded %d logs from %s in %.2f s (%s shutdown; %d open at their first use)",
            len(found),
            log_dir,
            time.monotonic() - started,
            "clean" if clean else "unclean",
            len(lazy),
        )
        # From now on a crash must trigger recovery.
        marker.unlink(missing_ok=True)
        return future_logs

    # -- access --------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    @property
    def logs(self) -> dict[TopicPartition, UnifiedLog]:
        return dict(self._logs)

    @property
    def offline(self) -> dict[TopicPartition, str]:
        """Partitions whose log failed to load, and why."""
        return dict(self._offline)

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig, topic_id: bytes | None = None
    ) -> UnifiedLog:
        """The partition's log, created (without the capacity check: its metadata is
        committed already) in the log dir holding the fewest partitions. With
        ``topic_id``: a new log records it in ``partition.metadata``, a log without one
        adopts it, and a log of another topic id raises INCONSISTENT_TOPIC_ID (it is
        another incarnation of the topic name: left as it is)."""
        log = self._logs.get((topic, partition))
        if log is None:
            log = self._create([(topic, partition, config)])[0]
        if topic_id is not None and self._topic_ids.get((topic, partition)) != (log, topic_id):
            held = read_topic_id(log.dir)
            if held is None:
                write_topic_id(log.dir, topic_id, sync=False)
                self._unsynced_topic_ids.append(log.dir)
            elif held != topic_id:
                raise KafkaError(
                    f"{topic}-{partition}: the log belongs to topic id {topic_id_str(held)},"
                    f" not {topic_id_str(topic_id)}",
                    ErrorCode.INCONSISTENT_TOPIC_ID,
                )
            self._topic_ids[(topic, partition)] = (log, topic_id)
        return log

    def create_logs(self, partitions: Sequence[tuple[str, int, LogConfig]]) -> list[UnifiedLog]:
        """Create the logs of new partitions, all or none: check capacity, create each
        and, if one fails, remove the others. Raises KafkaError (POLICY_VIOLATION or
        KAFKA_STORAGE_ERROR) with a message for the request."""
        missing = [(t, p, c) for t, p, c in partitions if (t, p) not in self._logs]
        self.check_capacity(len(missing))
        self._create(missing)
        return [self._logs[(t, p)] for t, p, _ in partitions]

    def _create(self, partitions: Sequence[tuple[str, int, LogConfig]]) -> list[UnifiedLog]:
        if self._stopping.is_set():
            # The logs are closed (or closing): a partition hosted now would find its own
            # directory and take it for a leftover to remove.
            raise StorageError("the log manager is shut down")
        created: list[tuple[TopicPartition, UnifiedLog]] = []
        try:
            for topic, partition, config in partitions:
                tp = (topic, partition)
                if tp in self._offline:
                    raise StorageError(f"{topic}-{partition} is offline: {self._offline[tp]}")
                log_dir = self._preferred_dir.pop(tp, None) or min(
                    self.online_dirs, key=self._hosted.__getitem__, default=None
                )
                if log_dir is None:
                    raise StorageError("every log dir of this broker is offline")
                path = log_dir / log_dir_name(topic, partition)
                if path.exists():
                    logger.warning("%s: leftover directory of a new partition; removing it", path)
                    shutil.rmtree(path)
                try:
                    log = UnifiedLog.open(
                        path,
                        config,
                        clock=self.clock,
                        caches=self.caches,
                        remote_log_enabled=self.remote_log_enabled(config),
                    )
                except BaseException:
                    shutil.rmtree(path, ignore_errors=True)
                    raise
                created.append((tp, log))
                self._add(tp, log, log_dir)
        except (OSError, KafkaError) as e:
            for tp, log in created:
                self._remove(tp)
                log.delete()
            if isinstance(e, OSError):
                raise storage_error(e, "cannot create the partition's log") from e
            raise
        return [log for _, log in created]

    def check_capacity(self, new_partitions: int) -> None:
        """Raise a KafkaError for the request if ``new_partitions`` more partitions do not
        fit: POLICY_VIOLATION beyond ``max.broker.partitions`` (derived from the
        descriptor budget unless set), KAFKA_STORAGE_ERROR when descriptors, memory maps,
        disk space or inodes are short right now."""
        if new_partitions <= 0:
            return
        budget = self.budget
        hosted = len(self._logs)
        if hosted + new_partitions > budget.max_partitions:
            raise KafkaError(
                f"this broker hosts {hosted} partitions and accepts at most "
                f"{budget.max_partitions} (max.broker.partitions, derived from "
                f"{budget.open_files_max} cached segment files of an open-files limit of "
                f"{budget.limit} unless set); {new_partitions} more do not fit",
                ErrorCode.POLICY_VIOLATION,
            )
        now = time.monotonic()
        if now - self._resources_checked < RESOURCE_CHECK_INTERVAL_S:
            return  # looked a moment ago: creating topic after topic costs no /proc scans
        in_use = open_descriptors()
        if in_use + DESCRIPTOR_RESERVE > open_files_limit():
            raise StorageError(
                f"out of file descriptors: {in_use} of {open_files_limit()} are open; "
                "new partitions need some to spare (raise ulimit -n)"
            )
        max_maps = max_memory_maps()
        if max_maps is not None and memory_maps() + MAP_RESERVE > max_maps:
            raise StorageError(
                f"out of memory maps: {memory_maps()} of vm.max_map_count {max_maps} in use"
            )
        need_bytes = new_partitions * BYTES_PER_PARTITION + DISK_RESERVE_BYTES
        need_inodes = new_partitions * INODES_PER_PARTITION
        spaces = {d: DiskSpace.of(d) for d in self.log_dirs}
        if sum(s.free_bytes for s in spaces.values()) < need_bytes:
            raise StorageError(
                f"not enough disk space in {', '.join(map(str, spaces))} for "
                f"{new_partitions} new partition(s)"
            )
        if sum(s.free_inodes for s in spaces.values()) < need_inodes:
            raise StorageError(
                f"not enough free inodes in {', '.join(map(str, spaces))} for "
                f"{new_partitions} new partition(s)"
            )
        self._resources_checked = now

    def _add(self, tp: TopicPartition, log: UnifiedLog, log_dir: Path) -> None:
        self._logs[tp], self._dir_of[tp] = log, log_dir
        self._hosted[log_dir] += 1

    def _remove(self, tp: TopicPartition) -> None:
        del self._logs[tp]
        self._topic_ids.pop(tp, None)
        self._hosted[self._dir_of.pop(tp)] -= 1

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (log_topic, _), log in [*self._logs.items(), *self._future.items()]:
            if log_topic == topic:
                log.update_config(config)
                log.remote_log_enabled = self.remote_log_enabled(config)

    # -- log dirs (DescribeLogDirs, AlterReplicaLogDirs, failures) ----------------
    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self._offline_dirs]

    @property
    def offline_dirs(self) -> dict[Path, str]:
        return dict(self._offline_dirs)

    def report_error(self, tp: TopicPartition, error: OSError) -> None:
        """An I/O error on the partition's log: its dir fails (not for a full disk)."""
        log_dir = self._dir_of.get(tp)
        if log_dir is not None:
            self._report(log_dir, error)

    def _report(self, log_dir: Path, error: OSError) -> None:
        if is_dir_failure(error):
            self.failures.report(log_dir, error.strerror or str(error))

    def fail_dir(self, log_dir: Path, reason: str) -> list[TopicPartition]:
        """Take the dir offline (on the event loop): its logs are dropped without
        touching the disk again and their partitions are offline here until a restart
        finds the dir healthy. Returns those partitions."""
        if log_dir in self._offline_dirs:
            return []
        self._offline_dirs[log_dir] = reason
        logger.error("log dir %s is offline: %s", log_dir, reason)
        lost = [tp for tp, d in self._dir_of.items() if d == log_dir]
        for tp in lost:
            self._remove(tp)
            self._offline[tp] = f"log dir {log_dir} is offline: {reason}"
        for tp in [tp for tp, d in self._future_dir_of.items() if d == log_dir]:
            del self._future[tp], self._future_dir_of[tp]
        for tp, d in list(self._preferred_dir.items()):
            if d == log_dir:
                del self._preferred_dir[tp]
        return lost

    def log_dir(self, path: str) -> Path:
        """The configured log dir at ``path`` (as DescribeLogDirs names it); raises
        LOG_DIR_NOT_FOUND for any other path."""
        wanted = Path(path).resolve()
        for log_dir in self.log_dirs:
            if log_dir.resolve() == wanted:
                return log_dir
        raise KafkaError(f"{path} is not a log dir of this broker", ErrorCode.LOG_DIR_NOT_FOUND)

    def describe_dirs(self) -> list[LogDirDescription]:
        """Every log dir with its disk space and the replicas (current and future) in it;
        safe in a worker thread (it statvfs-es each dir)."""
        replicas: dict[Path, list[ReplicaInDir]] = {d: [] for d in self.log_dirs}
        for logs, dir_of, is_future in (
            (self._logs, self._dir_of, False),
            (self._future, self._future_dir_of, True),
        ):
            for tp, log in list(logs.items()):
                log_dir = dir_of.get(tp)
                if log_dir is not None:
                    replicas[log_dir].append(
                        ReplicaInDir(tp, log.size_bytes, log.log_end_offset, is_future)
                    )
        described = []
        for log_dir, in_dir in replicas.items():
            offline = self._offline_dirs.get(log_dir)
            if offline is not None:
                described.append(LogDirDescription(log_dir, offline, -1, -1, []))
                continue
            try:
                space = DiskSpace.of(log_dir)
            except OSError as e:
                self.failures.report(log_dir, e.strerror or str(e))
                described.append(LogDirDescription(log_dir, e.strerror or str(e), -1, -1, []))
                continue
            described.append(
                LogDirDescription(log_dir, None, space.total_bytes, space.free_bytes, in_dir)
            )
        return described

    def alter_log_dir(self, topic: str, partition: int, destination: Path) -> None:
        """Move the replica to ``destination`` (a configured log dir) through a future
        log there, as Kafka: a replica not hosted yet will be created there and the
        request answers REPLICA_NOT_AVAILABLE; asking for the dir it is in cancels a move
        under way. Raises KafkaError."""
        tp = (topic, partition)
        if destination in self._offline_dirs:
            raise StorageError(f"log dir {destination} is offline")
        if len(future_dir_name(log_dir_name(*tp), uuid.uuid4().hex)) > 255:
            raise KafkaError("The topic name is too long.", ErrorCode.INVALID_TOPIC_EXCEPTION)
        if tp in self._offline:
            raise StorageError(f"{topic}-{partition} is offline: {self._offline[tp]}")
        current = self._logs.get(tp)
        if current is None:
            self._preferred_dir[tp] = destination
            raise KafkaError(
                f"{topic}-{partition} has no replica on this broker yet",
                ErrorCode.REPLICA_NOT_AVAILABLE,
            )
        if self._future_dir_of.get(tp) not in (None, destination):
            self._drop_future(tp)
        if self._dir_of[tp] == destination or tp in self._future:
            return
        path = destination / future_dir_name(log_dir_name(*tp), uuid.uuid4().hex)
        try:
            future = UnifiedLog.open(path, current.config, clock=self.clock, caches=self.caches)
        except OSError as e:
            shutil.rmtree(path, ignore_errors=True)
            raise storage_error(e, "cannot create the future log") from e
        self._future[tp], self._future_dir_of[tp] = future, destination
        self._hosted[destination] += 1
        logger.info("%s-%d: moving from %s to %s", *tp, self._dir_of[tp], destination)

    @property
    def moving(self) -> set[TopicPartition]:
        """Replicas with a future log (being moved to another log dir)."""
        return set(self._future)

    def copy_future_logs(
        self, budget: int = COPY_BYTES_PER_STEP
    ) -> tuple[list[TopicPartition], int]:
        """One copy step for every future log, copying at most ``budget`` bytes in all (a
        whole batch at least); returns those that have caught up with their current log
        (the caller swaps them in on the event loop) and the bytes copied. Safe in a
        worker thread: it only appends to future logs and reads current ones."""
        caught_up, copied = [], 0
        with self._copy_lock:
            for tp, future in list(self._future.items()):
                current = self._logs.get(tp)
                if current is None or self._stopping.is_set() or copied >= budget:
                    continue
                before = future.size_bytes
                try:
                    if catch_up(current, future, min(budget - copied, COPY_BYTES_PER_STEP)):
                        caught_up.append(tp)
                except (OSError, KafkaError) as e:
                    logger.warning("%s-%d: copying to the future log failed: %s", *tp, e)
                copied += max(0, future.size_bytes - before)
        return caught_up, copied

    def replace_current_with_future(self, tp: TopicPartition) -> bool:
        """Swap a caught-up future log in for the current one; on the event loop, so no
        append lands in between (what arrived since the last copy step is copied first).
        The future is made durable before the current dir is renamed away (and a restart
        in between promotes the future); the old files go after file.delete.delay.ms."""
        current, future = self._logs.get(tp), self._future.get(tp)
        if current is None or future is None or self._stopping.is_set():
            return False
        if not any(catch_up(current, future) for _ in range(SWAP_CATCH_UP_STEPS)):
            return False  # still behind: another copy step first
        if future.log_start_offset < current.log_start_offset:
            future.delete_records_before(current.log_start_offset, future.log_end_offset)
        destination = self._future_dir_of[tp]
        try:
            future.close(sync=True)
        except OSError as e:
            self._drop_future(tp)  # the current log stays; the move can be asked again
            self._report(destination, e)
            raise
        self._future_dir_of.pop(tp)
        del self._future[tp]
        self._hosted[destination] -= 1
        self._retire(tp, current)
        path = destination / log_dir_name(*tp)
        try:
            future.dir.rename(path)
            fsync_dir(destination)
            moved = UnifiedLog.open(
                path,
                current.config,
                recovery_point=current.log_end_offset,
                log_start_offset=current.log_start_offset,
                clean_shutdown=True,
                clock=self.clock,
                caches=self.caches,
            )
        except OSError as e:
            # Offline until a restart, which finds the durable future log and promotes it.
            self._offline[tp] = f"moving to {destination} failed: {e.strerror or e}"
            self._report(destination, e)
            raise
        self._add(tp, moved, destination)
        self.checkpoint()
        logger.info("%s-%d: moved to %s", *tp, destination)
        return True

    def _drop_future(self, tp: TopicPartition) -> None:
        future = self._future.pop(tp, None)
        if future is not None:
            self._hosted[self._future_dir_of.pop(tp)] -= 1
            future.delete()

    def delete_log(self, topic: str, partition: int, topic_id: bytes | None = None) -> None:
        """Rename the dir to ``<name>.<id>-delete`` now (it disappears from the next load)
        and remove it after file.delete.delay.ms, so in-flight sendfiles finish. With
        ``topic_id``, a log whose ``partition.metadata`` names another topic id is kept:
        it belongs to a topic of the same name created later (as Kafka matches logs to
        deletions by topic id)."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is not None and topic_id is not None:
            held = read_topic_id(log.dir)
            if held is not None and held != topic_id:
                logger.info(
                    "%s-%d: not deleting the log of topic id %s for the deletion of %s",
                    topic,
                    partition,
                    topic_id_str(held),
                    topic_id_str(topic_id),
                )
                return
        self._offline.pop(tp, None)
        self._preferred_dir.pop(tp, None)
        self._drop_future(tp)
        log = self._logs.get(tp)
        if log is None:
            return
        self._cleaner_offsets.pop(tp, None)
        self._retire(tp, log)

    def delete_stray_logs(self, topic_ids: Mapping[str, bytes]) -> list[TopicPartition]:
        """Delete the logs whose ``partition.metadata`` names another id than the one
        ``topic_ids`` gives their topic: an incarnation deleted while this node was away
        (Kafka's stray logs). Only for an image known to be current. Returns them."""
        stray = []
        for tp, log in self._logs.items():
            topic_id = topic_ids.get(tp[0])
            if topic_id is None:
                continue
            held = read_topic_id(log.dir)
            if held == topic_id:
                self._topic_ids[tp] = (log, held)
            elif held is not None:
                stray.append(tp)
        for tp in stray:
            logger.warning("%s-%d: deleting the stray log of an earlier topic id", *tp)
            self.delete_log(*tp)
        return stray

    def _retire(self, tp: TopicPartition, log: UnifiedLog) -> None:
        """Forget the log and rename its dir to ``<name>.<id>-delete`` at once (it is
        gone from the next load); its files go after file.delete.delay.ms."""
        topic, partition = tp
        self._remove(tp)
        suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        # As Kafka: the topic part is cut so that a 249-character topic still names a file.
        target = log.dir.with_name(topic[: 255 - len(suffix)] + suffix)
        log.dir.rename(target)
        log.dir = target
        fsync_dir(target.parent)
        self._pending_deletes.append((self._now_ms() + log.config.file_delete_delay_ms, log))
        self._purge_deleted_logs(self._now_ms())

    # -- periodic work -------------------------------------------------------------
    def run_retention(
        self, high_watermarks: Mapping[TopicPartition, int], now_ms: int | None = None
    ) -> int:
        """Retention for every log below its high watermark (logs without one only drop
        files already deleted); returns segments deleted (checkpoints if any)."""
        now = self._now_ms() if now_ms is None else now_ms
        deleted = 0
        for tp, log in list(self._logs.items()):
            hw = high_watermarks.get(tp)
            if hw is None:
                log.purge_deleted(now)
            else:
                deleted += log.enforce_retention(hw, now)
        self._purge_deleted_logs(now)
        if deleted:
            self.checkpoint()
        return deleted

    def expire_producers(self, now_ms: int, expiration_ms: int) -> None:
        """Forget idempotent producers idle for ``producer.id.expiration.ms`` (Kafka's rule)."""
        for log in list(self._logs.values()):
            if log.loaded:  # one not open yet has no producers in memory
                log.producer_state.remove_expired(now_ms, expiration_ms)

    def run_cleaner(
        self, high_watermarks: Mapping[TopicPartition, int], now_ms: int | None = None
    ) -> int:
        """Compact every ``compact`` log that is dirty enough below its high watermark;
        returns how many were cleaned and, if any, rewrites the cleaner-offset
        checkpoints. A log whose cleaning fails is left as it is and skipped until the
        next restart. Safe in a worker thread; one pass at a time."""
        now = self._now_ms() if now_ms is None else now_ms
        started = time.monotonic()
        cleaned = 0
        with self._cleaner_lock:
            for tp, log in list(self._logs.items()):
                hw = high_watermarks.get(tp)
                if self._stopping.is_set():
                    break
                if (
                    hw is None
                    or not log.loaded  # unchanged since the restart: cleaned once used
                    or not log.config.compact_enabled
                    or tp in self._uncleanable
                    or tp in self._future  # as Kafka: no cleaning while a replica moves
                ):
                    continue
                try:
                    checkpoint = clean_log(
                        log,
                        self._cleaner_offsets.get(tp, 0),
                        now,
                        high_watermark=hw,
                        aborted=self._stopping.is_set,
                        max_map_entries=self.cleaner_map_entries,
                    )
                except CleaningAbortedError:
                    continue  # truncated, deleted or stopping: cleaned again next time
                except (KafkaError, OSError):
                    # Like Kafka: a corrupt batch or an IO error makes the partition
                    # uncleanable instead of stopping the cleaner for every other log.
                    logger.exception("%s-%d: log cleaning failed; marked uncleanable", *tp)
                    self._uncleanable.add(tp)
                    continue
                if checkpoint is not None:
                    self._cleaner_offsets[tp] = checkpoint
                    cleaned += 1
        if cleaned:
            self._write_per_dir(CLEANER_OFFSET_CHECKPOINT, dict(self._cleaner_offsets))
        self.cleaner_stats.ran(time.monotonic() - started, len(self._uncleanable))
        return cleaned

    def flush_due(self, now_ms: int | None = None) -> None:
        """flush.ms and post-roll flushes for every log; safe in a worker thread."""
        now = self._now_ms() if now_ms is None else now_ms
        with self._flush_lock:
            for log in list(self._logs.values()):
                if self._stopping.is_set():
                    return
                log.maybe_flush(now)

    def sync_topic_ids(self) -> None:
        """fsync the ``partition.metadata`` files new logs wrote since the last call (as
        Kafka's flush-metadata-file task: creating thousands of partitions, their first
        produce waits for no fsync). Until then a machine crash may lose the file; the log
        then adopts its topic id again at the next start, as a log made before topic ids
        does. Safe in a worker thread."""
        while self._unsynced_topic_ids:
            log_dir = self._unsynced_topic_ids.popleft()
            try:
                sync_topic_id(log_dir)
            except FileNotFoundError:
                continue  # deleted meanwhile
            except OSError as e:
                if is_dir_failure(e):
                    self.failures.report(log_dir.parent, f"cannot sync {log_dir}: {e.strerror}")
                else:
                    logger.warning("%s: cannot sync partition.metadata: %s", log_dir, e)

    def checkpoint(self) -> None:
        """Write each log dir's recovery-point and log-start-offset checkpoints."""
        self._checkpoint(final=False)

    def _checkpoint(self, *, final: bool) -> None:
        logs = list(self._logs.items())
        recovery_points = {tp: log.recovery_point for tp, log in logs}
        self._write_per_dir(RECOVERY_POINT_CHECKPOINT, recovery_points, final=final)
        starts = ((tp, log.log_start_checkpoint) for tp, log in logs)
        self._write_per_dir(
            LOG_START_OFFSET_CHECKPOINT,
            {tp: start for tp, start in starts if start is not None},
            final=final,
        )

    def read_replication_checkpoint(self) -> dict[TopicPartition, int]:
        """High watermarks from every log dir's ``replication-offset-checkpoint``."""
        hws: dict[TopicPartition, int] = {}
        for log_dir in self.online_dirs:
            hws.update(_read_checkpoint_or_empty(log_dir / REPLICATION_OFFSET_CHECKPOINT))
        return hws

    def write_replication_checkpoint(self, hws: Mapping[TopicPartition, int]) -> None:
        """Write each log dir's ``replication-offset-checkpoint`` for its partitions."""
        self._write_per_dir(REPLICATION_OFFSET_CHECKPOINT, hws)

    def _write_per_dir(
        self, name: str, offsets: Mapping[TopicPartition, int], *, final: bool = False
    ) -> None:
        with self._checkpoint_lock:
            if self._closed and not final:
                return  # shut down: the shutdown's checkpoints are the last ones
            # Read under the lock: offsets gathered before a log was deleted must not put
            # it back into a checkpoint written after its deletion.
            dir_of = dict(self._dir_of)
            for log_dir in self.online_dirs:
                try:
                    write_checkpoint(
                        log_dir / name,
                        {tp: o for tp, o in offsets.items() if dir_of.get(tp) == log_dir},
                    )
                except OSError as e:
                    # As Kafka: a checkpoint that cannot be written fails its dir only.
                    if not is_dir_failure(e):
                        logger.warning("%s: cannot write %s: %s", log_dir, name, e)
                        continue
                    self.failures.report(log_dir, f"cannot write {name}: {e.strerror or e}")

    def shutdown(self) -> None:
        """Stop background passes, close every log, make it all durable with one sync,
        checkpoint, then mark each dir clean (no recovery next time) unless it holds a
        log still owing its recovery from a crash (the next start recovers it at its
        first use, from the checkpointed recovery point, as this one would have)."""
        self._stopping.set()
        with self._cleaner_lock, self._flush_lock, self._copy_lock:
            owed = {self._dir_of.get(tp) for tp, log in self._logs.items() if log.recovery_owed}
            for log in [*self._logs.values(), *self._future.values()]:
                log.close(sync=False)
            for _, log in self._pending_deletes:
                log.delete()
            self._pending_deletes = []
            started = time.monotonic()
            sync_filesystems(self.online_dirs)
            logger.info("log dirs synced in %.2f s", time.monotonic() - started)
            # The last checkpoints: a periodic pass that read the logs before they closed
            # must not overwrite them.
            with self._checkpoint_lock:
                self._closed = True
            self._checkpoint(final=True)
            for log_dir in self.online_dirs:
                if log_dir not in owed:
                    (log_dir / CLEAN_SHUTDOWN_FILE).touch()
                    fsync_dir(log_dir)
            self._logs.clear()
            self._topic_ids.clear()
            self._dir_of.clear()
            self._future.clear()
            self._future_dir_of.clear()
            self._hosted = {d: 0 for d in self.log_dirs}

    def _purge_deleted_logs(self, now_ms: int) -> None:
        due = [log for t, log in self._pending_deletes if t <= now_ms]
        self._pending_deletes = [(t, log) for t, log in self._pending_deletes if t > now_ms]
        for log in due:
            log.delete()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)


def _read_checkpoint_or_empty(path: Path) -> dict[TopicPartition, int]:
    """A checkpoint, or nothing if it is unreadable: a broker must start, and without a
    checkpoint it only does more work (recovers from the start, keeps every record)."""
    try:
        return read_checkpoint(path)
    except (StorageError, OSError) as e:
        logger.warning("%s; ignoring it", e)
        return {}


def _remove_dir(path: Path) -> None:
    target = path.with_name(f"{path.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
    path.rename(target)
    shutil.rmtree(target, ignore_errors=True)
