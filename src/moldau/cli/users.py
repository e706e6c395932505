"""`moldau users`: SCRAM users (AlterUserScramCredentials / DescribeUserScramCredentials),
what ``kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`` does.

    moldau users create alice --password alice-secret       # SCRAM-SHA-256 and -512
    moldau users create bob --mechanism SCRAM-SHA-512 --iterations 8192
    moldau users list
    moldau users delete alice

The client salts and hashes the password (the broker never sees it); the broker keeps
the salted keys as metadata records.
"""

from __future__ import annotations

from typing import Annotated

import typer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from moldau.cli.common import (
    ADMIN_TIMEOUTS,
    DEFAULT_BOOTSTRAP,
    BootstrapOption,
    CommandConfigOption,
    JsonOption,
    PropertyOption,
    admin_client,
    out,
    print_json,
    report_each,
    result,
    table,
)

app = typer.Typer(help="Create, delete and list SCRAM users.", no_args_is_help=True)

MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
MechanismOption = Annotated[
    list[str] | None,
    typer.Option(
        "--mechanism", "-m", help="SCRAM-SHA-256 and/or SCRAM-SHA-512 [default: both] (repeatable)."
    ),
]


def _mechanisms(names: list[str] | None) -> list[ScramMechanism]:
    chosen = [n.upper() for n in names or MECHANISMS]
    unknown = [n for n in chosen if n not in MECHANISMS]
    if unknown:
        raise typer.BadParameter(f"unknown mechanism {unknown[0]}", param_hint="--mechanism")
    return [MECHANISMS[n] for n in dict.fromkeys(chosen)]


def _alter(
    admin: AdminClient,
    alterations: list[tuple[UserScramCredentialAlteration, ScramMechanism]],
    done: str,
) -> None:
    # One alteration per request: Kafka refuses a user altered twice in one request.
    for alteration, mechanism in alterations:
        futures = admin.alter_user_scram_credentials([alteration], **ADMIN_TIMEOUTS)
        report_each(futures, futures, "{}: ", f"{done} the {_name(mechanism)} credentials of {{}}")


def _name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")


@app.command()
def create(
    user: str,
    password: Annotated[
        str,
        typer.Option(
            prompt=True, hide_input=True, confirmation_prompt=True, help="Asked if not given."
        ),
    ],
    mechanism: MechanismOption = None,
    iterations: Annotated[int, typer.Option(min=4096, max=16384, help="PBKDF2 rounds.")] = 4096,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Create (or change the password of) a SCRAM user."""
    _alter(
        admin_client(bootstrap, properties, command_config),
        [
            (
                UserScramCredentialUpsertion(
                    user, ScramCredentialInfo(m, iterations), password.encode()
                ),
                m,
            )
            for m in _mechanisms(mechanism)
        ],
        "Set",
    )


@app.command()
def delete(
    user: str,
    mechanism: MechanismOption = None,
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """Delete a user's SCRAM credentials (all of its mechanisms unless given)."""
    admin = admin_client(bootstrap, properties, command_config)
    if mechanism is None:
        futures = admin.describe_user_scram_credentials([user], **ADMIN_TIMEOUTS)
        assert isinstance(futures, dict)  # one future per user named
        described = result(futures[user], f"cannot delete {user}: ")
        mechanisms = [info.mechanism for info in described.scram_credential_infos]
    else:
        mechanisms = _mechanisms(mechanism)
    _alter(admin, [(UserScramCredentialDeletion(user, m), m) for m in mechanisms], "Deleted")


@app.command("list")
def list_users(
    bootstrap: BootstrapOption = DEFAULT_BOOTSTRAP,
    as_json: JsonOption = False,
    properties: PropertyOption = None,
    command_config: CommandConfigOption = None,
) -> None:
    """List SCRAM users with their mechanisms and iteration counts."""
    admin = admin_client(bootstrap, properties, command_config)
    future = admin.describe_user_scram_credentials(None, **ADMIN_TIMEOUTS)
    assert not isinstance(future, dict)  # all users: one future
    described = result(future, "cannot list users: ")
    rows = [
        (user, _name(info.mechanism), info.iterations)
        for user, d in sorted(described.items())
        for info in d.scram_credential_infos
    ]
    if as_json:
        print_json([{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows])
        return
    t = table("USER", "MECHANISM", "ITERATIONS")
    for u, m, i in rows:
        t.add_row(u, m, str(i))
    out.print(t)
