"""DescribeQuorum: the controller quorum's leader, epoch and voters' progress, from the
active controller (``kafka-metadata-quorum`` and ``moldau cluster describe`` ask it)."""

from __future__ import annotations

from moldau.protocol.api_keys import ApiKey
from moldau.server.handlers.forward import to_controller

API_KEY, MIN_VERSION, MAX_VERSION = ApiKey.DESCRIBE_QUORUM, 0, 2

handle = to_controller
