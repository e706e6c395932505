"""`moldau schemas`: subjects and schemas of a schema registry (Moldau's or Confluent's),
over its REST API.

    moldau schemas register orders-value --file order.avsc
    moldau schemas list
    moldau schemas get orders-value --version latest
    moldau schemas check orders-value --file order-v2.avsc
    moldau schemas config orders-value --level FULL
    moldau schemas delete orders-value [--version 2] [--permanent]
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from moldau.cli.common import JsonOption, fail, out, print_json, table

app = typer.Typer(help="Register, read, check and delete schemas.", no_args_is_help=True)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
UrlOption = Annotated[
    str,
    typer.Option("--url", envvar="MOLDAU_SCHEMA_REGISTRY", help="The schema registry's URL."),
]
SubjectArgument = Annotated[str, typer.Argument(help="Subject, e.g. orders-value.")]
FileOption = Annotated[
    Path, typer.Option("--file", "-f", exists=True, dir_okay=False, help="The schema's text.")
]
TypeOption = Annotated[str, typer.Option("--type", "-t", help="AVRO, JSON or PROTOBUF.")]
DEFAULT_URL = "http://127.0.0.1:8081"


def request(url: str, path: str, method: str = "GET", body: Any = None) -> Any:
    """The decoded answer; a registry error ends the command with its code and message."""
    call = urllib.request.Request(
        url.rstrip("/") + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE},
    )
    try:
        with urllib.request.urlopen(call, timeout=60) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as e:
        try:
            error = json.loads(e.read())
            fail(f"{error['error_code']}: {error['message']}")
        except (ValueError, KeyError, TypeError):
            fail(f"HTTP {e.code} from {url}")
    except OSError as e:
        fail(f"cannot reach the schema registry at {url}: {e}")


def quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def schema_body(file: Path, schema_type: str) -> dict[str, Any]:
    return {"schema": file.read_text(), "schemaType": schema_type.upper()}


@app.command("list")
def list_subjects(
    url: UrlOption = DEFAULT_URL,
    deleted: Annotated[bool, typer.Option(help="Include soft-deleted subjects.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Subjects and their versions."""
    subjects = request(url, f"/subjects?deleted={str(deleted).lower()}")
    rows = [
        (s, request(url, f"/subjects/{quoted(s)}/versions?deleted={str(deleted).lower()}"))
        for s in subjects
    ]
    if as_json:
        print_json([{"subject": s, "versions": v} for s, v in rows])
        return
    shown = table("SUBJECT", "VERSIONS")
    for s, v in rows:
        shown.add_row(s, ", ".join(map(str, v)))
    out.print(shown)


@app.command("get")
def get(
    subject: SubjectArgument,
    url: UrlOption = DEFAULT_URL,
    version: Annotated[str, typer.Option(help="A version number or latest.")] = "latest",
) -> None:
    """One version of a subject: its id, version and schema, as JSON."""
    print_json(request(url, f"/subjects/{quoted(subject)}/versions/{version}"))


@app.command("register")
def register(
    subject: SubjectArgument,
    file: FileOption,
    url: UrlOption = DEFAULT_URL,
    schema_type: TypeOption = "AVRO",
    normalize: Annotated[bool, typer.Option(help="Register the normalized form.")] = False,
) -> None:
    """Register a schema under a subject; prints its id."""
    answer = request(
        url,
        f"/subjects/{quoted(subject)}/versions?normalize={str(normalize).lower()}",
        "POST",
        schema_body(file, schema_type),
    )
    typer.echo(answer["id"])


@app.command("check")
def check(
    subject: SubjectArgument,
    file: FileOption,
    url: UrlOption = DEFAULT_URL,
    schema_type: TypeOption = "AVRO",
    version: Annotated[
        str | None, typer.Option(help="Check against this version only (default: the level's).")
    ] = None,
) -> None:
    """Whether a schema may be registered under the subject (exit 1 if not, with why)."""
    path = f"/compatibility/subjects/{quoted(subject)}/versions"
    if version is not None:
        path += f"/{version}"
    answer = request(url, path + "?verbose=true", "POST", schema_body(file, schema_type))
    if answer["is_compatible"]:
        typer.echo("compatible")
        return
    typer.echo("incompatible:")
    for message in answer.get("messages", []):
        typer.echo(f"  {message}")
    raise typer.Exit(1)


@app.command("delete")
def delete(
    subject: SubjectArgument,
    url: UrlOption = DEFAULT_URL,
    version: Annotated[str | None, typer.Option(help="One version (default: all).")] = None,
    permanent: Annotated[
        bool, typer.Option(help="Hard delete (after a soft delete): the records are removed.")
    ] = False,
) -> None:
    """Soft-delete (or with --permanent, hard-delete) a subject or one of its versions."""
    path = f"/subjects/{quoted(subject)}"
    if version is not None:
        path += f"/versions/{version}"
    deleted = request(url, f"{path}?permanent={str(permanent).lower()}", "DELETE")
    typer.echo(f"deleted version(s) {deleted}")


@app.command("config")
def config(
    subject: Annotated[str | None, typer.Argument(help="Subject (default: global).")] = None,
    url: UrlOption = DEFAULT_URL,
    level: Annotated[
        str | None,
        typer.Option(
            help="Set the compatibility level: NONE, BACKWARD, FORWARD, FULL (+_TRANSITIVE)."
        ),
    ] = None,
) -> None:
    """Show (or with --level, set) the compatibility level, global or of one subject."""
    path = "/config" if subject is None else f"/config/{quoted(subject)}"
    if level is not None:
        request(url, path, "PUT", {"compatibility": level.upper()})
    shown = request(url, path if subject is None else path + "?defaultToGlobal=true")
    typer.echo(shown["compatibilityLevel"])
