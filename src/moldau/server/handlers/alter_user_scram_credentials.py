"""AlterUserScramCredentials: ALTER on the cluster; the controller turns each salted
password into UserScramCredentialRecords (salt, StoredKey, ServerKey, iterations)."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0

handle = to_controller
