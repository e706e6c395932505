"""DeleteAcls: ALTER on the cluster; the controller removes every ACL each filter matches."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.DELETE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3

handle = to_controller
