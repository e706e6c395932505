"""Confluent Schema Registry's REST API (starlette), over a `SchemaRegistry`.

Every operation runs in a worker thread (it may wait on the store). A write that reaches
a node that is not the primary is forwarded over HTTP to the primary's URL, as Confluent's
registry and Karapace forward it, so any node takes any request.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from moldau.registry import errors
from moldau.registry.errors import RegistryError
from moldau.registry.service import SchemaRegistry, parse_bool

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
FORWARD_TIMEOUT_S = 60.0
ELECTION_WAIT_S = 30.0


class Primary(Protocol):
    """Who writes: this node, or the URL of the node that does (None: not elected yet)."""

    def is_primary(self) -> bool: ...

    def primary_url(self) -> str | None: ...


class Standalone:
    """The only node: always the primary."""

    def is_primary(self) -> bool:
        return True

    def primary_url(self) -> str | None:
        return None


def respond(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status, media_type=CONTENT_TYPE)


def error_response(error: RegistryError) -> Response:
    return respond({"error_code": error.error_code, "message": error.message}, error.status)


def _schema_id(request: Request) -> int:
    raw = request.path_params["id"]
    if not raw.lstrip("-").isdigit():
        raise errors.schema_not_found(f"Schema {raw} not found")
    return int(raw)


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise errors.bad_request("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    return body


def build_app(registry: SchemaRegistry, primary: Primary) -> Starlette:
    """The ASGI app serving `registry`'s API."""

    def query(request: Request, name: str) -> bool:
        return parse_bool(request.query_params.get(name))

    def read(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                return await _answer(await handler(request))
            except RegistryError as e:
                return error_response(e)

        return endpoint

    def write(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                return await _write(request, primary, lambda: _answer_later(handler, request))
            except RegistryError as e:
                return error_response(e)

        return endpoint

    async def _answer(result: Any) -> Response:
        return result if isinstance(result, Response) else respond(result)

    async def _answer_later(handler: Callable[[Request], Any], request: Request) -> Response:
        return await _answer(await handler(request))

    def run(fn: Callable[..., Any], *args: Any) -> Any:
        return asyncio.to_thread(fn, *args)

    async def root(request: Request) -> Any:
        return {}

    async def subjects(request: Request) -> Any:
        return await run(registry.subjects, query(request, "deleted"))

    async def versions(request: Request) -> Any:
        s = request.path_params["subject"]
        return await run(registry.version_numbers, s, query(request, "deleted"))

    async def version(request: Request) -> Any:
        p = request.path_params
        deleted, fmt = query(request, "deleted"), request.query_params.get("format")
        return await run(registry.version_json, p["subject"], p["version"], deleted, fmt)

    async def version_schema(request: Request) -> Any:
        p = request.path_params
        found = await run(registry.version, p["subject"], p["version"], query(request, "deleted"))
        return Response(found.schema.text, media_type=CONTENT_TYPE)

    async def referenced_by(request: Request) -> Any:
        p = request.path_params
        return await run(registry.referenced_by, p["subject"], p["version"])

    async def register(request: Request) -> Any:
        s = request.path_params["subject"]
        body = await _body(request)
        return {"id": await run(registry.register, s, body, query(request, "normalize"))}

    async def lookup(request: Request) -> Any:
        s = request.path_params["subject"]
        body = await _body(request)
        normalize, deleted = query(request, "normalize"), query(request, "deleted")
        return await run(registry.lookup, s, body, normalize, deleted)

    async def delete_subject(request: Request) -> Any:
        s = request.path_params["subject"]
        return await run(registry.delete_subject, s, query(request, "permanent"))

    async def delete_version(request: Request) -> Any:
        p = request.path_params
        permanent = query(request, "permanent")
        return await run(registry.delete_version, p["subject"], p["version"], permanent)

    async def schema_by_id(request: Request) -> Any:
        subject, fmt = request.query_params.get("subject"), request.query_params.get("format")
        return await run(registry.schema_by_id, _schema_id(request), subject, fmt)

    async def schema_text_by_id(request: Request) -> Any:
        found = await run(registry.schema_by_id, _schema_id(request))
        return Response(found["schema"], media_type=CONTENT_TYPE)

    async def id_subjects(request: Request) -> Any:
        pairs = await run(registry.subjects_of_id, _schema_id(request), query(request, "deleted"))
        return sorted({p["subject"] for p in pairs})

    async def id_versions(request: Request) -> Any:
        return await run(registry.subjects_of_id, _schema_id(request), query(request, "deleted"))

    async def types(request: Request) -> Any:
        return registry.types()

    async def compatibility(request: Request) -> Any:
        p = request.path_params
        body = await _body(request)
        messages = await run(
            registry.check, p["subject"], p.get("version"), body, query(request, "normalize")
        )
        answer: dict[str, Any] = {"is_compatible": not messages}
        if query(request, "verbose"):
            answer["messages"] = messages
        return answer

    async def get_config(request: Request) -> Any:
        s = request.path_params.get("subject")
        return await run(registry.config, s, query(request, "defaultToGlobal"))

    async def put_config(request: Request) -> Any:
        s = request.path_params.get("subject")
        return await run(registry.set_config, s, await _body(request))

    async def delete_config(request: Request) -> Any:
        return await run(registry.delete_config, request.path_params.get("subject"))

    async def get_mode(request: Request) -> Any:
        s = request.path_params.get("subject")
        return await run(registry.mode, s, query(request, "defaultToGlobal"))

    async def put_mode(request: Request) -> Any:
        s = request.path_params.get("subject")
        return await run(registry.set_mode, s, await _body(request), query(request, "force"))

    async def delete_mode(request: Request) -> Any:
        return await run(registry.delete_mode, request.path_params.get("subject"))

    subject = "/subjects/{subject:path}"
    routes = [
        Route("/", read(root)),
        Route("/subjects", read(subjects)),
        Route(subject + "/versions/{version}/schema", read(version_schema)),
        Route(subject + "/versions/{version}/referencedby", read(referenced_by)),
        Route(subject + "/versions/{version}", read(version), methods=["GET"]),
        Route(subject + "/versions/{version}", write(delete_version), methods=["DELETE"]),
        Route(subject + "/versions", read(versions), methods=["GET"]),
        Route(subject + "/versions", write(register), methods=["POST"]),
        Route(subject, read(lookup), methods=["POST"]),
        Route(subject, write(delete_subject), methods=["DELETE"]),
        Route("/schemas/types", read(types)),
        Route("/schemas/ids/{id}", read(schema_by_id)),
        Route("/schemas/ids/{id}/schema", read(schema_text_by_id)),
        Route("/schemas/ids/{id}/subjects", read(id_subjects)),
        Route("/schemas/ids/{id}/versions", read(id_versions)),
        Route(
            "/compatibility" + subject + "/versions/{version}",
            read(compatibility),
            methods=["POST"],
        ),
        Route("/compatibility" + subject + "/versions", read(compatibility), methods=["POST"]),
    ]
    for path in ("/config", "/config/{subject:path}"):
        routes.append(Route(path, read(get_config), methods=["GET"]))
        routes.append(Route(path, write(put_config), methods=["PUT"]))
        routes.append(Route(path, write(delete_config), methods=["DELETE"]))
    for path in ("/mode", "/mode/{subject:path}"):
        routes.append(Route(path, read(get_mode), methods=["GET"]))
        routes.append(Route(path, write(put_mode), methods=["PUT"]))
        routes.append(Route(path, write(delete_mode), methods=["DELETE"]))

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return respond(
            {"error_code": status, "message": f"HTTP {status}: {request.url.path}"}, status
        )

    async def internal(request: Request, exc: Exception) -> Response:
        return respond({"error_code": 50001, "message": f"Internal error: {exc}"}, 500)

    return Starlette(
        routes=routes, exception_handlers={404: not_found, 405: not_found, 500: internal}
    )


async def _write(
    request: Request, primary: Primary, handle: Callable[[], Awaitable[Response]]
) -> Response:
    """Handle the write here if this node is the primary, else forward it to the primary.

    While there is none, or it cannot be reached (it just died), the write waits up to
    ELECTION_WAIT_S for the next election rather than fail at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ELECTION_WAIT_S
    while True:
        if primary.is_primary():
            return await handle()
        url = primary.primary_url()
        if url is not None:
            try:
                return await _forward(request, url)
            except RegistryError:
                if loop.time() > deadline:
                    raise
        elif loop.time() > deadline:
            raise RegistryError(500, 50003, "Error while forwarding the request: no primary")
        await asyncio.sleep(0.2)


async def _forward(request: Request, url: str) -> Response:
    """Send the write to the primary; answer what it answered."""
    target = url.rstrip("/") + request.url.path
    if request.url.query:
        target += "?" + request.url.query
    forwarded = urllib.request.Request(
        target,
        data=await request.body() or None,
        method=request.method,
        headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE},
    )

    def send() -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(forwarded, timeout=FORWARD_TIMEOUT_S) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError as e:
            raise RegistryError(
                500, 50003, f"Error while forwarding the request to the primary {url}: {e}"
            ) from None

    status, body = await asyncio.to_thread(send)
    return Response(body, status, media_type=CONTENT_TYPE)
