"""`moldau groups`: inspect consumer groups and manage their offsets (like kafka-consumer-groups.sh)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, MemberAssignment

from moldau.admin.offsets import reset_target
from moldau.admin.share_groups import ShareGroupView, describe_share_group, share_group_states
from moldau.admin.share_in_flight import share_in_flight, total
from moldau.cli.common import (
    ADMIN_TIMEOUTS,
    DEFAULT_BOOTSTRAP,
    REQUEST_TIMEOUT_S,
    BootstrapOption,
    CommandConfigOption,
    JsonOption,
    PropertyOption,
    admin_client,
    check,
    consumer_client,
    describe_error,
    err,
    fail,
    kafka_errors,
    metrics_urls,
    out,
    print_json,
    print_kv,
    report_each,
    result,
    table,
    topic_metadata,
    user_properties,
    watermarks,
)
from moldau.cli.wire import Target, run

app = typer.Typer(
    help="List, describe, reset offsets of and delete consumer groups.", no_args_is_help=True
)

Partition = tuple[str, int]
_INACTIVE = {ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD}


@app.command("list")
def list_groups(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """List consumer groups and their states."""
    admin = admin_client(bootstrap, properties, command_config)
    listing = result(admin.list_consumer_groups(**ADMIN_TIMEOUTS))
    if listing.errors and not listing.valid:
        fail(describe_error(listing.errors[0]))
    for error in listing.errors:
        err.print(f"Warning: {describe_error(error)}")
    target = Target.of("groups list", bootstrap, user_properties(properties, command_config))
    shares = run("groups list", target, lambda: share_group_states(target.servers, target.security))
    rows = sorted(
        [
            (g.group_id, _type(g.type), _state(g.state), g.is_simple_consumer_group)
            for g in listing.valid
            if g.group_id not in shares
        ]
        + [(group, "share", state.upper(), False) for group, state in shares.items()]
    )
    if json_output:
        print_json(
            [
                {"group": group, "type": kind, "state": state, "simple": simple}
                for group, kind, state, simple in rows
            ]
        )
        return
    grid = table("GROUP", "TYPE", "STATE", "SIMPLE")
    for group, kind, state, simple in rows:
        grid.add_row(group, kind, state, "yes" if simple else "no")
    out.print(grid)


@app.command()
def describe(
    group: str,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
    json_output: JsonOption = False,
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            metavar="URL",
            help="Share groups: Prometheus endpoint of a broker to read records in flight "
            "from (repeatable, or comma-separated); by default each partition leader's "
            "metrics.port.",
        ),
    ] = None,
) -> None:
    """Show members, assignments, committed offsets, log end offsets and lag per partition;
    for a KIP-848 consumer group also each member's current and target assignment; for a
    share group the records in flight (acquired, not yet acknowledged) per partition."""
    target = Target.of("groups describe", bootstrap, user_properties(properties, command_config))
    share = run(
        "groups describe",
        target,
        lambda: describe_share_group(target.servers, target.security, group),
    )
    if share is not None:
        held = run(
            "groups describe",
            target,
            lambda: share_in_flight(
                target.servers,
                target.security,
                group,
                [(o.topic, o.partition) for o in share.offsets if o.error is None],
                metrics_urls(metrics),
            ),
        )
        _print_share_group(share, held, bootstrap, properties, command_config, json_output)
        return
    admin = admin_client(bootstrap, properties, command_config)
    description = _describe(admin, group)
    committed = _committed(admin, group)
    if description is None and not committed:
        fail(f"GROUP_ID_NOT_FOUND: consumer group {group!r} does not exist")
    members = description.members if description else []
    owners = {
        (tp.topic, tp.partition): member
        for member in members
        for tp in member.assignment.topic_partitions
    }
    state = _state(description.state if description else ConsumerGroupState.DEAD)
    coordinator = description.coordinator.id if description else None
    group_type = _type(description.type) if description else "-"
    consumer = consumer_client(bootstrap, properties, command_config=command_config)
    rows = []
    try:
        for topic, partition in sorted(committed.keys() | owners.keys()):
            _, end = watermarks(consumer, TopicPartition(topic, partition))
            current = committed.get((topic, partition))
            member = owners.get((topic, partition))
            rows.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "current_offset": current,
                    "log_end_offset": end,
                    "lag": None if current is None else max(end - current, 0),
                    "consumer_id": member.member_id if member else None,
                    "host": member.host if member else None,
                    "client_id": member.client_id if member else None,
                }
            )
    finally:
        consumer.close()
    if json_output:
        print_json(
            {
                "group": group,
                "type": group_type,
                "state": state,
                "coordinator": coordinator,
                "members": [
                    {
                        "consumer_id": m.member_id,
                        "host": m.host,
                        "client_id": m.client_id,
                        "assignment": [
                            {"topic": tp.topic, "partition": tp.partition}
                            for tp in m.assignment.topic_partitions
                        ],
                        "target_assignment": None
                        if m.target_assignment is None
                        else [
                            {"topic": tp.topic, "partition": tp.partition}
                            for tp in m.target_assignment.topic_partitions
                        ],
                    }
                    for m in members
                ],
                "offsets": rows,
            }
        )
        return
    print_kv(
        f"Group: {group}",
        {
            "Type": group_type,
            "State": state,
            "Members": len(members),
            "Coordinator": _or_dash(coordinator),
        },
    )
    grid = table(
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    for row in rows:
        grid.add_row(*(_or_dash(v) for v in row.values()))
    for member in members:
        if not member.assignment.topic_partitions:
            grid.add_row("-", "-", "-", "-", "-", member.member_id, member.host, member.client_id)
    out.print(grid)
    if any(m.target_assignment is not None for m in members):
        reconciling = table("CONSUMER-ID", "CLIENT-ID", "ASSIGNMENT", "TARGET-ASSIGNMENT")
        for m in members:
            reconciling.add_row(
                m.member_id,
                m.client_id,
                _partitions(m.assignment),
                _partitions(m.target_assignment),
            )
        out.print(reconciling)


def _print_share_group(
    share: ShareGroupView,
    held: dict[tuple[str, int], int | None],
    bootstrap: str,
    properties: list[str] | None,
    command_config: Path | None,
    json_output: bool,
) -> None:
    """A share group: members, and per share-partition its start offset (SPSO), the log
    end offset, the lag (records up to the end not yet acknowledged or archived) and the
    records in flight (``held``: acquired by members, not yet acknowledged; None where
    the leader's metrics could not be read)."""
    consumer = consumer_client(bootstrap, properties, command_config=command_config)
    try:
        ends = {
            (o.topic, o.partition): watermarks(consumer, TopicPartition(o.topic, o.partition))[1]
            for o in share.offsets
            if o.error is None
        }
    finally:
        consumer.close()
    rows = [
        {
            "topic": o.topic,
            "partition": o.partition,
            "start_offset": o.start_offset,
            "log_end_offset": ends.get((o.topic, o.partition)),
            "lag": o.lag if o.lag >= 0 else None,
            "in_flight": held.get((o.topic, o.partition)),
            "error": o.error,
        }
        for o in share.offsets
    ]
    in_flight = total(held.get((o.topic, o.partition)) for o in share.offsets)
    if json_output:
        print_json(
            {
                "group": share.group,
                "type": "share",
                "state": share.state.upper(),
                "coordinator": share.coordinator,
                "members": [
                    {
                        "consumer_id": m.member_id,
                        "host": m.host,
                        "client_id": m.client_id,
                        "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
                    }
                    for m in share.members
                ],
                "offsets": rows,
                "in_flight": in_flight,
            }
        )
        return
    print_kv(
        f"Group: {share.group}",
        {
            "Type": "share",
            "State": share.state.upper(),
            "Members": len(share.members),
            "Coordinator": share.coordinator,
            "In-flight": _or_dash(in_flight),
        },
    )
    grid = table("TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "LAG", "IN-FLIGHT")
    for row in rows:
        grid.add_row(*(_or_dash(row[k]) for k in list(row)[:6]))
    out.print(grid)
    members = table("CONSUMER-ID", "HOST", "CLIENT-ID", "ASSIGNMENT")
    for m in share.members:
        members.add_row(
            m.member_id, m.host, m.client_id, ",".join(f"{t}-{p}" for t, p in m.assignment) or "-"
        )
    out.print(members)
    for row in rows:
        if row["error"]:
            err.print(f"Warning: {row['topic']}-{row['partition']}: {row['error']}")


@app.command("reset-offsets")
def reset_offsets(
    group: str,
    topic: Annotated[
        list[str],
        typer.Option(
            "--topic",
            "-t",
            metavar="TOPIC[:P,P...]",
            help="Topic, optionally some partitions (repeatable).",
        ),
    ],
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="Log start offsets.")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="Log end offsets.")] = False,
    to_datetime: Annotated[
        str | None,
        typer.Option(metavar="ISO", help="First offset at/after this time (local unless zoned)."),
    ] = None,
    to_offset: Annotated[int | None, typer.Option(min=0)] = None,
    shift_by: Annotated[
        int | None, typer.Option(metavar="N", help="Move the committed offset by N.")
    ] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="Apply the plan (default: dry run).")
    ] = False,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """Plan (or with --execute, commit) new offsets for an inactive group.

    Targets outside a partition's log are clamped to its start/end, as Kafka does.
    """
    chosen = {
        "earliest": to_earliest,
        "latest": to_latest,
        "timestamp": to_datetime is not None,
        "offset": to_offset is not None,
        "shift": shift_by is not None,
    }
    if sum(chosen.values()) != 1:
        raise typer.BadParameter(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by"
        )
    strategy = next(name for name, on in chosen.items() if on)
    timestamp_ms = _parse_datetime(to_datetime) if to_datetime is not None else None
    value = {"offset": to_offset, "shift": shift_by, "timestamp": timestamp_ms}.get(strategy)
    admin = admin_client(bootstrap, properties, command_config)
    description = _describe(admin, group)
    if description is not None and (description.state not in _INACTIVE or description.members):
        fail(
            f"assignments can only be reset if the group {group!r} is inactive, "
            f"but the current state is {_state(description.state)}"
        )
    partitions = [tp for spec in topic for tp in _resolve(admin, spec)]
    committed = _committed(admin, group)
    consumer = consumer_client(bootstrap, properties, command_config=command_config)
    try:
        bounds = {(tp.topic, tp.partition): watermarks(consumer, tp) for tp in partitions}
        if timestamp_ms is not None:
            by_time = _offsets_at(consumer, partitions, timestamp_ms)
    finally:
        consumer.close()

    plan = []
    for key, (low, high) in bounds.items():
        try:
            offset = reset_target(
                strategy,
                current=committed.get(key),
                low=low,
                high=high,
                value=value,
                at_time=by_time[key] if timestamp_ms is not None else -1,
            )
        except ValueError as exc:
            fail(f"{key[0]}-{key[1]}: {exc}")
        plan.append(TopicPartition(*key, offset))
    if json_output:
        print_json(
            {
                "group": group,
                "executed": execute,
                "plan": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "current_offset": committed.get((tp.topic, tp.partition)),
                        "new_offset": tp.offset,
                    }
                    for tp in plan
                ],
            }
        )
    else:
        grid = table("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
        for tp in plan:
            grid.add_row(
                group,
                tp.topic,
                str(tp.partition),
                _or_dash(committed.get((tp.topic, tp.partition))),
                str(tp.offset),
            )
        out.print(grid)
    if not execute:
        err.print("Dry run: nothing changed; add --execute to apply.")
        return
    request = ConsumerGroupTopicPartitions(group, plan)
    altered = result(
        admin.alter_consumer_group_offsets([request], **ADMIN_TIMEOUTS)[group], f"group {group!r}: "
    )
    for tp in altered.topic_partitions:
        check(tp.error, f"{tp.topic}-{tp.partition}: ")
    err.print(f"Reset offsets of group {group} for {len(plan)} partitions.")


@app.command()
def delete(
    groups: Annotated[list[str], typer.Argument(help="Groups to delete.")],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete inactive consumer groups and their committed offsets."""
    admin = admin_client(bootstrap, properties, command_config)
    deleted = admin.delete_consumer_groups(groups, **ADMIN_TIMEOUTS)
    report_each(deleted, groups, "cannot delete group {!r}: ", "Deleted consumer group {}.")


def _describe(admin: AdminClient, group: str) -> ConsumerGroupDescription | None:
    """The group's description, or None if the broker knows no such group."""
    future = admin.describe_consumer_groups([group], **ADMIN_TIMEOUTS)[group]
    with kafka_errors(f"group {group!r}: "):
        try:
            description = future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                raise
            return None
    return None if description.state == ConsumerGroupState.DEAD else description


def _committed(admin: AdminClient, group: str) -> dict[Partition, int]:
    request = [ConsumerGroupTopicPartitions(group)]
    future = admin.list_consumer_group_offsets(request, **ADMIN_TIMEOUTS)[group]
    offsets = result(future, f"group {group!r}: ")
    return {
        (tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions if tp.offset >= 0
    }


def _resolve(admin: AdminClient, spec: str) -> list[TopicPartition]:
    """`topic` (all its partitions) or `topic:0,2` (those) as TopicPartitions."""
    name, _, numbers = spec.partition(":")
    try:
        wanted = [int(n) for n in numbers.split(",")] if numbers else []
    except ValueError:
        raise typer.BadParameter(
            f"expected TOPIC[:P,P...], got {spec!r}", param_hint="--topic"
        ) from None
    existing = topic_metadata(admin, name, wanted).partitions
    return [TopicPartition(name, p) for p in wanted or sorted(existing)]


def _offsets_at(
    consumer: Consumer, partitions: list[TopicPartition], timestamp_ms: int
) -> dict[Partition, int]:
    """First offset with a timestamp >= timestamp_ms per partition (-1: none that late)."""
    query = [TopicPartition(tp.topic, tp.partition, timestamp_ms) for tp in partitions]
    with kafka_errors("offsets for time: "):
        found = consumer.offsets_for_times(query, timeout=REQUEST_TIMEOUT_S)
    for tp in found:
        check(tp.error, f"{tp.topic}-{tp.partition}: ")
    return {(tp.topic, tp.partition): tp.offset for tp in found}


def _parse_datetime(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"not an ISO-8601 date-time: {text!r}", param_hint="--to-datetime"
        ) from None
    return int(moment.timestamp() * 1000)


def _state(state: object) -> str:
    return state.name if isinstance(state, ConsumerGroupState) else str(state)


def _type(group_type: object) -> str:
    """classic / consumer (KIP-848) / share, as Kafka's tools print it."""
    name = getattr(group_type, "name", str(group_type))
    return name.lower() if name != "UNKNOWN" else "-"


def _partitions(assignment: MemberAssignment | None) -> str:
    if assignment is None or not assignment.topic_partitions:
        return "-"
    return ",".join(f"{tp.topic}:{tp.partition}" for tp in assignment.topic_partitions)


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)
