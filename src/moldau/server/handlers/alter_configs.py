"""AlterConfigs (legacy): the given configs replace all of a resource's overrides."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ALTER_CONFIGS, 0, 2

handle = to_controller
