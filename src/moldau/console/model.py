"""What the console shows, as plain values: filled by `cluster.py`, read by the templates.

Nothing here talks to Kafka, so the pages' facts (lag, under-replication, record counts)
are computed in one place and unit-testable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from moldau.admin.share_in_flight import total as share_in_flight_total


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool


@dataclass(frozen=True)
class PartitionInfo:
    id: int
    leader: int  # -1: offline
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    start_offset: int  # log start offset (earliest)
    end_offset: int  # high watermark (latest)
    size_bytes: int | None = None  # from DescribeLogDirs-style metrics, when known

    @property
    def records(self) -> int:
        """Offsets between log start and high watermark: records, plus any control or
        compacted-away offsets (what Kafka UIs call "messages")."""
        return max(self.end_offset - self.start_offset, 0)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: tuple[PartitionInfo, ...]
    error: str | None = None

    @property
    def internal(self) -> bool:
        return self.name.startswith("__")

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def size_bytes(self) -> int | None:
        sizes = [p.size_bytes for p in self.partitions]
        return None if not sizes or None in sizes else sum(s or 0 for s in sizes)

    @property
    def under_replicated(self) -> int:
        return sum(p.under_replicated for p in self.partitions)

    @property
    def offline(self) -> int:
        return sum(p.offline for p in self.partitions)


@dataclass(frozen=True)
class QuorumVoter:
    id: int
    log_end_offset: int
    lag: int  # offsets behind the quorum's high watermark


@dataclass(frozen=True)
class QuorumInfo:
    """The KRaft controller quorum as DescribeQuorum reports it."""

    leader: int  # -1: none
    epoch: int
    high_watermark: int
    voters: tuple[QuorumVoter, ...]
    observers: tuple[QuorumVoter, ...]

    @classmethod
    def from_described(cls, quorum: Mapping[str, Any]) -> QuorumInfo | None:
        """From ``moldau cluster describe``'s ``quorum`` (None if the cluster did not say)."""
        if "error" in quorum or "leader" not in quorum:
            return None
        return cls(
            quorum["leader"],
            quorum["epoch"],
            quorum["high_watermark"],
            tuple(QuorumVoter(**r) for r in quorum["voters"]),
            tuple(QuorumVoter(**r) for r in quorum["observers"]),
        )


@dataclass(frozen=True)
class Overview:
    cluster_id: str | None
    controller_id: int | None
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicInfo, ...]
    group_count: int
    version: str | None  # from the metrics endpoint, when it says
    quorum: QuorumInfo | None = None  # a KRaft cluster's controller quorum

    @property
    def partition_count(self) -> int:
        return sum(len(t.partitions) for t in self.topics)

    @property
    def under_replicated(self) -> int:
        return sum(t.under_replicated for t in self.topics)

    @property
    def offline(self) -> int:
        return sum(t.offline for t in self.topics)

    def leaders(self, broker_id: int) -> int:
        """How many partitions `broker_id` leads."""
        return sum(p.leader == broker_id for t in self.topics for p in t.partitions)

    @property
    def racks(self) -> tuple[str, ...]:
        return tuple(sorted({b.rack for b in self.brokers if b.rack}))


@dataclass(frozen=True)
class ConfigItem:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG
    is_default: bool
    read_only: bool
    sensitive: bool

    @property
    def overridden(self) -> bool:
        return self.source == "DYNAMIC_TOPIC_CONFIG"


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: tuple[tuple[str, int], ...]
    target_assignment: tuple[tuple[str, int], ...] | None = None
    """A consumer group's (KIP-848) target for the member; None for classic groups."""

    @property
    def reconciling(self) -> bool:
        return self.target_assignment is not None and self.target_assignment != self.assignment


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    committed: int | None  # None: the group never committed here
    end_offset: int
    owner: str | None  # member id
    reported_lag: int | None = None  # a share group's lag, as its coordinator counts it
    in_flight: int | None = None  # a share group's records acquired, not yet acknowledged

    @property
    def lag(self) -> int | None:
        """Kafka's lag: high watermark minus committed offset (never negative); for a share
        group (``committed`` is the share-partition start offset) the records up to the
        high watermark not yet acknowledged or archived (KIP-1226)."""
        if self.reported_lag is not None:
            return self.reported_lag
        return None if self.committed is None else max(self.end_offset - self.committed, 0)


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    type: str = "classic"  # classic, consumer (KIP-848) or share
    protocol: str = ""
    coordinator: int | None = None
    simple: bool = False
    members: tuple[MemberInfo, ...] = ()
    offsets: tuple[GroupOffset, ...] = field(default=())

    @property
    def lag(self) -> int:
        return sum(o.lag or 0 for o in self.offsets)

    @property
    def in_flight(self) -> int | None:
        """A share group's records in flight; None unless every partition's is known."""
        return share_in_flight_total(o.in_flight for o in self.offsets)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({o.topic for o in self.offsets}))

    def lag_by_topic(self) -> dict[str, int]:
        lag: dict[str, int] = {}
        for o in self.offsets:
            lag[o.topic] = lag.get(o.topic, 0) + (o.lag or 0)
        return lag


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str  # CreateTime / LogAppendTime / none
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    key_decoded: Decoded | None = None  # a registry-framed key, decoded with its schema
    value_decoded: Decoded | None = None


@dataclass(frozen=True)
class Decoded:
    """A registry-framed key or value decoded with its writer's schema (as pretty JSON), or
    why it could not be (`error`)."""

    schema_id: int
    subject: tuple[str, int] | None  # (subject, version) the id is registered under
    schema_type: str | None
    text: str
    error: str = ""


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    schema_id: int
    schema_type: str  # AVRO, JSON or PROTOBUF
    schema: str
    references: tuple[tuple[str, str, int], ...] = ()  # (name, subject, version)


@dataclass(frozen=True)
class SubjectInfo:
    name: str
    latest: SchemaVersion
    compatibility: str  # the subject's level, else the global one


def with_sizes(topic: TopicInfo, sizes: dict[tuple[str, int], int]) -> TopicInfo:
    """The topic with partition sizes in bytes filled in from `sizes`, where known."""
    if not sizes:
        return topic
    partitions = tuple(
        replace(p, size_bytes=sizes.get((topic.name, p.id), p.size_bytes)) for p in topic.partitions
    )
    return replace(topic, partitions=partitions)
