"""A :class:`NodeSnapshot` as Prometheus metric families (pure).

Names are Kafka's MBeans as the JMX exporter's Kafka rules render them (lower case,
``kafka_<domain>_<type>_<name>``, meters as ``_total`` counters), Kafka's histograms as
Prometheus histograms (``_bucket``/``_sum``/``_count``), and consumer lag under
kafka-exporter's names. Values that only the active controller knows are 0 elsewhere, as
in Kafka.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from moldau.metrics.snapshot import NodeSnapshot, ReplicaSnapshot
from moldau.stats.counters import HistogramSnapshot, TopicCounts
from moldau.stats.requests import TIME_NAMES

TOPIC_METRICS = "kafka_server_brokertopicmetrics_"
REQUEST_METRICS = "kafka_network_requestmetrics_"
REPLICA_MANAGER = "kafka_server_replicamanager_"
PARTITION = "kafka_cluster_partition_"
LOG = "kafka_log_log_"
CONTROLLER = "kafka_controller_kafkacontroller_"
GROUP_MANAGER = "kafka_coordinator_group_groupmetadatamanager_"
GROUP_COORDINATOR = "kafka_server_group_coordinator_metrics_"
SHARE_GROUP = "kafka_server_sharegroupmetrics_"
SHARE_PARTITION = "kafka_server_sharepartitionmetrics_"
SHARE_STATES = ("Empty", "Stable")
# RecordAcknowledgementsPerSec's ackType tag per acknowledgement type (a gap is no record).
ACK_TYPES = ((1, "Accept"), (2, "Release"), (3, "Reject"))
GROUP_STATES = (
    ("Empty", "numgroupsempty"),
    ("PreparingRebalance", "numgroupspreparingrebalance"),
    ("CompletingRebalance", "numgroupscompletingrebalance"),
    ("Stable", "numgroupsstable"),
    ("Dead", "numgroupsdead"),
)


def families(s: NodeSnapshot, now_ms: int, version: str) -> Iterator[Metric]:
    """Every family of one node, in a stable order."""
    info = InfoMetricFamily("kafka_server_app", "The broker's software.")
    info.add_metric([], {"version": version, "broker_id": str(s.node_id)})
    yield info
    yield from _topics(s)
    yield from _requests(s)
    conns = GaugeMetricFamily(
        "kafka_server_socket_server_metrics_connection_count",
        "Open client connections per listener.",
        labels=["listener"],
    )
    for listener, count in sorted(s.connections.items()):
        conns.add_metric([listener], count)
    yield conns
    yield from _replica_manager(s)
    yield from _partitions(s.replicas)
    yield from _logs(s, now_ms)
    yield from _controller(s)
    yield from _groups(s)
    yield from _lag(s)
    yield from _share_groups(s)
    yield from _share_partitions(s)
    yield _histogram(
        "moldau_event_loop_lag_seconds",
        "How late the event loop ran a timer (sampled every 250 ms): time it spent busy.",
        [],
        [([], s.loop_lag)],
    )


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _histogram(
    name: str,
    doc: str,
    labels: list[str],
    series: Iterable[tuple[list[str], HistogramSnapshot]],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, h in series:
        buckets, cumulative = [], 0
        for bound, count in zip((*h.bounds, float("inf")), h.counts, strict=True):
            cumulative += count
            buckets.append((floatToGoString(bound), float(cumulative)))
        family.add_metric(values, buckets, h.sum)
    return family


def _topics(s: NodeSnapshot) -> Iterator[Metric]:
    topic_meters: tuple[tuple[str, Callable[[TopicCounts], int], str], ...] = (
        ("messagesin", lambda c: c.messages_in, "Records appended by this node as leader."),
        ("bytesin", lambda c: c.bytes_in, "Record batch bytes appended by this node as leader."),
        ("bytesout", lambda c: c.bytes_out, "Record bytes sent to consumers."),
        # KIP-1103's share request meters (TotalShareFetchRequestsPerSec, ...)
        ("totalsharefetchrequests", lambda c: c.share_requests[0], "ShareFetch requests."),
        ("failedsharefetchrequests", lambda c: c.share_requests[1], "Failed ShareFetches."),
        ("totalshareacknowledgementrequests", lambda c: c.share_requests[2], "Acknowledgement requests."),
        ("failedshareacknowledgementrequests", lambda c: c.share_requests[3], "Failed acknowledgements."),
    )
    for name, value, doc in topic_meters:
        family = CounterMetricFamily(TOPIC_METRICS + name, doc, labels=["topic"])
        for topic, counts in sorted(s.topics.items()):
            family.add_metric([topic], value(counts))
        family.add_sample(family.name + "_total", {}, value(s.all_topics))
        yield family
    yield _counter(
        TOPIC_METRICS + "replicationbytesin",
        "Record bytes appended by this node as a follower.",
        s.replication_bytes_in,
    )
    yield _counter(
        TOPIC_METRICS + "replicationbytesout",
        "Record bytes sent to follower replicas.",
        s.replication_bytes_out,
    )
    yield from _remote_storage(s)


def _remote_storage(s: NodeSnapshot) -> Iterator[Metric]:
    """Kafka's tiered storage BrokerTopicMetrics (RemoteCopyBytesPerSec ... as counters;
    RemoteLogSizeBytes and the copy lag per topic, over the partitions led here)."""
    stats = s.remote.stats
    for name, value, doc in (
        ("remotecopybytes", stats.copy_bytes, "Segment bytes copied to the remote tier."),
        ("remotecopyrequests", stats.copy_requests, "Segments copied to the remote tier."),
        ("failedremotecopyrequests", stats.failed_copy_requests, "Copies that failed."),
        ("remotefetchbytes", stats.fetch_bytes, "Record bytes read from the remote tier."),
        ("remotefetchrequests", stats.fetch_requests, "Reads served from the remote tier."),
        ("failedremotefetchrequests", stats.failed_fetch_requests, "Remote reads that failed."),
        ("remotedeleterequests", stats.delete_requests, "Remote segments deleted."),
        ("failedremotedeleterequests", stats.failed_delete_requests, "Remote deletes failed."),
    ):
        yield _counter(TOPIC_METRICS + name, doc, value)
    for index, name, doc in (
        (0, "remotelogsizebytes", "Bytes of the topic's segments in the remote tier."),
        (1, "remotecopylagbytes", "Bytes of closed segments below the LSO not copied yet."),
        (2, "remotecopylagsegments", "Closed segments below the LSO not copied yet."),
    ):
        family = GaugeMetricFamily(TOPIC_METRICS + name, doc, labels=["topic"])
        for topic, values in sorted(s.remote.topics.items()):
            family.add_metric([topic], values[index])
        yield family


def _requests(s: NodeSnapshot) -> Iterator[Metric]:
    requests = sorted(s.requests.items())
    count = CounterMetricFamily(
        REQUEST_METRICS + "requests",
        "Requests handled, per request type and version.",
        labels=["request", "version"],
    )
    for name, r in requests:
        for version, n in sorted(r.versions.items()):
            count.add_metric([name, str(version)], n)
    yield count
    for i, time_name in enumerate(TIME_NAMES):
        yield _histogram(
            REQUEST_METRICS + time_name,
            f"Request {time_name.removesuffix('ms')} in milliseconds, per request type.",
            ["request"],
            [([name], r.times[i]) for name, r in requests],
        )
    yield _histogram(
        REQUEST_METRICS + "requestbytes",
        "Request sizes in bytes, per request type.",
        ["request"],
        [([name], r.size) for name, r in requests],
    )


def _replica_manager(s: NodeSnapshot) -> Iterator[Metric]:
    hosted = [r for r in s.replicas if r.hosted]
    leaders = [r for r in hosted if r.leader]
    for name, doc, value in (
        ("partitioncount", "Partitions hosted here.", len(hosted)),
        ("leadercount", "Partitions led here.", len(leaders)),
        (
            "underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            sum(r.isr < r.replicas for r in leaders),
        ),
        (
            "underminisrpartitioncount",
            "Partitions led here with fewer in-sync replicas than min.insync.replicas.",
            sum(r.isr < r.min_isr for r in leaders),
        ),
        (
            "atminisrpartitioncount",
            "Partitions led here with exactly min.insync.replicas in-sync replicas.",
            sum(r.isr == r.min_isr for r in leaders),
        ),
        ("offlinereplicacount", "Replicas here whose log cannot be opened.", s.offline_replicas),
    ):
        yield _gauge(REPLICA_MANAGER + name, doc, value)
    yield _counter(
        REPLICA_MANAGER + "isrshrinks", "ISR shrinks of partitions led here.", s.isr_shrinks
    )
    yield _counter(
        REPLICA_MANAGER + "isrexpands", "ISR expansions of partitions led here.", s.isr_expands
    )


def _partitions(replicas: Iterable[ReplicaSnapshot]) -> Iterator[Metric]:
    """Kafka's per-partition gauges, reported by the leader (0 elsewhere)."""
    families = {
        name: GaugeMetricFamily(PARTITION + name, doc, labels=["topic", "partition"])
        for name, doc in (
            ("underreplicated", "1 if the ISR is smaller than the replica set (leader only)."),
            ("insyncreplicascount", "In-sync replicas (leader only)."),
            ("replicascount", "Replicas (leader only)."),
        )
    }
    for r in sorted(replicas, key=_tp):
        labels = [r.topic, str(r.partition)]
        lead = r.hosted and r.leader
        families["underreplicated"].add_metric(labels, int(lead and r.isr < r.replicas))
        families["insyncreplicascount"].add_metric(labels, r.isr if lead else 0)
        families["replicascount"].add_metric(labels, r.replicas if lead else 0)
    yield from families.values()


