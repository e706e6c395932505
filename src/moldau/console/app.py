"""The web console: a Starlette app with Jinja2 pages, htmx for live parts, SVG charts.

Pages are rendered on the server from `Cluster` calls (run in worker threads: the Kafka
client blocks). Changes are plain HTML form POSTs answered with a redirect (post/redirect/
get) carrying a one-line notice or error, so every page also works without JavaScript;
htmx only adds polling (live tail, charts) and the topic filter.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from moldau.admin.offsets import RESET_STRATEGIES
from moldau.console import render
from moldau.console.charts import line_chart
from moldau.console.cluster import Cluster, ConsoleError, Start
from moldau.console.model import Record, TopicInfo, with_sizes
from moldau.console.registry import Registry
from moldau.console.sampler import Sampler

T = TypeVar("T")
_HERE = Path(__file__).parent
_LIMITS = (20, 50, 100, 500)
_NOT_FOUND = ("UNKNOWN_TOPIC_OR_PART", "GROUP_ID_NOT_FOUND", "schema registry 404")


class InputError(ConsoleError):
    """A form field or query parameter the console cannot use (HTTP 400)."""


@dataclass(frozen=True)
class ConsoleSettings:
    """How the console reaches the cluster; `properties` are librdkafka client settings
    (security.protocol, sasl.*, ssl.*, ...), from --command-config and -X."""

    bootstrap: str
    properties: dict[str, str]
    metrics_urls: tuple[str, ...] = ()
    sample_interval_s: float = 5.0
    # The schema registry (None: the one the cluster's brokers serve, if they say) and its
    # basic-auth `user:password` (None: the SASL username and password, if any).
    schema_registry_url: str | None = None
    schema_registry_auth: str | None = None


def create_app(settings: ConsoleSettings) -> Starlette:
    cluster = Cluster(settings.bootstrap, settings.properties, settings.metrics_urls)
    sampler = Sampler(cluster, settings.metrics_urls, settings.sample_interval_s)
    templates = Jinja2Templates(directory=_HERE / "templates")
    env = templates.env
    env.filters.update(size=render.size, count=render.count, ts=render.timestamp)
    env.globals.update(show=render.show, settings=settings, sampler=sampler)
    pages = _Pages(cluster, sampler, templates, settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        sampler.start()
        try:
            yield
        finally:
            await run_in_threadpool(sampler.stop)
            await run_in_threadpool(cluster.close)

    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/topics", pages.topics, name="topics"),
        Route("/topics", pages.create_topic, methods=["POST"], name="create_topic"),
        Route("/topics/{name}", pages.topic, name="topic"),
        Route("/topics/{name}/delete", pages.delete_topic, methods=["POST"], name="delete_topic"),
        Route(
            "/topics/{name}/partitions",
            pages.add_partitions,
            methods=["POST"],
            name="add_partitions",
        ),
        Route("/topics/{name}/configs", pages.configs, name="configs"),
        Route(
            "/topics/{name}/configs", pages.alter_configs, methods=["POST"], name="alter_configs"
        ),
        Route("/topics/{name}/messages", pages.messages, name="messages"),
        Route("/topics/{name}/messages", pages.produce, methods=["POST"], name="produce"),
        Route("/topics/{name}/tail", pages.tail, name="tail"),
        Route("/groups", pages.groups, name="groups"),
        Route("/groups/{group_id:path}", pages.group, name="group"),
        Route(
            "/actions/reset-offsets", pages.reset_offsets, methods=["POST"], name="reset_offsets"
        ),
        Route("/actions/delete-group", pages.delete_group, methods=["POST"], name="delete_group"),
        Route("/schemas", pages.subjects, name="subjects"),
        Route("/schemas/{subject}", pages.subject, name="subject"),
        Route(
            "/schemas/{subject}/versions/{version:int}",
            pages.schema_version,
            name="schema_version",
        ),
        Route("/schemas/{subject}/diff", pages.schema_diff, name="schema_diff"),
        Route("/charts/throughput", pages.throughput_chart, name="throughput_chart"),
        Route("/charts/lag", pages.lag_chart, name="lag_chart"),
        Route("/healthz", lambda _request: PlainTextResponse("ok"), name="healthz"),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(_SameOriginPosts)])
    app.add_exception_handler(ConsoleError, pages.error)  # type: ignore[arg-type]
    return app


class _SameOriginPosts(BaseHTTPMiddleware):
    """Refuse changes (POST) sent by pages of other origins: any web site the operator
    visits could otherwise post a form to the console on localhost and delete topics."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            origin = request.headers.get("origin")
            if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
                return PlainTextResponse("cross-origin request refused", status_code=403)
        return await call_next(request)


