"""`moldau topics`: create, list, describe, alter and delete topics (like kafka-topics.sh)."""

from __future__ import annotations

from typing import Annotated

import typer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
    TopicMetadata,
)

from moldau.admin.tiers import PartitionTiers, describe_tiers
from moldau.cli.common import (
    ADMIN_TIMEOUTS,
    DEFAULT_BOOTSTRAP,
    TOPIC_OP_TIMEOUTS,
    BootstrapOption,
    CommandConfigOption,
    JsonOption,
    PropertyOption,
    admin_client,
    client_config,
    cluster_metadata,
    out,
    parse_pairs,
    print_json,
    print_kv,
    report_each,
    result,
    table,
    topic_metadata,
)

app = typer.Typer(help="Create, list, describe, alter and delete topics.", no_args_is_help=True)

ConfigOption = Annotated[
    list[str] | None,
    typer.Option("--config", "-c", metavar="KEY=VALUE", help="Topic config (repeatable)."),
]


@app.command()
def create(
    name: str,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", min=1, help="Partition count [default: broker's]."),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option("--replication-factor", "-r", min=1, help="[default: broker's]."),
    ] = None,
    config: ConfigOption = None,
    if_not_exists: Annotated[
        bool, typer.Option("--if-not-exists", help="Succeed if the topic already exists.")
    ] = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Create a topic."""
    configs = parse_pairs(config, "--config")
    admin = admin_client(bootstrap, properties, command_config)
    if if_not_exists and name in cluster_metadata(admin).topics:
        out.print(f"Topic {name} already exists.")
        return
    # -1 asks the broker for its num.partitions / default.replication.factor (KIP-464).
    topic = NewTopic(
        name,
        num_partitions=partitions or -1,
        replication_factor=replication_factor or -1,
        config=configs,
    )
    futures = admin.create_topics([topic], **TOPIC_OP_TIMEOUTS)
    result(futures[name], f"cannot create topic {name!r}: ")
    out.print(f"Created topic {name}.")


@app.command("list")
def list_topics(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    exclude_internal: Annotated[
        bool,
        typer.Option("--exclude-internal", help="Hide internal topics such as __consumer_offsets."),
    ] = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """List topics with their partition counts."""
    topics = cluster_metadata(admin_client(bootstrap, properties, command_config)).topics
    names = [n for n in sorted(topics) if not (exclude_internal and _is_internal(n))]
    if json_output:
        print_json(
            [
                {"topic": n, "partitions": len(topics[n].partitions), "internal": _is_internal(n)}
                for n in names
            ]
        )
        return
    grid = table("TOPIC", "PARTITIONS")
    for name in names:
        grid.add_row(name, str(len(topics[name].partitions)))
    out.print(grid)


@app.command()
def describe(
    names: Annotated[list[str] | None, typer.Argument(help="Topics [default: all].")] = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show partitions (leader, replicas, ISR) and non-default configs of topics."""
    admin = admin_client(bootstrap, properties, command_config)
    if names:
        topics = [topic_metadata(admin, name) for name in names]
    else:
        everything = cluster_metadata(admin).topics
        topics = [everything[name] for name in sorted(everything) if not _is_internal(name)]
    overrides = _config_overrides(admin, [str(t.topic) for t in topics])
    brokers = cluster_metadata(admin).brokers
    tiered = [t for t in topics if overrides[str(t.topic)].get("remote.storage.enable") == "true"]
    tiers = (
        describe_tiers(
            admin,
            tiered,
            brokers,
            client_config(bootstrap, properties, command_config=command_config),
        )
        if tiered
        else {}
    )
    if json_output:
        print_json(
            [
                _topic_json(topic, overrides[str(topic.topic)], tiers.get(str(topic.topic)))
                for topic in topics
            ]
        )
        return
    for topic in topics:
        _print_topic(topic, overrides[str(topic.topic)], tiers.get(str(topic.topic)))


@app.command()
def alter(
    name: str,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", min=1, help="New (larger) partition count."),
    ] = None,
    config: ConfigOption = None,
    delete_config: Annotated[
        list[str] | None,
        typer.Option("--delete-config", metavar="KEY", help="Revert a config to its default."),
    ] = None,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Add partitions to a topic and/or change its configs."""
    configs = parse_pairs(config, "--config")
    if partitions is None and not configs and not delete_config:
        raise typer.BadParameter("give --partitions, --config or --delete-config")
    admin = admin_client(bootstrap, properties, command_config)
    if partitions is not None:
        futures = admin.create_partitions([NewPartitions(name, partitions)], **TOPIC_OP_TIMEOUTS)
        result(futures[name], f"cannot add partitions to {name!r}: ")
        out.print(f"Topic {name} now has {partitions} partitions.")
    if configs or delete_config:
        entries = [
            *(
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in configs.items()
            ),
            *(
                ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in delete_config or ()
            ),
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        altered = admin.incremental_alter_configs([resource], **ADMIN_TIMEOUTS)
        result(altered[resource], f"cannot alter configs of {name!r}: ")
        out.print(f"Updated configs of topic {name}.")


@app.command()
def delete(
    names: Annotated[list[str], typer.Argument(help="Topics to delete.")],
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete topics."""
    admin = admin_client(bootstrap, properties, command_config)
    report_each(
        admin.delete_topics(names, **TOPIC_OP_TIMEOUTS),
        names,
        "cannot delete topic {!r}: ",
        "Deleted topic {}.",
    )


