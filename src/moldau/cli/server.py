"""`moldau server`: run a node (a single-node broker, or a KRaft broker and/or controller)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from moldau.config.broker import BrokerConfig, ConfigError, Listener
from moldau.protocol.errors import KafkaError

if TYPE_CHECKING:
    from moldau.metadata.security import ScramCredential
    from moldau.metrics.endpoint import MetricsEndpoint
    from moldau.registry.auth import RegistryAccess
    from moldau.registry.runner import RegistryNode
    from moldau.security.scram import ScramMechanism
    from moldau.server.node import Node

log = logging.getLogger("moldau.server")


def server(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Kafka-style server.properties file.")
    ] = None,
    override: Annotated[
        list[str] | None,
        typer.Option("--override", "-o", help="key=value, overrides the file; repeatable."),
    ] = None,
    ephemeral: Annotated[
        bool,
        typer.Option(
            "--ephemeral", help="Keep the data in a new temporary log.dirs, removed on exit."
        ),
    ] = False,
) -> None:
    """Start the broker. Stops cleanly on SIGTERM/SIGINT (flush + checkpoints)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not ephemeral:
        _run(config, override or [])
        return
    data_dir = tempfile.mkdtemp(prefix="moldau-ephemeral-")
    log.info("ephemeral: data in %s, removed on exit", data_dir)
    try:
        _run(config, [*(override or []), f"log.dirs={data_dir}"])
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _run(config: Path | None, override: list[str]) -> None:
    try:
        broker_config = BrokerConfig.load(config, override)
    except ConfigError as e:
        typer.echo(f"moldau server: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    for key in broker_config.unknown:
        log.warning("unknown configuration '%s' was supplied but is not used", key)
    try:
        import uvloop

        uvloop.run(_serve(broker_config))
    except ConfigError as e:
        typer.echo(f"moldau server: invalid configuration: {e}", err=True)
        raise typer.Exit(2) from None
    except (OSError, KafkaError) as e:
        typer.echo(f"moldau server: {e}", err=True)
        raise typer.Exit(1) from None


def _registry_access(config: BrokerConfig, node: Node) -> RegistryAccess:
    """Basic authentication against this node's SCRAM credentials (if configured) and its
    authorizer (if it has one), read from the registry's thread: both are swapped whole."""
    from moldau.registry.auth import BASIC, RegistryAccess

    broker = node.broker
    assert broker is not None, "the registry runs on brokers"

    def credentials(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return broker.publisher.image.security.scram_credential(user, mechanism.type)

    basic = config.get("schema.registry.authentication.method").strip().upper() == BASIC
    authorizer = broker.authorizer.authorizer
    return RegistryAccess(
        credentials if basic else None, None if authorizer is None else authorizer.authorize
    )


def _registry_client(config: BrokerConfig, bound: list[Listener]) -> tuple[str, dict[str, str]]:
    """Where the registry's Kafka client connects and its librdkafka settings, from the
    `schema.registry.kafkastore.*` keys (Confluent's `kafkastore.*`). By default it speaks
    the inter-broker listener's protocol to this node's listener of that protocol (the
    inter-broker one first) and logs in as the broker does there: the listener's
    `ssl.*` files and its JAAS `username`/`password` for the mechanism."""
    from moldau.config.broker import SCHEMA_REGISTRY_KAFKASTORE_PREFIX as PREFIX
    from moldau.registry.kafkastore import KafkastoreConfigError, client_properties
    from moldau.security.listeners import ListenerConfig, SecurityConfigError, listener_protocol

    def own(key: str) -> str | None:
        value = config.props.get(PREFIX + key, "").strip()
        return value or None

    inter = config.get("inter.broker.listener.name")
    try:
        protocol = (own("security.protocol") or listener_protocol(config, inter).value).upper()
        controllers = {n.strip() for n in config.get("controller.listener.names").split(",")}
        brokers = [b for b in bound if b.name not in controllers]
        ordered = sorted(brokers, key=lambda b: b.name != inter)
        chosen = next(
            (b for b in ordered if listener_protocol(config, b.name).value == protocol), None
        )
    except SecurityConfigError as e:
        raise ConfigError(str(e)) from None
    bootstrap = own("bootstrap.servers")
    if bootstrap is None:
        if chosen is None:
            raise ConfigError(
                f"{PREFIX}security.protocol: this node has no {protocol} listener for the "
                f"schema registry to connect to (set {PREFIX}bootstrap.servers)"
            )
        bootstrap = f"{chosen.host or '127.0.0.1'}:{chosen.port}"
    listener = ListenerConfig(config, chosen.name) if chosen else None

    def get(key: str) -> str | None:
        if key == "security.protocol":
            return protocol
        value = own(key)
        if value is not None or listener is None:
            return value
        if key == "sasl.mechanism":
            return listener.get("sasl.mechanism.inter.broker.protocol")
        return listener.get(key) if key.startswith("ssl.") else None

    try:
        props = client_properties(get, PREFIX)
    except KafkastoreConfigError as e:
        raise ConfigError(str(e)) from None
    if "sasl.mechanism" in props and "sasl.username" not in props:
        jaas = listener.jaas(props["sasl.mechanism"]) if listener else None
        if jaas is None or "username" not in jaas.options or "password" not in jaas.options:
            raise ConfigError(
                f"{PREFIX}sasl.jaas.config: the schema registry needs a username and password "
                f"for {props['sasl.mechanism']} (or the listener's JAAS config to give them)"
            )
        props["sasl.username"] = jaas.options["username"]
        props["sasl.password"] = jaas.options["password"]
    return bootstrap, props


async def _start_registry(
    config: BrokerConfig, node: Node, bound: list[Listener]
) -> RegistryNode | None:
    """The schema registry of `schema.registry.listeners`, a Kafka client of this node's
    inter-broker listener (so it is one code path with `moldau registry`). An https
    listener takes its keystore from `listener.name.schema_registry.ssl.*`, else `ssl.*`."""
    from moldau.admin.preflight import Unreachable, client_security
    from moldau.security.listeners import ListenerConfig
    from moldau.security.tls import TlsConfigError, client_context, server_context

    url = config.schema_registry_listener
    if url is None:
        return None
    try:  # the registry's dependencies are an extra
        from moldau.registry.errors import RegistryError
        from moldau.registry.runner import RegistryNode
    except ImportError as e:
        raise ConfigError(
            f"schema.registry.listeners: the registry is unavailable ({e}); install "
            "'moldau[registry]'"
        ) from None
    bootstrap, client_config = _registry_client(config, bound)
    voters = config.get("controller.quorum.voters")
    tls_config = ListenerConfig(config, "SCHEMA_REGISTRY").get
    try:
        https = url.startswith("https:")
        tls = server_context(tls_config) if https else None
        forward_tls = client_context(tls_config) if https else None
    except TlsConfigError as e:
        raise ConfigError(f"schema.registry.listeners: {e}") from None
    try:
        security = client_security(client_config)
    except Unreachable as e:
        raise ConfigError(f"schema.registry.kafkastore: {e}") from None
    registry = RegistryNode(
        bootstrap,
        url,
        client_config=client_config,
        security=security,
        advertised=config.get("schema.registry.advertised.listener") or None,
        replication_factor=min(3, max(1, len([v for v in voters.split(",") if v.strip()]))),
        tls=tls,
        access=_registry_access(config, node),
        forward_tls=forward_tls,
    )
    try:
        await asyncio.to_thread(registry.start)
    except RegistryError as e:
        raise OSError(f"the schema registry did not start: {e.message}") from None
    print(f"schema registry on {registry.url}", flush=True)
    return registry


async def _serve(config: BrokerConfig) -> None:
    from moldau.metrics.endpoint import start_metrics
    from moldau.server.node import Node
    from moldau.storage.resources import raise_open_files_limit

    node = Node(config)
    # SIGTERM/SIGINT stop the node from here on: one during the start cuts it short
    # and stops what had started, as cleanly as a stop of a running node.
    stop = node.failed
    signals: list[str] = []
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, sig, signals, stop)
    node.lock_log_dirs()  # before anything else: a second process on these dirs stops here
    raise_open_files_limit()
    metrics = start_metrics(config)  # binds next: a taken port fails before the node starts
    try:
        await _run_node(config, node, stop, signals, metrics)
    finally:
        if metrics is not None:
            metrics.close()


def _on_signal(sig: signal.Signals, signals: list[str], stop: asyncio.Event) -> None:
    signals.append(sig.name)
    stop.set()


async def _run_node(
    config: BrokerConfig,
    node: Node,
    stop: asyncio.Event,
    signals: list[str],
    metrics: MetricsEndpoint | None,
) -> None:
    """Start the node (cut short by ``stop``), serve until ``stop``, then stop it cleanly;
    a start that fails or times out stops what had started before the error goes up."""
    try:
        bound = await _start(node, stop)
    except BaseException:
        await node.stop()
        raise
    if bound is None:
        log.info(
            "%s during the start (waiting for %s): stopping what had started",
            signals[0] if signals else "the metadata log replica failed",
            node.starting,
        )
        await node.stop()
        print("shut down cleanly: start cut short, logs flushed, checkpoints written", flush=True)
        return
    for b in bound:
        print(f"listening on {b.host}:{b.port}", flush=True)
    if metrics is not None:
        metrics.watch_node(node)
        print(f"metrics on {metrics.url}", flush=True)
    try:
        registry = await _start_registry(config, node, bound)
    except BaseException:
        await node.stop()  # a registry that cannot start stops the server, cleanly
        raise
    if registry is not None and node.broker is not None:
        node.broker.schema_validation.attach(registry)
    await stop.wait()
    log.info("shutting down")
    if registry is not None:
        await asyncio.to_thread(registry.stop)
    await node.stop()
    print("shut down cleanly: logs flushed, checkpoints written", flush=True)


async def _start(node: Node, stop: asyncio.Event) -> list[Listener] | None:
    """``node.start()``, or None once ``stop`` is set before it is done: the start is
    cancelled at its next await (nothing is half written at one)."""
    start = asyncio.ensure_future(node.start())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait([start, stopping], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not stop.is_set():
        return start.result()
    start.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await start
    return None
