"""``moldau reassign``: Kafka's kafka-reassign-partitions, over the
AlterPartitionReassignments and ListPartitionReassignments APIs.

A reassignment moves a partition to a new replica list: the controller adds the new
replicas, which fetch from the leader; once all of them are in the ISR the replicas that
are not in the new list leave (and the leadership moves if its holder leaves).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    PropertyOption,
    user_properties,
)
from moldau.cli.wire import Target, error_text, fail, run, send
from moldau.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from moldau.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)

COMMAND = "reassign"
ALTER_VERSION = 0
LIST_VERSION = 0
# (topic, partition) -> the new replicas, or None to cancel that partition's reassignment
Plan = dict[tuple[str, int], list[int] | None]
# topic -> partition -> {"replicas", "adding", "removing"}
Ongoing = dict[str, dict[int, dict[str, list[int]]]]


async def alter_reassignments(
    target: Target, plan: Plan, timeout_ms: int = 30_000
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """Start (or cancel) the reassignments of ``plan``: per partition, (error code, message)."""
    topics: dict[str, list[ReassignablePartition]] = defaultdict(list)
    for (topic, partition), replicas in sorted(plan.items()):
        topics[topic].append(ReassignablePartition(partition_index=partition, replicas=replicas))
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=timeout_ms,
        topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()],
    )
    response = await send(target, request, ALTER_VERSION, timeout_ms + 5_000)
    if response.error_code:
        code, message = response.error_code, response.error_message
        return {tp: (code, message) for tp in plan}
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }


async def list_reassignments(
    target: Target, partitions: dict[str, list[int]] | None = None, timeout_ms: int = 30_000
) -> Ongoing:
    """The reassignments in progress (of ``partitions``, or all)."""
    request = ListPartitionReassignmentsRequest(
        timeout_ms=timeout_ms,
        topics=None
        if partitions is None
        else [
            ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
            for t, ps in partitions.items()
        ],
    )
    response = await send(target, request, LIST_VERSION, timeout_ms + 5_000)
    if response.error_code:
        raise ReassignmentError(error_text(response.error_code, response.error_message))
    return {
        t.name: {
            p.partition_index: {
                "replicas": list(p.replicas),
                "adding": list(p.adding_replicas),
                "removing": list(p.removing_replicas),
            }
            for p in t.partitions
        }
        for t in response.topics
    }


async def wait_done(target: Target, plan: Plan, timeout_s: float) -> Ongoing:
    """Poll until none of ``plan``'s partitions is being reassigned; what is left."""
    wanted: dict[str, list[int]] = defaultdict(list)
    for topic, partition in plan:
        wanted[topic].append(partition)
    deadline = time.monotonic() + timeout_s
    while True:
        ongoing = await list_reassignments(target, dict(wanted))
        if not any(ongoing.values()) or time.monotonic() > deadline:
            return {t: ps for t, ps in ongoing.items() if ps}
        await asyncio.sleep(0.2)


class ReassignmentError(Exception):
    """The request as a whole failed."""


