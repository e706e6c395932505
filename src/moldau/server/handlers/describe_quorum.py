"""DescribeQuorum: the controller quorum's leader, epoch and voters' progress, from the
active controller (``kafka-metadata-quorum`` and ``moldau cluster describe`` ask it)."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY = ApiKey.DESCRIBE_QUORUM
MIN_VERSION = 0
MAX_VERSION = 2

handle = to_controller
