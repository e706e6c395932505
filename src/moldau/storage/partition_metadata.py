"""``partition.metadata``: the id of the topic a partition's log belongs to.

As Kafka's PartitionMetadataFile (``version: 0`` and ``topic_id: <uuid>``): a topic
deleted and created again under the same name gets the same directory name, so only the
topic id tells the new topic's log from the old one's. A node replaying its metadata log
acts on the old topic's deletion after the new topic's log exists on disk; the log
manager deletes a log only for the topic whose id it holds.
"""

from __future__ import annotations

import base64
from pathlib import Path

from moldau.storage.checkpoint import atomic_write

PARTITION_METADATA = "partition.metadata"


def topic_id_str(topic_id: bytes) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def read_topic_id(log_dir: Path) -> bytes | None:
    """The topic id of the log in ``log_dir`` (None: no file, as in logs made before it)."""
    try:
        text = (log_dir / PARTITION_METADATA).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    value = fields.get("topic_id", "").strip()
    if not value:
        return None
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def write_topic_id(log_dir: Path, topic_id: bytes) -> None:
    atomic_write(log_dir / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id_str(topic_id)}\n")
