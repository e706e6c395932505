"""Broker configuration: Kafka's property names and defaults.

A properties file (``--config``) is read first, then ``-o key=value`` overrides. Broker
keys for topic-level settings (``log.segment.bytes`` ...) are defined once, in
``moldau.config.topic``; this module holds the broker-only keys Moldau acts upon. Every
other broker key Kafka defines (``moldau.config.kafka``) is accepted and validated with
Kafka's type and range, and listed as not acted upon (``moldau.config.catalog``).
"""

from __future__ import annotations

import builtins
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from moldau.config.kafka import KAFKA_BROKER_CONFIGS
from moldau.config.topic import BROKER_SYNONYMS, LogConfig, check_local_retention
from moldau.protocol.errors import KafkaError


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message says which and why."""


# Kafka's replica.selector.class for KIP-392 rack-aware fetching, the only one Moldau has.
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True)
class BrokerKey:
    """A broker key Moldau acts upon. ``why_default`` says why ``default`` differs from
    Kafka's (the tests hold every other default to Kafka's)."""

    name: str
    type: type
    default: str
    doc: str
    why_default: str = ""


# Security (moldau.security): listeners' protocols, TLS, SASL, authorizer, quotas. Each
# ssl.*/sasl.* key may be set for one listener as listener.name.<listener>.<key>.
SECURITY_KEYS = [
    BrokerKey(
        "listener.security.protocol.map",
        str,
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "Listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    ),
    BrokerKey("ssl.keystore.type", str, "JKS", "PEM or PKCS12 (JKS is not supported)."),
    BrokerKey("ssl.keystore.location", str, "", "Key and certificate chain file."),
    BrokerKey("ssl.keystore.password", str, "", "PKCS12 keystore password."),
    BrokerKey("ssl.key.password", str, "", "Password of an encrypted private key."),
    BrokerKey("ssl.keystore.certificate.chain", str, "", "Inline PEM certificate chain."),
    BrokerKey("ssl.keystore.key", str, "", "Inline PEM private key."),
    BrokerKey("ssl.truststore.type", str, "JKS", "PEM or PKCS12."),
    BrokerKey("ssl.truststore.location", str, "", "Trusted CA certificates file."),
    BrokerKey("ssl.truststore.password", str, "", "PKCS12 truststore password."),
    BrokerKey("ssl.truststore.certificates", str, "", "Inline PEM CA certificates."),
    BrokerKey("ssl.client.auth", str, "none", "Client certificates: none, requested, required."),
    BrokerKey(
        "ssl.enabled.protocols",
        str,
        "TLSv1.2,TLSv1.3",
        "TLS versions allowed.",
        "Kafka enables TLSv1.3 too where its JDK has it (the rendered default shows TLSv1.2).",
    ),
    BrokerKey(
        "ssl.protocol",
        str,
        "TLSv1.3",
        "TLS protocol (the versions are enabled.protocols).",
        "As ssl.enabled.protocols: the newest version the TLS library has.",
    ),
    BrokerKey("ssl.cipher.suites", str, "", "TLS 1.2 cipher suites (IANA or OpenSSL names)."),
    BrokerKey("ssl.endpoint.identification.algorithm", str, "https", "https: check host names."),
    BrokerKey("ssl.principal.mapping.rules", str, "DEFAULT", "Certificate subject -> user name."),
    BrokerKey("sasl.enabled.mechanisms", str, "GSSAPI", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512."),
    BrokerKey("sasl.mechanism.inter.broker.protocol", str, "GSSAPI", "Mechanism between brokers."),
    BrokerKey("sasl.mechanism.controller.protocol", str, "GSSAPI", "Mechanism to controllers."),
    BrokerKey(
        "sasl.server.max.receive.size", int, "524288", "Largest frame before authentication."
    ),
    BrokerKey("connections.max.reauth.ms", int, "0", "SASL session lifetime (0: unlimited)."),
    BrokerKey(
        "authorizer.class.name", str, "", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    ),
    BrokerKey("super.users", str, "", "Principals allowed everything: User:a;User:b."),
    BrokerKey("allow.everyone.if.no.acl.found", bool, "false", "Allow where no ACL applies."),
    BrokerKey("quota.window.num", int, "11", "Samples a client quota rate is measured over."),
    BrokerKey("quota.window.size.seconds", int, "1", "Length of one quota sample."),
]
LISTENER_SCOPED = re.compile(
    r"^listener\.name\.[^.]+\.(?:[a-z0-9-]+\.sasl\.jaas\.config|(?P<key>.+))$"
)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# Tiered storage (KIP-405): Kafka's RemoteLogManagerConfig keys and defaults. Keys under
# remote.log.storage.manager.impl.prefix (rsm.config.) go to the remote storage manager,
# those under remote.log.metadata.manager.impl.prefix (rlmm.config.) to the metadata manager.
REMOTE_STORAGE_MANAGER_PREFIX = "rsm.config."
REMOTE_LOG_METADATA_MANAGER_PREFIX = "rlmm.config."
REMOTE_LOG_KEYS = [
    BrokerKey(
        "remote.log.storage.system.enable",
        bool,
        "false",
        "Enable tiered storage on this broker; topics opt in with remote.storage.enable.",
    ),
    BrokerKey(
        "remote.log.storage.manager.class.name",
        str,
        "",
        "Remote storage manager: file, s3, or a Python 'package.module:Class'.",
    ),
    BrokerKey(
        "remote.log.storage.manager.impl.prefix",
        str,
        REMOTE_STORAGE_MANAGER_PREFIX,
        "Prefix of the keys passed (without it) to the remote storage manager.",
    ),
    BrokerKey(
        "remote.log.metadata.manager.class.name",
        str,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        "Remote log metadata manager (Moldau has the topic-based one).",
    ),
    BrokerKey(
        "remote.log.metadata.manager.impl.prefix",
        str,
        REMOTE_LOG_METADATA_MANAGER_PREFIX,
        "Prefix of the keys passed (without it) to the remote log metadata manager.",
    ),
    BrokerKey(
        "remote.log.metadata.topic.replication.factor",
        int,
        "3",
        "Replication of __remote_log_metadata (capped by the live brokers).",
    ),
    BrokerKey(
        "remote.log.metadata.topic.num.partitions",
        int,
        "50",
        "Partitions of __remote_log_metadata.",
    ),
    BrokerKey(
        "remote.log.metadata.topic.retention.ms",
        int,
        "-1",
        "retention.ms of __remote_log_metadata (-1: forever).",
    ),
    BrokerKey(
        "remote.log.manager.task.interval.ms",
        int,
        "30000",
        "How often each leader partition looks for segments to copy or expire.",
    ),
    BrokerKey(
        "remote.log.manager.task.retry.backoff.ms",
        int,
        "500",
        "First backoff after a failed copy; doubles up to the max.",
    ),
    BrokerKey(
        "remote.log.manager.task.retry.backoff.max.ms",
        int,
        "30000",
        "Largest backoff after failed copies.",
    ),
    BrokerKey(
        "remote.log.manager.thread.pool.size",
        int,
        "10",
        "Worker threads copying and expiring segments.",
    ),
    BrokerKey("remote.log.reader.threads", int, "10", "Worker threads reading remote data."),
    BrokerKey(
        "remote.log.index.file.cache.total.size.bytes",
        int,
        str(1 << 30),
        "Bytes of remote offset/time/transaction indexes cached on this broker.",
    ),
]


BROKER_KEYS: dict[str, BrokerKey] = {
    k.name: k
    for k in [
        BrokerKey("node.id", int, "1", "This broker's id.", "A node started bare is node 1."),
        BrokerKey(
            "listeners",
            str,
            "PLAINTEXT://127.0.0.1:9092",
            "Where to listen.",
            "A node started bare listens on loopback only.",
        ),
        BrokerKey("advertised.listeners", str, "", "What to tell clients (default: listeners)."),
        BrokerKey(
            "log.dirs",
            str,
            "./moldau-data",
            "Comma-separated data directories.",
            "Data under the working directory, not /tmp.",
        ),
        BrokerKey(
            "log.dir",
            str,
            "./moldau-data",
            "Data directory, if log.dirs is unset.",
            "Data under the working directory, not /tmp.",
        ),
        BrokerKey("num.partitions", int, "1", "Partitions of auto-created topics."),
        BrokerKey("default.replication.factor", int, "1", "Replication of auto-created topics."),
        BrokerKey("auto.create.topics.enable", bool, "true", "Create topics on first use."),
        BrokerKey("delete.topic.enable", bool, "true", "Allow DeleteTopics."),
        BrokerKey("socket.request.max.bytes", int, "104857600", "Largest request frame."),
        # Kafka's default is -1 (unbounded); ours bounds request memory to what one
        # largest frame may take, and may be raised when many large requests are in flight.
        BrokerKey(
            "queued.max.request.bytes",
            int,
            "104857600",
            "Bytes of all requests in flight; reading stops while exhausted (-1: unbounded).",
            "Bounds request memory by default (Kafka: unbounded).",
        ),
        BrokerKey("connections.max.idle.ms", int, "600000", "Close idle connections (-1: never)."),
        BrokerKey(
            "socket.request.read.timeout.ms",
            int,
            "30000",
            "Moldau: close a connection whose request stops arriving mid-frame this long "
            "(-1: never); clients give up on a request after request.timeout.ms, 30 s.",
        ),
        BrokerKey("max.connections", int, "2147483647", "Connections per broker; accepting waits."),
        BrokerKey("max.connections.per.ip", int, "2147483647", "Connections per client address."),
        BrokerKey(
            "max.connections.per.ip.overrides", str, "", "Per-address limits: 'host:count,...'."
        ),
        BrokerKey("max.connection.creation.rate", int, "2147483647", "New connections per second."),
        BrokerKey("log.retention.check.interval.ms", int, "300000", "Retention check period."),
        BrokerKey(
            "log.flush.scheduler.interval.ms",
            int,
            "1000",
            "How often flush.ms is checked.",
            "Kafka's default never checks; flush.ms is honoured within a second.",
        ),
        BrokerKey("log.flush.offset.checkpoint.interval.ms", int, "60000", "Checkpoint period."),
        BrokerKey("log.cleaner.enable", bool, "true", "Run the log cleaner (compaction)."),
        BrokerKey("log.cleaner.backoff.ms", int, "15000", "Sleep between log cleaner runs."),
        BrokerKey("log.cleaner.threads", int, "1", "Log cleaner threads (Moldau runs one)."),
        BrokerKey(
            "log.cleaner.dedupe.buffer.size",
            int,
            "134217728",
            "Bounds the cleaner's key map (24 bytes a key, filled to 90%, shared by the "
            "cleaner threads); a log with more dirty keys is cleaned in several passes.",
        ),
        BrokerKey(
            "replica.lag.time.max.ms", int, "30000", "A follower this far behind leaves the ISR."
        ),
        BrokerKey(
            "replica.high.watermark.checkpoint.interval.ms", int, "5000", "HW checkpoint period."
        ),
        BrokerKey("num.replica.fetchers", int, "1", "Fetcher connections per leader."),
        BrokerKey("replica.fetch.max.bytes", int, "1048576", "Bytes per partition per fetch."),
        BrokerKey("replica.fetch.response.max.bytes", int, "10485760", "Bytes per fetch."),
        BrokerKey("replica.fetch.wait.max.ms", int, "500", "Follower fetch long poll."),
        BrokerKey("replica.fetch.min.bytes", int, "1", "Bytes a follower fetch waits for."),
        BrokerKey("replica.fetch.backoff.ms", int, "1000", "Follower backoff after errors."),
        BrokerKey(
            "replication.quota.window.num",
            int,
            "11",
            "Samples the replication throttles' rate is measured over (KIP-73).",
        ),
        BrokerKey(
            "replication.quota.window.size.seconds",
            int,
            "1",
            "Length of one replication throttle sample.",
        ),
        BrokerKey("max.incremental.fetch.session.cache.slots", int, "1000", "Fetch sessions kept."),
        BrokerKey("broker.rack", str, "", "Rack of this broker (rack-aware placement)."),
        BrokerKey(
            "replica.selector.class",
            str,
            "",
            f"Empty (consumers read from leaders) or {RACK_AWARE_SELECTOR} (KIP-392).",
        ),
        BrokerKey("broker.heartbeat.interval.ms", int, "2000", "Heartbeats to the controller."),
        BrokerKey("broker.session.timeout.ms", int, "9000", "Fenced without heartbeats."),
        BrokerKey("controlled.shutdown.enable", bool, "true", "Move leaders before stopping."),
        BrokerKey("unclean.leader.election.enable", bool, "false", "Elect out-of-sync replicas."),
        BrokerKey("auto.leader.rebalance.enable", bool, "true", "Move leaders back home."),
        BrokerKey("leader.imbalance.per.broker.percentage", int, "10", "Tolerated imbalance."),
        BrokerKey("leader.imbalance.check.interval.seconds", int, "300", "Balance check period."),
        BrokerKey(
            "log.segment.open.files.max", int, "-1", "Segment files kept open (-1: derived)."
        ),
        BrokerKey("max.broker.partitions", int, "-1", "Partitions accepted (-1: derived)."),
        BrokerKey(
            "num.recovery.threads.per.data.dir",
            int,
            "2",
            "Log loading threads.",
            "Logs load in worker threads; two overlap IO with parsing.",
        ),
        BrokerKey("offsets.topic.num.partitions", int, "50", "Partitions of __consumer_offsets."),
        BrokerKey(
            "offsets.topic.replication.factor",
            int,
            "3",
            "Replication of __consumer_offsets; groups wait (COORDINATOR_NOT_AVAILABLE) until "
            "this many brokers are alive. A single node (no controller.quorum.voters) uses 1.",
        ),
        BrokerKey("offsets.topic.segment.bytes", int, "104857600", "Offsets topic segment size."),
        BrokerKey("offsets.retention.minutes", int, "10080", "Offsets kept after a group empties."),
        BrokerKey("offsets.retention.check.interval.ms", int, "600000", "Offset expiry period."),
        BrokerKey("offset.metadata.max.bytes", int, "4096", "Largest commit metadata."),
        BrokerKey(
            "offsets.commit.timeout.ms",
            int,
            "5000",
            "How long a group write (offset commit, join, sync) waits for its replicas.",
        ),
        BrokerKey("group.initial.rebalance.delay.ms", int, "3000", "Wait for more joiners."),
        BrokerKey("group.min.session.timeout.ms", int, "6000", "Smallest session timeout."),
        BrokerKey("group.max.session.timeout.ms", int, "1800000", "Largest session timeout."),
        BrokerKey("group.max.size", int, "2147483647", "Members per group."),
        BrokerKey(
            "group.coordinator.rebalance.protocols",
            str,
            "classic,consumer,share",
            "Group protocols the coordinator accepts.",
            "Kafka 4.2's default; consumer (KIP-848) and share (KIP-932) groups are on.",
        ),
        BrokerKey(
            "group.consumer.assignors",
            str,
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
            "KIP-848 server-side assignors (class or short names: uniform, range); first is default.",
        ),
        BrokerKey(
            "group.consumer.session.timeout.ms", int, "45000", "Consumer-group member session."
        ),
        BrokerKey(
            "group.consumer.heartbeat.interval.ms",
            int,
            "5000",
            "Consumer-group heartbeat interval.",
        ),
        BrokerKey("group.consumer.max.size", int, "2147483647", "Members per consumer group."),
        BrokerKey(
            "group.share.enable",
            bool,
            "true",
            "Share groups on (Kafka 4.0/4.1's switch; accepted, always on).",
            "Kafka 4.2 made share groups generally available.",
        ),
        BrokerKey(
            "group.share.record.lock.duration.ms", int, "30000", "Acquisition lock of a record."
        ),
        BrokerKey("group.share.delivery.count.limit", int, "5", "Deliveries before archiving."),
        BrokerKey(
            "group.share.partition.max.record.locks",
            int,
            "2000",
            "In-flight records per share-partition.",
            "Kafka 4.1's default (the key table is Kafka 3.9's, which had 200).",
        ),
        BrokerKey("group.share.session.timeout.ms", int, "45000", "Share member session."),
        BrokerKey("group.share.heartbeat.interval.ms", int, "5000", "Share member heartbeat."),
        BrokerKey("group.share.max.size", int, "200", "Members per share group."),
        BrokerKey("producer.id.expiration.ms", int, "86400000", "Forget idle producers."),
        BrokerKey(
            "transaction.state.log.num.partitions", int, "50", "Partitions of __transaction_state."
        ),
        BrokerKey(
            "transaction.state.log.replication.factor",
            int,
            "3",
            "Replication of __transaction_state; as offsets.topic.replication.factor, a "
            "single node (no controller.quorum.voters) uses 1.",
        ),
        BrokerKey(
            "transaction.state.log.min.isr",
            int,
            "2",
            "min.insync.replicas of __transaction_state (at most its replication factor).",
        ),
        BrokerKey(
            "transaction.state.log.segment.bytes", int, "104857600", "Transaction log segments."
        ),
        BrokerKey(
            "transaction.max.timeout.ms", int, "900000", "Largest transaction.timeout.ms allowed."
        ),
        BrokerKey(
            "transactional.id.expiration.ms", int, "604800000", "Forget idle transactional ids."
        ),
        BrokerKey(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            int,
            "10000",
            "How often transactions past their timeout are aborted.",
        ),
        BrokerKey(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            int,
            "3600000",
            "How often idle transactional ids are expired.",
        ),
        BrokerKey(
            "transaction.partition.verification.enable",
            bool,
            "true",
            "Leaders check with the coordinator before a transaction starts (KIP-890).",
        ),
        BrokerKey("cluster.id", str, "", "Cluster id (generated on first start)."),
        BrokerKey(
            "process.roles",
            str,
            "broker,controller",
            "KRaft roles of this node.",
            "A node started bare is a combined single-node cluster.",
        ),
        BrokerKey("controller.quorum.voters", str, "", "KRaft voters (single node: self)."),
        BrokerKey(
            "controller.listener.names",
            str,
            "CONTROLLER",
            "Controller listener names.",
            "Kafka requires it to be set; Moldau names the listener for you.",
        ),
        BrokerKey("controller.quorum.election.timeout.ms", int, "1000", "Raft election timeout."),
        BrokerKey("controller.quorum.fetch.timeout.ms", int, "2000", "Raft follower timeout."),
        BrokerKey("controller.quorum.election.backoff.max.ms", int, "1000", "Raft backoff."),
        BrokerKey("controller.quorum.request.timeout.ms", int, "2000", "Raft request timeout."),
        BrokerKey("controller.quorum.retry.backoff.ms", int, "20", "Raft retry backoff."),
        BrokerKey("metadata.log.segment.bytes", int, "1073741824", "Metadata log segment size."),
        BrokerKey(
            "metadata.log.max.record.bytes.between.snapshots",
            int,
            "20971520",
            "Metadata snapshot period.",
        ),
        BrokerKey(
            "inter.broker.protocol.version",
            str,
            "3.9-IV0",
            "Read when a new cluster's metadata log starts: the metadata.version it is "
            "finalized at if Moldau supports it (3.0-IV1 to 3.3-IV3; else 3.3-IV3), as "
            "kafka-storage format reads it. Later, kafka-features upgrades it.",
        ),
        BrokerKey(
            "inter.broker.listener.name",
            str,
            "PLAINTEXT",
            "Listener for brokers.",
            "Kafka derives it from security.inter.broker.protocol (PLAINTEXT).",
        ),
        BrokerKey("metrics.port", int, "0", "Moldau: serve Prometheus /metrics here (0: off)."),
        BrokerKey("metrics.host", str, "127.0.0.1", "Moldau: address of the /metrics server."),
        BrokerKey(
            "schema.registry.listeners",
            str,
            "",
            "Moldau: serve the schema registry (Confluent's REST API) at this http://HOST:PORT "
            "or https://HOST:PORT (empty: off). https uses the broker's ssl.* keystore, "
            "overridden by listener.name.schema_registry.ssl.* keys.",
        ),
        BrokerKey(
            "schema.registry.authentication.method",
            str,
            "NONE",
            "Moldau: NONE, or BASIC (HTTP basic authentication against the broker's SCRAM "
            "credentials), as Confluent's authentication.method.",
        ),
        BrokerKey(
            "schema.registry.advertised.listener",
            str,
            "",
            "Moldau: the registry URL other nodes forward writes to (default: the listener).",
        ),
        *SECURITY_KEYS,
        *REMOTE_LOG_KEYS,
    ]
}

_LISTENER = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$"
)
_BOOLS = {"true": True, "false": False}


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def _known_key(key: str) -> bool:
    """A broker key, a topic default, or a security key for one listener."""
    if key in BROKER_KEYS or key in BROKER_SYNONYMS or key in KAFKA_BROKER_CONFIGS:
        return True
    if key.startswith((REMOTE_STORAGE_MANAGER_PREFIX, REMOTE_LOG_METADATA_MANAGER_PREFIX)):
        return True  # for the plugins (default prefixes; custom ones are reported unknown)
    m = LISTENER_SCOPED.match(key)
    return m is not None and (m["key"] is None or m["key"] in BROKER_KEYS)


def parse_listeners(value: str, key: str) -> list[Listener]:
    out = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        m = _LISTENER.match(item)
        if not m or int(m["port"]) > 65535:
            raise ConfigError(f"{key}: '{item}' is not of the form NAME://HOST:PORT")
        out.append(Listener(m["name"], m["host"].strip("[]"), int(m["port"])))
    if not out:
        raise ConfigError(f"{key}: at least one listener is required")
    return out


def parse_ip_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...``, host names resolved to the
    address connections come from (as Kafka does, once at start)."""
    out: dict[str, int] = {}
    for item in filter(None, (v.strip() for v in value.split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: '{item}' is not host:count")
        try:
            address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
        except (OSError, UnicodeError) as e:
            raise ConfigError(
                f"max.connections.per.ip.overrides: cannot resolve '{host}': {e}"
            ) from None
        out[str(address)] = int(count)
    return out


def read_properties(path: Path) -> dict[str, str]:
    """Java properties, the subset Kafka configs use: ``key=value``, ``key: value``, comments."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    props: dict[str, str] = {}
    for lineno, raw in enumerate(text.replace("\\\n", "").splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{path}:{lineno}: expected key=value, got '{line}'")
        props[m[1]] = m[2].strip()
    return props


def parse_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override '{item}' is not of the form key=value")
    return key.strip(), value.strip()


def _registry_listener(value: str) -> str | None:
    """The one http(s)://HOST:PORT the registry serves (Confluent's `listeners` key takes
    a list)."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        return None
    if len(urls) > 1:
        raise ConfigError(f"schema.registry.listeners: one listener, not {len(urls)}")
    if not re.fullmatch(r"https?://(\[[^\]]*\]|[^:/]+):\d{1,5}/?", urls[0]) or not (
        0 <= int(urls[0].rstrip("/").rsplit(":", 1)[1]) <= 65535
    ):
        raise ConfigError(f"schema.registry.listeners: {urls[0]!r} is not http(s)://HOST:PORT")
    return urls[0].rstrip("/")


def parse_value(key: str, raw: str) -> int | bool | str:
    """A broker key's value in its type; ConfigError says why it is not one."""
    spec = BROKER_KEYS[key]
    if spec.type is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{key}: '{raw}' is not an integer") from None
    if spec.type is bool:
        if raw.lower() not in _BOOLS:
            raise ConfigError(f"{key}: '{raw}' is not true or false")
        return _BOOLS[raw.lower()]
    return raw


class BrokerConfig:
    """Validated broker settings; unknown keys are kept and reported, as Kafka does."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.unknown = sorted(k for k in props if not _known_key(k))
        for key, raw in props.items():
            if key in BROKER_KEYS:
                self._typed(key)
            elif key in KAFKA_BROKER_CONFIGS and key not in BROKER_SYNONYMS:
                try:
                    KAFKA_BROKER_CONFIGS[key].validate(raw, key)
                except KafkaError as e:
                    raise ConfigError(str(e)) from None
        self.listeners = parse_listeners(self.get("listeners"), "listeners")
        adv = self.props.get("advertised.listeners", "")
        self.advertised = parse_listeners(adv, "advertised.listeners") if adv else None
        dirs = (
            self.props.get("log.dirs")
            or self.props.get("log.dir")
            or BROKER_KEYS["log.dirs"].default
        )
        self.log_dirs = [Path(d.strip()) for d in dirs.split(",") if d.strip()]
        self.log_defaults = {k: v for k, v in props.items() if k in BROKER_SYNONYMS}
        try:
            self.default_log_config = LogConfig.from_props({}, self.log_defaults)
        except KafkaError as e:
            raise ConfigError(str(e)) from e
        if self.bool("remote.log.storage.system.enable"):
            try:
                check_local_retention(self.default_log_config)
            except KafkaError as e:
                raise ConfigError(str(e)) from e
        if self.int("num.partitions") < 1:
            raise ConfigError("num.partitions must be at least 1")
        self._check_socket_server()
        self.ip_connection_overrides = parse_ip_overrides(
            self.get("max.connections.per.ip.overrides")
        )
        authorizer = self.get("authorizer.class.name").strip()
        if authorizer not in ("", STANDARD_AUTHORIZER):
            raise ConfigError(
                f"authorizer.class.name: {authorizer} is not available; Moldau has "
                f"{STANDARD_AUTHORIZER} (ACLs in the metadata log)"
            )
        if self.int("max.connections.per.ip") == 0 and not self.ip_connection_overrides:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides is set"
            )

        self.schema_registry_listener = _registry_listener(self.get("schema.registry.listeners"))
        method = self.get("schema.registry.authentication.method").strip().upper()
        if method not in ("NONE", "BASIC"):
            raise ConfigError(
                f"schema.registry.authentication.method must be NONE or BASIC, not {method!r}"
            )

    def _check_socket_server(self) -> None:
        """Kafka's checks of its socket server keys."""
        if self.int("socket.request.max.bytes") < 1:
            raise ConfigError("socket.request.max.bytes must be at least 1")
        queued = self.int("queued.max.request.bytes")
        if 0 < queued < self.int("socket.request.max.bytes"):
            raise ConfigError(
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
            )
        if self.get("replica.selector.class") not in ("", RACK_AWARE_SELECTOR):
            raise ConfigError(f"replica.selector.class must be empty or {RACK_AWARE_SELECTOR}")
        for key in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
            if self.int(key) < 0:
                raise ConfigError(f"{key} must be at least 0")

    @classmethod
    def load(cls, config_file: Path | None, overrides: list[str]) -> BrokerConfig:
        props = read_properties(config_file) if config_file else {}
        props.update(parse_override(o) for o in overrides)
        return cls(props)

    def get(self, key: str) -> str:
        return self.props.get(key, BROKER_KEYS[key].default)

    def _typed(self, key: str) -> int | bool | str:
        return parse_value(key, self.get(key))

    def int(self, key: str) -> int:
        value = self._typed(key)
        assert isinstance(value, int)
        return value

    def bool(self, key: str) -> bool:
        return bool(self._typed(key))

    def remote_storage_manager_configs(self) -> dict[str, str]:
        """The keys under remote.log.storage.manager.impl.prefix, without it."""
        return _strip_prefix(self.props, self.get("remote.log.storage.manager.impl.prefix"))

    def remote_log_metadata_int(self, key: str) -> builtins.int:
        """A remote.log.metadata.* key; Kafka reads it under the metadata manager's prefix
        (rlmm.config.<key>), which wins here too."""
        prefixed = self.get("remote.log.metadata.manager.impl.prefix") + key
        if prefixed not in self.props:
            return self.int(key)
        value = parse_value(key, self.props[prefixed])
        assert isinstance(value, int)
        return value

    @property
    def node_id(self) -> builtins.int:
        return self.int("node.id")


def _strip_prefix(props: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if prefix and k.startswith(prefix)}
