"""What a coordinator operation produces: records to write and parked requests it answers.

Shared by the pure coordinators (group, transaction) and the runtime that writes the
records and releases the answers once they are committed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

RequestId = Hashable
"""Caller-chosen key of a parked request; any hashable except None."""


class Completion(NamedTuple):
    """The answer to a parked request, released once the operation's records commit."""

    request_id: RequestId
    result: Any


class CoordinatorRecord(NamedTuple):
    """A record for the coordinator's topic; value None is a tombstone."""

    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class TxnBatch:
    """How an operation's records are framed when a transaction is involved: data of the
    producer's transaction (TxnOffsetCommit), or its COMMIT/ABORT marker (``marker``)."""

    producer_id: int
    producer_epoch: int
    marker: bool | None = None  # None: transactional records; True/False: commit/abort
    coordinator_epoch: int = -1


@dataclass
class Effects:
    completions: list[Completion] = field(default_factory=list)
    records: list[CoordinatorRecord] = field(default_factory=list)
    txn: TxnBatch | None = None  # None: plain records
