"""Options of a direct read of the remote tier (`remoteStorage.directRead`).

The storage manager is named and configured with the broker's own keys, so a job passes the
same settings the brokers run with: `remote.log.storage.manager.class.name` and the
`rsm.config.*` keys (prefix kept in the option name, stripped before `configure`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DIRECT_READ = "remotestorage.directread"
CLASS_NAME = "remote.log.storage.manager.class.name"
RSM_PREFIX = "rsm.config."
METADATA_TOPIC = "__remote_log_metadata"


@dataclass(frozen=True)
class RemoteOptions:
    class_name: str
    configs: dict[str, str] = field(default_factory=dict)


def parse_remote_options(
    opts: Mapping[str, str], *, streaming: bool, include_headers: bool
) -> RemoteOptions | None:
    """None unless `remoteStorage.directRead=true`; `opts` has lower-cased keys."""
    value = opts.get(DIRECT_READ, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"option remoteStorage.directRead must be true or false, got {value!r}")
    if value == "false":
        return None
    if streaming:
        raise ValueError("remoteStorage.directRead is for batch queries only")
    if include_headers:
        raise ValueError("remoteStorage.directRead does not read headers (includeHeaders=true)")
    class_name = opts.get(CLASS_NAME)
    if not class_name:
        raise ValueError(f"remoteStorage.directRead needs the option {CLASS_NAME}")
    configs = {k[len(RSM_PREFIX) :]: v for k, v in opts.items() if k.startswith(RSM_PREFIX)}
    return RemoteOptions(class_name, configs)
