"""UpdateFeatures: finalize a feature level (``metadata.version``); the controller decides."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.UPDATE_FEATURES, 0, 1

handle = to_controller
