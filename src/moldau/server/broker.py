"""The broker: ties the metadata image, the logs and the coordinators to the network.

Handlers receive the :class:`Broker` and use its small API: the current metadata image,
``commit()`` for metadata changes, ``get_log()`` for data, and the purgatory for waits.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from moldau.controller.controller import Controller
from moldau.controller.image import MetadataImage, TopicImage
from moldau.controller.metadata_log import MetadataLog
from moldau.controller.records import (
    ClusterIdRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.config import BrokerConfig, Listener
from moldau.server.groups import GroupService
from moldau.server.purgatory import Purgatory
from moldau.storage.checkpoint import write_properties
from moldau.storage.config import LogConfig
from moldau.storage.log import Log
from moldau.storage.log_manager import LogManager
from moldau.storage.resources import DescriptorBudget, open_files_limit

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.controller = Controller(
            self.node_id, config.log_defaults, config.int("num.partitions")
        )
        self.image = MetadataImage()
        self.purgatory = Purgatory()
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_defaults,
            budget=DescriptorBudget.derive(
                open_files_limit(),
                config.int("log.segment.open.files.max"),
                config.int("max.broker.partitions"),
            ),
            recovery_threads=config.int("num.recovery.threads.per.data.dir"),
        )
        # Single replica: the high watermark is the log end offset once appended. The
        # replication layer will own it; until then produce and the groups move it here.
        self.high_watermarks: dict[tuple[str, int], int] = {}
        self.metadata_log: MetadataLog | None = None
        self.advertised: list[Listener] = []
        self._commit_lock = asyncio.Lock()
        self._producer_ids = range(0)
        self._tasks: list[asyncio.Task[None]] = []
        self.groups = GroupService(self)

    # -- lifecycle ------------------------------------------------------------------
    def load(self) -> None:
        """Replay metadata, then open (and if needed recover) every partition's log."""
        for d in self.config.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.metadata_log, self.image = MetadataLog.open(self.config.log_dirs[0])
        if not self.image.cluster_id:
            cluster_id = self.config.get("cluster.id") or _new_cluster_id()
            self._commit_now([ClusterIdRecord(cluster_id)])
        self._write_meta_properties()
        self.log_manager.load_logs(self.topic_config_props, keep=self._in_metadata)
        for topic in self.image.topics.values():
            self._ensure_logs(topic)
        self.high_watermarks = {tp: log.log_end_offset for tp, log in self.log_manager.logs.items()}
        self.groups.load()

    def register(self, listeners: list[Listener]) -> None:
        """Record where clients reach this broker (advertised listeners)."""
        self.advertised = listeners
        endpoints = [{"name": li.name, "host": li.host, "port": li.port} for li in listeners]
        self._commit_now([RegisterBrokerRecord(self.node_id, endpoints)])

    def start_background(self) -> None:
        c = self.config
        self.groups.start()
        self._every(c.int("log.retention.check.interval.ms"), self._retention)
        # Flushes, checkpoints and cleaning run in worker threads: an fsync or a large
        # compaction must not stall requests. A busy worker thread hands the GIL back to
        # request handling within 0.5 ms instead of the interpreter's default 5 ms.
        sys.setswitchinterval(0.0005)
        self._every(c.int("log.flush.scheduler.interval.ms"), self._flush, in_thread=True)
        self._every(
            c.int("log.flush.offset.checkpoint.interval.ms"),
            self.log_manager.checkpoint,
            in_thread=True,
        )
        if c.bool("log.cleaner.enable"):
            self._every(c.int("log.cleaner.backoff.ms"), self._clean, in_thread=True)

    def _every(
        self, interval_ms: int, fn: Callable[[], object], *, in_thread: bool = False
    ) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    if in_thread:
                        await asyncio.to_thread(fn)
                    else:
                        fn()
                except Exception:
                    log.exception("background task %s failed", fn.__name__)

        self._tasks.append(asyncio.get_running_loop().create_task(loop()))

    def _retention(self) -> None:
        now = self.now_ms()
        self.log_manager.run_retention(self.high_watermarks, now)
        self.log_manager.expire_producers(now, self.config.int("producer.id.expiration.ms"))

    def _clean(self) -> None:
        self.log_manager.run_cleaner(self.high_watermarks, self.now_ms())

    def _flush(self) -> None:
        self.log_manager.flush_due(self.now_ms())

    def shutdown(self) -> None:
        """Flush everything and write checkpoints, so the next start needs no recovery."""
        for task in self._tasks:
            task.cancel()
        self.groups.close()
        self.log_manager.shutdown()
        if self.metadata_log is not None:
            self.metadata_log.close()

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- metadata -------------------------------------------------------------------
    async def commit(self, records: list[MetadataRecord]) -> MetadataImage:
        """Make metadata records durable, then apply them; returns the new image."""
        async with self._commit_lock:
            return self._commit_now(records)

    def _commit_now(self, records: list[MetadataRecord]) -> MetadataImage:
        if not records:
            return self.image
        assert self.metadata_log is not None
        created = self._create_logs(records, self.image.apply(records))
        try:
            offset = self.metadata_log.append(records)
        except BaseException:
            for topic, partition in created:
                self.log_manager.delete_log(topic, partition)
            raise
        old, self.image = self.image, self.image.apply(records, offset)
        self._on_image_change(old, self.image)
        return self.image

    def _create_logs(
        self, records: list[MetadataRecord], new: MetadataImage
    ) -> list[tuple[str, int]]:
        """Create the logs of the partitions ``records`` add before they commit, all or
        none (KafkaError otherwise), so metadata never names a partition storage could
        not create."""
        specs = []
        for rec in records:
            if isinstance(rec, PartitionRecord):
                name = new.topics_by_id[rec.topic_id]
                if self.log_manager.get_log(name, rec.partition_id) is None:
                    configs = dict(new.topics[name].configs)
                    config = LogConfig.from_props(configs, self.config.log_defaults)
                    specs.append((name, rec.partition_id, config))
        if specs:
            self.log_manager.create_logs(specs)
        return [(name, p) for name, p, _ in specs]

    def _in_metadata(self, tp: tuple[str, int]) -> bool:
        topic = self.image.topics.get(tp[0])
        return topic is not None and tp[1] in topic.partitions

    def _on_image_change(self, old: MetadataImage, new: MetadataImage) -> None:
        for name, topic in old.topics.items():
            current = new.topics.get(name)
            if current is None or current.topic_id != topic.topic_id:
                for p in topic.partitions:
                    self.log_manager.delete_log(name, p)
                    self.high_watermarks.pop((name, p), None)
                    self.purgatory.notify((name, p))
        for name, topic in new.topics.items():
            before = old.topics.get(name)
            if before is not None and before.configs != topic.configs:
                self.log_manager.update_config(name, self.topic_log_config(name))
            if before is None or before.partitions != topic.partitions:
                self._ensure_logs(topic)

    def _ensure_logs(self, topic: TopicImage) -> None:
        config = self.topic_log_config(topic.name)
        for p in topic.partitions:
            try:
                self.log_manager.get_or_create_log(topic.name, p, config)
            except KafkaError as e:
                log.error("%s-%d has no log: %s", topic.name, p, e)

    def topic_config_props(self, topic: str) -> dict[str, str]:
        t = self.image.topics.get(topic)
        return dict(t.configs) if t is not None else {}

    def topic_log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_props(self.topic_config_props(topic), self.config.log_defaults)

    async def auto_create_topics(self, names: Iterable[str]) -> dict[str, ErrorCode]:
        """Create missing topics with broker defaults (auto.create.topics.enable)."""
        results: dict[str, ErrorCode] = {}
        for name in names:
            if name in self.image.topics:
                results[name] = ErrorCode.NONE
                continue
            outcome = self.controller.create_topic(self.image, name)
            if outcome.error == ErrorCode.TOPIC_ALREADY_EXISTS:
                results[name] = ErrorCode.NONE
            elif outcome.error:
                results[name] = outcome.error
            else:
                try:
                    await self.commit(outcome.records)
                except KafkaError as e:
                    log.warning("auto-creating topic %s failed: %s", name, e)
                    results[name] = e.code
                    continue
                results[name] = ErrorCode.NONE
        return results

    async def ensure_internal_topic(
        self, name: str, partitions: int, configs: dict[str, str]
    ) -> TopicImage:
        topic = self.image.topics.get(name)
        if topic is None:
            outcome = self.controller.create_topic(self.image, name, partitions, 1, configs)
            if outcome.error:
                raise KafkaError(f"cannot create {name}: {outcome.message}", outcome.error)
            await self.commit(outcome.records)
            topic = self.image.topics[name]
        return topic

    async def next_producer_id(self) -> int:
        """Hand out a producer id; blocks of ids are reserved durably so none repeats."""
        async with self._commit_lock:
            if not self._producer_ids:
                block, outcome = self.controller.allocate_producer_ids(self.image)
                self._commit_now(outcome.records)
                self._producer_ids = block
            pid = self._producer_ids[0]
            self._producer_ids = self._producer_ids[1:]
            return pid

    # -- data -----------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.log_manager.get_log(topic, partition)

    def _write_meta_properties(self) -> None:
        props = {"version": "1", "node.id": str(self.node_id), "cluster.id": self.image.cluster_id}
        for d in self.config.log_dirs:
            path = Path(d) / "meta.properties"
            if not path.exists():
                write_properties(path, props)


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
