"""UpdateFeatures: finalize a feature level (``metadata.version``); the controller decides."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.UPDATE_FEATURES
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_controller
