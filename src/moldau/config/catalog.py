"""Every broker and topic config, joined from Kafka's definitions and Moldau's: the one
table that DescribeConfigs, dynamic config validation and docs/configuration.md read.

A key is *acted on* when Moldau's definitions (``moldau.config.broker``,
``moldau.config.topic``) give it a meaning; every other Kafka key is accepted, validated
with Kafka's type and range, stored, described back, and listed here with the reason
Moldau does not act on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.config.broker import BROKER_KEYS, BrokerKey
from moldau.config.kafka import (
    CLUSTER_WIDE,
    KAFKA_BROKER_CONFIGS,
    PER_BROKER,
    READ_ONLY,
    KafkaKey,
)
from moldau.config.topic import BROKER_SYNONYMS, TOPIC_CONFIGS, ConfigDef

_PY_TYPES = {int: "int", bool: "boolean", str: "string"}

# Broker keys Moldau changes at run time when they are altered dynamically; other keys
# Kafka treats as dynamic are stored and described, and applied at the next start only if
# also set in the properties file (see docs/configuration.md).
# Kafka's broker keys that Moldau acts on without a definition of its own: read where they
# are used, from the dynamic configs (and, for the log-dir move quota, the properties file).
KAFKA_KEYS_ACTED = {
    "leader.replication.throttled.rate": "Bytes per second this broker sends to followers of "
    "the replicas in leader.replication.throttled.replicas (KIP-73; unset: unbounded).",
    "follower.replication.throttled.rate": "Bytes per second this broker fetches for the "
    "replicas in follower.replication.throttled.replicas (KIP-73; unset: unbounded).",
    "replica.alter.log.dirs.io.max.bytes.per.second": "Bytes per second this broker copies "
    "into future replicas moving between log dirs (AlterReplicaLogDirs).",
}

APPLIED_AT_RUN_TIME = frozenset(k for k, t in BROKER_SYNONYMS.items() if TOPIC_CONFIGS[t].acted) | {
    "log.cleaner.threads",
    "log.cleaner.backoff.ms",
    *KAFKA_KEYS_ACTED,
}

# Why Moldau does not act on a Kafka broker key: (prefix or exact name, reason), first
# match wins. Keep reasons short: they appear in DescribeConfigs and the reference.
_NOT_ACTED_ON: tuple[tuple[str, str], ...] = (
    ("zookeeper.", "ZooKeeper mode (removed in Kafka 4.0); Moldau runs KRaft only."),
    ("broker.id", "ZooKeeper-era broker ids; KRaft nodes use node.id."),
    (
        "control.plane.listener.name",
        "ZooKeeper-era controller channel; KRaft uses controller.listener.names.",
    ),
    ("log.message.format.version", "Deprecated by Kafka (ignored from 3.0 on); Moldau writes v2."),
    ("remote.", "Tiered storage settings."),
    ("log.local.retention.", "Tiered storage settings."),
    ("sasl.kerberos.", "GSSAPI (Kerberos) is not offered; Moldau has PLAIN and SCRAM."),
    ("sasl.oauthbearer.", "OAUTHBEARER is not offered; Moldau has PLAIN and SCRAM."),
    ("sasl.login.", "Java login modules; Moldau's SASL needs no login."),
    (
        "sasl.jaas.config",
        "Java JAAS; Moldau keeps SASL users as SCRAM credentials or in its own files.",
    ),
    ("sasl.client.callback.handler.class", "Java plug-in class."),
    ("sasl.server.callback.handler.class", "Java plug-in class."),
    ("ssl.", "Java TLS provider setting; Moldau uses the OpenSSL of Python's ssl module."),
    ("security.providers", "Java security providers."),
    (
        "principal.builder.class",
        "Java plug-in class; principals come from SASL or ssl.principal.mapping.rules.",
    ),
    ("delegation.token.", "Delegation tokens are not offered."),
    ("password.encoder.", "Dynamic passwords are stored as given; no encoder."),
    ("metric.reporters", "Java metrics reporters; Moldau serves Prometheus on metrics.port."),
    ("metrics.", "Java metrics library settings; Moldau serves Prometheus on metrics.port."),
    ("kafka.metrics.", "Java metrics reporters; Moldau serves Prometheus on metrics.port."),
    ("auto.include.jmx.reporter", "JMX is Java's; Moldau serves Prometheus on metrics.port."),
    ("telemetry.max.bytes", "Client telemetry (KIP-714) is not collected."),
    (
        "num.io.threads",
        "Java thread pool; Moldau serves requests on one event loop with worker threads.",
    ),
    (
        "num.network.threads",
        "Java thread pool; Moldau serves requests on one event loop with worker threads.",
    ),
    (
        "background.threads",
        "Java thread pool; Moldau serves requests on one event loop with worker threads.",
    ),
    ("num.replica.alter.log.dirs.threads", "Java thread pool for log-dir moves."),
    ("group.coordinator.threads", "Java thread pool; coordinators run on the event loop."),
    (
        "queued.max.requests",
        "Moldau bounds requests in flight by bytes (queued.max.request.bytes).",
    ),
    (
        "log.cleaner.io.buffer.load.factor",
        "The cleaner's key map is filled to Kafka's default, 0.9.",
    ),
    ("log.cleaner.io.", "The cleaner is not throttled and sizes its own buffers."),
    ("socket.", "Socket buffers and backlog are left to the operating system."),
    ("replica.socket.", "Socket buffers are left to the operating system."),
    ("fetch.purgatory.", "Java purgatory tuning; Moldau's delayed operations need none."),
    ("producer.purgatory.", "Java purgatory tuning; Moldau's delayed operations need none."),
    ("delete.records.purgatory.", "Java purgatory tuning; Moldau's delayed operations need none."),
    ("log.preallocate", "Segment files grow as written; they are not preallocated."),
    ("log.roll.jitter.", "Segments roll at segment.ms exactly, without random jitter."),
    (
        "log.message.downconversion.enable",
        "Moldau serves record batches v2 only; no down-conversion.",
    ),
    ("log.message.timestamp.", "Produce does not check timestamps against broker time."),
    ("alter.config.policy.class.name", "Java plug-in class; no policy is applied."),
    ("create.topic.policy.class.name", "Java plug-in class; no policy is applied."),
    (
        "client.quota.callback.class",
        "Java plug-in class; Moldau's quotas are Kafka's default ones.",
    ),
    ("alter.log.dirs.replication.quota.", "The log-dir move quota uses 11 windows of 1 s."),
    ("controller.quota.", "Controller mutation quotas are not applied."),
    ("group.consumer.", "KIP-848 groups use Moldau's fixed limits."),
    ("group.share.", "Share groups use Moldau's fixed limits."),
    ("group.coordinator.", "Coordinator tuning; Moldau writes each batch at once."),
    ("offsets.", "Not acted on by Moldau."),
    ("transaction.state.log.load.buffer.size", "Coordinator state loads in whole batches."),
    ("metadata.", "The metadata log keeps Moldau's own snapshot and retention schedule."),
    ("controller.", "KRaft tuning Moldau does not expose."),
    ("early.start.listeners", "Every listener opens once the node has caught up."),
    ("eligible.leader.replicas.enable", "Eligible leader replicas (KIP-966) are not offered."),
    ("security.inter.broker.protocol", "Use inter.broker.listener.name."),
)


def not_acted_on_reason(name: str) -> str:
    return next(
        (why for prefix, why in _NOT_ACTED_ON if name.startswith(prefix)), "Not acted on by Moldau."
    )


@dataclass(frozen=True)
class BrokerEntry:
    """One broker key: Kafka's facts (None: a Moldau-only key), Moldau's meaning."""

    name: str
    type: str  # Kafka's type name
    default: str | None  # Moldau's default
    update_mode: str  # Kafka's: read-only, per-broker, cluster-wide
    acted: bool
    doc: str  # what it does in Moldau, or why Moldau does not act on it
    kafka: KafkaKey | None

    @property
    def dynamic(self) -> bool:
        return self.update_mode != READ_ONLY


def _moldau_entry(spec: BrokerKey) -> BrokerEntry:
    kafka = KAFKA_BROKER_CONFIGS.get(spec.name)
    return BrokerEntry(
        spec.name,
        kafka.type if kafka else _PY_TYPES[spec.type],
        spec.default,
        kafka.update_mode or READ_ONLY if kafka else READ_ONLY,
        True,
        spec.doc,
        kafka,
    )


def _synonym_entry(name: str, d: ConfigDef) -> BrokerEntry:
    kafka = KAFKA_BROKER_CONFIGS.get(name)
    return BrokerEntry(
        name,
        kafka.type if kafka else d.type,
        d.default if d.first_synonym == name else None,
        kafka.update_mode or CLUSTER_WIDE if kafka else CLUSTER_WIDE,
        d.acted,
        d.doc,
        kafka,
    )


def _kafka_entry(k: KafkaKey) -> BrokerEntry:
    acted = k.name in KAFKA_KEYS_ACTED
    doc = KAFKA_KEYS_ACTED[k.name] if acted else not_acted_on_reason(k.name)
    return BrokerEntry(k.name, k.type, k.default, k.update_mode or READ_ONLY, acted, doc, k)


def _broker_catalog() -> dict[str, BrokerEntry]:
    entries = {k: _synonym_entry(k, TOPIC_CONFIGS[t]) for k, t in BROKER_SYNONYMS.items()}
    entries.update((k, _moldau_entry(spec)) for k, spec in BROKER_KEYS.items())
    for k in KAFKA_BROKER_CONFIGS.values():
        entries.setdefault(k.name, _kafka_entry(k))
    return dict(sorted(entries.items()))


BROKER_CATALOG = _broker_catalog()
PER_BROKER_KEYS = frozenset(k for k, e in BROKER_CATALOG.items() if e.update_mode == PER_BROKER)
