"""`moldau transactions`: list, describe and abort transactions (Kafka's
kafka-transactions.sh).

librdkafka has no transaction admin APIs, so this command speaks the Kafka protocol
itself (Moldau's :class:`~moldau.protocol.client.NetworkClient`), over plaintext: it asks
every broker for the transactions it coordinates (ListTransactions), the coordinator of
one transactional id for its state (FindCoordinator key type 1, DescribeTransactions),
and, to end a hanging transaction, a partition's leader for its open transactions
(DescribeProducers) and then writes the ABORT marker there (WriteTxnMarkers), as
Kafka's tool does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer

from moldau.admin.cluster import servers
from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    REQUEST_TIMEOUT_S,
    BootstrapOption,
    JsonOption,
    check_reachable,
    fail,
    out,
    print_json,
    print_kv,
    table,
)
from moldau.protocol.client import NetworkClient
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from moldau.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from moldau.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.messages.list_transactions_request import ListTransactionsRequest
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from moldau.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

app = typer.Typer(
    help="List, describe and abort transactions (like kafka-transactions.sh).",
    no_args_is_help=True,
)

T = TypeVar("T")
Address = tuple[str, int]
TRANSACTION_KEY_TYPE = 1
METADATA_VERSION = 12
FIND_COORDINATOR_VERSION = 4
LIST_TRANSACTIONS_VERSION = 1
DESCRIBE_TRANSACTIONS_VERSION = 0
DESCRIBE_PRODUCERS_VERSION = 0
WRITE_TXN_MARKERS_VERSION = 1


class AdminError(Exception):
    """A Kafka error an operation ends with (``NAME: message``)."""


def _error(code: int, context: str) -> AdminError:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return AdminError(f"{name}: {context}")


class TransactionsAdmin:
    """The admin requests of the transactions tool, on one bootstrap list."""

    def __init__(self, bootstrap: str, timeout_ms: int = int(REQUEST_TIMEOUT_S * 1000)) -> None:
        self.servers: list[Address] = list(servers(bootstrap))
        self.client = NetworkClient("moldau-transactions", request_timeout_ms=timeout_ms)

    def close(self) -> None:
        self.client.close()

    async def _any(self, message: Any, version: int) -> Any:
        """The answer of the first bootstrap server that answers."""
        error: Exception = ConnectionError("no bootstrap server given")
        for address in self.servers:
            try:
                return await self.client.send(address, message, version)
            except (ConnectionError, TimeoutError, OSError) as e:
                error = e
        raise AdminError(f"no broker answered: {error}")

    async def brokers(self, topic: str | None = None) -> tuple[dict[int, Address], Any]:
        """Every broker's address, and ``topic``'s metadata if asked for."""
        topics = [MetadataRequestTopic(name=topic)] if topic is not None else []
        metadata = await self._any(MetadataRequest(topics=topics), METADATA_VERSION)
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        return brokers, (metadata.topics[0] if topic is not None else None)

    async def list_all(
        self, states: list[str], producer_ids: list[int], duration_ms: int
    ) -> list[dict[str, Any]]:
        """ListTransactions of every broker (each lists those it coordinates)."""
        brokers, _ = await self.brokers()
        request = ListTransactionsRequest(
            state_filters=states, producer_id_filters=producer_ids, duration_filter=duration_ms
        )
        answers = await asyncio.gather(
            *(self.client.send(a, request, LIST_TRANSACTIONS_VERSION) for a in brokers.values()),
            return_exceptions=True,
        )
        found = []
        for node, answer in zip(brokers, answers, strict=True):
            if isinstance(answer, BaseException):
                raise AdminError(f"broker {node} did not answer: {answer}")
            if answer.error_code:
                raise _error(answer.error_code, f"ListTransactions on broker {node}")
            if answer.unknown_state_filters:
                raise AdminError(f"unknown states: {', '.join(answer.unknown_state_filters)}")
            found += [
                {
                    "transactional_id": t.transactional_id,
                    "coordinator": node,
                    "producer_id": t.producer_id,
                    "state": t.transaction_state,
                }
                for t in answer.transaction_states
            ]
        return sorted(found, key=lambda t: t["transactional_id"])

    async def describe(self, transactional_id: str) -> dict[str, Any]:
        found = await self._any(
            FindCoordinatorRequest(
                key_type=TRANSACTION_KEY_TYPE, coordinator_keys=[transactional_id]
            ),
            FIND_COORDINATOR_VERSION,
        )
        (coordinator,) = found.coordinators
        if coordinator.error_code:
            raise _error(coordinator.error_code, f"the coordinator of {transactional_id!r}")
        answer = await self.client.send(
            (coordinator.host, coordinator.port),
            DescribeTransactionsRequest(transactional_ids=[transactional_id]),
            DESCRIBE_TRANSACTIONS_VERSION,
        )
        (state,) = answer.transaction_states
        if state.error_code:
            raise _error(state.error_code, f"transactional id {transactional_id!r}")
        return {
            "transactional_id": transactional_id,
            "coordinator": coordinator.node_id,
            "state": state.transaction_state,
            "producer_id": state.producer_id,
            "producer_epoch": state.producer_epoch,
            "timeout_ms": state.transaction_timeout_ms,
            "start_time_ms": state.transaction_start_time_ms,
            "partitions": sorted(f"{t.topic}-{p}" for t in state.topics for p in t.partitions),
        }

    async def _leader(self, topic: str, partition: int) -> Address:
        brokers, meta = await self.brokers(topic)
        if meta.error_code:
            raise _error(meta.error_code, f"topic {topic!r}")
        leader = next(
            (p.leader_id for p in meta.partitions if p.partition_index == partition), None
        )
        if leader is None or leader not in brokers:
            raise AdminError(f"UNKNOWN_TOPIC_OR_PARTITION: {topic}-{partition} has no leader")
        return brokers[leader]

    async def producers(self, topic: str, partition: int) -> list[dict[str, Any]]:
        """DescribeProducers of one partition at its leader."""
        leader = await self._leader(topic, partition)
        answer = await self.client.send(
            leader,
            DescribeProducersRequest(
                topics=[TopicRequest(name=topic, partition_indexes=[partition])]
            ),
            DESCRIBE_PRODUCERS_VERSION,
        )
        (result,) = answer.topics[0].partitions
        if result.error_code:
            raise _error(result.error_code, result.error_message or f"{topic}-{partition}")
        return [
            {
                "producer_id": p.producer_id,
                "producer_epoch": p.producer_epoch,
                "last_sequence": p.last_sequence,
                "last_timestamp": p.last_timestamp,
                "coordinator_epoch": p.coordinator_epoch,
                "current_txn_start_offset": p.current_txn_start_offset,
            }
            for p in result.active_producers
        ]

    async def abort(
        self,
        topic: str,
        partition: int,
        start_offset: int | None,
        producer: tuple[int, int, int] | None,
    ) -> dict[str, Any]:
        """Write an ABORT marker for a partition's open transaction, found by the offset
        it started at (DescribeProducers) or given as (producer id, epoch, coordinator
        epoch)."""
        if producer is None:
            open_txns = [
                p
                for p in await self.producers(topic, partition)
                if p["current_txn_start_offset"] == start_offset
            ]
            if not open_txns:
                raise AdminError(
                    f"no open transaction starts at offset {start_offset} of {topic}-{partition}"
                )
            p = open_txns[0]
            producer = (p["producer_id"], p["producer_epoch"], max(p["coordinator_epoch"], 0))
        producer_id, producer_epoch, coordinator_epoch = producer
        leader = await self._leader(topic, partition)
        answer = await self.client.send(
            leader,
            WriteTxnMarkersRequest(
                markers=[
                    WritableTxnMarker(
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        transaction_result=False,
                        topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
                        coordinator_epoch=coordinator_epoch,
                    )
                ]
            ),
            WRITE_TXN_MARKERS_VERSION,
        )
        code = answer.markers[0].topics[0].partitions[0].error_code
        if code:
            raise _error(code, f"aborting producer {producer_id} on {topic}-{partition}")
        return {
            "topic": topic,
            "partition": partition,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "coordinator_epoch": coordinator_epoch,
        }


def _run(bootstrap: str, op: Callable[[TransactionsAdmin], Awaitable[T]]) -> T:
    check_reachable(bootstrap, {})

    async def main() -> T:
        admin = TransactionsAdmin(bootstrap)
        try:
            return await op(admin)
        finally:
            admin.close()

    try:
        return asyncio.run(main())
    except AdminError as e:
        fail(str(e))


def _time(ms: int) -> str:
    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@app.command("list")
def list_transactions(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only these states, e.g. Ongoing (repeatable)."),
    ] = None,
    producer_id: Annotated[
        list[int] | None, typer.Option("--producer-id", help="Only these producers.")
    ] = None,
    duration_ms: Annotated[
        int, typer.Option("--duration-ms", help="Only those running longer than this.")
    ] = -1,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    json_output: JsonOption = False,
) -> None:
    """List the transactional ids every broker coordinates, with their states."""
    found = _run(bootstrap, lambda a: a.list_all(state or [], producer_id or [], duration_ms))
    if json_output:
        print_json(found)
        return
    grid = table("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
    for t in found:
        grid.add_row(
            t["transactional_id"], str(t["coordinator"]), str(t["producer_id"]), t["state"]
        )
    out.print(grid)


@app.command()
def describe(
    transactional_id: str,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    json_output: JsonOption = False,
) -> None:
    """Show a transactional id's state, producer, timeout and partitions."""
    found = _run(bootstrap, lambda a: a.describe(transactional_id))
    if json_output:
        print_json(found)
        return
    print_kv(
        f"TransactionalId: {transactional_id}",
        {
            "Coordinator": found["coordinator"],
            "State": found["state"],
            "ProducerId": found["producer_id"],
            "ProducerEpoch": found["producer_epoch"],
            "TimeoutMs": found["timeout_ms"],
            "Started": _time(found["start_time_ms"]),
        },
    )
    grid = table("PARTITION")
    for tp in found["partitions"]:
        grid.add_row(tp)
    out.print(grid)


