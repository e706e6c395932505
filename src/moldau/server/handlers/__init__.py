"""One module per Kafka API. Each defines ``API_KEY``, ``MIN_VERSION``/``MAX_VERSION``
(the versions it implements), optionally ``ADVERTISED_MIN_VERSION``, and
``async def handle(services, ctx, request) -> response | None`` (None: send nothing).
Handlers see the node only through :class:`~moldau.server.services.Services`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from moldau.protocol.messages.api_versions_response import ApiVersion

_MODULES = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "delete_records",
    "init_producer_id",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_delete",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_quorum",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "write_txn_markers",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    "describe_topic_partitions",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "describe_client_quotas",
    "alter_client_quotas",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
]


def _load() -> dict[int, ModuleType]:
    modules = (importlib.import_module(f"{__name__}.{name}") for name in _MODULES)
    return {int(m.API_KEY): m for m in modules}


HANDLERS: dict[int, ModuleType] = _load()


def advertised_versions() -> list[ApiVersion]:
    return [
        ApiVersion(
            api_key=key,
            min_version=getattr(m, "ADVERTISED_MIN_VERSION", m.MIN_VERSION),
            max_version=m.MAX_VERSION,
        )
        for key, m in sorted(HANDLERS.items())
    ]
