"""The web app of ``slidewin serve``: the dashboard, the JSON API under ``/api/v1``, live updates
over server-sent events and ``/metrics``. Read-only: every connection it opens for a request
runs with ``default_transaction_read_only`` (the jobs' store, read through APScheduler, is the
exception: it reads the job list only).

Each JSON route answers with what the CLI's ``--json`` prints for the same question -- both call
the same function of ``client.answers`` -- except that integers beyond 2**53 go out as strings
(``client.serve.jsonout``). Failures are ``{"error": ..., "exit_code": ...}`` as the CLI's
``--json`` ends, with an HTTP status: 400 for a question the store refuses or a parameter no
question can use (``client.serve.params``: a NUL byte, an overlong value, a number, duration or
time out of range -- never a 500), 404 for a name it does not know, 503 when the store cannot be
reached. The DSN is in no response.

FastAPI on uvicorn: the API's parameters, validation and OpenAPI document come from the route
signatures; uvicorn serves long-lived event streams beside plain requests on one event loop.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

import psycopg
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from psycopg_pool import ConnectionPool, PoolTimeout

from slidewin.client.answers import jobs as answer_jobs
from slidewin.client.answers import joins as answer_joins
from slidewin.client.answers import sessions as answer_sessions
from slidewin.client.answers import store as answer_store
from slidewin.client.answers import windows as answer_windows
from slidewin.client.serve import dashboard, metrics, params
from slidewin.client.serve.jsonout import dumps
from slidewin.client.serve.live import Hub
from slidewin.db.config import redact
from slidewin.db.errors import ConfigError, DatabaseUnavailable, ProcedureError, SchemaMissing
from slidewin.db.streams import BUILTIN

API = "/api/v1"
APPLICATION = "slidewin serve"
STATEMENT_TIMEOUT = "30s"
HEALTH_WAIT_S = 3.0  # a health check waits this long for a connection, then says the store is down


def _configure(conn: psycopg.Connection) -> None:
    conn.execute("SET default_transaction_read_only = on")
    conn.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
    conn.execute("SET jit = off")


class Store:
    """The server's connections: a small pool for requests and dashboard readings."""

    def __init__(self, dsn: str, size: int = 8, wait_s: float = 5.0) -> None:
        self.dsn = dsn
        self.pool = ConnectionPool(
            dsn, min_size=1, max_size=size, open=False, timeout=wait_s,
            kwargs={"autocommit": True, "application_name": APPLICATION},
            configure=_configure, check=ConnectionPool.check_connection, name="slidewin-serve")

    @contextlib.contextmanager
    def connect(self, timeout: float | None = None) -> Iterator[psycopg.Connection]:
        with self.pool.connection(timeout=timeout) as conn:
            yield conn


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(dumps(obj), status_code=status, media_type="application/json")


_NOT_FOUND = re.compile(r"\b(no|unknown) (stream|join|job|window definition|session window)\b|"
                        r"does not exist|not found", re.I)


def failure(exc: Exception, dsn: str) -> Response:
    """The JSON of a failure, its status, and no DSN in it."""
    from slidewin.client.cli.failures import describe

    message, code = describe(exc, dsn)
    for shown in {dsn, redact(dsn)}:
        message = message.replace(shown, "the store")
    message = re.sub(r" at the store\b", "", message)
    if isinstance(exc, OverflowError):  # a time or duration asked for beyond the calendar
        message, code = (f"a time or duration asked for is out of range ({exc}); ask for a "
                         "shorter range, or times within the years 1 to 9999"), 2
    if isinstance(exc, DatabaseUnavailable | SchemaMissing | PoolTimeout) or (
            isinstance(exc, psycopg.OperationalError)):
        status = 503
    elif isinstance(exc, ConfigError | ProcedureError) or code == 2:
        status = 404 if _NOT_FOUND.search(message) else 400
    elif isinstance(exc, OverflowError | psycopg.DataError):  # a value the question cannot hold
        status = 400
    else:
        status = 500
    if isinstance(exc, PoolTimeout):
        message = "the store did not hand out a connection in time; it is busy or unreachable"
    return json_response({"error": message, "exit_code": code}, status)


