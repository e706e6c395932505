"""`moldau acls`: add, remove and list ACLs (like kafka-acls.sh), against any Kafka broker.

    moldau acls add --allow-principal User:alice --operation Read --topic orders
    moldau acls add --allow-principal User:bob --producer --topic orders --idempotent
    moldau acls add --allow-principal User:carol --consumer --topic orders --group billing
    moldau acls list --topic orders
    moldau acls remove --allow-principal User:alice --operation Read --topic orders --force

Resources are ``--topic``, ``--group``, ``--cluster`` and ``--transactional-id`` (each
repeatable), with ``--resource-pattern-type`` literal or prefixed (list and remove also
take any and match); DELEGATION_TOKEN ACLs need a client that knows the type
(librdkafka does not: use Kafka's kafka-acls.sh or the Java Admin). Operations are kafka-acls' names
(Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs,
AlterConfigs, IdempotentWrite, All); ``--producer`` and ``--consumer`` add the sets Kafka's
tool adds. Hosts default to ``*``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from moldau.cli.common import (
    ADMIN_TIMEOUTS,
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    JsonOption,
    PropertyOption,
    admin_client,
    out,
    print_json,
    result,
    table,
)

app = typer.Typer(help="Add, remove and list ACLs (like kafka-acls).", no_args_is_help=True)

CLUSTER_NAME = "kafka-cluster"
Names = Annotated[list[str] | None, typer.Option(metavar="NAME", show_default=False)]
Principals = Annotated[
    list[str] | None, typer.Option(metavar="PRINCIPAL", help="e.g. User:alice (repeatable).")
]
Hosts = Annotated[list[str] | None, typer.Option(metavar="HOST", help="Default: * (any).")]
Operations = Annotated[
    list[str] | None,
    typer.Option("--operation", metavar="OP", help="Read, Write, Describe, All... (repeatable)."),
]
PatternOption = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type", help="literal or prefixed (list/remove: also any, match)."
    ),
]
Entry = tuple[str | None, str | None, AclPermissionType]  # principal, host, permission


def _operation(name: str) -> AclOperation:
    key = "".join(c for c in name.upper() if c.isalpha())
    for op in AclOperation:
        if op.name.replace("_", "") == key and op not in (AclOperation.UNKNOWN, AclOperation.ANY):
            return op
    raise typer.BadParameter(f"unknown operation {name!r}", param_hint="--operation")


def _pattern(name: str, *, filtering: bool) -> ResourcePatternType:
    allowed = ["literal", "prefixed", *(["any", "match"] if filtering else [])]
    if name.lower() not in allowed:
        raise typer.BadParameter(
            f"{name!r} is not one of {', '.join(allowed)}", param_hint="--resource-pattern-type"
        )
    return ResourcePatternType[name.upper()]


def _resources(
    topic: list[str] | None,
    group: list[str] | None,
    cluster: bool,
    transactional_id: list[str] | None,
) -> list[tuple[ResourceType, str]]:
    return [
        *((ResourceType.TOPIC, t) for t in topic or []),
        *((ResourceType.GROUP, g) for g in group or []),
        *([(ResourceType.BROKER, CLUSTER_NAME)] if cluster else []),
        *((ResourceType.TRANSACTIONAL_ID, t) for t in transactional_id or []),
    ]


def _entries(
    allow_principal: list[str] | None,
    deny_principal: list[str] | None,
    allow_host: list[str] | None,
    deny_host: list[str] | None,
    any_host: str | None = "*",
) -> list[Entry]:
    """(principal, host, permission) of every principal and host given; ``any_host`` when
    no host is (``*`` to add, None, i.e. whatever host, to match)."""
    allow: list[str | None] = [*allow_host] if allow_host else [any_host]
    deny: list[str | None] = [*deny_host] if deny_host else [any_host]
    return [
        *((p, h, AclPermissionType.ALLOW) for p in allow_principal or [] for h in allow),
        *((p, h, AclPermissionType.DENY) for p in deny_principal or [] for h in deny),
    ]


def _bindings(
    resources: list[tuple[ResourceType, str]],
    entries: list[Entry],
    operations: list[AclOperation],
    pattern: ResourcePatternType,
    producer: bool,
    consumer: bool,
    idempotent: bool,
) -> list[AclBinding]:
    """What kafka-acls adds: the operations on every resource, plus the convenience sets."""
    wanted: list[tuple[ResourceType, str, AclOperation]] = [
        (r, n, op) for r, n in resources for op in operations
    ]
    topics = [(r, n) for r, n in resources if r == ResourceType.TOPIC]
    if producer:
        wanted += [
            (r, n, op)
            for r, n in topics
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
        ]
        wanted += [
            (r, n, op)
            for r, n in resources
            if r == ResourceType.TRANSACTIONAL_ID
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
        if idempotent:
            wanted.append((ResourceType.BROKER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE))
    if consumer:
        wanted += [
            (r, n, op) for r, n in topics for op in (AclOperation.READ, AclOperation.DESCRIBE)
        ]
        wanted += [(r, n, AclOperation.READ) for r, n in resources if r == ResourceType.GROUP]
    unique = dict.fromkeys(
        (r, n, principal, host or "*", op, permission)
        for r, n, op in wanted
        for principal, host, permission in entries
    )
    return [AclBinding(r, n, pattern, str(p), h, op, perm) for r, n, p, h, op, perm in unique]


def _name(value: object) -> str:
    """An enum member's name (confluent-kafka's bindings may hold enums, strings or ints)."""
    return str(getattr(value, "name", value))


def _kind(restype: object) -> str:
    """Kafka's name: confluent-kafka calls the cluster resource BROKER."""
    name = _name(restype)
    return "CLUSTER" if name == "BROKER" else name


