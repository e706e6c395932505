"""AlterConfigs (legacy): the given configs replace all of a resource's overrides."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 2

handle = to_controller
