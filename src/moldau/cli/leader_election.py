"""``moldau leader-election``: Kafka's kafka-leader-election, over the ElectLeaders API.

A preferred election hands a partition's leadership back to the first replica of its
assignment (when it is alive and in the ISR); an unclean one lets an out-of-sync replica
lead a partition that has no live ISR member, losing what it had not replicated.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Annotated, Any

import typer

from moldau.cli.common import (
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    PropertyOption,
    user_properties,
)
from moldau.cli.wire import Target, error_text, fail, run, send
from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election_type
ELECT_LEADERS_VERSION = 2
METADATA_VERSION = 12
COMMAND = "leader-election"


async def elect_leaders(
    target: Target,
    partitions: dict[str, list[int]] | None,
    election_type: int = PREFERRED,
    timeout_ms: int = 30_000,
) -> dict[str, dict[int, tuple[int, str | None]]]:
    """Run one election round: ``{topic: {partition: (error code, message)}}``.

    ``partitions`` None means every partition of the cluster (whose answer lists only the
    partitions an election changed or could not act on). A topic given with no partitions
    means all of its partitions (found in the cluster's metadata)."""
    if partitions is not None and any(not ps for ps in partitions.values()):
        partitions = {
            t: ps or await partitions_of(target, t, timeout_ms) for t, ps in partitions.items()
        }
    request = ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [TopicPartitions(topic=t, partitions=ps) for t, ps in partitions.items()],
        timeout_ms=timeout_ms,
    )
    response = await send(target, request, ELECT_LEADERS_VERSION, timeout_ms + 5_000)
    if response.error_code:
        raise ElectionError(error_text(response.error_code))
    results: dict[str, dict[int, tuple[int, str | None]]] = defaultdict(dict)
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            results[topic.topic][p.partition_id] = (p.error_code, p.error_message)
    return dict(results)


async def partitions_of(target: Target, topic: str, timeout_ms: int) -> list[int]:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    metadata = await send(target, request, METADATA_VERSION, timeout_ms)
    found = metadata.topics[0] if metadata.topics else None
    if found is None or found.error_code:
        code = found.error_code if found is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        raise ElectionError(f"topic {topic}: {error_text(code)}")
    return sorted(p.partition_index for p in found.partitions)


class ElectionError(Exception):
    """The request as a whole failed (not one partition)."""


def leader_election(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    preferred: Annotated[
        bool,
        typer.Option(
            "--preferred/--unclean",
            help="Preferred election (the first replica leads again) or unclean (an "
            "out-of-sync replica may lead a partition with no live ISR member).",
        ),
    ] = True,
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic", "-t", help="The topic (with --partition, or all of its partitions)."
        ),
    ] = None,
    partitions: Annotated[
        list[int] | None,
        typer.Option("--partition", "-p", help="A partition of --topic (repeatable)."),
    ] = None,
    all_partitions: Annotated[
        bool,
        typer.Option("--all", "--all-topic-partitions", help="Every partition of the cluster."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    command_config: CommandConfigOption = None,
    properties: PropertyOption = None,
) -> None:
    """Elect partition leaders (Kafka's kafka-leader-election): ``--preferred`` gives each
    partition back to its preferred replica."""
    if all_partitions == (topic is not None):
        fail(COMMAND, "give either --topic (with --partition, or all its partitions) or --all")
    if partitions and topic is None:
        fail(COMMAND, "--partition needs --topic")
    wanted = None if topic is None else {topic: sorted(set(partitions or []))}
    kind = PREFERRED if preferred else UNCLEAN
    target = Target.of(COMMAND, bootstrap, user_properties(properties, command_config))

    async def call() -> dict[str, dict[int, tuple[int, str | None]]]:
        return await elect_leaders(target, wanted, kind)

    try:
        results = run(COMMAND, target, call)
    except ElectionError as e:
        fail(COMMAND, str(e))
    report(results, "PREFERRED" if preferred else "UNCLEAN", as_json)


def report(results: dict[str, dict[int, tuple[int, str | None]]], kind: str, as_json: bool) -> None:
    """Print what happened, in kafka-leader-election's words; exit 1 if a partition failed."""
    elected, not_needed, failed = [], [], []
    for topic, outcomes in sorted(results.items()):
        for partition, (code, message) in sorted(outcomes.items()):
            name = f"{topic}-{partition}"
            if code == ErrorCode.NONE:
                elected.append(name)
            elif code == ErrorCode.ELECTION_NOT_NEEDED:
                not_needed.append(name)
            else:
                failed.append((name, error_text(code, message)))
    if as_json:
        out: dict[str, Any] = {
            "election_type": kind,
            "elected": elected,
            "not_needed": not_needed,
            "failed": dict(failed),
        }
        typer.echo(json.dumps(out, indent=2))
    else:
        if elected:
            typer.echo(
                f"Successfully completed leader election ({kind}) for partitions {', '.join(elected)}"
            )
        if not_needed:
            typer.echo(f"Valid replica already elected for partitions {', '.join(not_needed)}")
        if not (elected or not_needed or failed):
            typer.echo("No partition needed an election")
        for name, error in failed:
            typer.echo(
                f"Error completing leader election ({kind}) for partition {name}: {error}", err=True
            )
    if failed:
        raise typer.Exit(1)
