"""DeleteTopics: by name (and by topic id from v6); decided by the controller."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DELETE_TOPICS, 1, 6

handle = to_controller
