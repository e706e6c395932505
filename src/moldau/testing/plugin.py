"""The pytest plugin (entry point ``pytest11``, so installing Moldau is enough).

Fixtures:

- ``moldau_broker`` (session): one broker for the whole run, a
  :class:`~moldau.testing.BrokerProcess`. Server properties come from the ``moldau_config``
  ini lines and ``--moldau-config key=value`` (repeatable). A test that stops or kills it
  gets it started again (same port, same data) before the next test that uses it.
  ``--moldau-bootstrap HOST:PORT`` uses a running Kafka-protocol cluster instead (e.g. to
  run the same tests against Apache Kafka); tests that call ``restart()`` or ``kill()``
  are then skipped.
- ``moldau_topic`` (function): the name of a new topic on ``moldau_broker``, deleted
  after the test. ``@pytest.mark.moldau_topic(partitions=3, cleanup_policy="compact")``
  sets its partitions and configs.
- ``moldau_cluster`` (session): a local KRaft cluster of ``--moldau-cluster-nodes`` (3)
  combined nodes, a :class:`~moldau.testing.cluster.ClusterProcess`, with the same server
  properties. Nodes a test killed, stopped or paused are back before the next test that
  uses it. Under ``--moldau-bootstrap`` it is that cluster, and tests that kill, stop,
  pause or restart nodes are skipped.

When a test fails, the output its brokers (every broker started through
:mod:`moldau.testing` and not closed) wrote during the test is added to the report.
``-p no:moldau.testing.plugin`` turns the plugin off.
"""

from __future__ import annotations

import itertools
import re
import uuid
import warnings
from collections.abc import Generator, Iterator
from typing import Any, NoReturn

import pluggy
import pytest

from moldau.testing.clients import ClientHelpers, ExternalCluster
from moldau.testing.cluster import ClusterProcess
from moldau.testing.launcher import launcher
from moldau.testing.process import TEST_DEFAULTS, BrokerProcess, running_brokers

REPORTED_LINES = 200

_session_broker = pytest.StashKey[BrokerProcess]()
_session_cluster = pytest.StashKey[ClusterProcess]()
_session_configs = pytest.StashKey[dict[str, str]]()
_prestarted = pytest.StashKey[bool]()
_output_marks = pytest.StashKey[dict[BrokerProcess, int]]()
_topic_numbers = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("moldau", "Kafka broker for tests (moldau.testing)")
    group.addoption(
        "--moldau-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="server property of the moldau_broker fixture's broker (repeatable)",
    )
    group.addoption(
        "--moldau-bootstrap",
        metavar="HOST:PORT",
        help="use this running Kafka-protocol cluster for moldau_broker instead of a new broker",
    )
    group.addoption(
        "--moldau-cluster-nodes",
        type=int,
        default=3,
        metavar="N",
        help="nodes of the moldau_cluster fixture's cluster (default 3)",
    )
    parser.addini(
        "moldau_config",
        "server properties (KEY=VALUE lines) of moldau_broker and moldau_cluster",
        type="linelist",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_session_configs] = _parse_configs(config)
    config.addinivalue_line(
        "markers",
        "moldau_topic(partitions=1, **configs): partitions and topic configs of moldau_topic",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    bootstrap = config.getoption("moldau_bootstrap")
    return f"moldau: moldau_broker is the cluster at {bootstrap}" if bootstrap else None


def _parse_configs(config: pytest.Config) -> dict[str, str]:
    configs = dict(TEST_DEFAULTS)
    for pair in [*config.getini("moldau_config"), *config.getoption("moldau_config")]:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"moldau config {pair!r} is not of the form KEY=VALUE")
        configs[key.strip()] = value.strip()
    return configs


class _ExternalBroker(ExternalCluster):
    """``moldau_broker`` under ``--moldau-bootstrap``: what needs our own process skips."""

    def restart(self) -> NoReturn:
        pytest.skip("restart() needs a broker of its own (--moldau-bootstrap is set)")

    def kill(self) -> NoReturn:
        pytest.skip("kill() needs a broker of its own (--moldau-bootstrap is set)")

    def stop(self) -> NoReturn:
        pytest.skip("stop() needs a broker of its own (--moldau-bootstrap is set)")


