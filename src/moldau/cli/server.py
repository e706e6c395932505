"""`moldau server`: run a node (a single-node broker, or a KRaft broker and/or controller)."""

from __future__ import annotations

import asyncio
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


async def _start_registry(
    config: BrokerConfig, node: Node, bound: list[Listener]
) -> RegistryNode | None:
    """The schema registry of `schema.registry.listeners`, a Kafka client of this node's
    inter-broker listener (so it is one code path with `moldau registry`). An https
    listener takes its keystore from `listener.name.schema_registry.ssl.*`, else `ssl.*`."""
    from moldau.security.listeners import ListenerConfig, SecurityProtocol, listener_protocol
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
    name = config.get("inter.broker.listener.name")
    own = [b for b in bound if b.name == name]
    if not own or listener_protocol(config, name) != SecurityProtocol.PLAINTEXT:
        raise ConfigError(
            f"schema.registry.listeners: the registry needs the PLAINTEXT listener {name} "
            "(inter.broker.listener.name) to reach its node"
        )
    voters = config.get("controller.quorum.voters")
    tls_config = ListenerConfig(config, "SCHEMA_REGISTRY").get
    try:
        https = url.startswith("https:")
        tls = server_context(tls_config) if https else None
        forward_tls = client_context(tls_config) if https else None
    except TlsConfigError as e:
        raise ConfigError(f"schema.registry.listeners: {e}") from None
    registry = RegistryNode(
        f"{own[0].host or '127.0.0.1'}:{own[0].port}",
        url,
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
    node.lock_log_dirs()  # before anything else: a second process on these dirs stops here
    raise_open_files_limit()
    metrics = start_metrics(config)  # binds next: a taken port fails before the node starts
    bound = await node.start()
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
    stop = node.failed
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    if registry is not None:
        await asyncio.to_thread(registry.stop)
    await node.stop()
    if metrics is not None:
        metrics.close()
    print("shut down cleanly: logs flushed, checkpoints written", flush=True)
