"""AlterPartitionReassignments (KIP-455): move replicas; the controller adds, catches up, removes."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0

handle = to_controller