def read_plan(path: Path) -> Plan:
    """kafka-reassign-partitions' JSON: ``{"version": 1, "partitions": [{"topic": "t",
    "partition": 0, "replicas": [1, 2, 3]}, ...]}``."""
    try:
        document = json.loads(path.read_text())
        return {
            (str(p["topic"]), int(p["partition"])): [int(r) for r in p["replicas"]]
            for p in document["partitions"]
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ReassignmentError(f"cannot read the reassignment plan {path}: {e}") from None


def parse_replicas(text: str) -> list[int]:
    try:
        return [int(r) for r in text.split(",") if r.strip()]
    except ValueError:
        raise ReassignmentError(f"--replicas wants broker ids like 1,2,3, not {text!r}") from None


def reassign(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="The topic.")] = None,
    partitions: Annotated[
        list[int] | None, typer.Option("--partition", "-p", help="A partition (repeatable).")
    ] = None,
    replicas: Annotated[
        str | None,
        typer.Option("--replicas", help="New replica list, preferred leader first: 1,2,3."),
    ] = None,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--reassignment-json-file", help="Several partitions, as kafka-reassign-partitions."
        ),
    ] = None,
    cancel: Annotated[
        bool, typer.Option("--cancel", help="Cancel the partitions' reassignments.")
    ] = False,
    list_them: Annotated[
        bool, typer.Option("--list", help="List the reassignments in progress.")
    ] = False,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Return once the new replicas caught up and the old left."),
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
) -> None:
    """Move partitions to other brokers (Kafka's kafka-reassign-partitions): new replicas
    catch up first, then the old ones leave. ``--list`` shows what is in progress."""
    target = Target.of(COMMAND, bootstrap, user_properties(properties, command_config))
    try:
        if list_them:
            wanted = {topic: sorted(set(partitions))} if topic and partitions else None

            async def listing() -> Ongoing:
                ongoing = await list_reassignments(target, wanted)
                return {t: ps for t, ps in ongoing.items() if topic in (None, t)}

            show_ongoing(run(COMMAND, target, listing), as_json)
            return
        plan = build_plan(topic, partitions, replicas, plan_file, cancel)

        async def execute() -> tuple[dict[tuple[str, int], tuple[int, str | None]], Ongoing]:
            results = await alter_reassignments(target, plan)
            started = {tp: r for tp, r in plan.items() if results.get(tp, (0, None))[0] == 0}
            left = await wait_done(target, started, timeout) if wait and started else {}
            return results, left

        results, left = run(COMMAND, target, execute)
    except ReassignmentError as e:
        fail(COMMAND, str(e))
    report(plan, results, left, wait, as_json)


def build_plan(
    topic: str | None,
    partitions: list[int] | None,
    replicas: str | None,
    plan_file: Path | None,
    cancel: bool,
) -> Plan:
    if plan_file is not None:
        if topic is not None or replicas is not None:
            fail(COMMAND, "--reassignment-json-file replaces --topic/--partition/--replicas")
        plan = read_plan(plan_file)
        return dict.fromkeys(plan) if cancel else dict(plan)
    if topic is None or not partitions:
        fail(COMMAND, "give --topic and --partition (or --reassignment-json-file), or --list")
    if cancel == (replicas is not None):
        fail(COMMAND, "give either --replicas or --cancel")
    new = None if replicas is None else parse_replicas(replicas)
    return {(topic, p): new for p in sorted(set(partitions))}


def report(
    plan: Plan,
    results: dict[tuple[str, int], tuple[int, str | None]],
    left: Ongoing,
    waited: bool,
    as_json: bool,
) -> None:
    failed = {
        f"{t}-{p}": error_text(code, message)
        for (t, p), (code, message) in sorted(results.items())
        if code
    }
    ok = [f"{t}-{p}" for (t, p) in sorted(plan) if f"{t}-{p}" not in failed]
    unfinished = [f"{t}-{p}" for t, ps in sorted(left.items()) for p in sorted(ps)]
    verb = "cancelled" if all(r is None for r in plan.values()) else "started"
    if as_json:
        out: dict[str, Any] = {verb: ok, "failed": failed}
        if waited:
            out["unfinished"] = unfinished
        typer.echo(json.dumps(out, indent=2))
    else:
        if ok:
            typer.echo(f"Reassignment {verb} for partitions {', '.join(ok)}")
        if waited and ok and not unfinished and verb == "started":
            typer.echo(f"Reassignment complete for partitions {', '.join(ok)}")
        if unfinished:
            typer.echo(f"Still being reassigned: {', '.join(unfinished)}", err=True)
        for name, error in failed.items():
            typer.echo(f"Error reassigning partition {name}: {error}", err=True)
    if failed or unfinished:
        raise typer.Exit(1)


def show_ongoing(ongoing: Ongoing, as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                {t: {str(p): r for p, r in ps.items()} for t, ps in ongoing.items()}, indent=2
            )
        )
        return
    if not any(ongoing.values()):
        typer.echo("No partition reassignment is in progress")
        return
    table = Table("topic", "partition", "replicas", "adding", "removing", title="reassignments")
    for topic, parts in sorted(ongoing.items()):
        for p, r in sorted(parts.items()):
            table.add_row(
                topic,
                str(p),
                ",".join(map(str, r["replicas"])),
                ",".join(map(str, r["adding"])),
                ",".join(map(str, r["removing"])),
            )
    Console().print(table)
