"""CreatePartitions: grow a topic's partition count; decided by the controller."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3

handle = to_controller
