"""Confluent Schema Registry's REST API (starlette), over a `SchemaRegistry`.

Every operation runs in a worker thread (it may wait on the store). A write that reaches
a node that is not the primary is forwarded over HTTP to the primary's URL, as Confluent's
registry and Karapace forward it, so any node takes any request, with the caller's credentials: the primary checks them again.

Each request is authenticated and authorized by a `RegistryAccess` (registry/auth.py)
before its handler runs; `/subjects` lists only the subjects the caller may describe, and
a schema id is readable by whoever may read one of the subjects that use it.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from moldau.registry import errors
from moldau.registry.auth import RegistryAccess
from moldau.registry.errors import RegistryError
from moldau.registry.service import SchemaRegistry, parse_bool
from moldau.security.acl import ANONYMOUS, AclOperation, KafkaPrincipal

READ, WRITE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS

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
    response = respond({"error_code": error.error_code, "message": error.message}, error.status)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
    return response


def _principal(request: Request) -> KafkaPrincipal:
    return getattr(request.state, "principal", ANONYMOUS)


def _host(request: Request) -> str:
    return request.client.host if request.client is not None else ""


async def _authorize(
    request: Request, access: RegistryAccess, operation: AclOperation | None
) -> None:
    """Authenticate the caller (401), then check `operation` on the request's subject, or
    on the whole registry if it names none (403); None: the handler decides."""
    if access.credentials is not None:
        header = request.headers.get("authorization")
        request.state.principal = await asyncio.to_thread(access.authenticate, header)
    if operation is not None:
        subject = request.path_params.get("subject")
        access.check(_principal(request), _host(request), operation, subject)


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


def _query(request: Request, name: str) -> bool:
    return parse_bool(request.query_params.get(name))


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    """Registry operations may wait on the store: off the event loop."""
    return asyncio.to_thread(fn, *args)


class Endpoints:
    """One method per REST endpoint: request in, JSON-able answer (or Response) out."""

    def __init__(self, registry: SchemaRegistry, access: RegistryAccess) -> None:
        self.registry = registry
        self.access = access

    def _visible(self, request: Request, subjects: list[str]) -> list[str]:
        """The subjects the caller may describe (Kafka's Metadata filters topics so)."""
        principal, host = _principal(request), _host(request)
        return [
            s for s in subjects if self.access.allowed(principal, host, AclOperation.DESCRIBE, s)
        ]

    async def _readable_id(self, request: Request) -> int:
        """The request's schema id, if the caller may read a subject that uses it (403)."""
        schema_id = _schema_id(request)
        if self.access.authorizer is not None:
            pairs = await _run(self.registry.subjects_of_id, schema_id, True)
            principal, host = _principal(request), _host(request)
            if not any(self.access.allowed(principal, host, READ, p["subject"]) for p in pairs):
                raise RegistryError(
                    403,
                    40301,
                    f"User is denied operation Read on the subjects of schema {schema_id}",
                )
        return schema_id

    async def root(self, request: Request) -> Any:
        return {}

    async def subjects(self, request: Request) -> Any:
        found = await _run(self.registry.subjects, _query(request, "deleted"))
        return self._visible(request, found)

    async def versions(self, request: Request) -> Any:
        s = request.path_params["subject"]
        return await _run(self.registry.version_numbers, s, _query(request, "deleted"))

    async def version(self, request: Request) -> Any:
        p = request.path_params
        deleted, fmt = _query(request, "deleted"), request.query_params.get("format")
        return await _run(self.registry.version_json, p["subject"], p["version"], deleted, fmt)

    async def version_schema(self, request: Request) -> Any:
        p = request.path_params
        deleted = _query(request, "deleted")
        found = await _run(self.registry.version, p["subject"], p["version"], deleted)
        return Response(found.schema.text, media_type=CONTENT_TYPE)

    async def referenced_by(self, request: Request) -> Any:
        p = request.path_params
        return await _run(self.registry.referenced_by, p["subject"], p["version"])

    async def register(self, request: Request) -> Any:
        s, body = request.path_params["subject"], await _body(request)
        return {"id": await _run(self.registry.register, s, body, _query(request, "normalize"))}

    async def lookup(self, request: Request) -> Any:
        s, body = request.path_params["subject"], await _body(request)
        normalize, deleted = _query(request, "normalize"), _query(request, "deleted")
        return await _run(self.registry.lookup, s, body, normalize, deleted)

    async def delete_subject(self, request: Request) -> Any:
        s = request.path_params["subject"]
        return await _run(self.registry.delete_subject, s, _query(request, "permanent"))

    async def delete_version(self, request: Request) -> Any:
        p, permanent = request.path_params, _query(request, "permanent")
        return await _run(self.registry.delete_version, p["subject"], p["version"], permanent)

    async def schema_by_id(self, request: Request) -> Any:
        subject, fmt = request.query_params.get("subject"), request.query_params.get("format")
        return await _run(
            self.registry.schema_by_id, await self._readable_id(request), subject, fmt
        )

    async def schema_text_by_id(self, request: Request) -> Any:
        found = await _run(self.registry.schema_by_id, await self._readable_id(request))
        return Response(found["schema"], media_type=CONTENT_TYPE)

    async def id_subjects(self, request: Request) -> Any:
        deleted = _query(request, "deleted")
        pairs = await _run(self.registry.subjects_of_id, await self._readable_id(request), deleted)
        return self._visible(request, sorted({p["subject"] for p in pairs}))

    async def id_versions(self, request: Request) -> Any:
        deleted = _query(request, "deleted")
        pairs = await _run(self.registry.subjects_of_id, await self._readable_id(request), deleted)
        visible = set(self._visible(request, [p["subject"] for p in pairs]))
        return [p for p in pairs if p["subject"] in visible]

    async def types(self, request: Request) -> Any:
        return self.registry.types()

    async def compatibility(self, request: Request) -> Any:
        p, body = request.path_params, await _body(request)
        messages = await _run(
            self.registry.check, p["subject"], p.get("version"), body, _query(request, "normalize")
        )
        answer: dict[str, Any] = {"is_compatible": not messages}
        if _query(request, "verbose"):
            answer["messages"] = messages
        return answer

    async def get_config(self, request: Request) -> Any:
        s = request.path_params.get("subject")
        return await _run(self.registry.config, s, _query(request, "defaultToGlobal"))

    async def put_config(self, request: Request) -> Any:
        s = request.path_params.get("subject")
        return await _run(self.registry.set_config, s, await _body(request))

    async def delete_config(self, request: Request) -> Any:
        return await _run(self.registry.delete_config, request.path_params.get("subject"))

    async def get_mode(self, request: Request) -> Any:
        s = request.path_params.get("subject")
        return await _run(self.registry.mode, s, _query(request, "defaultToGlobal"))

    async def put_mode(self, request: Request) -> Any:
        s, body = request.path_params.get("subject"), await _body(request)
        return await _run(self.registry.set_mode, s, body, _query(request, "force"))

    async def delete_mode(self, request: Request) -> Any:
        return await _run(self.registry.delete_mode, request.path_params.get("subject"))


async def _answer(handler: Callable[[Request], Any], request: Request) -> Response:
    result = await handler(request)
    return result if isinstance(result, Response) else respond(result)


def build_app(
    registry: SchemaRegistry,
    primary: Primary,
    access: RegistryAccess | None = None,
    forward_tls: ssl.SSLContext | None = None,
) -> Starlette:
    """The ASGI app serving `registry`'s API; `forward_tls` verifies an https primary."""
    guard = access or RegistryAccess()
    api = Endpoints(registry, guard)

    def read(
        handler: Callable[[Request], Any], operation: AclOperation | None = READ
    ) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                await _authorize(request, guard, operation)
                return await _answer(handler, request)
            except RegistryError as e:
                return error_response(e)

        return endpoint

    def write(
        handler: Callable[[Request], Any], operation: AclOperation
    ) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            try:
                await _authorize(request, guard, operation)
                forward = _Forward(request, primary, forward_tls)
                return await forward.write(lambda: _answer(handler, request))
            except RegistryError as e:
                return error_response(e)

        return endpoint

    subject = "/subjects/{subject:path}"
    compatibility = "/compatibility" + subject + "/versions"
    routes = [
        Route("/", read(api.root, None)),
        Route("/subjects", read(api.subjects, None)),
        Route(subject + "/versions/{version}/schema", read(api.version_schema)),
        Route(subject + "/versions/{version}/referencedby", read(api.referenced_by)),
        Route(subject + "/versions/{version}", read(api.version), methods=["GET"]),
        Route(
            subject + "/versions/{version}", write(api.delete_version, DELETE), methods=["DELETE"]
        ),
        Route(subject + "/versions", read(api.versions), methods=["GET"]),
        Route(subject + "/versions", write(api.register, WRITE), methods=["POST"]),
        Route(subject, read(api.lookup), methods=["POST"]),
        Route(subject, write(api.delete_subject, DELETE), methods=["DELETE"]),
        Route("/schemas/types", read(api.types, None)),
        Route("/schemas/ids/{id}", read(api.schema_by_id, None)),
        Route("/schemas/ids/{id}/schema", read(api.schema_text_by_id, None)),
        Route("/schemas/ids/{id}/subjects", read(api.id_subjects, None)),
        Route("/schemas/ids/{id}/versions", read(api.id_versions, None)),
        Route(compatibility + "/{version}", read(api.compatibility), methods=["POST"]),
        Route(compatibility, read(api.compatibility), methods=["POST"]),
    ]
    for path, describe in (("/config", None), ("/config/{subject:path}", DESCRIBE_CONFIGS)):
        routes.append(Route(path, read(api.get_config, describe), methods=["GET"]))
        routes.append(Route(path, write(api.put_config, ALTER_CONFIGS), methods=["PUT"]))
        routes.append(Route(path, write(api.delete_config, ALTER_CONFIGS), methods=["DELETE"]))
    for path, describe in (("/mode", None), ("/mode/{subject:path}", DESCRIBE_CONFIGS)):
        routes.append(Route(path, read(api.get_mode, describe), methods=["GET"]))
        routes.append(Route(path, write(api.put_mode, ALTER_CONFIGS), methods=["PUT"]))
        routes.append(Route(path, write(api.delete_mode, ALTER_CONFIGS), methods=["DELETE"]))
    return Starlette(
        routes=routes, exception_handlers={404: _not_found, 405: _not_found, 500: _internal}
    )


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    return respond({"error_code": status, "message": f"HTTP {status}: {request.url.path}"}, status)


async def _internal(request: Request, exc: Exception) -> Response:
    return respond({"error_code": 50001, "message": f"Internal error: {exc}"}, 500)


class _Forward:
    """One write: handled here if this node is the primary, else sent to the primary."""

    def __init__(self, request: Request, primary: Primary, tls: ssl.SSLContext | None) -> None:
        self.request = request
        self.primary = primary
        self.tls = tls

    async def write(self, handle: Callable[[], Awaitable[Response]]) -> Response:
        """While there is no primary, or it cannot be reached (it just died), the write
        waits up to ELECTION_WAIT_S for the next election rather than fail at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ELECTION_WAIT_S
        while True:
            if self.primary.is_primary():
                return await handle()
            url = self.primary.primary_url()
            if url is not None:
                try:
                    return await self.send(url)
                except RegistryError:
                    if loop.time() > deadline:
                        raise
            elif loop.time() > deadline:
                raise RegistryError(500, 50003, "Error while forwarding the request: no primary")
            await asyncio.sleep(0.2)

    async def send(self, url: str) -> Response:
        """Send the write to the primary, with the caller's credentials; answer what it
        answered."""
        request = self.request
        target = url.rstrip("/") + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if "authorization" in request.headers:
            headers["Authorization"] = request.headers["authorization"]
        forwarded = urllib.request.Request(
            target, data=await request.body() or None, method=request.method, headers=headers
        )

        def send() -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(
                    forwarded, timeout=FORWARD_TIMEOUT_S, context=self.tls
                ) as answer:
                    return answer.status, answer.read()
            except urllib.error.HTTPError as e:
                return e.code, e.read()
            except OSError as e:
                raise RegistryError(
                    500, 50003, f"Error while forwarding the request to the primary {url}: {e}"
                ) from None

        status, body = await asyncio.to_thread(send)
        return Response(body, status, media_type=CONTENT_TYPE)
