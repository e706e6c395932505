"""CreateAcls: ALTER on the cluster; decided by the controller (AccessControlEntryRecords)."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.CREATE_ACLS
MIN_VERSION = 0
MAX_VERSION = 3

handle = to_controller
