"""AlterClientQuotas (KIP-546): ALTER_CONFIGS on the cluster; the controller validates each
entity and writes ClientQuotaRecords."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_controller
