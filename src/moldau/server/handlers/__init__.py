"""One module per Kafka API, listed in ``_MODULES``. Each declares, on one line,
``API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.X, low, high`` (the versions it
implements), optionally ``ADVERTISED_MIN_VERSION``, and ``handle``: either
``async def handle(services, ctx, request) -> response | None`` (None: send nothing) or,
for what only the controller decides, ``handle = to_controller`` (:mod:`.forward`).
Handlers see the node only through :class:`~moldau.server.services.Services`.
"""

from __future__ import annotations

from collections.abc import Collection
from types import ModuleType

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.messages.api_versions_response import ApiVersion
from moldau.server.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_share_group_state,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    initialize_share_group_state,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    read_share_group_state,
    read_share_group_state_summary,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
    update_features,
    write_share_group_state,
    write_txn_markers,
)

_MODULES: list[ModuleType] = [
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    alter_configs,
    incremental_alter_configs,
    describe_cluster,
    delete_records,
    init_producer_id,
    find_coordinator,
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    describe_quorum,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    txn_offset_commit,
    write_txn_markers,
    describe_transactions,
    list_transactions,
    describe_producers,
    describe_topic_partitions,
    sasl_handshake,
    sasl_authenticate,
    describe_acls,
    create_acls,
    delete_acls,
    describe_client_quotas,
    alter_client_quotas,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    update_features,
    offset_for_leader_epoch,
    describe_log_dirs,
    alter_replica_log_dirs,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
    consumer_group_heartbeat,
    consumer_group_describe,
]


HANDLERS: dict[int, ModuleType] = {int(m.API_KEY): m for m in _MODULES}


_PROTOCOL_APIS: dict[str, frozenset[int]] = {
    "consumer": frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}),
}
"""The APIs of a group rebalance protocol, as Kafka exposes them only when it is enabled."""


def disabled_apis(rebalance_protocols: Collection[str]) -> frozenset[int]:
    """APIs of the protocols missing from ``group.coordinator.rebalance.protocols``: not
    advertised, and their handlers answer UNSUPPORTED_VERSION."""
    return frozenset(
        key
        for protocol, keys in _PROTOCOL_APIS.items()
        if protocol not in rebalance_protocols
        for key in keys
    )


def advertised_versions(disabled: Collection[int] = ()) -> list[ApiVersion]:
    return [
        ApiVersion(
            api_key=key,
            min_version=getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION),
            max_version=m.MAX_VERSION,
        )
        for key, m in sorted(HANDLERS.items())
        if key not in disabled
    ]
