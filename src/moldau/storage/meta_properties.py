"""``meta.properties``: which cluster and node a data directory belongs to.

As in KRaft, every log directory is formatted once (``moldau storage format``, or on the
first start of a node) with ``version=1``, ``node.id``, ``cluster.id`` and a
``directory.id``. A node refuses to start on a directory that belongs to another cluster
or another node, with a message saying which: mixing them would corrupt both.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.checkpoint import META_PROPERTIES, write_properties


class FormatError(KafkaError):
    """A data directory does not belong to this node or cluster."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ErrorCode.INCONSISTENT_CLUSTER_ID)


def new_uuid() -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str

    @classmethod
    def read(cls, log_dir: Path) -> MetaProperties | None:
        path = log_dir / META_PROPERTIES
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        props = dict(
            line.split("=", 1)
            for line in text.splitlines()
            if "=" in line and not line.startswith("#")
        )
        try:
            return cls(
                props["cluster.id"],
                int(props["node.id"]),
                props.get("directory.id", ""),
            )
        except (KeyError, ValueError) as e:
            raise FormatError(f"{path} is malformed: {e}") from None

    def write(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        write_properties(
            log_dir / META_PROPERTIES,
            {
                "version": "1",
                "node.id": str(self.node_id),
                "cluster.id": self.cluster_id,
                "directory.id": self.directory_id,
            },
        )


def directory_uuid(log_dir: Path) -> bytes | None:
    """The dir's ``directory.id`` as the 16 bytes of a Kafka Uuid (None if unknown)."""
    try:
        meta = MetaProperties.read(log_dir)
    except (OSError, FormatError):
        return None
    if meta is None or not meta.directory_id:
        return None
    try:
        return base64.urlsafe_b64decode(meta.directory_id + "==")
    except ValueError:
        return None


def format_dirs(
    log_dirs: Sequence[Path], node_id: int, cluster_id: str, *, ignore_formatted: bool = False
) -> None:
    """``moldau storage format``: write meta.properties in every unformatted directory.
    A directory already formatted is an error unless ``ignore_formatted`` (as Kafka's
    ``--ignore-formatted``), and then it must agree."""
    for d in log_dirs:
        existing = MetaProperties.read(d)
        if existing is not None:
            if not ignore_formatted:
                raise FormatError(f"{d} is already formatted (cluster {existing.cluster_id})")
            _check(d, existing, node_id, cluster_id)
            continue
        MetaProperties(cluster_id, node_id, new_uuid()).write(d)


def ensure_formatted(log_dirs: Sequence[Path], node_id: int, cluster_id: str | None) -> str:
    """The cluster id of this node's directories, formatting the unformatted ones with
    ``cluster_id`` (or the id the formatted ones already carry, or a new one).

    Raises FormatError if directories disagree or belong to another node or cluster."""
    found = {d: MetaProperties.read(d) for d in log_dirs}
    known = {m.cluster_id for m in found.values() if m is not None}
    if len(known) > 1:
        raise FormatError(f"the log directories belong to different clusters: {sorted(known)}")
    chosen = cluster_id or (known.pop() if known else new_uuid())
    for d, meta in found.items():
        if meta is None:
            MetaProperties(chosen, node_id, new_uuid()).write(d)
        else:
            _check(d, meta, node_id, chosen)
    return chosen


def _check(d: Path, meta: MetaProperties, node_id: int, cluster_id: str) -> None:
    if meta.cluster_id != cluster_id:
        raise FormatError(
            f"{d} belongs to cluster {meta.cluster_id}, not {cluster_id}: this node cannot "
            "join another cluster with it (format a new directory instead)"
        )
    if meta.node_id != node_id:
        raise FormatError(
            f"{d} belongs to node {meta.node_id}, but this node is configured with "
            f"node.id={node_id}"
        )