def _logs(s: NodeSnapshot, now_ms: int) -> Iterator[Metric]:
    replicas = sorted(s.replicas, key=_tp)
    for name, attr, doc in (
        ("size", "size", "Bytes of the partition's log on disk."),
        ("numlogsegments", "segments", "Segments of the partition's log."),
        ("logstartoffset", "log_start_offset", "The log's first offset."),
        ("logendoffset", "log_end_offset", "The offset the log's next record gets."),
    ):
        family = GaugeMetricFamily(LOG + name, doc, labels=["topic", "partition"])
        for r in replicas:
            family.add_metric([r.topic, str(r.partition)], getattr(r, attr))
        yield family
    yield _gauge(
        "kafka_log_logcleaner_max_clean_time_secs",
        "Duration of the log cleaner's last pass.",
        s.cleaner_last_run_seconds,
    )
    yield _gauge(
        "kafka_log_logcleanermanager_time_since_last_run_ms",
        "Milliseconds since the log cleaner last finished a pass (or since start-up).",
        max(now_ms - s.cleaner_last_run_end_ms, 0),
    )
    yield _gauge(
        "kafka_log_logmanager_offlinelogdirectorycount",
        "Log dirs of this broker taken offline after an I/O error (until a restart).",
        s.offline_log_dirs,
    )
    yield _gauge(
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "Partitions the cleaner gave up on (a failure cleaning them) until a restart.",
        s.uncleanable_partitions,
    )