def _duration(text: str | None, name: str) -> Any:
    return None if text is None else params.duration(text, name)


def _count(text: str | None, name: str) -> int | None:
    return None if text is None else params.count(text, name)


def _time(text: str | None, name: str) -> datetime | None:
    return None if text is None else answer_windows.parse_time(text, name)


def _relative(text: str) -> str:
    if text not in ("now", "stream"):
        answer_windows.parse_time(text, "relative_to")
    return text


def create_app(dsn: str, *, pool_size: int = 8, min_interval: float = 1.0,
               idle_s: float = 5.0, wait_s: float = 5.0) -> FastAPI:
    """The app serving the store at ``dsn``; it opens its pool and its LISTEN connection when
    it starts and closes them when it stops. A request waits ``wait_s`` for a connection, then
    fails with 503."""
    store = Store(dsn, pool_size, wait_s)

    def read(view: dashboard.View) -> dict[str, Any]:
        with store.connect() as conn:
            return dashboard.read(conn, view)

    hub = Hub(dsn, read, min_interval=min_interval, idle_s=idle_s)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        store.pool.open(wait=False)
        await hub.start()
        try:
            yield
        finally:
            await hub.close()
            store.pool.close()

    app = FastAPI(title="slidewin", summary="A live slidewin store: windows, streams, dead "
                  "letters, jobs and metrics.", version=answer_store.version(),
                  lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=f"{API}/openapi.json", dependencies=[Depends(params.guard)])
    app.state.store, app.state.hub = store, hub

    @app.exception_handler(Exception)
    async def _any(_request: Request, exc: Exception) -> Response:
        return failure(exc, dsn)

    @app.exception_handler(params.ParameterError)
    async def _refused(_request: Request, exc: params.ParameterError) -> Response:
        return failure(exc, dsn)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return json_response({"error": params.validation_message(request, exc),
                              "exit_code": ConfigError.exit_code}, 400)

    def answer(fn: Any, *args: Any, **kwargs: Any) -> Response:
        try:
            with store.connect() as conn:
                result = fn(conn, *args, **kwargs)
            return json_response(result.as_json() if hasattr(result, "as_json") else result)
        except Exception as exc:
            return failure(exc, dsn)

    static = resources.files("slidewin.client.serve").joinpath("static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(str(static.joinpath("index.html")), media_type="text/html")

    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    # -- the store ----------------------------------------------------------------------------

    @app.get(f"{API}/info", summary="What is serving: versions, streams, joins, definitions")
    def info() -> Response:
        return answer(answer_store.info)

    @app.get(f"{API}/health", summary="ksqlDB's healthcheck: database, schema, jobs",
             responses={503: {"description": "not healthy"}})
    def health() -> Response:
        body, healthy = answer_store.health(
            lambda: store.connect(timeout=min(HEALTH_WAIT_S, wait_s)))
        return json_response(body, 200 if healthy else 503)

    @app.get(f"{API}/status", summary="db status --json [--stream NAME]")
    def status(stream: str | None = None) -> Response:
        if stream is not None and stream != BUILTIN:
            return answer(answer_store.stream_status, stream)
        return answer(answer_store.store_status, builtin_only=stream is not None)

    @app.get(f"{API}/streams", summary="streams list --json")
    def stream_list() -> Response:
        return answer(answer_store.stream_list)

    @app.get(f"{API}/streams/{{name}}", summary="streams show NAME --json")
    def stream_show(name: str) -> Response:
        return answer(answer_store.stream_show, name)

    @app.get(f"{API}/dead-letters", summary="db dead-letters --json: a page, newest first")
    def dead_letters(stream: str | None = None, reason: str | None = None,
                     before: Annotated[int | None, Query(ge=1, le=params.INT8_MAX)] = None,
                     limit: Annotated[int, Query(ge=1, le=answer_store.MAX_PAGE)] = 20) -> Response:
        return answer(answer_store.dead_letters, stream=stream, reason=reason, before=before,
                      limit=limit)

    @app.get(f"{API}/ingest/batches", summary="db batches --json: a page, newest first")
    def batches(stream: str | None = None, before: str | None = None,
                limit: Annotated[int, Query(ge=1, le=answer_store.MAX_PAGE)] = 20) -> Response:
        return answer(answer_store.batches, stream=stream, before=before, limit=limit)

    # -- windows ------------------------------------------------------------------------------

    @app.get(f"{API}/query/{{what}}", summary="query avg|max|min|sum|count --json")
    def query(what: str, seconds: Annotated[int, Query(ge=1, le=86400)] = 30,
              relative_to: str = "now", stream: str = BUILTIN,
              measure: str | None = None) -> Response:
        if relative_to not in ("now", "stream"):
            return failure(ConfigError(f"relative_to {relative_to!r}: use now or stream"), dsn)
        return answer(answer_windows.query, what, seconds, relative_to, stream, measure)

    @app.get(f"{API}/windows/rows", summary="windows rows --json: count windows")
    def rows_windows(size: str, advance: str | None = None, rows: str | None = None,
                     key: str | None = None, stream: str = BUILTIN,
                     measure: str | None = None) -> Response:
        try:
            parsed = (params.count(size, "size"), _count(advance, "advance"),
                      _count(rows, "rows"))
        except Exception as exc:
            return failure(exc, dsn)
        response = answer(answer_windows.count_windows, *parsed, key=key, stream=stream,
                          measure=measure)
        too_big = params.beyond_int4(dict(zip(("size", "advance", "rows"), parsed, strict=True)))
        if response.status_code >= 500 and too_big is not None:
            return failure(too_big, dsn)
        return response

    @app.get(f"{API}/windows/current", summary="windows current --json: Faust's lookups")
    def current_windows(size: str, advance: str | None = None, delta: str | None = None,
                        all: bool = False, relative_to: str = "now",
                        key: str | None = None, stream: str = BUILTIN,
                        measure: str | None = None) -> Response:
        try:
            args = (params.duration(size, "size"), _duration(advance, "advance"),
                    _duration(delta, "delta"), all, _relative(relative_to))
        except Exception as exc:
            return failure(exc, dsn)
        return answer(answer_windows.current_windows, *args, key=key, stream=stream,
                      measure=measure)

    @app.get(f"{API}/windows/key-index", summary="windows key-index status --json")
    def key_index(stream: str | None = None) -> Response:
        return answer(answer_windows.key_index, None, stream)

    @app.get(f"{API}/windows/{{kind}}", summary="windows tumbling|hopping|sliding --json")
    def time_windows(kind: str, size: str, advance: str | None = None, key: str | None = None,
                     stream: str = BUILTIN, measure: str | None = None,
                     last: str | None = None,
                     from_: Annotated[str | None, Query(alias="from")] = None,
                     to: str | None = None, relative_to: str = "now") -> Response:
        try:
            spec = answer_windows.window_spec(kind, params.duration(size, "size"),
                                              _duration(advance, "advance"), key, stream,
                                              measure)
            opts = {"last": _duration(last, "last"), "from_": _time(from_, "from"),
                    "to": _time(to, "to"), "relative_to": _relative(relative_to)}
        except Exception as exc:
            return failure(exc, dsn)
        return answer(answer_windows.time_windows, spec, **opts)

    # -- sessions and joins -------------------------------------------------------------------

    @app.get(f"{API}/sessions", summary="windows list --json: session window definitions")
    def session_definitions() -> Response:
        return answer(answer_sessions.definitions)

    @app.get(f"{API}/sessions/{{name}}", summary="windows sessions NAME --json")
    def sessions(name: str, key: str | None = None,
                 from_: Annotated[str | None, Query(alias="from")] = None,
                 to: str | None = None, last: str | None = None,
                 limit: Annotated[int, Query(ge=1, le=100_000)] = 1000) -> Response:
        try:
            args = (_time(from_, "from"), _time(to, "to"), _duration(last, "last"))
        except Exception as exc:
            return failure(exc, dsn)
        return answer(answer_sessions.session_list, name, key, *args, limit)

    @app.get(f"{API}/joins", summary="joins list --json: every join and where it stands")
    def join_list() -> Response:
        return answer(answer_joins.join_list)

    @app.get(f"{API}/joins/{{name}}", summary="joins show NAME --json: its newest answers")
    def join_show(name: str, last: str | None = None,
                  from_: Annotated[str | None, Query(alias="from")] = None,
                  to: str | None = None,
                  limit: Annotated[int, Query(ge=1, le=100_000)] = 20) -> Response:
        try:
            opts = {"last": _duration(last, "last"), "from_": _time(from_, "from"),
                    "to": _time(to, "to")}
        except Exception as exc:
            return failure(exc, dsn)
        return answer(answer_joins.join_show, name, limit=limit, **opts)

    # -- jobs ---------------------------------------------------------------------------------

    @app.get(f"{API}/jobs", summary="jobs status --json: runs, rates, retention lag per partition")
    def jobs_status() -> Response:
        return answer(answer_jobs.jobs_status, dsn)

    @app.get(f"{API}/jobs/runs", summary="jobs runs --json: a page, newest first")
    def job_runs(job: str | None = None,
                 before: Annotated[int | None, Query(ge=1, le=params.INT8_MAX)] = None,
                 limit: Annotated[int, Query(ge=1, le=answer_jobs.MAX_RUNS)] = 20) -> Response:
        return answer(answer_jobs.job_runs, job, before, limit)

    # -- the dashboard's data, live -----------------------------------------------------------

    def view_of(stream: str | None, measure: str | None, kind: str | None, size: str | None,
                advance: str | None, range_: str | None, key: str | None,
                join: str | None) -> dashboard.View:
        return dashboard.View.parse(stream, measure, kind, size, advance, range_, key, join)

    @app.get(f"{API}/dashboard", summary="What the dashboard shows of a stream, now")
    def dashboard_now(stream: str | None = None, measure: str | None = None,
                      kind: str | None = None, size: str | None = None,
                      advance: str | None = None,
                      range_: Annotated[str | None, Query(alias="range")] = None,
                      key: str | None = None, join: str | None = None) -> Response:
        try:
            view = view_of(stream, measure, kind, size, advance, range_, key, join)
        except Exception as exc:
            return failure(exc, dsn)
        return answer(dashboard.read, view)

    @app.get(f"{API}/live", summary="The dashboard's updates, as server-sent events",
             response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {}}}})
    async def live(stream: str | None = None, measure: str | None = None,
                   kind: str | None = None, size: str | None = None,
                   advance: str | None = None,
                   range_: Annotated[str | None, Query(alias="range")] = None,
                   key: str | None = None, join: str | None = None,
                   last_event_id: Annotated[str | None, Header()] = None) -> Response:
        try:
            view = view_of(stream, measure, kind, size, advance, range_, key, join)
            sub, first = await hub.subscribe(view, last_event_id)
        except Exception as exc:
            return failure(exc, dsn)
        return StreamingResponse(hub.stream(view, sub, first), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})

    generated = app.openapi

    def openapi() -> dict[str, Any]:
        fresh = app.openapi_schema is None
        doc = generated()
        return params.refusals_are_400(doc) if fresh else doc

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/metrics", summary="Prometheus metrics (text format 0.0.4)")
    def prometheus() -> Response:
        try:
            with store.connect() as conn:
                text = metrics.render(metrics.gather(conn))
        except (psycopg.OperationalError, PoolTimeout, DatabaseUnavailable):
            text = metrics.unreachable()
        return Response(text, media_type=metrics.CONTENT_TYPE)

    return app
