"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on topic and broker configs."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_controller