def _is_internal(name: str) -> bool:
    return name.startswith("__")


def _config_overrides(admin: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    """Per topic, the configs set on the topic itself (kafka-topics --describe's `Configs:`)."""
    if not names:
        return {}
    resources = [ConfigResource(ResourceType.TOPIC, name) for name in names]
    futures = admin.describe_configs(resources, **ADMIN_TIMEOUTS)
    overrides = {}
    for resource, future in futures.items():
        entries = result(future, f"cannot describe configs of {resource.name!r}: ")
        overrides[resource.name] = {
            e.name: e.value
            for e in sorted(entries.values(), key=lambda e: e.name)
            if _is_override(e)
        }
    return overrides


def _is_override(entry: ConfigEntry) -> bool:
    # confluent-kafka hands the source over as a plain int.
    source = ConfigSource(entry.source)
    # Brokers answering without config sources (DescribeConfigs v0) only flag defaults.
    if source == ConfigSource.UNKNOWN_CONFIG:
        return not entry.is_default
    return source == ConfigSource.DYNAMIC_TOPIC_CONFIG


def _topic_json(
    topic: TopicMetadata,
    overrides: dict[str, str],
    tiers: dict[int, PartitionTiers | None] | None,
) -> dict:
    partitions = sorted(topic.partitions.values(), key=lambda p: p.id)
    rows = []
    for p in partitions:
        row = {"partition": p.id, "leader": p.leader, "replicas": p.replicas, "isr": p.isrs}
        tier = tiers.get(p.id) if tiers is not None else None
        if tier is not None:
            row |= {
                "log_start_offset": tier.log_start_offset,
                "local_log_start_offset": tier.local_log_start_offset,
                "highest_offset_in_remote_storage": tier.highest_offset_in_remote_storage,
                "log_end_offset": tier.log_end_offset,
                "local_size_bytes": tier.local_size_bytes,
                "remote_size_bytes": tier.remote_size_bytes,
                "remote_segments": tier.remote_segments,
            }
        rows.append(row)
    return {
        "topic": topic.topic,
        "partition_count": len(partitions),
        "replication_factor": len(partitions[0].replicas) if partitions else 0,
        "configs": overrides,
        "partitions": rows,
    }


def _print_topic(
    topic: TopicMetadata,
    overrides: dict[str, str],
    tiers: dict[int, PartitionTiers | None] | None,
) -> None:
    partitions = sorted(topic.partitions.values(), key=lambda p: p.id)
    print_kv(
        f"Topic: {topic.topic}",
        {
            "PartitionCount": len(partitions),
            "ReplicationFactor": len(partitions[0].replicas) if partitions else 0,
            "Configs": ",".join(f"{k}={v}" for k, v in overrides.items()),
        },
    )
    columns = ["PARTITION", "LEADER", "REPLICAS", "ISR"]
    if tiers is not None:
        columns += ["REMOTE", "REMOTE-SIZE", "LOCAL", "LOCAL-SIZE"]
    grid = table(*columns)
    for p in partitions:
        row = [str(p.id), str(p.leader), _ids(p.replicas), _ids(p.isrs)]
        if tiers is not None:
            tier = tiers.get(p.id)
            row += ["?"] * 4 if tier is None else _tier_cells(tier)
        grid.add_row(*row)
    out.print(grid)
    out.print()


def _tier_cells(tier: PartitionTiers) -> list[str]:
    """The remote and local offset ranges (first-last, "-" when empty) and sizes."""
    remote_end = tier.highest_offset_in_remote_storage
    local_end = tier.log_end_offset - 1
    return [
        f"{tier.log_start_offset}-{remote_end}" if remote_end >= tier.log_start_offset else "-",
        _size(tier.remote_size_bytes),
        f"{tier.local_log_start_offset}-{local_end}"
        if local_end >= tier.local_log_start_offset
        else "-",
        _size(tier.local_size_bytes),
    ]


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n} B"


def _ids(broker_ids: list[int]) -> str:
    return ",".join(map(str, broker_ids))
