"""DeleteAcls: ALTER on the cluster; the controller removes every ACL each filter matches."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DELETE_ACLS, 0, 3

handle = to_controller