class _ExternalNodes(ExternalCluster):
    """``moldau_cluster`` under ``--moldau-bootstrap``: what needs our own nodes skips."""

    def _skip(self, *args: object, **kwargs: object) -> NoReturn:
        pytest.skip("this needs a cluster of its own (--moldau-bootstrap is set)")

    kill = stop = restart = pause = resume = start_node = _skip


def pytest_itemcollected(item: pytest.Item) -> None:
    """Start the fork server when the first test that needs a broker is collected: it
    imports the broker while pytest collects the rest."""
    config = item.config
    if config.stash.get(_prestarted, False) or config.option.collectonly:
        return
    wanted = {"moldau_broker", "moldau_topic", "moldau_cluster"}.intersection(
        getattr(item, "fixturenames", ())
    )
    if wanted and not config.getoption("moldau_bootstrap"):
        config.stash[_prestarted] = True
        launcher()


@pytest.fixture(scope="session")
def moldau_broker(pytestconfig: pytest.Config) -> Iterator[ClientHelpers]:
    """One Moldau broker for the test session (or the cluster at --moldau-bootstrap)."""
    bootstrap = pytestconfig.getoption("moldau_bootstrap")
    if bootstrap:
        yield _ExternalBroker(bootstrap)
        return
    with BrokerProcess(configs=pytestconfig.stash[_session_configs]) as running:
        pytestconfig.stash[_session_broker] = running
        yield running
        del pytestconfig.stash[_session_broker]


@pytest.fixture(scope="session")
def moldau_cluster(pytestconfig: pytest.Config) -> Iterator[ClientHelpers]:
    """A local Moldau cluster for the test session (or the cluster at --moldau-bootstrap)."""
    bootstrap = pytestconfig.getoption("moldau_bootstrap")
    if bootstrap:
        yield _ExternalNodes(bootstrap)
        return
    nodes = pytestconfig.getoption("moldau_cluster_nodes")
    with ClusterProcess(nodes, configs=pytestconfig.stash[_session_configs]) as running:
        pytestconfig.stash[_session_cluster] = running
        yield running
        del pytestconfig.stash[_session_cluster]


@pytest.fixture
def moldau_topic(moldau_broker: ClientHelpers, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new topic for this test (name from the test's), deleted afterwards."""
    marker = request.node.get_closest_marker("moldau_topic")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    partitions = int(options.pop("partitions", 1))
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:180]
    name = f"{base}-{next(_topic_numbers)}-{uuid.uuid4().hex[:6]}"
    moldau_broker.create_topic(name, partitions, **options)
    yield name
    if isinstance(moldau_broker, BrokerProcess) and not moldau_broker.running:
        return  # the test stopped it; the topic goes with the session's data
    try:
        moldau_broker.delete_topic(name)
    except Exception as e:  # cleanup only: the test's outcome stands
        warnings.warn(f"moldau_topic: could not delete {name!r}: {e}", stacklevel=1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    session_broker = item.config.stash.get(_session_broker, None)
    if (
        session_broker is not None
        and "moldau_broker" in getattr(item, "fixturenames", ())
        and not session_broker.running
    ):
        session_broker.start()  # a previous test stopped or killed it
    session_cluster = item.config.stash.get(_session_cluster, None)
    if session_cluster is not None and "moldau_cluster" in getattr(item, "fixturenames", ()):
        session_cluster.heal()  # nodes a previous test stopped, killed or paused
    item.stash[_output_marks] = {b: b.lines_seen for b in running_brokers()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    """Attach what the brokers wrote during a failing test (setup and teardown included)."""
    report = (yield).get_result()
    if not report.failed:
        return
    marks = item.stash.get(_output_marks, {})
    for b in running_brokers():
        b.settle_output()
        lines = b.output_since(marks.get(b, 0))[-REPORTED_LINES:]
        if lines or not b.running:  # a quiet, healthy broker has nothing to tell
            where = f"{b.host}:{b.port}" if b.port else str(b.data_dir)
            report.sections.append((f"moldau broker {where} ({b.state()})", "\n".join(lines)))
