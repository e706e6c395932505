"""A single node's metadata log (a Raft quorum of one) taking over what earlier releases'
local metadata log wrote: binary and JSON records load, and a damaged record is skipped
rather than keeping the node down."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import TopicRecord
from moldau.raft.driver import METADATA_DIR
from moldau.storage.meta_properties import FormatError, MetaProperties, ensure_formatted
from tests.unit.controller.test_quorum_controller import quorum_of_one
from tests.unit.raft.test_file_log import write_quorum_of_one_log

TOPIC_ID = b"\x07" * 16


def taken_over(tmp_path: Path) -> MetadataImage:
    """What a node of this release starts from on that directory."""

    async def start() -> MetadataImage:
        raft = quorum_of_one(tmp_path)
        await raft.start()
        raft.close()
        return raft.image

    return asyncio.run(start())


def _legacy(kind: str, **fields: object) -> tuple[bytes, bytes]:
    def enc(v: object) -> object:
        return {"$b": base64.b64encode(v).decode()} if isinstance(v, bytes) else v

    return kind.encode(), json.dumps({k: enc(v) for k, v in fields.items()}).encode()


def test_a_json_log_of_an_earlier_release_loads(tmp_path: Path) -> None:
    write_quorum_of_one_log(
        tmp_path / METADATA_DIR,
        [
            [_legacy("ClusterIdRecord", cluster_id="old")],
            [
                _legacy("TopicRecord", name="t", topic_id=TOPIC_ID),
                _legacy(
                    "ConfigRecord",
                    resource_type=2,
                    resource_name="t",
                    name="retention.ms",
                    value="9",
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
        ],
    )
    image = taken_over(tmp_path)
    assert image.topics["t"].configs == {"retention.ms": "9"}
    assert image.topics["t"].partitions[0].leader == 1
    assert image.next_producer_id == 1000


def test_an_undecodable_record_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_quorum_of_one_log(
        tmp_path / METADATA_DIR,
        [[(None, b"\x01\x7f\x00garbage")], [TopicRecord(name="t", topic_id=TOPIC_ID)]],
    )
    assert list(taken_over(tmp_path).topics) == ["t"]
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