def _controller(s: NodeSnapshot) -> Iterator[Metric]:
    c = s.controller
    for name, doc, value in (
        ("activecontrollercount", "1 on the active controller.", int(c.active)),
        ("offlinepartitionscount", "Partitions without a leader.", c.offline_partitions),
        (
            "preferredreplicaimbalancecount",
            "Partitions not led by their preferred (first) replica.",
            c.preferred_replica_imbalance,
        ),
        ("globaltopiccount", "Topics in the cluster.", c.topics),
        ("globalpartitioncount", "Partitions in the cluster.", c.partitions),
        ("activebrokercount", "Registered, unfenced brokers.", c.active_brokers),
        ("fencedbrokercount", "Registered, fenced brokers.", c.fenced_brokers),
        (
            "lastappliedrecordoffset",
            "Last metadata log offset applied to the controller's state.",
            c.last_applied_offset,
        ),
        (
            "lastcommittedrecordoffset",
            "Last committed metadata log offset.",
            c.last_committed_offset,
        ),
    ):
        yield _gauge(CONTROLLER + name, doc, value)
    yield _gauge(
        "kafka_server_broker_metadata_metrics_last_applied_record_offset",
        "Last metadata log offset in the image this broker serves.",
        s.last_applied_offset,
    )
    if s.raft is not None:
        for name, doc, value in (
            ("current_leader", "The quorum leader this node knows (-1: none).", s.raft.leader),
            ("current_epoch", "The quorum's epoch.", s.raft.epoch),
            (
                "high_watermark",
                "The metadata log's high watermark (-1: unknown).",
                s.raft.high_watermark,
            ),
        ):
            yield _gauge("kafka_server_raft_metrics_" + name, doc, value)


def _groups(s: NodeSnapshot) -> Iterator[Metric]:
    states = Counter(g.state for g in s.groups)
    yield _gauge(GROUP_MANAGER + "numgroups", "Groups coordinated here.", len(s.groups))
    for state, name in GROUP_STATES:
        yield _gauge(
            GROUP_MANAGER + name, f"Groups coordinated here in state {state}.", states[state]
        )
    yield _gauge(
        GROUP_MANAGER + "numoffsets",
        "Committed offsets of the groups coordinated here.",
        sum(len(g.offsets) for g in s.groups),
    )
    yield _counter(
        GROUP_COORDINATOR + "group_completed_rebalance",
        "Rebalances completed (the leader's assignment stored) by groups coordinated here.",
        s.completed_rebalances,
    )


def _share_groups(s: NodeSnapshot) -> Iterator[Metric]:
    """Kafka's group-coordinator-metrics of share groups: group-count with protocol=share,
    share-group-count per state."""
    shares = s.shares
    count = GaugeMetricFamily(
        GROUP_COORDINATOR + "group_count", "Groups coordinated here.", labels=["protocol"]
    )
    count.add_metric(["share"], sum(shares.states.values()))
    yield count
    per_state = GaugeMetricFamily(
        GROUP_COORDINATOR + "share_group_count",
        "Share groups coordinated here, per state.",
        labels=["state"],
    )
    for state in SHARE_STATES:
        per_state.add_metric([state], shares.states.get(state, 0))
    yield per_state


