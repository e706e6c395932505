"""The local metadata log: binary records round-trip, earlier releases' JSON logs still
load, and a damaged record is skipped rather than keeping the node down."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from moldau.controller.metadata_log import METADATA_DIR, MetadataLog
from moldau.metadata.loader import replay
from moldau.metadata.records import PartitionRecord, TopicRecord
from moldau.records.batch import scan_batches
from moldau.records.record import build_batch
from moldau.storage.meta_properties import FormatError, MetaProperties, ensure_formatted

TOPIC_ID = b"\x07" * 16


def test_binary_records_round_trip(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    committed: list[int] = []
    log.set_commit_callback(lambda records, offset: committed.append(offset))
    log.append([TopicRecord(name="t", topic_id=TOPIC_ID)])
    log.append(
        [PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1)]
    )
    assert committed == [0, 1]
    log.close()
    image = replay(MetadataLog.open(tmp_path).batches())
    assert image.topics["t"].partitions[0].leader == 1 and image.offset == 1


def _legacy(kind: str, **fields: object) -> tuple[bytes, bytes]:
    def enc(v: object) -> object:
        return {"$b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v

    return kind.encode(), json.dumps({k: enc(v) for k, v in fields.items()}).encode()


def test_a_json_log_of_an_earlier_release_loads(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path)
    for records in (
        [_legacy("ClusterIdRecord", cluster_id="old")],
        [
            _legacy("TopicRecord", name="t", topic_id=TOPIC_ID),
            _legacy(
                "ConfigRecord", resource_type=2, resource_name="t", name="retention.ms", value="9"
            ),
            _legacy(
                "PartitionRecord",
                topic_id=TOPIC_ID,
                partition_id=0,
                replicas=[1],
                isr=[1],
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            ),
        ],
        [_legacy("ProducerIdsRecord", broker_id=1, next_producer_id=1000)],
    ):
        batch = bytearray(build_batch(records))
        log.log.append_as_leader(batch, scan_batches(batch, strict=False), leader_epoch=0)
    log.close()
    image = replay(MetadataLog.open(tmp_path).batches())
    assert image.topics["t"].configs == {"retention.ms": "9"}
    assert image.next_producer_id == 1000


def test_an_undecodable_record_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = MetadataLog.open(tmp_path)
    batch = bytearray(build_batch([(None, b"\x01\x7f\x00garbage")]))
    log.log.append_as_leader(batch, scan_batches(batch, strict=False), leader_epoch=0)
    log.append([TopicRecord(name="t", topic_id=TOPIC_ID)])
    log.close()
    image = replay(MetadataLog.open(tmp_path).batches())
    assert list(image.topics) == ["t"]
    assert f"{METADATA_DIR}: skipping the record at offset 0" in caplog.text


def test_meta_properties(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    cluster = ensure_formatted([a, b], 1, None)
    assert MetaProperties.read(a).cluster_id == MetaProperties.read(b).cluster_id == cluster
    assert ensure_formatted([a, b], 1, None) == cluster
    with pytest.raises(FormatError, match="belongs to cluster"):
        ensure_formatted([a], 1, "another")
    with pytest.raises(FormatError, match="node.id=2"):
        ensure_formatted([a], 2, None)
