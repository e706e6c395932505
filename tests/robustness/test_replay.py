"""Real client traffic, captured through a loopback proxy, replayed mutated to a live broker.

confluent-kafka, kafka-python and aiokafka run admin, produce, fetch and consumer-group
traffic through :class:`RecordingProxy`; the captured requests are then mutated (bit
flips, truncation, lying lengths, huge counts, random API keys and versions, topic names
retargeted) and sent a few thousand at a time. Afterwards the broker must be alive with
no traceback in its output, serve a normal produce/consume round trip, and come back
from kill -9 with every record it had.

``MOLDAU_REPLAY_SEED`` / ``MOLDAU_REPLAY_CASES`` pick another run (the seed is in every
failure message).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from moldau.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from tests.integration.helpers import (
    METADATA_VERSION,
    RawClient,
    consume_confluent,
    create_topic,
    metadata_request,
    roundtrip_ok,
)
from tests.robustness.conftest import Broker, Start
from tests.robustness.mutations import INTERNAL_TOPICS, Case, cases, framed, retarget
from tests.robustness.proxy import RecordingProxy
from tests.robustness.replay import replay
from tests.robustness.traffic import COMPACTED, TOPIC, TOPICS, generate

SEED = int(os.environ.get("MOLDAU_REPLAY_SEED", "15"))
CASES = int(os.environ.get("MOLDAU_REPLAY_CASES", "3000"))
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    # The compacted topic must read the same before a kill and after the restart.
    "log.cleaner.enable": "false",
}

pytestmark = pytest.mark.slow


@dataclass
class Capture:
    broker: Broker
    proxy: RecordingProxy
    requests: list[bytes]

    def api_keys(self) -> set[int]:
        return {struct.unpack_from(">h", r)[0] for r in self.requests}


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Capture]:
    """A broker that advertises the proxy, and what the clients sent it."""
    proxy = RecordingProxy()
    b = Broker(
        tmp_path_factory.mktemp("replay"),
        {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}", **BROKER_SETTINGS},
    )
    b.start()
    proxy.upstream = (b.host, b.port)
    try:
        generate(proxy.bootstrap)
        yield Capture(b, proxy, list(proxy.requests))
    finally:
        b.close()
        proxy.close()


def snapshot(bootstrap: str, topics: list[str]) -> dict[str, dict[int, list[tuple]]]:
    """Every record of ``topics`` as (offset, key, value, headers), per partition."""
    return {
        t: {
            p: [(g.offset, g.key, g.value, g.headers) for g in gots]
            for p, gots in consume_confluent(bootstrap, t).items()
        }
        for t in topics
    }


def assert_healthy(b: Broker, what: str) -> None:
    assert b.alive, f"broker died ({what})"
    tracebacks = b.tracebacks()
    assert not tracebacks, f"{len(tracebacks)} tracebacks ({what}), first:\n{tracebacks[0]}"


def assert_survives_kill(b: Broker, topics: list[str], on_restart: object = None) -> None:
    """Same records before kill -9 and after the restart; a round trip works again."""
    before = snapshot(b.bootstrap, topics)
    b.kill()
    b.output.clear()
    b.start()
    if isinstance(on_restart, RecordingProxy):
        on_restart.upstream = (b.host, b.port)
    assert_healthy(b, "restart after kill -9")
    assert snapshot(b.bootstrap, topics) == before, "records changed across kill -9"
    roundtrip_ok(b.bootstrap, topics[-1], seed=SEED + 1)


def test_capture_covers_the_clients_apis(capture: Capture) -> None:
    """The replay is only as good as the capture: admin, data and group APIs, from
    clients using both flexible and older versions."""
    keys = capture.api_keys()
    wanted = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 32, 37, 42, 44}
    assert wanted <= keys, f"not captured: {sorted(wanted - keys)}"
    assert len(capture.requests) > 100


def test_mutated_replay_leaves_the_broker_healthy(capture: Capture, topic: str) -> None:
    b = capture.broker
    b.output.clear()
    mutated = cases(capture.requests, TOPICS, CASES, SEED)
    problems = replay(b.bootstrap, mutated)
    what = f"after {len(mutated)} mutated requests, seed {SEED}"
    assert_healthy(b, what)
    assert not problems, f"{len(problems)} wrong answers ({what}), e.g. {problems[:5]}"
    create_topic(b.bootstrap, topic, 2)
    roundtrip_ok(b.bootstrap, topic, seed=SEED)
    assert_survives_kill(b, [TOPIC, COMPACTED, topic], on_restart=capture.proxy)


@pytest.mark.parametrize(
    "target",
    [t for t in INTERNAL_TOPICS],
)
def test_replay_retargeted_to_an_internal_topic(
    capture: Capture, start_broker: Start, target: str, topic: str
) -> None:
    """Everything the clients sent about their topics, sent about an internal one instead
    (CreateTopics, Produce, Fetch, DeleteRecords, configs ...), in capture order."""
    b = start_broker(BROKER_SETTINGS)
    retargeted = [
        Case(f"retarget {target}", i, wire)
        for i, request in enumerate(capture.requests)
        if (wire := retarget(request, TOPICS, target)) is not None
    ]
    others = [Case("as captured", i, framed(r)) for i, r in enumerate(capture.requests)]
    problems = replay(b.bootstrap, others[:50] + retargeted, concurrency=1, timeout=1.0)
    assert_healthy(b, f"after {len(retargeted)} requests retargeted to {target}")
    assert not problems, f"wrong answers: {problems[:5]}"
    create_topic(b.bootstrap, topic, 2)
    roundtrip_ok(b.bootstrap, topic, seed=SEED)
    assert_survives_kill(b, [topic])


@pytest.mark.parametrize("api", ["CreateTopics", "CreatePartitions"])
def test_huge_partition_counts_are_refused_promptly(
    start_broker: Start, topic: str, api: str
) -> None:
    """What the mixed replay leaves out (see PARTITION_COUNT_APIS): a partition count of
    millions is refused with an error code while other clients keep being served."""
    b = start_broker()
    create_topic(b.bootstrap, topic, 1)
    huge = 5_000_000
    if api == "CreateTopics":
        request: Any = CreateTopicsRequest(
            topics=[CreatableTopic(name=f"{topic}-huge", num_partitions=huge, replication_factor=1)]
        )
        version = 5
    else:
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=topic, count=huge, assignments=None)],
            timeout_ms=30000,
        )
        version = 3
    answered: list[Any] = []

    def ask() -> None:
        try:
            with RawClient(b.bootstrap, timeout=30) as raw:
                answered.append(raw.request(request, version))
        except (OSError, AssertionError) as e:  # no answer: closed or timed out
            answered.append(e)

    abuser = threading.Thread(target=ask)
    try:
        abuser.start()
        time.sleep(0.2)
        start = time.monotonic()
        with RawClient(b.bootstrap, timeout=5) as raw:
            raw.request(metadata_request([topic]), METADATA_VERSION)
        assert time.monotonic() - start < 1.0, "other clients stalled behind the request"
        abuser.join(10)
        assert answered and not isinstance(answered[0], Exception), f"no answer: {answered}"
        results = answered[0].topics if api == "CreateTopics" else answered[0].results
        assert [r.error_code for r in results] in (
            [ErrorCode.POLICY_VIOLATION],
            [ErrorCode.INVALID_PARTITIONS],
        )
    finally:
        b.kill()  # a frozen broker does not answer SIGTERM
