"""ElectLeaders: preferred or unclean leader elections, decided by the controller."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ELECT_LEADERS, 0, 2

handle = to_controller
