"""Metadata records: the events of the cluster metadata log (KRaft's record types).

Every change to cluster state is one of these records, appended to ``__cluster_metadata``
and applied to the in-memory :class:`~moldau.metadata.image.MetadataImage`. They are
stored as a record batch whose record key is the record type and whose value is JSON.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class MetadataRecord:
    TYPE: ClassVar[str] = ""

    def encode(self) -> tuple[bytes, bytes]:
        value = {k: _enc(v) for k, v in asdict(self).items()}
        return self.TYPE.encode(), json.dumps(value, separators=(",", ":")).encode()


def _enc(v: Any) -> Any:
    return {"$b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v


def _dec(v: Any) -> Any:
    if isinstance(v, dict) and "$b" in v:
        return base64.b64decode(v["$b"])
    return v


@dataclass(frozen=True)
class TopicRecord(MetadataRecord):
    TYPE: ClassVar[str] = "TopicRecord"
    name: str
    topic_id: bytes


@dataclass(frozen=True)
class PartitionRecord(MetadataRecord):
    TYPE: ClassVar[str] = "PartitionRecord"
    topic_id: bytes
    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass(frozen=True)
class PartitionChangeRecord(MetadataRecord):
    """Only the fields that are not None change; leader -2 keeps the leader."""

    TYPE: ClassVar[str] = "PartitionChangeRecord"
    topic_id: bytes
    partition_id: int
    leader: int = -2
    isr: list[int] | None = None
    replicas: list[int] | None = None
    removing_replicas: list[int] | None = None
    adding_replicas: list[int] | None = None


@dataclass(frozen=True)
class RemoveTopicRecord(MetadataRecord):
    TYPE: ClassVar[str] = "RemoveTopicRecord"
    topic_id: bytes


@dataclass(frozen=True)
class ConfigRecord(MetadataRecord):
    """A topic (resource_type 2) or broker (4) config; value None deletes the key."""

    TYPE: ClassVar[str] = "ConfigRecord"
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class ProducerIdsRecord(MetadataRecord):
    """A block of producer ids handed out: ids below next_producer_id are never reused."""

    TYPE: ClassVar[str] = "ProducerIdsRecord"
    broker_id: int
    next_producer_id: int


@dataclass(frozen=True)
class ClusterIdRecord(MetadataRecord):
    TYPE: ClassVar[str] = "ClusterIdRecord"
    cluster_id: str


@dataclass(frozen=True)
class RegisterBrokerRecord(MetadataRecord):
    TYPE: ClassVar[str] = "RegisterBrokerRecord"
    broker_id: int
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    rack: str | None = None
    fenced: bool = False
    broker_epoch: int = 0


@dataclass(frozen=True)
class FenceBrokerRecord(MetadataRecord):
    TYPE: ClassVar[str] = "FenceBrokerRecord"
    broker_id: int
    broker_epoch: int = 0


@dataclass(frozen=True)
class UnfenceBrokerRecord(MetadataRecord):
    TYPE: ClassVar[str] = "UnfenceBrokerRecord"
    broker_id: int
    broker_epoch: int = 0


RECORD_TYPES: dict[str, type[MetadataRecord]] = {
    cls.TYPE: cls
    for cls in (
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        ConfigRecord,
        ProducerIdsRecord,
        ClusterIdRecord,
        RegisterBrokerRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
    )
}


def decode_record(key: bytes, value: bytes) -> MetadataRecord:
    cls = RECORD_TYPES[key.decode()]
    return cls(**{k: _dec(v) for k, v in json.loads(value).items()})
