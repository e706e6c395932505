"""The quorum controller: one writer that decides and commits metadata changes.

As Kafka's QuorumController, every change is an operation run in order against the
*latest* state, which includes changes appended but not yet committed, so two
operations can never both pass a check that only one of them may pass (two CreateTopics
of the same name, two producer-id blocks). An operation's records are appended to the
metadata log at once; its caller is answered only when they are committed (a quorum of
one: appended and fsynced). If the append fails, the latest state falls back to the
committed one and the caller gets the error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

T = TypeVar("T")
CommitListener = Callable[[Sequence[MetadataRecord], int], None]


@dataclass
class ControllerResult(Generic[T]):
    """What an operation decided: the records that carry it out and the caller's answer."""

    response: T
    records: list[MetadataRecord] = field(default_factory=list)


class MetadataLogWriter(Protocol):
    """Where metadata goes: the Raft log (a single node's is a quorum of one). Its owner
    hands every committed batch, in log order, to :meth:`QuorumController.handle_commit`."""

    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append one batch; returns its last offset. Raises OSError/KafkaError."""
        ...

    async def wait_committed(self, offset: int) -> None:
        """Return once ``offset`` is committed; raise NOT_CONTROLLER if it never will be."""
        ...


class QuorumController:
    def __init__(
        self, log_writer: MetadataLogWriter, image: MetadataImage, *, active: bool = True
    ) -> None:
        self.log_writer = log_writer
        self.latest = image  # includes appended, uncommitted records
        self.committed = image
        self.active = active  # leads the quorum: a quorum of one always does
        self._lock = asyncio.Lock()
        self._listeners: list[CommitListener] = []

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Called with every committed batch, in log order (the metadata loader)."""
        self._listeners.append(listener)

    async def write(self, op: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        """Run ``op`` against the latest state, append its records, answer on commit."""
        async with self._lock:
            if not self.active:
                raise KafkaError("this node is not the active controller", ErrorCode.NOT_CONTROLLER)
            result = op(self.latest)
            if not result.records:
                return result.response
            try:
                offset = self.log_writer.append(result.records)
            except (OSError, KafkaError) as e:
                self.latest = self.committed
                log.error("metadata append failed: %s", e)
                code = e.code if isinstance(e, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
                raise KafkaError(f"metadata could not be written: {e}", code) from e
            self.latest = self.latest.apply(result.records, offset)
        await self.log_writer.wait_committed(offset)
        return result.response

    def handle_commit(
        self, records: Sequence[MetadataRecord], offset: int, image: MetadataImage | None = None
    ) -> None:
        """Batches the quorum committed, in log order; `image`, the committed image after
        them if the metadata log replica built it already (else it is built here)."""
        if offset <= self.committed.offset:
            return
        self.committed = image if image is not None else self.committed.apply(records, offset)
        if not self.active:
            self.latest = self.committed
        for listener in self._listeners:
            listener(records, offset)

    def load_snapshot(self, image: MetadataImage) -> None:
        self.committed = self.latest = image

    def activate(self) -> None:
        """This node leads the quorum now (its committed state is the whole log)."""
        self.latest = self.committed
        self.active = True

    def deactivate(self) -> None:
        """Another node leads: what was appended but not committed is not ours to decide."""
        self.active = False
        self.latest = self.committed
