"""Metadata records: the events of the cluster metadata log, in KRaft's binary format.

The record types are Kafka's (generated from its schemas in
``moldau.protocol.metadata_records``); each is stored as a record with a null key and a
value framed as Kafka's MetadataRecordSerde writes it (frame version, api key, record
version, body), so a ``__cluster_metadata`` log reads the same as Kafka's.

Data directories written by earlier Moldau releases hold JSON records (the key names the
type): they are still read, converted to the binary records on the fly.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from moldau.protocol.metadata_record_serde import decode_metadata_record, encode_metadata_record
from moldau.protocol.metadata_records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from moldau.protocol.metadata_records.config_record import ConfigRecord
from moldau.protocol.metadata_records.feature_level_record import FeatureLevelRecord
from moldau.protocol.metadata_records.fence_broker_record import FenceBrokerRecord
from moldau.protocol.metadata_records.no_op_record import NoOpRecord
from moldau.protocol.metadata_records.partition_change_record import PartitionChangeRecord
from moldau.protocol.metadata_records.partition_record import PartitionRecord
from moldau.protocol.metadata_records.producer_ids_record import ProducerIdsRecord
from moldau.protocol.metadata_records.register_broker_record import (
    BrokerEndpoint,
    RegisterBrokerRecord,
)
from moldau.protocol.metadata_records.remove_topic_record import RemoveTopicRecord
from moldau.protocol.metadata_records.topic_record import TopicRecord
from moldau.protocol.metadata_records.unfence_broker_record import UnfenceBrokerRecord
from moldau.protocol.metadata_records.unregister_broker_record import UnregisterBrokerRecord

__all__ = [
    "BrokerEndpoint",
    "BrokerRegistrationChangeRecord",
    "ConfigRecord",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "RegisterBrokerRecord",
    "RemoveTopicRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "decode_record",
    "encode_record",
]

MetadataRecord = Any
"""One of the generated metadata record classes."""


def encode_record(record: MetadataRecord) -> tuple[None, bytes]:
    """(key, value) of the log record that stores ``record``."""
    return None, encode_metadata_record(record)


def decode_record(key: bytes | None, value: bytes | None) -> MetadataRecord | None:
    """The record stored as (key, value); None for a legacy record with no KRaft
    counterpart. Raises ValueError (UnknownMetadataRecordError for newer types)."""
    if key is not None:
        return _legacy(key, value or b"{}")
    if value is None:
        raise ValueError("a metadata record has no value")
    return decode_metadata_record(value)


def _b(v: Any) -> bytes:
    return base64.b64decode(v["$b"])


def _legacy(key: bytes, value: bytes) -> MetadataRecord | None:
    """A JSON record of the first Moldau releases, as its KRaft record."""
    kind, v = key.decode(), json.loads(value)
    if kind == "TopicRecord":
        return TopicRecord(name=v["name"], topic_id=_b(v["topic_id"]))
    if kind == "PartitionRecord":
        return PartitionRecord(
            partition_id=v["partition_id"],
            topic_id=_b(v["topic_id"]),
            replicas=v["replicas"],
            isr=v["isr"],
            leader=v["leader"],
            leader_epoch=v.get("leader_epoch", 0),
            partition_epoch=v.get("partition_epoch", 0),
        )
    if kind == "RemoveTopicRecord":
        return RemoveTopicRecord(topic_id=_b(v["topic_id"]))
    if kind == "ConfigRecord":
        return ConfigRecord(
            resource_type=v["resource_type"],
            resource_name=v["resource_name"],
            name=v["name"],
            value=v["value"],
        )
    if kind == "ProducerIdsRecord":
        return ProducerIdsRecord(broker_id=v["broker_id"], next_producer_id=v["next_producer_id"])
    if kind == "RegisterBrokerRecord":
        return RegisterBrokerRecord(
            broker_id=v["broker_id"],
            end_points=[
                BrokerEndpoint(name=e["name"], host=e["host"], port=e["port"])
                for e in v.get("endpoints", [])
            ],
            rack=v.get("rack"),
            fenced=False,
        )
    if kind == "ClusterIdRecord":
        return None  # the cluster id lives in meta.properties, as in KRaft
    raise ValueError(f"unknown legacy metadata record type {kind!r}")
