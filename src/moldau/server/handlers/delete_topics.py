"""DeleteTopics: by name (and by topic id from v6); decided by the controller."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.DELETE_TOPICS
MIN_VERSION = 1
MAX_VERSION = 6

handle = to_controller
