"""Consumer-group plumbing for the end-to-end group tests.

In-process: :func:`group_consumer` (a subscribing confluent-kafka consumer that records its
rebalance callbacks and client errors), :func:`poll_all` (round-robin polling of several
consumers from one thread until a condition holds), and AdminClient wrappers.

Out of process: ``python -m tests.integration.group_helpers BOOTSTRAP TOPIC GROUP CONFIG``
runs one group member that reports, as JSON lines on stdout, its assignment, every record
it processed and every offset commit that returned, and takes ``nocommit`` / ``close``
commands on stdin. :class:`MemberProcess` drives it, so a test can SIGKILL a member.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer as _Consumer
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription

from tests.integration.helpers import DEADLINE_S, admin

Processed = tuple[int, int, str]  # (partition, offset, value as latin-1)

# Fast but legal (group.min.session.timeout.ms is 6000): what the brief asks for.
MEMBER_CONFIG: dict[str, Any] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
}


# --- in-process members ----------------------------------------------------------------------


@dataclass
class Member:
    """A subscribing confluent-kafka consumer and what its group told it."""

    name: str
    consumer: _Consumer
    events: list[tuple[str, frozenset[int]]] = field(default_factory=list)
    """("assign" | "revoke" | "lost", partitions) in callback order."""
    errors: list[KafkaError] = field(default_factory=list)
    records: list[Processed] = field(default_factory=list)

    def owned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def assigns(self) -> list[frozenset[int]]:
        return [parts for kind, parts in self.events if kind == "assign"]

    def revokes(self) -> list[frozenset[int]]:
        return [parts for kind, parts in self.events if kind != "assign"]

    def poll(self, timeout: float) -> None:
        """One poll: serves callbacks, keeps records, collects (non-EOF) errors."""
        for msg in self.consumer.consume(500, timeout):
            err = msg.error()
            if err is None:
                self.records.append((msg.partition(), msg.offset(), _text(msg.value())))
            elif err.code() != KafkaError._PARTITION_EOF:
                self.errors.append(err)


def group_consumer(
    bootstrap: str, group: str, topics: Sequence[str], name: str = "member", **config: Any
) -> Member:
    """A confluent-kafka consumer subscribed to ``topics`` in ``group``."""
    member: Member

    def on_error(err: KafkaError) -> None:
        member.errors.append(err)

    settings = {**MEMBER_CONFIG, **config}
    if settings.get("group.protocol") == "consumer":  # KIP-848: the broker times members
        del settings["session.timeout.ms"], settings["heartbeat.interval.ms"]
    consumer = _Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "error_cb": on_error,
            **settings,
        }
    )
    member = Member(name, consumer)

    def record(kind: str) -> Callable[[Any, list[TopicPartition]], None]:
        def callback(_consumer: Any, partitions: list[TopicPartition]) -> None:
            member.events.append((kind, frozenset(tp.partition for tp in partitions)))

        return callback

    consumer.subscribe(
        list(topics), on_assign=record("assign"), on_revoke=record("revoke"), on_lost=record("lost")
    )
    return member


def poll_all(
    members: Iterable[Member], until: Callable[[], bool], what: str, timeout: float = DEADLINE_S
) -> None:
    """Poll every member in turn (callbacks run on this thread) until ``until()`` holds."""
    members = list(members)
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            state = {m.name: (sorted(m.owned()), m.events, m.errors[-3:]) for m in members}
            raise AssertionError(f"timed out waiting for {what}: {state}")
        for m in members:
            m.poll(0.05)


def settled(members: Sequence[Member], partitions: int, per_member: int | None = None) -> bool:
    """Every partition owned by exactly one member (and ``per_member`` each, if given)."""
    owned = [m.owned() for m in members]
    union = frozenset().union(*owned)
    if sum(len(o) for o in owned) != partitions or union != frozenset(range(partitions)):
        return False
    return per_member is None or all(len(o) == per_member for o in owned)


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("latin-1")


# --- admin ----------------------------------------------------------------------------------


def describe_group(bootstrap: str, group: str) -> ConsumerGroupDescription:
    client = admin(bootstrap)  # must outlive its futures
    return client.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=30)


def described_assignment(bootstrap: str, group: str, topic: str) -> dict[str, frozenset[int]]:
    """client.id -> partitions of ``topic``, as DescribeGroups reports the Stable group."""
    description = describe_group(bootstrap, group)
    return {
        m.client_id: frozenset(
            tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic
        )
        for m in description.members
    }


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> committed offset, via AdminClient (OffsetFetch)."""
    client = admin(bootstrap)  # must outlive its futures
    request = [ConsumerGroupTopicPartitions(group)]
    result = client.list_consumer_group_offsets(request, request_timeout=30)[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


# --- out-of-process members -------------------------------------------------------------------


class MemberProcess:
    """One group member in a subprocess (this module's ``__main__``), killable with -9."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, **config: Any) -> None:
        self.name = name
        root = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.group_helpers",
                bootstrap,
                topic,
                group,
                json.dumps({"client.id": name, **config}),
            ],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=dict(
                os.environ,
                PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
            ),
        )
        self._lock = threading.Lock()
        self._events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self._events.append(json.loads(line))

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self._events if kind is None or e["ev"] == kind]

    def assignment(self) -> frozenset[int] | None:
        """The last ``consumer.assignment()`` the member reported."""
        reported = self.events("assignment")
        return frozenset(reported[-1]["partitions"]) if reported else None

    def processed(self) -> list[Processed]:
        return [tuple(r) for e in self.events("processed") for r in e["records"]]  # type: ignore[misc]

    def committed(self) -> dict[int, int]:
        """partition -> highest offset whose synchronous commit returned successfully."""
        out: dict[int, int] = {}
        for e in self.events("committed"):
            for p, offset in e["offsets"].items():
                out[int(p)] = max(out.get(int(p), 0), offset)
        return out

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL; returns once everything the member reported before dying is read."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join(10)

    def close(self, timeout: float = 30.0) -> None:
        """Ask for a clean close (LeaveGroup); kill if it does not exit."""
        if self.proc.poll() is None:
            try:
                self.send("close")
                self.proc.wait(timeout)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)


def _member_main(bootstrap: str, topic: str, group: str, config_json: str) -> None:
    """Consume, report what was processed, then commit it synchronously and report that."""
    commands: queue.Queue[str] = queue.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("close")

    def emit(event: str, **data: Any) -> None:
        print(json.dumps({"ev": event, **data}), flush=True)

    threading.Thread(target=read_commands, daemon=True).start()
    consumer = _Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            **MEMBER_CONFIG,
            **json.loads(config_json),
        }
    )
    consumer.subscribe([topic])
    commit, reported = True, None
    while True:
        try:
            command = commands.get_nowait()
        except queue.Empty:
            command = ""
        if command == "close":
            break
        if command == "nocommit":
            commit = False
            emit("mode", commit=False)
        messages = consumer.consume(500, 0.1)
        owned = sorted(tp.partition for tp in consumer.assignment())
        if owned != reported:
            reported = owned
            emit("assignment", partitions=owned)
        records = [(m.partition(), m.offset(), _text(m.value())) for m in messages if not m.error()]
        for m in messages:
            if m.error() and m.error().code() != KafkaError._PARTITION_EOF:
                emit("error", error=str(m.error()))
        if not records:
            continue
        emit("processed", records=records)
        if not commit:
            continue
        offsets: dict[int, int] = {}
        for p, offset, _ in records:
            offsets[p] = max(offsets.get(p, 0), offset + 1)
        try:
            consumer.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as e:
            emit("commit_error", error=str(e))
        else:
            emit("committed", offsets=offsets)
    consumer.close()
    emit("closed")


if __name__ == "__main__":
    _member_main(*sys.argv[1:5])
