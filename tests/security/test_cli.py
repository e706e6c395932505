"""`moldau users` and `moldau acls` as an operator runs them (subprocesses, logged in as a
super user through ``--command-config``), checked by what they change: a created user
can log in with SCRAM, an ACL lets a principal in, removing it shuts them out again."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from moldau.cli.main import app
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.security.conftest import broker_configs
from tests.security.raw import SaslRawClient
from tests.security.secure import Listeners


@pytest.fixture(scope="module")
def cli_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: dict[str, Any]
) -> Iterator[Listeners]:
    configs = broker_configs(certs, **{"allow.everyone.if.no.acl.found": "false"})
    broker = Listeners(
        tmp_path_factory.mktemp("cli"),
        {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "PLAINTEXT": "PLAINTEXT"},
        configs,
    )
    yield broker.start()
    broker.close()


@pytest.fixture(scope="module")
def admin_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-config") / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\n"
        "sasl.username=admin\nsasl.password=admin-secret\n"
    )
    return path


def moldau(
    broker: Listeners, config: Path, command: str, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MOLDAU_BOOTSTRAP": broker.bootstrap("SASL_PLAINTEXT")}
    args = [sys.executable, "-m", "moldau", *shlex.split(command), "--command-config", str(config)]
    proc = subprocess.run(args, capture_output=True, env=env, timeout=120, text=True)
    if ok:
        assert proc.returncode == 0, f"{command}: {proc.stdout}{proc.stderr}"
    return proc


def login(broker: Listeners, mechanism: str, user: str, password: str) -> int:
    with SaslRawClient(broker.bootstrap("SASL_PLAINTEXT")) as raw:
        return raw.login(mechanism, user, password).error_code


def describe_error(broker: Listeners, topic: str) -> int:
    with SaslRawClient(broker.bootstrap("SASL_PLAINTEXT")) as raw:
        assert raw.login("SCRAM-SHA-512", "dora", "dora-pw").error_code == E.NONE
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        return raw.request(request, 12).topics[0].error_code


def test_users_create_list_delete(cli_broker: Listeners, admin_config: Path) -> None:
    moldau(cli_broker, admin_config, "users create dora --password dora-pw --iterations 8192")
    moldau(cli_broker, admin_config, "users create emil --password emil-pw -m SCRAM-SHA-512")
    listed = json.loads(moldau(cli_broker, admin_config, "users list --json").stdout)
    assert {(u["user"], u["mechanism"], u["iterations"]) for u in listed} >= {
        ("dora", "SCRAM-SHA-256", 8192), ("dora", "SCRAM-SHA-512", 8192), ("emil", "SCRAM-SHA-512", 4096)
    }  # fmt: skip
    assert login(cli_broker, "SCRAM-SHA-256", "dora", "dora-pw") == E.NONE
    assert login(cli_broker, "SCRAM-SHA-256", "emil", "emil-pw") == E.SASL_AUTHENTICATION_FAILED
    moldau(cli_broker, admin_config, "users delete emil")
    assert login(cli_broker, "SCRAM-SHA-512", "emil", "emil-pw") == E.SASL_AUTHENTICATION_FAILED
    error = moldau(
        cli_broker, admin_config, "users create x --password pw --iterations 100", ok=False
    )
    assert error.returncode == 2 and "4096" in error.stderr  # refused before reaching the broker
    missing = moldau(cli_broker, admin_config, "users delete nobody", ok=False)
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr


def test_acls_add_list_remove(cli_broker: Listeners, admin_config: Path) -> None:
    moldau(cli_broker, admin_config, "users create dora --password dora-pw")
    moldau(cli_broker, admin_config, "topics create cli-orders --partitions 1")
    assert describe_error(cli_broker, "cli-orders") == E.TOPIC_AUTHORIZATION_FAILED
    added = moldau(cli_broker, admin_config,
                   "acls add --allow-principal User:dora --consumer --topic cli-orders --group billing")  # fmt: skip
    assert added.stdout.count("Added") == 3  # Read + Describe on the topic, Read on the group
    assert describe_error(cli_broker, "cli-orders") == E.NONE
    moldau(cli_broker, admin_config,
           "acls add --deny-principal User:dora --operation Describe --topic cli- --resource-pattern-type prefixed")  # fmt: skip
    assert describe_error(cli_broker, "cli-orders") == E.TOPIC_AUTHORIZATION_FAILED  # deny wins
    listed = json.loads(moldau(cli_broker, admin_config,
                               "acls list --topic cli-orders --resource-pattern-type match --json").stdout)  # fmt: skip
    assert {(a["pattern_type"], a["name"], a["operation"], a["permission"]) for a in listed} == {
        ("LITERAL", "cli-orders", "READ", "ALLOW"),
        ("LITERAL", "cli-orders", "DESCRIBE", "ALLOW"),
        ("PREFIXED", "cli-", "DESCRIBE", "DENY"),
    }
    table = moldau(cli_broker, admin_config, "acls list --principal User:dora").stdout
    assert "billing" in table and "GROUP" in table
    removed = moldau(cli_broker, admin_config,
                     "acls remove --deny-principal User:dora --topic cli- --resource-pattern-type prefixed --force")  # fmt: skip
    assert "Removed TOPIC:PREFIXED:cli- DENY User:dora DESCRIBE" in removed.stdout
    assert describe_error(cli_broker, "cli-orders") == E.NONE
    moldau(cli_broker, admin_config, "acls remove --topic cli-orders --force")
    assert describe_error(cli_broker, "cli-orders") == E.TOPIC_AUTHORIZATION_FAILED
    bad = moldau(
        cli_broker,
        admin_config,
        "acls add --allow-principal User:dora --operation Fly --topic t",
        ok=False,
    )
    assert bad.returncode == 2 and "unknown operation" in bad.stderr


def test_every_command_logs_in_with_command_config(cli_broker: Listeners, admin_config: Path):
    """produce, consume and the commands that speak the protocol themselves (leader-election,
    reassign, cluster describe) take --command-config as the admin commands do."""
    moldau(cli_broker, admin_config, "topics create cli-login --partitions 1")
    env = {**os.environ, "MOLDAU_BOOTSTRAP": cli_broker.bootstrap("SASL_PLAINTEXT")}
    produce = [sys.executable, "-m", "moldau", "produce", "cli-login"]
    produce += ["--command-config", str(admin_config)]
    done = subprocess.run(produce, input="a\nb\n", capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    consumed = moldau(cli_broker, admin_config, "consume cli-login --from-beginning -n 2")
    assert consumed.stdout.splitlines() == ["a", "b"]
    elected = moldau(cli_broker, admin_config, "leader-election --topic cli-login")
    assert "Valid replica already elected for partitions cli-login-0" in elected.stdout
    listed = moldau(cli_broker, admin_config, "reassign --list")
    assert "No partition reassignment is in progress" in listed.stdout
    described = json.loads(moldau(cli_broker, admin_config, "cluster describe --json").stdout)
    assert "cli-login" in described["topics"]


# --- a cluster the client cannot use: one line, the address and the cause, at once -------

WRONG = {
    # listener, client properties, what the line says
    "plaintext-to-tls": ("SSL", {}, "a TLS listener?"),
    "tls-to-plaintext": ("PLAINTEXT", {"security.protocol": "SSL"}, "plaintext listener?"),
    "plaintext-to-sasl": ("SASL_PLAINTEXT", {}, "a SASL listener?"),
    "bad-plain-password": (
        "SASL_PLAINTEXT",
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
         "sasl.username": "admin", "sasl.password": "wrong"},
        "authentication failed",
    ),
    "bad-scram-password": (
        "SASL_PLAINTEXT",
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
         "sasl.username": "nobody", "sasl.password": "wrong"},
        "authentication failed",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_client_that_does_not_fit_the_listener_fails_at_once_in_one_line(
    cli_broker: Listeners, certs: dict[str, Any], tmp_path: Path, case: str
) -> None:
    listener, properties, cause = WRONG[case]
    if properties.get("security.protocol") == "SSL":
        properties = {**properties, "ssl.ca.location": str(certs["pki"].ca_file)}
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    address = cli_broker.bootstrap(listener)
    args = ["-b", address, "--command-config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "moldau", "topics", "list", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done
    assert len(done.stderr.splitlines()) == 1 and not done.stdout, done.stderr
    assert f"cannot reach {address}: " in done.stderr and cause in done.stderr, done.stderr
    for command in ("topics list", "reassign --list", "cluster describe"):
        # In-process, so the time is the command's and not an interpreter's start-up.
        started = time.monotonic()
        result = CliRunner().invoke(app, [*shlex.split(command), *args])
        took = time.monotonic() - started
        assert result.exit_code == 1 and cause in result.stderr, (command, result.stderr)
        assert took < 5, f"{command}: {took:.1f} s (librdkafka alone waits 15 s)"