def _redirect(url: str, *, notice: str | None = None, error: str | None = None) -> Response:
    query = urlencode({k: v for k, v in (("notice", notice), ("error", error)) if v})
    return RedirectResponse(f"{url}?{query}" if query else url, status_code=303)


def _int(value: Any, field: str, *, minimum: int | None = None) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InputError(f"{field}: expected a whole number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise InputError(f"{field}: must be at least {minimum}")
    return number


def _optional_int(value: Any, field: str, *, minimum: int | None = None) -> int | None:
    return None if value is None or not str(value).strip() else _int(value, field, minimum=minimum)


def _pairs(text: str, field: str) -> dict[str, str]:
    """`key=value` lines (blank lines ignored) as a dict."""
    pairs = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise InputError(f"{field}: expected key=value, got {line.strip()!r}")
            pairs[key.strip()] = value.strip()
    return pairs


def parse_positions(text: str) -> dict[int, int]:
    """`0:12,1:40` (partition:next offset) as a dict; the live tail's state in the page."""
    positions = {}
    for item in filter(None, text.split(",")):
        partition, _, offset = item.partition(":")
        positions[int(partition)] = int(offset)
    return positions


def format_positions(positions: dict[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


class _Pages:
    def __init__(
        self,
        cluster: Cluster,
        sampler: Sampler,
        templates: Jinja2Templates,
        settings: ConsoleSettings,
    ) -> None:
        self.cluster = cluster
        self.sampler = sampler
        self.templates = templates
        self.settings = settings
        self._registry: Registry | None = None
        self._registry_looked_up = False

    async def registry(self) -> Registry | None:
        """The schema registry of the settings, else the one the brokers' configs name
        (looked up once: a broker's listeners do not change while it runs)."""
        if not self._registry_looked_up:
            url = self.settings.schema_registry_url
            if not url:
                url = await self._call(self.cluster.registry_url)
            auth = self.settings.schema_registry_auth
            user = self.settings.properties
            if auth is None and "sasl.username" in user:
                auth = f"{user['sasl.username']}:{user.get('sasl.password', '')}"
            self._registry = Registry(url, auth) if url else None
            self._registry_looked_up = True
        return self._registry

    async def _decoded(self, topic: str, records: list[Record], fmt: str) -> list[Record]:
        """Records with their registry-framed keys and values decoded (format `auto` only:
        the other formats show the bytes as they are)."""
        registry = await self.registry() if fmt == "auto" else None
        if registry is None:
            return records

        def decode() -> list[Record]:
            return [
                replace(
                    r,
                    key_decoded=registry.decode(r.key, f"{topic}-key"),
                    value_decoded=registry.decode(r.value, f"{topic}-value"),
                )
                for r in records
            ]

        return await run_in_threadpool(decode)

    def _page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("notice", request.query_params.get("notice"))
        context.setdefault("error", request.query_params.get("error"))
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    async def error(self, request: Request, exc: ConsoleError) -> Response:
        if isinstance(exc, InputError):
            status = 400
        else:
            status = 404 if str(exc).startswith(_NOT_FOUND) else 502
        return self._page(request, "error.html", status, error=str(exc), section=None)

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A cluster call in a worker thread, after a quick check that the cluster can be
        reached: a page of an unreachable cluster fails in moments, in one line."""
        await run_in_threadpool(self.cluster.check_reachable)
        return await run_in_threadpool(fn, *args, **kwargs)

    async def _sizes(self, topics: list[TopicInfo]) -> list[TopicInfo]:
        """Partition sizes from DescribeLogDirs (what Kafka UIs show), else from the
        brokers' metrics."""
        sizes = await self._call(self.cluster.partition_sizes)
        if not sizes and self.sampler.scrape:
            sizes = self.sampler.scrape.log_sizes()
        return [with_sizes(t, sizes) for t in topics]

    # --- overview and topics ------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        version = self.sampler.scrape.version() if self.sampler.scrape else None
        overview = await self._call(self.cluster.overview, version)
        return self._page(request, "overview.html", section="overview", overview=overview)

    async def topics(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        internal = request.query_params.get("internal") == "on"
        topics = await self._sizes(await self._call(self.cluster.topics))
        shown = [
            t for t in topics if (internal or not t.internal) and query.lower() in t.name.lower()
        ]
        template = "topics_table.html" if request.headers.get("HX-Request") else "topics.html"
        return self._page(
            request,
            template,
            section="topics",
            topics=shown,
            total=len(topics),
            query=query,
            internal=internal,
        )

    async def create_topic(self, request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", "")).strip()
        try:
            if not name:
                raise InputError("a topic name is required")
            await self._call(
                self.cluster.create_topic,
                name,
                _optional_int(form.get("partitions"), "partitions", minimum=1),
                _optional_int(form.get("replication_factor"), "replication factor", minimum=1),
                _pairs(str(form.get("configs", "")), "configs"),
            )
        except ConsoleError as exc:
            return _redirect(str(request.url_for("topics")), error=str(exc))
        return _redirect(str(request.url_for("topic", name=name)), notice=f"Created topic {name}.")

    async def topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        (topic,) = await self._sizes([await self._call(self.cluster.topic, name)])
        groups = [g for g in await self._call(self.cluster.groups) if name in g.topics]
        tiers = await self._call(self.cluster.tiers, name)
        return self._page(
            request,
            "topic.html",
            section="topics",
            tab="partitions",
            topic=topic,
            groups=groups,
            tiers=tiers,
        )

    async def delete_topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            await self._call(self.cluster.delete_topic, name)
        except ConsoleError as exc:
            return _redirect(str(request.url_for("topic", name=name)), error=str(exc))
        return _redirect(str(request.url_for("topics")), notice=f"Deleted topic {name}.")

    async def add_partitions(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        here = str(request.url_for("topic", name=name))
        try:
            total = _int(form.get("partitions", ""), "partitions", minimum=1)
            await self._call(self.cluster.add_partitions, name, total)
        except ConsoleError as exc:
            return _redirect(here, error=str(exc))
        return _redirect(here, notice=f"Topic {name} now has {total} partitions.")

    async def configs(self, request: Request) -> Response:
        name = request.path_params["name"]
        topic = await self._call(self.cluster.topic, name)
        configs = await self._call(self.cluster.topic_configs, name)
        return self._page(
            request, "configs.html", section="topics", tab="configs", topic=topic, configs=configs
        )

    async def alter_configs(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        here = str(request.url_for("configs", name=name))
        reset = [str(k) for k in form.getlist("reset")]
        try:
            updates = _pairs(str(form.get("set", "")), "configs")
            if not updates and not reset:
                raise InputError("nothing to change: give key=value lines")
            await self._call(self.cluster.alter_topic_configs, name, updates, reset)
        except ConsoleError as exc:
            return _redirect(here, error=str(exc))
        changed = ", ".join([*updates, *reset])
        return _redirect(here, notice=f"Updated {changed}.")

    # --- messages -------------------------------------------------------------------------

    async def messages(self, request: Request) -> Response:
        name = request.path_params["name"]
        params = request.query_params
        topic = await self._call(self.cluster.topic, name)
        fmt = params.get("format", "auto")
        fmt = fmt if fmt in render.FORMATS else "auto"
        limit = _int(params.get("limit", "50"), "limit", minimum=1)
        limit = min(limit, _LIMITS[-1])
        partition = params.get("partition", "all")
        partitions = None if partition == "all" else [_int(partition, "partition", minimum=0)]
        start = self._start(params.get("start", "newest"), params.get("from", ""))
        records = await self._call(self.cluster.read, name, partitions, start, limit)
        records = await self._decoded(name, records, fmt)
        return self._page(
            request,
            "messages.html",
            section="topics",
            tab="messages",
            topic=topic,
            records=records,
            fmt=fmt,
            limit=limit,
            limits=_LIMITS,
            partition=partition,
            start=start,
            start_text=params.get("from", ""),
            formats=render.FORMATS,
            tail_from=format_positions({p.id: p.end_offset for p in topic.partitions}),
        )

    @staticmethod
    def _start(kind: str, value: str) -> Start:
        if kind == "offset":
            return Start("offset", _int(value, "offset", minimum=0))
        if kind == "timestamp":
            try:
                return Start("timestamp", render.parse_timestamp(value))
            except ValueError:
                raise InputError(
                    f"timestamp: expected ISO-8601 (UTC) or epoch ms, got {value!r}"
                ) from None
        return Start("oldest" if kind == "oldest" else "newest")

    async def tail(self, request: Request) -> Response:
        """New records since `pos`, as table rows to prepend, plus the new positions."""
        name = request.path_params["name"]
        params = request.query_params
        try:
            positions = parse_positions(params.get("pos", ""))
        except ValueError:
            raise InputError("pos: expected partition:offset,...") from None
        fmt = params.get("format", "auto")
        fmt = fmt if fmt in render.FORMATS else "auto"
        records, positions = await self._call(self.cluster.tail, name, positions)
        return self._page(
            request,
            "tail_rows.html",
            records=await self._decoded(name, records, fmt),
            fmt=fmt,
            tail_from=format_positions(positions),
        )

    async def produce(self, request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        here = str(request.url_for("messages", name=name))
        try:
            partition = _optional_int(form.get("partition"), "partition", minimum=0)
            headers = [
                (k, v.encode()) for k, v in _pairs(str(form.get("headers", "")), "headers").items()
            ]
            key = _field_bytes(form, "key")
            value = _field_bytes(form, "value")
            where = await self._call(self.cluster.produce, name, value, key, headers, partition)
        except ConsoleError as exc:
            return _redirect(here, error=str(exc))
        return _redirect(
            here, notice=f"Produced a record to partition {where[0]} at offset {where[1]}."
        )

    # --- groups ---------------------------------------------------------------------------

    async def groups(self, request: Request) -> Response:
        groups = await self._call(self.cluster.groups)
        return self._page(request, "groups.html", section="groups", groups=groups)

    async def group(self, request: Request) -> Response:
        group_id = request.path_params["group_id"]
        group = await self._call(self.cluster.group, group_id)
        topics = sorted(t.name for t in await self._call(self.cluster.topics) if not t.internal)
        return self._page(
            request,
            "group.html",
            section="groups",
            group=group,
            topics=topics,
            strategies=RESET_STRATEGIES,
        )

    async def reset_offsets(self, request: Request) -> Response:
        form = await request.form()
        group_id = str(form.get("group", ""))
        topic = str(form.get("topic", ""))
        strategy = str(form.get("strategy", ""))
        here = str(request.url_for("group", group_id=group_id))
        try:
            raw = str(form.get("value", "")).strip()
            if strategy == "timestamp":
                try:
                    value: int | None = render.parse_timestamp(raw)
                except ValueError:
                    raise InputError(f"timestamp: not ISO-8601 or epoch ms: {raw!r}") from None
            else:
                value = _optional_int(raw, "value")
            plan = await self._call(self.cluster.reset_offsets, group_id, topic, strategy, value)
        except ConsoleError as exc:
            return _redirect(here, error=str(exc))
        moved = ", ".join(
            f"{topic}-{p}: {old if old is not None else '-'} → {new}" for p, old, new in plan
        )
        return _redirect(here, notice=f"Reset offsets of {group_id}: {moved}.")

    async def delete_group(self, request: Request) -> Response:
        form = await request.form()
        group_id = str(form.get("group", ""))
        try:
            await self._call(self.cluster.delete_group, group_id)
        except ConsoleError as exc:
            return _redirect(str(request.url_for("group", group_id=group_id)), error=str(exc))
        return _redirect(
            str(request.url_for("groups")), notice=f"Deleted consumer group {group_id}."
        )

    # --- schemas ----------------------------------------------------------------------------

    async def _required_registry(self) -> Registry:
        registry = await self.registry()
        if registry is None:
            raise InputError("no schema registry: start the console with --schema-registry URL")
        return registry

    async def subjects(self, request: Request) -> Response:
        registry = await self.registry()
        subjects = await run_in_threadpool(registry.subjects) if registry else []
        return self._page(
            request, "subjects.html", section="schemas", registry=registry, subjects=subjects
        )

    async def _subject_page(self, request: Request, **context: Any) -> Response:
        """The subject's versions (with their ids and types) above `context`'s schema or diff."""
        registry = await self._required_registry()
        subject = request.path_params["subject"]
        versions = await run_in_threadpool(registry.versions, subject)
        every = [await run_in_threadpool(registry.version, subject, v) for v in versions]
        context.setdefault("diff", None)
        context.setdefault("shown", None)
        return self._page(
            request,
            "subject.html",
            section="schemas",
            subject=subject,
            versions=versions,
            ids={v.version: v.schema_id for v in every},
            types={v.version: v.schema_type for v in every},
            **context,
        )

    async def subject(self, request: Request) -> Response:
        return await self._subject_page(request)

    async def schema_version(self, request: Request) -> Response:
        registry = await self._required_registry()
        shown = await run_in_threadpool(
            registry.version, request.path_params["subject"], request.path_params["version"]
        )
        text = render.pretty_schema(shown.schema, shown.schema_type)
        return await self._subject_page(request, shown=shown, schema_text=text)

    async def schema_diff(self, request: Request) -> Response:
        registry = await self._required_registry()
        subject = request.path_params["subject"]
        params = request.query_params
        old_version = _int(params.get("from", ""), "from", minimum=1)
        new_version = _int(params.get("to", ""), "to", minimum=1)
        old = await run_in_threadpool(registry.version, subject, old_version)
        new = await run_in_threadpool(registry.version, subject, new_version)
        diff = render.diff(
            render.pretty_schema(old.schema, old.schema_type),
            render.pretty_schema(new.schema, new.schema_type),
            f"{subject} version {old.version} (id {old.schema_id})",
            f"{subject} version {new.version} (id {new.schema_id})",
        )
        return await self._subject_page(request, old=old, new=new, diff=diff)

    # --- charts (htmx fragments) ------------------------------------------------------------

    def _chart(self, request: Request, series: dict[str, Any], unit: str) -> Response:
        width = _int(request.query_params.get("w", "600"), "w", minimum=1)
        chart = line_chart(series, unit=unit, width=width)
        return self._page(request, "chart.html", chart=chart)

    async def throughput_chart(self, request: Request) -> Response:
        """Messages (or bytes) per second per topic; ?topic= narrows it to one."""
        kind = request.query_params.get("kind", "messages")
        if kind not in ("messages", "bytes_in", "bytes_out"):
            raise InputError("kind: expected messages, bytes_in or bytes_out")
        series = self.sampler.history.select(kind)
        topic = request.query_params.get("topic")
        if topic:
            series = {k: v for k, v in series.items() if k == topic}
        unit = "messages/s" if kind == "messages" else "bytes/s"
        return self._chart(request, series, unit)

    async def lag_chart(self, request: Request) -> Response:
        """Lag per topic of one group (?group=), or total lag per group."""
        group_id = request.query_params.get("group")
        if group_id:
            series = self.sampler.history.select("lag", group_id)
        else:
            series = self.sampler.history.totals("lag")
        return self._chart(request, series, "messages")


def _field_bytes(form: FormData, field: str) -> bytes | None:
    """A key/value form field: absent or with its `<field>_null` box ticked means null."""
    if form.get(f"{field}_null") or field not in form:
        return None
    return str(form.get(field, "")).encode()
