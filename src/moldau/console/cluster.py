"""The console's only door to Kafka: confluent-kafka's AdminClient, Consumer and Producer.

Everything goes through the Kafka protocol (no Moldau internals), so the console works
against any Kafka-protocol cluster. Calls block; the web layer runs them in threads.
Results are the plain values of `model.py`; failures are `ConsoleError`s that read like
Kafka's own (`NAME: message`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar, cast

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from moldau.admin.cluster import describe_cluster
from moldau.admin.errors import describe_error
from moldau.admin.log_dirs import partition_sizes
from moldau.admin.offsets import reset_target
from moldau.admin.preflight import Unreachable, client_security, ensure_reachable, parse_servers
from moldau.admin.share_groups import describe_share_group, share_group_states
from moldau.admin.share_in_flight import share_in_flight
from moldau.admin.tiers import PartitionTiers, describe_tiers
from moldau.console.model import (
    BrokerInfo,
    ConfigItem,
    GroupInfo,
    GroupOffset,
    MemberInfo,
    Overview,
    PartitionInfo,
    QuorumInfo,
    Record,
    TopicInfo,
)

T = TypeVar("T")
TP = tuple[str, int]

REQUEST_TIMEOUT_S = 15.0
_TIMEOUTS = {"request_timeout": REQUEST_TIMEOUT_S}
_TOPIC_OP_TIMEOUTS = {
    "operation_timeout": REQUEST_TIMEOUT_S,
    "request_timeout": REQUEST_TIMEOUT_S + 5,
}
# How long one browse may wait for records the watermarks promised.
_READ_DEADLINE_S = 5.0
_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}

# Under the CLI's librdkafka logger: silent unless `moldau -v console`.
_log = logging.getLogger("moldau.cli.librdkafka.console")


class ConsoleError(Exception):
    """A failed cluster operation, worded for the user (Kafka's error name first)."""


def _wait(future: Future[T], context: str = "") -> T:
    try:
        return future.result()
    except KafkaException as exc:
        raise ConsoleError(f"{context}{describe_error(exc)}") from None


def _check(error: KafkaError | None, context: str = "") -> None:
    if error is not None and error.code() != KafkaError.NO_ERROR:
        raise ConsoleError(f"{context}{describe_error(error)}")


@dataclass(frozen=True)
class Start:
    """Where the message browser starts reading a partition."""

    kind: Literal["newest", "oldest", "offset", "timestamp"] = "newest"
    value: int = 0  # the offset, or the timestamp in ms


class Cluster:
    """One AdminClient, plus a Consumer for reading (serialised by a lock: browsing
    re-assigns it) and a Producer made on first use."""

    def __init__(
        self,
        bootstrap: str,
        properties: Mapping[str, str] | None = None,
        metrics_urls: Sequence[str] = (),
    ) -> None:
        self.bootstrap = bootstrap
        self.metrics_urls = tuple(metrics_urls)  # a share group's in-flight records
        # User properties last: that is where SASL/TLS settings come in.
        self._base: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": "moldau-console",
            "logger": _log,
        }
        self._user = dict(properties or {})
        self._admin = AdminClient(self._config(**{"allow.auto.create.topics": False}))
        self._reader = Consumer(
            self._config(
                **{
                    "group.id": "moldau-console",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "allow.auto.create.topics": False,
                }
            )
        )
        self._read_lock = threading.Lock()
        self._producer: Producer | None = None
        self._produce_lock = threading.Lock()

    def check_reachable(self) -> None:
        """Raise ConsoleError (one line: the address and the cause) at once while no
        bootstrap server answers, rather than wait out the client's request timeout. Asked
        afresh every time (a connection and two small requests): an answer kept for later
        would let a page of a cluster that has just gone wait for the timeout again."""
        try:
            ensure_reachable(self.bootstrap, client_security(self._user))
        except Unreachable as exc:
            raise ConsoleError(str(exc)) from None

    def _config(self, **extra: Any) -> dict[str, Any]:
        return {**self._base, **extra, **self._user}

    def close(self) -> None:
        with self._read_lock:
            self._reader.close()
        with self._produce_lock:
            if self._producer is not None:
                self._producer.flush(REQUEST_TIMEOUT_S)

    # --- cluster and topics -----------------------------------------------------------

    def _metadata(self, topic: str | None = None) -> ClusterMetadata:
        try:
            return self._admin.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise ConsoleError(describe_error(exc)) from None

    def overview(self, version: str | None = None) -> Overview:
        meta = self._metadata()
        try:  # DescribeCluster (KIP-700) knows racks; old brokers only answer Metadata.
            described = self._admin.describe_cluster(**_TIMEOUTS).result()
            nodes = [(n.id, n.host, n.port, n.rack) for n in described.nodes]
            controller = described.controller.id if described.controller else None
            cluster_id = described.cluster_id
        except KafkaException:
            nodes = [(b.id, b.host, b.port, None) for b in meta.brokers.values()]
            controller = meta.controller_id if meta.controller_id >= 0 else None
            cluster_id = meta.cluster_id
        # A KRaft broker names itself or a random broker as the "controller" (clients cannot
        # reach controllers): where the quorum says, its leader is the active controller.
        quorum = self.quorum()
        if quorum is not None and quorum.leader >= 0:
            controller = quorum.leader
        brokers = tuple(
            BrokerInfo(i, host, port, rack, i == controller)
            for i, host, port, rack in sorted(nodes)
        )
        return Overview(
            cluster_id=cluster_id,
            controller_id=controller,
            brokers=brokers,
            topics=tuple(self._topics(meta)),
            group_count=len(self._group_listing()),
            version=version,
            quorum=quorum,
        )

    def quorum(self) -> QuorumInfo | None:
        """The controller quorum (DescribeQuorum, which librdkafka lacks: Moldau's own
        client asks, on plaintext connections only). None where the cluster does not say:
        ZooKeeper-era Kafka, a Moldau node without a quorum, TLS/SASL settings."""
        if self._user.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
            return None
        try:
            described = asyncio.run(describe_cluster(self.bootstrap, int(REQUEST_TIMEOUT_S * 1000)))
        except Exception as exc:  # an old or foreign broker may refuse the request
            _log.info("no quorum description from %s: %s", self.bootstrap, exc)
            return None
        return QuorumInfo.from_described(described.get("quorum", {}))

    def partition_sizes(self) -> dict[tuple[str, int], int]:
        """Partition sizes from DescribeLogDirs on every broker (Moldau's own client, on
        plaintext connections only, as ``quorum``); empty where the cluster does not say."""
        if self._user.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
            return {}
        try:
            return asyncio.run(partition_sizes(self.bootstrap, int(REQUEST_TIMEOUT_S * 1000)))
        except Exception as exc:  # an old or foreign broker may refuse the request
            _log.info("no log dir sizes from %s: %s", self.bootstrap, exc)
            return {}

    def topics(self) -> list[TopicInfo]:
        return self._topics(self._metadata())

    def topic(self, name: str) -> TopicInfo:
        meta = self._metadata(name).topics.get(name)
        if meta is None or (
            meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        ):
            raise ConsoleError(f"UNKNOWN_TOPIC_OR_PART: topic {name!r} does not exist")
        [topic] = self._topics_of([meta])
        return topic

    def _topics(self, meta: ClusterMetadata) -> list[TopicInfo]:
        return self._topics_of(meta.topics[name] for name in sorted(meta.topics))

    def _topics_of(self, metas: Iterable[Any]) -> list[TopicInfo]:
        metas = list(metas)
        keys = [(t.topic, p) for t in metas if t.error is None for p in t.partitions]
        starts = self.offsets(keys, OffsetSpec.earliest())
        ends = self.offsets(keys, OffsetSpec.latest())
        topics = []
        for t in metas:
            partitions = tuple(
                PartitionInfo(
                    id=p.id,
                    leader=p.leader,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isrs),
                    start_offset=starts.get((t.topic, p.id), 0),
                    end_offset=ends.get((t.topic, p.id), 0),
                )
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            )
            error = None if t.error is None else describe_error(t.error)
            topics.append(TopicInfo(t.topic, partitions, error))
        return topics

    def offsets(self, partitions: Iterable[TP], spec: OffsetSpec) -> dict[TP, int]:
        """ListOffsets for many partitions at once (batched per leader by librdkafka).

        Partitions whose lookup fails (e.g. leader unavailable) are left out.
        """
        request = {TopicPartition(t, p): spec for t, p in partitions}
        if not request:
            return {}
        try:
            futures = self._admin.list_offsets(request, **_TIMEOUTS)
        except KafkaException as exc:
            raise ConsoleError(describe_error(exc)) from None
        found = {}
        for tp, future in futures.items():
            try:
                found[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                _log.info("list offsets %s-%d: %s", tp.topic, tp.partition, describe_error(exc))
        return found

    def tiers(self, name: str) -> dict[int, PartitionTiers | None] | None:
        """A tiered topic's remote and local offset ranges and sizes per partition (None:
        not tiered)."""
        configs = {c.name: c.value for c in self.topic_configs(name)}
        if configs.get("remote.storage.enable") != "true":
            return None
        meta = self._metadata(name)
        try:
            return describe_tiers(self._admin, [meta.topics[name]], meta.brokers, self._config())[
                name
            ]
        except (KafkaException, OSError, RuntimeError, TimeoutError) as exc:
            raise ConsoleError(f"tiers of {name!r}: {exc}") from None

    def registry_url(self) -> str | None:
        """The schema registry a broker serves, from its configs (Moldau's
        `schema.registry.advertised.listener`, else `schema.registry.listeners`); None when
        the broker names none (or is not Moldau)."""
        brokers = self._metadata().brokers
        if not brokers:
            return None
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        try:
            entries = _wait(self._admin.describe_configs([resource], **_TIMEOUTS)[resource])
        except ConsoleError:
            return None
        for key in ("schema.registry.advertised.listener", "schema.registry.listeners"):
            entry = entries.get(key)
            if entry is not None and entry.value:
                return str(entry.value)
        return None

    def topic_configs(self, name: str) -> list[ConfigItem]:
        resource = ConfigResource(ResourceType.TOPIC, name)
        entries = _wait(
            self._admin.describe_configs([resource], **_TIMEOUTS)[resource],
            f"configs of {name!r}: ",
        )
        return [
            ConfigItem(
                name=e.name,
                value=e.value,
                source=ConfigSource(e.source).name,
                is_default=e.is_default,
                read_only=e.is_read_only,
                sensitive=e.is_sensitive,
            )
            for e in sorted(entries.values(), key=lambda e: e.name)
        ]

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        # -1 asks the broker for num.partitions / default.replication.factor (KIP-464).
        new = NewTopic(
            name,
            num_partitions=partitions or -1,
            replication_factor=replication_factor or -1,
            config=dict(configs or {}),
        )
        futures = self._admin.create_topics([new], **_TOPIC_OP_TIMEOUTS)
        _wait(futures[name], f"cannot create topic {name!r}: ")

    def delete_topic(self, name: str) -> None:
        futures = self._admin.delete_topics([name], **_TOPIC_OP_TIMEOUTS)
        _wait(futures[name], f"cannot delete topic {name!r}: ")

    def add_partitions(self, name: str, total: int) -> None:
        futures = self._admin.create_partitions([NewPartitions(name, total)], **_TOPIC_OP_TIMEOUTS)
        _wait(futures[name], f"cannot add partitions to {name!r}: ")

    def alter_topic_configs(
        self, name: str, set_: Mapping[str, str], delete: Iterable[str] = ()
    ) -> None:
        """IncrementalAlterConfigs: SET some keys, DELETE (revert to default) others."""
        entries = [
            *(
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in set_.items()
            ),
            *(ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete),
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self._admin.incremental_alter_configs([resource], **_TIMEOUTS)
        _wait(futures[resource], f"cannot alter configs of {name!r}: ")

    # --- consumer groups --------------------------------------------------------------

    def _group_listing(self) -> list[Any]:
        listing = _wait(self._admin.list_consumer_groups(**_TIMEOUTS), "list groups: ")
        for error in listing.errors:
            _log.warning("list groups: %s", describe_error(error))
        return sorted(listing.valid, key=lambda g: g.group_id)

    def groups(self) -> list[GroupInfo]:
        """Every group with its state, members and lag."""
        shares = self._wire(share_group_states)
        ids = [g.group_id for g in self._group_listing() if g.group_id not in shares]
        found = [self._share_group(group_id) for group_id in shares]
        groups = self._groups(ids) + [g for g in found if g is not None]
        return sorted(groups, key=lambda g: g.group_id)

    def group(self, group_id: str) -> GroupInfo:
        share = self._share_group(group_id)
        if share is not None:
            return self._with_in_flight(share)
        [group] = self._groups([group_id])
        if group.state == "DEAD" and not group.offsets:
            raise ConsoleError(f"GROUP_ID_NOT_FOUND: consumer group {group_id!r} does not exist")
        return group

    def _groups(self, ids: list[str]) -> list[GroupInfo]:
        if not ids:
            return []
        futures = self._admin.describe_consumer_groups(ids, **_TIMEOUTS)
        described = {group_id: self._description(group_id, futures[group_id]) for group_id in ids}
        members = {
            group_id: tuple(map(_member, d.members if d else ()))
            for group_id, d in described.items()
        }
        committed = {group_id: self.committed(group_id) for group_id in ids}
        owners = {
            group_id: {tp: m.member_id for m in ms for tp in m.assignment}
            for group_id, ms in members.items()
        }
        keys = {
            group_id: sorted(committed[group_id].keys() | owners[group_id].keys())
            for group_id in ids
        }
        ends = self.offsets({tp for ks in keys.values() for tp in ks}, OffsetSpec.latest())
        groups = []
        for group_id, d in described.items():
            offsets = tuple(
                GroupOffset(
                    topic=t,
                    partition=p,
                    committed=committed[group_id].get((t, p)),
                    end_offset=ends.get((t, p), 0),
                    owner=owners[group_id].get((t, p)),
                )
                for t, p in keys[group_id]
            )
            groups.append(
                GroupInfo(
                    group_id=group_id,
                    state=_state(d.state) if d else "DEAD",
                    type=_type(d.type) if d else "classic",
                    protocol=d.partition_assignor if d else "",
                    coordinator=d.coordinator.id if d and d.coordinator else None,
                    simple=d.is_simple_consumer_group if d else False,
                    members=members[group_id],
                    offsets=offsets,
                )
            )
        return groups

    def _wire(self, call: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """A request librdkafka's admin API lacks, over Moldau's own protocol client."""
        try:
            return asyncio.run(
                call(parse_servers(self.bootstrap), client_security(self._user), *args)
            )
        except (ConnectionError, TimeoutError, OSError, Unreachable) as exc:
            raise ConsoleError(f"share groups: {exc or type(exc).__name__}") from None

    def _share_group(self, group_id: str) -> GroupInfo | None:
        """A share group (KIP-932) with its members and, per share-partition, the start
        offset, end offset and lag; None if ``group_id`` is no share group."""
        view = self._wire(describe_share_group, group_id)
        if view is None:
            return None
        keys = {(o.topic, o.partition) for o in view.offsets if o.error is None}
        ends = self.offsets(keys, OffsetSpec.latest())
        owners: dict[TP, list[str]] = {}
        for m in view.members:
            for tp in m.assignment:
                owners.setdefault(tp, []).append(m.member_id)
        return GroupInfo(
            group_id=group_id,
            state=view.state.upper(),
            type="share",
            protocol="simple",
            coordinator=view.coordinator,
            members=tuple(
                MemberInfo(m.member_id, m.client_id, m.host, None, tuple(m.assignment))
                for m in view.members
            ),
            offsets=tuple(
                GroupOffset(
                    topic=o.topic,
                    partition=o.partition,
                    committed=o.start_offset if o.start_offset >= 0 else None,
                    end_offset=ends.get((o.topic, o.partition), 0),
                    owner=", ".join(owners.get((o.topic, o.partition), [])) or None,
                    reported_lag=o.lag if o.lag >= 0 else None,
                )
                for o in view.offsets
            ),
        )

    def _with_in_flight(self, group: GroupInfo) -> GroupInfo:
        """A share group with its records in flight per share-partition, read from the
        partition leaders' metrics (``--metrics``, else their ``metrics.port``)."""
        held = self._wire(
            share_in_flight,
            group.group_id,
            [(o.topic, o.partition) for o in group.offsets],
            self.metrics_urls,
        )
        offsets = tuple(
            replace(o, in_flight=held.get((o.topic, o.partition))) for o in group.offsets
        )
        return replace(group, offsets=offsets)

    @staticmethod
    def _description(group_id: str, future: Future[Any]) -> Any | None:
        """The group's description, or None if the coordinator knows no such group."""
        try:
            return future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                raise ConsoleError(f"group {group_id!r}: {describe_error(exc)}") from None
            return None

    def committed(self, group_id: str) -> dict[TP, int]:
        request = [ConsumerGroupTopicPartitions(group_id)]
        future = self._admin.list_consumer_group_offsets(request, **_TIMEOUTS)[group_id]
        offsets = _wait(future, f"group {group_id!r}: ")
        return {
            (tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions if tp.offset >= 0
        }

    def reset_offsets(
        self, group_id: str, topic: str, strategy: str, value: int | None = None
    ) -> list[tuple[int, int | None, int]]:
        """Commit new offsets for all partitions of `topic` in an inactive group.

        Returns (partition, old offset, new offset) rows. Targets are clamped to the log.
        """
        group = self.group_or_none(group_id)
        if group is not None and (group.members or group.state not in ("EMPTY", "DEAD")):
            raise ConsoleError(
                f"assignments can only be reset if the group {group_id!r} is inactive, "
                f"but the current state is {group.state}"
            )
        keys = [(topic, p.id) for p in self.topic(topic).partitions]
        committed = self.committed(group_id)
        low = self.offsets(keys, OffsetSpec.earliest())
        high = self.offsets(keys, OffsetSpec.latest())
        at_time = (
            self.offsets(keys, OffsetSpec.for_timestamp(value or 0))
            if strategy == "timestamp"
            else {}
        )
        plan = []
        for key in keys:
            try:
                new = reset_target(
                    strategy,
                    current=committed.get(key),
                    low=low[key],
                    high=high[key],
                    value=value,
                    at_time=at_time.get(key, -1),
                )
            except ValueError as exc:
                raise ConsoleError(f"{key[0]}-{key[1]}: {exc}") from None
            plan.append((key[1], committed.get(key), new))
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(topic, p, new) for p, _, new in plan]
        )
        altered = _wait(
            self._admin.alter_consumer_group_offsets([request], **_TIMEOUTS)[group_id],
            f"group {group_id!r}: ",
        )
        for tp in altered.topic_partitions:
            _check(tp.error, f"{tp.topic}-{tp.partition}: ")
        return plan

    def group_or_none(self, group_id: str) -> GroupInfo | None:
        try:
            return self.group(group_id)
        except ConsoleError as exc:
            if str(exc).startswith("GROUP_ID_NOT_FOUND"):
                return None
            raise

    def delete_group(self, group_id: str) -> None:
        futures = self._admin.delete_consumer_groups([group_id], **_TIMEOUTS)
        _wait(futures[group_id], f"cannot delete group {group_id!r}: ")

    # --- records ----------------------------------------------------------------------

    def read(
        self, topic: str, partitions: Iterable[int] | None, start: Start, limit: int
    ) -> list[Record]:
        """Up to `limit` records of `topic`: the newest ones (newest first), or the first
        ones at/after an offset or a timestamp (oldest first), across `partitions`."""
        info = self.topic(topic)
        wanted = None if partitions is None else set(partitions)
        chosen = [p for p in info.partitions if wanted is None or p.id in wanted]
        if start.kind == "timestamp":
            found = self.offsets(
                [(topic, p.id) for p in chosen], OffsetSpec.for_timestamp(start.value)
            )
        starts = {}
        for p in chosen:
            if start.kind == "newest":
                offset = p.end_offset - limit
            elif start.kind == "oldest":
                offset = p.start_offset
            elif start.kind == "offset":
                offset = start.value
            else:
                at = found.get((topic, p.id), -1)
                offset = p.end_offset if at < 0 else at
            starts[p.id] = min(max(offset, p.start_offset), p.end_offset)
        stops = {p.id: p.end_offset for p in chosen}
        records, _ = self._fetch(topic, starts, stops, limit)
        newest = start.kind == "newest"
        records.sort(key=lambda r: (r.timestamp_ms or 0, r.partition, r.offset), reverse=newest)
        return records[:limit]

    def tail(
        self, topic: str, positions: Mapping[int, int], limit: int = 500
    ) -> tuple[list[Record], dict[int, int]]:
        """Records appended since `positions` (partition -> next offset), newest first,
        and the positions to ask from next time. Partitions not listed start at their end."""
        info = self.topic(topic)
        stops = {p.id: p.end_offset for p in info.partitions}
        starts = {pid: min(positions.get(pid, end), end) for pid, end in stops.items()}
        records, reached = self._fetch(topic, starts, stops, limit)
        records.sort(key=lambda r: (r.timestamp_ms or 0, r.partition, r.offset), reverse=True)
        return records, reached

    def _fetch(
        self, topic: str, starts: Mapping[int, int], stops: Mapping[int, int], cap: int
    ) -> tuple[list[Record], dict[int, int]]:
        """Read each partition from its start up to its stop offset (at most `cap` records
        each); return the records and the next offset per partition."""
        positions = dict(starts)
        pending = {p for p, s in starts.items() if s < stops[p]}
        records: list[Record] = []
        if not pending:
            return records, positions
        counts = dict.fromkeys(pending, 0)
        with self._read_lock:
            self._reader.assign([TopicPartition(topic, p, starts[p]) for p in sorted(pending)])
            try:
                deadline = time.monotonic() + _READ_DEADLINE_S
                while pending and time.monotonic() < deadline:
                    for message in self._reader.consume(500, timeout=0.2):
                        p, offset = message.partition(), message.offset()
                        if p not in pending or offset is None:
                            continue
                        error = message.error()
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                positions[p] = max(positions[p], offset)
                                pending.discard(p)
                            elif not error.retriable():
                                raise ConsoleError(describe_error(error))
                            continue
                        if offset >= stops[p]:
                            pending.discard(p)
                            continue
                        records.append(_record(message, topic, p, offset))
                        positions[p] = offset + 1
                        counts[p] += 1
                        if counts[p] >= cap or positions[p] >= stops[p]:
                            pending.discard(p)
            finally:
                self._reader.unassign()
        return records, positions

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
    ) -> tuple[int, int]:
        """Produce one record and wait for its acknowledgement: (partition, offset)."""
        delivered: list[tuple[KafkaError | None, Message]] = []
        with self._produce_lock:
            if self._producer is None:
                self._producer = Producer(self._config(**{"linger.ms": 0, "acks": "all"}))
            extra: dict[str, Any] = {"headers": headers or None}
            if partition is not None:
                extra["partition"] = partition
            try:
                self._producer.produce(
                    topic, value, key, on_delivery=lambda e, m: delivered.append((e, m)), **extra
                )
            except KafkaException as exc:
                raise ConsoleError(describe_error(exc)) from None
            self._producer.flush(REQUEST_TIMEOUT_S)
        if not delivered:
            raise ConsoleError("REQUEST_TIMED_OUT: the record was not acknowledged in time")
        error, message = delivered[0]
        _check(error, f"cannot produce to {topic!r}: ")
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None  # set on every delivered record
        return partition, offset


def _record(message: Message, topic: str, partition: int, offset: int) -> Record:
    ts_type, ts = message.timestamp()
    headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
    return Record(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp_ms=ts if ts_type else None,
        timestamp_type=_TIMESTAMP_TYPES.get(ts_type, "none"),
        key=message.key(),
        value=message.value(),
        headers=tuple(headers),
    )


def _member(m: Any) -> MemberInfo:
    target = getattr(m, "target_assignment", None)
    return MemberInfo(
        member_id=m.member_id,
        client_id=m.client_id,
        host=m.host,
        group_instance_id=m.group_instance_id,
        assignment=_partitions(m.assignment),
        target_assignment=None if target is None else _partitions(target),
    )


def _partitions(assignment: Any) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((tp.topic, tp.partition) for tp in assignment.topic_partitions))


def _type(group_type: Any) -> str:
    """Kafka's group type names (classic, consumer, share); an older answer without one
    is a classic group."""
    name = getattr(group_type, "name", "UNKNOWN")
    return name.lower() if name != "UNKNOWN" else "classic"


def _state(state: ConsumerGroupState | Any) -> str:
    return state.name if isinstance(state, ConsumerGroupState) else str(state)