def _show(b: AclBinding) -> str:
    return (
        f"{_kind(b.restype)}:{_name(b.resource_pattern_type)}:{b.name} "
        f"{_name(b.permission_type)} {b.principal} {_name(b.operation)} from {b.host}"
    )


@app.command()
def add(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    allow_principal: Principals = None,
    deny_principal: Principals = None,
    allow_host: Hosts = None,
    deny_host: Hosts = None,
    operation: Operations = None,
    topic: Names = None,
    group: Names = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster resource.")] = False,
    transactional_id: Names = None,
    resource_pattern_type: PatternOption = "literal",
    producer: Annotated[bool, typer.Option(help="Write, Describe, Create on topics.")] = False,
    consumer: Annotated[
        bool, typer.Option(help="Read, Describe on topics; Read on groups.")
    ] = False,
    idempotent: Annotated[bool, typer.Option(help="With --producer: IdempotentWrite.")] = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Add ACLs: every principal and host, for every operation, on every resource."""
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    resources = _resources(topic, group, cluster, transactional_id)
    if not entries or not resources:
        raise typer.BadParameter(
            "give a principal (--allow-principal/--deny-principal) and a resource"
        )
    if not (operation or producer or consumer):
        raise typer.BadParameter("give --operation, --producer or --consumer")
    bindings = _bindings(
        resources,
        entries,
        [_operation(o) for o in operation or []],
        _pattern(resource_pattern_type, filtering=False),
        producer,
        consumer,
        idempotent,
    )
    admin = admin_client(bootstrap, properties, command_config)
    futures = admin.create_acls(bindings, **ADMIN_TIMEOUTS)
    for binding, future in futures.items():
        result(future, f"cannot add {_show(binding)}: ")
        out.print(f"Added {_show(binding)}")


def _filters(
    resources: list[tuple[ResourceType, str]],
    entries: list[Entry],
    operations: list[AclOperation],
    pattern: ResourcePatternType,
) -> list[AclBindingFilter]:
    targets: list[tuple[ResourceType, str | None]] = list(resources) or [(ResourceType.ANY, None)]
    return [
        AclBindingFilter(r, n, pattern, principal, host, op, permission)  # type: ignore[arg-type]
        for r, n in targets
        for principal, host, permission in entries or [(None, None, AclPermissionType.ANY)]
        for op in operations or [AclOperation.ANY]
    ]


@app.command()
def remove(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    # The resources first: removing needs them, the rest narrows what is removed.
    topic: Names = None,
    group: Names = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster resource.")] = False,
    transactional_id: Names = None,
    resource_pattern_type: PatternOption = "literal",
    allow_principal: Principals = None,
    deny_principal: Principals = None,
    allow_host: Hosts = None,
    deny_host: Hosts = None,
    operation: Operations = None,
    force: Annotated[bool, typer.Option("--force", help="Do not ask for confirmation.")] = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Remove the ACLs matching the given principals, operations and resources."""
    resources = _resources(topic, group, cluster, transactional_id)
    if not resources:
        raise typer.BadParameter("give the resource(s) whose ACLs to remove")
    filters = _filters(
        resources,
        _entries(allow_principal, deny_principal, allow_host, deny_host, any_host=None),
        [_operation(o) for o in operation or []],
        _pattern(resource_pattern_type, filtering=True),
    )
    if not force:
        typer.confirm("Remove the matching ACLs?", abort=True)
    admin = admin_client(bootstrap, properties, command_config)
    removed = 0
    for future in admin.delete_acls(filters, **ADMIN_TIMEOUTS).values():
        for binding in result(future, "cannot remove ACLs: "):
            out.print(f"Removed {_show(binding)}")
            removed += 1
    if not removed:
        out.print("No ACL matched.")


@app.command("list")
def list_acls(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    principal: Annotated[str | None, typer.Option(help="Only this principal's ACLs.")] = None,
    topic: Names = None,
    group: Names = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The cluster resource.")] = False,
    transactional_id: Names = None,
    resource_pattern_type: PatternOption = "any",
    as_json: JsonOption = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """List ACLs (all, or those of the given resources and principal)."""
    filters = _filters(
        _resources(topic, group, cluster, transactional_id),
        [(principal, None, AclPermissionType.ANY)] if principal else [],
        [],
        _pattern(resource_pattern_type, filtering=True),
    )
    admin = admin_client(bootstrap, properties, command_config)
    found: dict[str, AclBinding] = {}
    for f in filters:
        for binding in result(admin.describe_acls(f, **ADMIN_TIMEOUTS), "cannot list ACLs: "):
            found[_show(binding)] = binding
    rows = sorted(found.values(), key=_show)
    if as_json:
        print_json([
            {"resource_type": _kind(b.restype),
             "name": b.name, "pattern_type": _name(b.resource_pattern_type), "principal": b.principal,
             "host": b.host, "operation": _name(b.operation), "permission": _name(b.permission_type)}
            for b in rows
        ])  # fmt: skip
        return
    t = table("RESOURCE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
    for b in rows:
        t.add_row(_kind(b.restype), _name(b.resource_pattern_type), b.name, b.principal, b.host,
                  _name(b.operation), _name(b.permission_type))  # fmt: skip
    out.print(t)
