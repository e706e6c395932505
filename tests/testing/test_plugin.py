"""The pytest plugin, run as a user runs it: pytest in a subprocess on a test module."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from moldau.testing import broker

pytestmark = pytest.mark.timeout(600)


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=textwrap.dedent(source))
    return pytester.runpytest_subprocess(
        "-p", "moldau.testing.plugin", "-p", "no:cacheprovider", *args
    )


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_session_broker_shared_by_many_tests(pytester: pytest.Pytester) -> None:
    log = pytester.path / "seen.jsonl"
    result = run(
        pytester,
        f"""
        import json
        import pytest

        @pytest.mark.parametrize("n", range(6))
        def test_produce(moldau_broker, moldau_topic, n):
            acked = moldau_broker.produce(moldau_topic, f"value {{n}}")
            assert [r.value for r in moldau_broker.consume(moldau_topic, 1)] == [f"value {{n}}".encode()]
            with open({str(log)!r}, "a") as f:
                f.write(json.dumps({{
                    "bootstrap": moldau_broker.bootstrap_servers,
                    "pid": moldau_broker.proc.pid,
                    "topic": moldau_topic,
                    "offset": acked[0].offset,
                }}) + "\\n")

        def test_topics_are_deleted_afterwards(moldau_broker):
            from confluent_kafka.admin import AdminClient
            topics = AdminClient({{"bootstrap.servers": moldau_broker.bootstrap_servers}}).list_topics(timeout=10).topics
            assert not [t for t in topics if t.startswith("test_produce")]
        """,
    )
    result.assert_outcomes(passed=7)
    seen = records(log)
    assert len(seen) == 6
    assert len({(s["bootstrap"], s["pid"]) for s in seen}) == 1, "one broker for the session"
    assert len({s["topic"] for s in seen}) == 6, "a fresh topic per test"
    assert {s["offset"] for s in seen} == {0}


def test_moldau_topic_marker_and_moldau_config(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest
        from confluent_kafka.admin import AdminClient, ConfigResource

        def describe(bootstrap, topic):
            admin = AdminClient({"bootstrap.servers": bootstrap})
            meta = admin.list_topics(topic, timeout=10).topics[topic]
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
            configs = admin.describe_configs([resource])[resource].result(10)
            return len(meta.partitions), {k: c.value for k, c in configs.items()}

        @pytest.mark.moldau_topic(partitions=3, cleanup_policy="compact")
        def test_marker(moldau_broker, moldau_topic):
            partitions, configs = describe(moldau_broker.bootstrap_servers, moldau_topic)
            assert partitions == 3
            assert configs["cleanup.policy"] == "compact"

        def test_config(moldau_broker):
            moldau_broker.produce("auto", "x")
            partitions, configs = describe(moldau_broker.bootstrap_servers, "auto")
            assert partitions == 5
            assert configs["retention.ms"] == "7200000"
        """,
        "--moldau-config",
        "num.partitions=5",
        "--moldau-config",
        "log.retention.hours=2",
    )
    result.assert_outcomes(passed=2)


def test_moldau_config_must_be_key_value(pytester: pytest.Pytester) -> None:
    result = run(pytester, "def test_x(moldau_broker): pass", "--moldau-config", "oops")
    assert "moldau config 'oops' is not of the form KEY=VALUE" in result.stderr.str()
    assert result.ret != 0


def test_a_killed_session_broker_comes_back_for_the_next_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_kill(moldau_broker):
            moldau_broker.produce("kept", "before")
            moldau_broker.kill()

        def test_after(moldau_broker):
            assert [r.value for r in moldau_broker.consume("kept")] == [b"before"]

        def test_restart(moldau_broker):
            address = moldau_broker.bootstrap_servers
            moldau_broker.restart()
            assert moldau_broker.bootstrap_servers == address
            assert [r.value for r in moldau_broker.consume("kept")] == [b"before"]
        """,
    )
    result.assert_outcomes(passed=3)


def test_moldau_bootstrap_uses_the_cluster_given(pytester: pytest.Pytester) -> None:
    with broker() as b:
        result = run(
            pytester,
            """
            def test_uses_it(moldau_broker, moldau_topic):
                moldau_broker.produce("from-the-plugin", "hello")
                moldau_broker.produce(moldau_topic, "scratch")

            def test_restart_is_skipped(moldau_broker):
                moldau_broker.restart()

            def test_kill_is_skipped(moldau_broker):
                moldau_broker.kill()
            """,
            "--moldau-bootstrap",
            b.bootstrap_servers,
            "-rs",
        )
        result.assert_outcomes(passed=1, skipped=2)
        result.stdout.fnmatch_lines(
            [f"moldau: moldau_broker is the cluster at {b.bootstrap_servers}"]
        )
        assert [r.value for r in b.consume("from-the-plugin")] == [b"hello"]
        topics = (
            AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics(timeout=10).topics
        )
        assert not [t for t in topics if t.startswith("test_uses_it")], "moldau_topic cleaned up"
        assert b.state() == "running"


def test_failing_tests_get_the_broker_output_of_their_own_run(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import socket, struct

        def unknown_api(bootstrap, key):
            host, port = bootstrap.rsplit(":", 1)
            with socket.create_connection((host, int(port))) as s:
                s.sendall(struct.pack(">ihhi", 8, key, 0, 1))
                s.recv(1)  # the broker closes the connection (and logs why)

        def test_first(moldau_broker):
            unknown_api(moldau_broker.bootstrap_servers, 9001)
            assert False, "first fails"

        def test_second(moldau_broker):
            unknown_api(moldau_broker.bootstrap_servers, 9002)
            assert False, "second fails"

        def test_passes(moldau_broker):
            unknown_api(moldau_broker.bootstrap_servers, 9003)

        def test_quiet(moldau_broker):
            assert False, "the broker had nothing to say"
        """,
    )
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    first = out[out.index("_ test_first _") : out.index("_ test_second _")]
    second = out[out.index("_ test_second _") : out.index("_ test_quiet _")]
    quiet = out[out.index("_ test_quiet _") : out.index("short test summary")]
    assert "moldau broker" not in quiet
    assert "moldau broker 127.0.0.1:" in first and "(running)" in first
    assert "unknown API key 9001" in first and "listening on" in first
    assert "unknown API key 9002" in second
    assert "9001" not in second and "listening on" not in second, "only this test's lines"
    assert "9003" not in out