def _share_partitions(s: NodeSnapshot) -> Iterator[Metric]:
    """KIP-1103's SharePartitionMetrics of the share-partitions led here, and
    ShareGroupMetrics' RecordAcknowledgementsPerSec summed over them (a share-partition
    read again from the share coordinator starts its meters over)."""
    gtp = ["group", "topic", "partition"]
    in_flight = GaugeMetricFamily(
        SHARE_PARTITION + "inflightmessagecount",
        "Records from the share-partition start offset to its end offset.",
        labels=gtp,
    )
    batches = GaugeMetricFamily(
        SHARE_PARTITION + "inflightbatchcount",
        "Batches of records in flight (runs of records in one state).",
        labels=gtp,
    )
    acquired = GaugeMetricFamily(
        "moldau_share_partition_acquired_records",
        "Records acquired by members and not yet acknowledged or released.",
        labels=gtp,
    )
    timeouts = CounterMetricFamily(
        SHARE_PARTITION + "acquisitionlocktimeout",
        "Acquired records whose acquisition lock ran out before an acknowledgement.",
        labels=gtp,
    )
    acknowledged = [0] * len(ACK_TYPES)
    parts = sorted(s.shares.partitions, key=lambda p: (p.group_id, p.topic, p.partition))
    for p in parts:
        labels = [p.group_id, p.topic, str(p.partition)]
        in_flight.add_metric(labels, p.in_flight)
        batches.add_metric(labels, p.batches)
        acquired.add_metric(labels, p.acquired)
        timeouts.add_metric(labels, p.lock_timeouts)
        for i, (ack_type, _) in enumerate(ACK_TYPES):
            acknowledged[i] += p.acknowledged[ack_type]
    yield from (in_flight, batches, acquired, timeouts)
    yield _histogram(
        SHARE_PARTITION + "inflightbatchmessagecount",
        "Records per batch acquired by a member.",
        gtp,
        [([p.group_id, p.topic, str(p.partition)], p.batch_records) for p in parts],
    )
    acks = CounterMetricFamily(
        SHARE_GROUP + "recordacknowledgements",
        "Records acknowledged in share-partitions led here, per acknowledgement type.",
        labels=["ackType"],
    )
    for (_, name), total in zip(ACK_TYPES, acknowledged, strict=True):
        acks.add_metric([name], total)
    yield acks


def _lag(s: NodeSnapshot) -> Iterator[Metric]:
    """kafka-exporter's series. Lag is the partition's high watermark minus the committed
    offset (never negative), for partitions with a replica here; the coordinator of a group
    may not host all its partitions in a cluster, current offsets let PromQL join them."""
    tp = ["topic", "partition"]
    current = GaugeMetricFamily(
        "kafka_topic_partition_current_offset", "High watermark (partitions led here).", labels=tp
    )
    oldest = GaugeMetricFamily(
        "kafka_topic_partition_oldest_offset", "Log start offset (partitions led here).", labels=tp
    )
    high_watermarks = {}
    for r in sorted(s.replicas, key=_tp):
        if r.hosted:
            high_watermarks[(r.topic, r.partition)] = r.high_watermark
        if r.hosted and r.leader:
            current.add_metric([r.topic, str(r.partition)], r.high_watermark)
            oldest.add_metric([r.topic, str(r.partition)], r.log_start_offset)
    yield current
    yield oldest
    gtp = ["consumergroup", "topic", "partition"]
    committed = GaugeMetricFamily(
        "kafka_consumergroup_current_offset", "Committed offset per partition.", labels=gtp
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag", "High watermark minus committed offset.", labels=gtp
    )
    lag_sum = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum",
        "Lag of the group summed over a topic's partitions hosted here.",
        labels=["consumergroup", "topic"],
    )
    members = GaugeMetricFamily(
        "kafka_consumergroup_members", "Members of the group.", labels=["consumergroup"]
    )
    for g in sorted(s.groups, key=lambda g: g.group_id):
        members.add_metric([g.group_id], g.members)
        sums: dict[str, int] = defaultdict(int)
        for topic, partition, offset in sorted(g.offsets):
            labels = [g.group_id, topic, str(partition)]
            committed.add_metric(labels, offset)
            hw = high_watermarks.get((topic, partition))
            if hw is not None:
                behind = max(hw - offset, 0)
                lag.add_metric(labels, behind)
                sums[topic] += behind
        for topic, total in sums.items():
            lag_sum.add_metric([g.group_id, topic], total)
    yield from (committed, lag, lag_sum, members)


def _tp(r: ReplicaSnapshot) -> tuple[str, int]:
    return r.topic, r.partition
