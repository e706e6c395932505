"""All partition logs of a broker across its ``log.dirs``.

Synchronous and pure of timers: the broker's asyncio code calls ``run_retention``,
``run_cleaner``, ``flush_due`` and ``checkpoint`` periodically. Per log dir it keeps
Kafka's recovery-point, log-start-offset and cleaner-offset checkpoints and a
clean-shutdown marker, so a clean restart skips recovery, a crash recovers only what was
not flushed and compaction does not redo work.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from moldau.metrics.stats import CleanerStats
from moldau.protocol.errors import KafkaError, StorageError
from moldau.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
    read_checkpoint,
    write_checkpoint,
)
from moldau.storage.cleaner import clean_log
from moldau.storage.config import LogConfig
from moldau.storage.log import Log

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
# Partition dirs owned by someone else (the KRaft metadata log), never loaded as topics.
RESERVED_DIRS = frozenset({"__cluster_metadata-0"})


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``<topic>-<partition>`` split on the last dash (topics may contain dashes)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config_props: Mapping[str, str],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_props = dict(default_config_props)
        self.default_config = LogConfig.from_props({}, self.default_props)
        self.clock = clock
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._pending_deletes: list[tuple[int, Log]] = []
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._uncleanable: set[TopicPartition] = set()  # cleaning failed: skipped till restart
        self.cleaner_stats = CleanerStats()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)

    def config_for(self, topic_overrides: Mapping[str, str]) -> LogConfig:
        """A topic's LogConfig from its overrides over this broker's defaults."""
        return LogConfig.from_props(topic_overrides, self.default_props)

    # -- loading -------------------------------------------------------------------
    def load_logs(
        self, topic_configs: Callable[[str], Mapping[str, str]] = lambda topic: {}
    ) -> None:
        """Open every ``<topic>-<partition>`` dir, recovering from the checkpoints.

        ``topic_configs(topic)`` returns the topic's config overrides (topic keys).
        """
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            recovery_points = read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
            cleaner_offsets = read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
            for path in sorted(p for p in log_dir.iterdir() if p.is_dir()):
                if path.name.endswith(DELETE_DIR_SUFFIX):
                    shutil.rmtree(path, ignore_errors=True)  # deletion cut short by a restart
                    continue
                tp = parse_log_dir_name(path.name)
                if tp is None or path.name in RESERVED_DIRS:
                    continue
                if tp in self._logs:
                    raise StorageError(f"{path.name} exists in {self._dir_of[tp]} and {log_dir}")
                self._logs[tp] = Log.open(
                    path,
                    self.config_for(topic_configs(tp[0])),
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp),
                    clean_shutdown=clean and tp in recovery_points,
                    clock=self.clock,
                )
                self._dir_of[tp] = log_dir
                if tp in cleaner_offsets:
                    self._cleaner_offsets[tp] = cleaner_offsets[tp]
            # From now on a crash must trigger recovery.
            marker.unlink(missing_ok=True)

    # -- access --------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig) -> Log:
        """The partition's log, created in the log dir holding the fewest partitions."""
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            return log
        counts = {d: 0 for d in self.log_dirs}
        for log_dir in self._dir_of.values():
            counts[log_dir] += 1
        log_dir = min(self.log_dirs, key=counts.__getitem__)
        log = Log.open(log_dir / log_dir_name(topic, partition), config, clock=self.clock)
        self._logs[tp], self._dir_of[tp] = log, log_dir
        return log

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (log_topic, _), log in self._logs.items():
            if log_topic == topic:
                log.update_config(config)

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename the dir to ``<name>.<id>-delete`` now (it disappears from the next load)
        and remove it after file.delete.delay.ms, so in-flight sendfiles finish."""
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return
        del self._dir_of[tp]
        self._cleaner_offsets.pop(tp, None)
        suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        # As Kafka: the topic part is cut so that a 249-character topic still names a file.
        target = log.dir.with_name(topic[: 255 - len(suffix)] + suffix)
        log.dir.rename(target)
        log.dir = target
        self._pending_deletes.append((self._now_ms() + log.config.file_delete_delay_ms, log))
        self._purge_deleted_logs(self._now_ms())

    # -- periodic work -------------------------------------------------------------
    def run_retention(self, now_ms: int | None = None) -> int:
        """Retention for every log; returns segments deleted (checkpoints if any)."""
        now = self._now_ms() if now_ms is None else now_ms
        deleted = sum(log.enforce_retention(now) for log in list(self._logs.values()))
        self._purge_deleted_logs(now)
        if deleted:
            self.checkpoint()
        return deleted

    def expire_producers(self, now_ms: int, expiration_ms: int) -> None:
        """Forget idempotent producers idle for ``producer.id.expiration.ms`` (Kafka's rule)."""
        for log in list(self._logs.values()):
            log.producer_state.remove_expired(now_ms, expiration_ms)

    def run_cleaner(self, now_ms: int | None = None) -> int:
        """Compact every ``compact`` log that is dirty enough; returns how many were
        cleaned and, if any, rewrites the cleaner-offset checkpoints. A log whose cleaning
        fails is left as it is and skipped until the next restart."""
        now = self._now_ms() if now_ms is None else now_ms
        started = time.monotonic()
        cleaned = 0
        for tp, log in list(self._logs.items()):
            if not log.config.compact_enabled or tp in self._uncleanable:
                continue
            try:
                checkpoint = clean_log(log, self._cleaner_offsets.get(tp, 0), now)
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
            self._write_cleaner_checkpoints()
        self.cleaner_stats.ran(time.monotonic() - started, len(self._uncleanable))
        return cleaned

    def _write_cleaner_checkpoints(self) -> None:
        for log_dir in self.log_dirs:
            write_checkpoint(
                log_dir / CLEANER_OFFSET_CHECKPOINT,
                {
                    tp: offset
                    for tp, offset in self._cleaner_offsets.items()
                    if self._dir_of.get(tp) == log_dir
                },
            )

    def flush_due(self, now_ms: int | None = None) -> None:
        """flush.ms and post-roll flushes for every log."""
        now = self._now_ms() if now_ms is None else now_ms
        for log in list(self._logs.values()):
            log.maybe_flush(now)

    def checkpoint(self) -> None:
        """Write each log dir's recovery-point and log-start-offset checkpoints."""
        for log_dir in self.log_dirs:
            mine = {tp: log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir}
            write_checkpoint(
                log_dir / RECOVERY_POINT_CHECKPOINT,
                {tp: log.recovery_point for tp, log in mine.items()},
            )
            write_checkpoint(
                log_dir / LOG_START_OFFSET_CHECKPOINT,
                {tp: log.log_start_offset for tp, log in mine.items()},
            )

    def shutdown(self) -> None:
        """Close every log, checkpoint, then mark each dir clean (no recovery next time)."""
        for log in self._logs.values():
            log.close()
        for _, log in self._pending_deletes:
            log.delete()
        self._pending_deletes = []
        self.checkpoint()
        for log_dir in self.log_dirs:
            (log_dir / CLEAN_SHUTDOWN_FILE).touch()
        self._logs.clear()
        self._dir_of.clear()

    def _purge_deleted_logs(self, now_ms: int) -> None:
        due = [log for t, log in self._pending_deletes if t <= now_ms]
        self._pending_deletes = [(t, log) for t, log in self._pending_deletes if t > now_ms]
        for log in due:
            log.delete()

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)
