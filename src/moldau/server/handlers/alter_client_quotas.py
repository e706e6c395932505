"""AlterClientQuotas (KIP-546): ALTER_CONFIGS on the cluster; the controller validates each
entity and writes ClientQuotaRecords."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ALTER_CLIENT_QUOTAS, 0, 1

handle = to_controller
