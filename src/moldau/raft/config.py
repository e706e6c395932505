"""`controller.quorum.*` settings with Kafka's names and defaults (QuorumConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

VOTERS = "controller.quorum.voters"
ELECTION_TIMEOUT_MS = "controller.quorum.election.timeout.ms"
FETCH_TIMEOUT_MS = "controller.quorum.fetch.timeout.ms"
ELECTION_BACKOFF_MAX_MS = "controller.quorum.election.backoff.max.ms"
REQUEST_TIMEOUT_MS = "controller.quorum.request.timeout.ms"
RETRY_BACKOFF_MS = "controller.quorum.retry.backoff.ms"
METADATA_LOG_SEGMENT_BYTES = "metadata.log.segment.bytes"
MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = "metadata.log.max.record.bytes.between.snapshots"
MAX_SNAPSHOT_INTERVAL_MS = "metadata.log.max.snapshot.interval.ms"


class QuorumConfigError(ValueError):
    """A `controller.quorum.*` value that cannot be used."""


@dataclass(frozen=True, slots=True)
class VoterAddress:
    host: str
    port: int


def parse_voters(value: str) -> dict[int, VoterAddress]:
    """Parse `1@host:9093,2@host:9094` into {node id: address}, as Kafka does."""
    voters: dict[int, VoterAddress] = {}
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        node, at, address = entry.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not host:
            raise QuorumConfigError(f"{VOTERS}: '{entry}' is not of the form id@host:port")
        try:
            node_id, port_number = int(node), int(port)
        except ValueError:
            raise QuorumConfigError(f"{VOTERS}: '{entry}' has a non-numeric id or port") from None
        if node_id < 0 or not 0 <= port_number <= 65535:
            raise QuorumConfigError(f"{VOTERS}: '{entry}' has an invalid id or port")
        if node_id in voters:
            raise QuorumConfigError(f"{VOTERS}: node {node_id} is listed twice")
        voters[node_id] = VoterAddress(host.strip("[]"), port_number)
    return voters


def _number(props: Mapping[str, str], key: str, default: int) -> int:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise QuorumConfigError(f"{key}: '{raw}' is not an integer") from None


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """The static voter set and the Raft timers (milliseconds)."""

    voters: Mapping[int, VoterAddress] = field(default_factory=dict)
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise QuorumConfigError(f"{name} must be positive")
        if self.election_backoff_max_ms < 0 or self.retry_backoff_ms < 0:
            raise QuorumConfigError("backoffs must not be negative")

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(self.voters)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> QuorumConfig:
        """Build from server properties; unknown keys are someone else's business."""
        defaults = cls()
        return cls(
            voters=parse_voters(props.get(VOTERS, "")),
            election_timeout_ms=_number(props, ELECTION_TIMEOUT_MS, defaults.election_timeout_ms),
            fetch_timeout_ms=_number(props, FETCH_TIMEOUT_MS, defaults.fetch_timeout_ms),
            election_backoff_max_ms=_number(
                props, ELECTION_BACKOFF_MAX_MS, defaults.election_backoff_max_ms
            ),
            request_timeout_ms=_number(props, REQUEST_TIMEOUT_MS, defaults.request_timeout_ms),
            retry_backoff_ms=_number(props, RETRY_BACKOFF_MS, defaults.retry_backoff_ms),
        )


@dataclass(frozen=True, slots=True)
class MetadataLogConfig:
    """`metadata.log.*` settings (Kafka's MetadataLogConfig) with Kafka's defaults."""

    segment_bytes: int = 1 << 30
    max_record_bytes_between_snapshots: int = 20 << 20
    max_snapshot_interval_ms: int = 3_600_000  # 0: no time-based snapshots

    def __post_init__(self) -> None:
        if self.segment_bytes <= 0 or self.max_record_bytes_between_snapshots <= 0:
            raise QuorumConfigError("metadata.log sizes must be positive")
        if self.max_snapshot_interval_ms < 0:
            raise QuorumConfigError(f"{MAX_SNAPSHOT_INTERVAL_MS} must be at least 0")

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> MetadataLogConfig:
        defaults = cls()
        return cls(
            segment_bytes=_number(props, METADATA_LOG_SEGMENT_BYTES, defaults.segment_bytes),
            max_record_bytes_between_snapshots=_number(
                props,
                MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
                defaults.max_record_bytes_between_snapshots,
            ),
            max_snapshot_interval_ms=_number(
                props, MAX_SNAPSHOT_INTERVAL_MS, defaults.max_snapshot_interval_ms
            ),
        )
