"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on topic and broker configs."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1

handle = to_controller