@app.command("describe-producers")
def describe_producers(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    partition: Annotated[int, typer.Option("--partition", "-p", min=0)],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    json_output: JsonOption = False,
) -> None:
    """Active producers of a partition and where their open transactions started."""
    found = _run(bootstrap, lambda a: a.producers(topic, partition))
    if json_output:
        print_json(found)
        return
    grid = table(
        "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH",
        "CURRENT-TXN-START-OFFSET",
    )  # fmt: skip
    for p in found:
        grid.add_row(
            str(p["producer_id"]),
            str(p["producer_epoch"]),
            str(p["last_sequence"]),
            _time(p["last_timestamp"]),
            str(p["coordinator_epoch"]),
            str(p["current_txn_start_offset"]) if p["current_txn_start_offset"] >= 0 else "-",
        )
    out.print(grid)


@app.command()
def abort(
    topic: Annotated[str, typer.Option("--topic", "-t")],
    partition: Annotated[int, typer.Option("--partition", "-p", min=0)],
    start_offset: Annotated[
        int | None,
        typer.Option("--start-offset", help="Offset where the hanging transaction starts."),
    ] = None,
    producer_id: Annotated[int | None, typer.Option("--producer-id")] = None,
    producer_epoch: Annotated[int | None, typer.Option("--producer-epoch")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option("--coordinator-epoch")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    json_output: JsonOption = False,
) -> None:
    """Abort a hanging transaction on one partition (writes its ABORT marker).

    Give --start-offset (see describe-producers), or --producer-id with
    --producer-epoch and --coordinator-epoch."""
    given = (producer_id, producer_epoch, coordinator_epoch)
    if (start_offset is None) == all(v is None for v in given):
        raise typer.BadParameter(
            "give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch"
        )
    producer: tuple[int, int, int] | None = None
    if start_offset is None:
        if producer_id is None or producer_epoch is None or coordinator_epoch is None:
            raise typer.BadParameter("--producer-id needs --producer-epoch and --coordinator-epoch")
        producer = (producer_id, producer_epoch, coordinator_epoch)
    done = _run(bootstrap, lambda a: a.abort(topic, partition, start_offset, producer))
    if json_output:
        print_json(done)
        return
    out.print(
        f"Aborted the transaction of producer {done['producer_id']} "
        f"(epoch {done['producer_epoch']}) on {topic}-{partition}."
    )
