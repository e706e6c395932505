"""What the controller's API handlers decide with: the quorum controller they write
through and the control managers that decide (one of each per controller)."""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.clock import Clock, SystemClock
from moldau.controller.cluster_control import ClusterControl
from moldau.controller.quorum_controller import QuorumController
from moldau.controller.replication_control import ReplicationControl
from moldau.controller.topic_control import TopicControl
from moldau.ids import IdSource


@dataclass
class ControllerContext:
    quorum: QuorumController
    topics: TopicControl
    cluster: ClusterControl = field(
        default_factory=lambda: ClusterControl("", ReplicationControl())
    )
    clock: Clock = field(default_factory=SystemClock)
    delete_topic_enable: bool = True

    @property
    def replication(self) -> ReplicationControl:
        return self.cluster.replication

    @property
    def ids(self) -> IdSource:
        """Where new ids (topics, ACLs) come from: injected, so a simulation can seed it."""
        return self.topics.ids
