"""ListPartitionReassignments: the reassignments under way, from the controller."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0

handle = to_controller
