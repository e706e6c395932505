"""A share group's records in flight per share-partition, for `moldau groups describe`
and the console.

No Kafka API returns them: a share-partition's delivery state lives on the partition's
leader, which exports it as metrics (KIP-1103). So this reads each leader's Prometheus
endpoint, the one ``--metrics`` names or else the one the leader's own ``metrics.port``
and ``metrics.host`` configs say (DescribeConfigs on the BROKER resource). A leader whose
endpoint is off or does not answer gives None ("-"), never an error: in-flight counts are
an extra, the rest of the description stands without them.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client.parser import text_string_to_metric_families

from moldau import metrics
from moldau.protocol.client import Address, NetworkClient
from moldau.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from moldau.security.client import ClientSecurity

log = logging.getLogger(__name__)

ACQUIRED = "moldau_share_partition_acquired_records"
APP_INFO = "kafka_server_app_info"
BROKER_RESOURCE = 4
SCRAPE_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_MS = 10_000
_WILDCARDS = ("", "0.0.0.0", "::")

TP = tuple[str, int]


def parse(text: str, group: str) -> tuple[int | None, dict[TP, int]]:
    """One scrape: the broker id it comes from (None: not a Moldau broker's endpoint) and
    the records acquired and not yet acknowledged per share-partition of ``group``."""
    broker: int | None = None
    acquired: dict[TP, int] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == APP_INFO and "broker_id" in s.labels:
                broker = int(s.labels["broker_id"])
            elif s.name == ACQUIRED and s.labels.get("group") == group:
                acquired[(s.labels["topic"], int(s.labels["partition"]))] = int(s.value)
    return broker, acquired


def in_flight(
    partitions: Iterable[TP],
    leaders: Mapping[TP, int],
    scrapes: Mapping[int, Mapping[TP, int]],
) -> dict[TP, int | None]:
    """Per partition, what its leader's endpoint reports; 0 when the leader answered
    without it (no member has fetched from it since the leader took over), None when the
    leader is unknown or its endpoint was not read."""
    out: dict[TP, int | None] = {}
    for tp in partitions:
        scrape = scrapes.get(leaders.get(tp, -1))
        out[tp] = None if scrape is None else scrape.get(tp, 0)
    return out


def total(counts: Iterable[int | None]) -> int | None:
    """A group's records in flight: None unless every partition's count is known."""
    known = list(counts)
    return None if not known or None in known else sum(c or 0 for c in known)


async def share_in_flight(
    servers: list[Address],
    security: ClientSecurity,
    group: str,
    partitions: Sequence[TP],
    metrics_urls: Sequence[str] = (),
) -> dict[TP, int | None]:
    """The records ``group``'s members hold (acquired, not yet acknowledged) per
    share-partition, read from the partition leaders' metrics endpoints."""
    if not partitions:
        return {}
    client = NetworkClient("moldau-admin", request_timeout_ms=REQUEST_TIMEOUT_MS, security=security)
    try:
        leaders, brokers = await _leaders(client, servers, {t for t, _ in partitions})
        urls = list(metrics_urls)
        if not urls:
            wanted = {leaders[tp] for tp in partitions if tp in leaders}
            found = [await _metrics_url(client, n, brokers[n]) for n in wanted if n in brokers]
            urls = [u for u in found if u is not None]
    finally:
        client.close()
    scrapes: dict[int, dict[TP, int]] = {}
    for text in await asyncio.gather(*(asyncio.to_thread(_fetch, u) for u in urls)):
        if text is not None:
            broker, acquired = parse(text, group)
            if broker is not None:
                scrapes[broker] = acquired
    return in_flight(partitions, leaders, scrapes)


async def _leaders(
    client: NetworkClient, servers: list[Address], topics: set[str]
) -> tuple[dict[TP, int], dict[int, Address]]:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=t) for t in sorted(topics)],
        allow_auto_topic_creation=False,
    )
    error: Exception = ConnectionError("no bootstrap server")
    for address in servers:
        try:
            metadata = await client.send(address, request, 12)
            break
        except (ConnectionError, TimeoutError, OSError) as e:
            error = e
    else:
        raise error
    leaders = {
        (t.name, p.partition_index): p.leader_id
        for t in metadata.topics
        if t.name is not None and not t.error_code
        for p in t.partitions
        if p.leader_id >= 0
    }
    return leaders, {b.node_id: (b.host, b.port) for b in metadata.brokers}


async def _metrics_url(client: NetworkClient, node_id: int, address: Address) -> str | None:
    """Where broker ``node_id`` serves its metrics, as its configs say; None if it serves
    none or cannot say."""
    resource = DescribeConfigsResource(
        resource_type=BROKER_RESOURCE,
        resource_name=str(node_id),
        configuration_keys=[metrics.PORT_KEY, metrics.HOST_KEY],
    )
    try:
        response = await client.send(address, DescribeConfigsRequest(resources=[resource]), 4)
    except (ConnectionError, TimeoutError, OSError) as e:
        log.info("metrics address of broker %d: %s", node_id, e or type(e).__name__)
        return None
    [result] = response.results
    configs = {c.name: c.value for c in result.configs}
    port = int(configs.get(metrics.PORT_KEY) or 0)
    if result.error_code or not 0 < port < 65536:
        return None
    host = configs.get(metrics.HOST_KEY) or ""
    return metrics.url(address[0] if host in _WILDCARDS else host, port)


def _fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            return str(response.read().decode())
    except (OSError, ValueError) as e:
        log.info("metrics of %s: %s", url, e)
        return None
