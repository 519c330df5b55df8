"""The dashboard's ASGI application: server-rendered pages (Jinja2, every
value escaped), a few lines of plain JavaScript that nothing depends on, and
the JSON API the pages' actions share.

Pages: `/` (queues, throughput, fleet), `/jobs` (filters, keyset pages),
`/jobs/{id}`, `/workflows` (newest first, keyset pages), `/workflows/{id}`
(counts, graph, jobs), `/batches/{id}` (progress, members by page),
`/schedules`, `/login`. Actions are POSTs to
`/actions/{verb}`: the first answers a confirmation page, the second (with
`confirmed=1`) acts and redirects back with a message saying what it did.
The API is under `/api/` (see docs/operations.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..config import ADMIN_TOKEN_EXPECTED, admin_token_ok
from ..log import get_logger
from ..queue.api import AsyncQueue
from ..queue.batches import BatchStatus
from ..queue.browse import COUNT_CAP, PAGE_DEFAULT, JobPage
from ..queue.errors import BatchNotFound, InvalidArgument, JobNotFound, JobvisorError
from ..queue.internal import dashboard_ops, service_ops
from ..queue.model import TERMINAL, JobStatus, LimitScope
from ..queue.workflows import WORKFLOW_PAGE_DEFAULT, state_of
from . import views
from .actions import ACTION_FIELDS, MAX_BODY_BYTES, Action, parse_json
from .auth import SESSION_COOKIE, SESSION_MAX_AGE, Guard
from .proxy import ForwardedHeaders, SessionCookie
from .throttle import Throttle

HERE: Final = Path(__file__).parent
PAGE_HEADERS: Final = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
        " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
NO_STORE: Final = {"Cache-Control": "no-store"}
WORKFLOW_JOBS_SHOWN: Final = 1_000  # a workflow page lists this many of its jobs
BATCH_PAGE: Final = 50  # members per page of a batch
FILTERS: Final = ("status", "queue", "job_type", "correlation_id", "order")

log = get_logger("web")


@dataclasses.dataclass(frozen=True, slots=True)
class Dashboard:
    queue: AsyncQueue
    guard: Guard
    templates: Jinja2Templates
    throttle: Throttle

    async def page(
        self,
        request: Request,
        name: str,
        context: Mapping[str, Any],
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        base = {
            "read_only": self.guard.read_only,
            "logged_in": await self.guard.logged_in(request),
            "csrf": self.guard.csrf_token(request),
            "flash": request.session.pop("flash", None),
            "engine": self.queue.engine,
            # A page answering a POST (a refusal, a confirmation) sends its
            # links back to the page the form came from, never to the action.
            "here": _here(request) if request.method == "GET" else context.get("next", "/"),
            "root": request.scope.get("root_path", ""),
            "next": "/",
        }
        return self.templates.TemplateResponse(
            request,
            name,
            {**base, **context},
            status_code=status,
            headers={**PAGE_HEADERS, **(headers or {})},
        )


def _templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(views.FILTERS)
    return Jinja2Templates(env=env)


def _here(request: Request) -> str:
    """The page's own path and query, relative to the app (a form's `next`)."""
    path = request.url.path.removeprefix(request.scope.get("root_path", "")) or "/"
    return path + (f"?{request.url.query}" if request.url.query else "")


def _safe_next(value: object) -> str:
    """A `next` that stays inside the app: an absolute path, never `//host`."""
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return "/"
    return "/" if any(c in value for c in "\\\r\n") else value


def _redirect(request: Request, target: str) -> RedirectResponse:
    return RedirectResponse(request.scope.get("root_path", "") + target, status_code=303)


# --- pages ------------------------------------------------------------------------


async def overview(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    queues, minutes, fleet, running, limits = await asyncio.gather(
        dashboard_ops(d.queue).queue_states(),
        dashboard_ops(d.queue).throughput(),
        dashboard_ops(d.queue).supervisors(),
        service_ops(d.queue).running_by_worker(),
        d.queue.limits(),
    )
    context = {
        "queues": queues,
        "type_limits": [x for x in limits if x.scope is LimitScope.TYPE],
        "statuses": list(JobStatus),
        "chart": views.throughput_svg(minutes),
        "minutes": minutes,
        "fleet": fleet,
        "running": running,
        "count_cap": COUNT_CAP,
    }
    return await d.page(request, "overview.html", context)


def _filters(request: Request) -> dict[str, str]:
    return {k: request.query_params.get(k, "").strip() for k in FILTERS}


async def jobs(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    filters = _filters(request)
    wanted_id = request.query_params.get("id", "").strip()
    if wanted_id:
        try:
            return _redirect(request, f"/jobs/{uuid.UUID(wanted_id)}")
        except ValueError:
            error = f"id={wanted_id!r}: expected a job id"
            return await d.page(request, "jobs.html", _jobs_context(filters, None, error), 400)
    try:
        page = await _page(d.queue, request, filters)
    except InvalidArgument as exc:
        return await d.page(request, "jobs.html", _jobs_context(filters, None, str(exc)), 400)
    return await d.page(request, "jobs.html", _jobs_context(filters, page, None))


async def _page(
    queue: AsyncQueue, request: Request, filters: Mapping[str, str], limit: int = PAGE_DEFAULT
) -> JobPage:
    return await dashboard_ops(queue).job_page(
        status=filters["status"],
        queue=filters["queue"],
        job_type=filters["job_type"],
        correlation_id=filters["correlation_id"],
        order=filters["order"] or None,
        cursor=request.query_params.get("cursor") or None,
        limit=limit,
    )


def _jobs_context(filters: dict[str, str], page: Any, error: str | None) -> dict[str, Any]:
    kept = {k: v for k, v in filters.items() if v}
    return {
        "filters": filters,
        "page": page,
        "error": error,
        "statuses": list(JobStatus),
        "next_query": views.query({**kept, "cursor": page.next_cursor})
        if page is not None and page.next_cursor
        else None,
        "first_query": views.query(kept),
    }


async def job_detail(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    raw = request.path_params["job_id"]
    try:
        job = await d.queue.get(raw)
    except (JobNotFound, InvalidArgument) as exc:
        return await d.page(request, "missing.html", {"error": str(exc)}, 404)
    reads = dashboard_ops(d.queue)
    workflow = await reads.workflow_of_job(job.id)
    history = await reads.step_history(job.id)
    context = {
        "job": job,
        "trace": views.trace_id(job.meta),
        "workflow": workflow,
        "history": history,
    }
    return await d.page(request, "job.html", context)


async def workflows(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    cursor = request.query_params.get("cursor") or None
    try:
        page = await dashboard_ops(d.queue).workflow_page(cursor=cursor)
    except InvalidArgument as exc:
        return await d.page(request, "workflows.html", {"page": None, "error": str(exc)}, 400)
    return await d.page(request, "workflows.html", {"page": page, "error": None})


async def workflow_detail(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    try:
        workflow = await d.queue.workflow(request.path_params["workflow_id"])
    except (JobNotFound, InvalidArgument) as exc:
        return await d.page(request, "missing.html", {"error": str(exc)}, 404)
    counts = workflow.counts
    context = {
        "workflow": workflow,
        "counts": counts,
        "state": state_of(counts).value,
        "statuses": [s for s in JobStatus if s in counts],
        "graph": views.workflow_svg(workflow.jobs, request.scope.get("root_path", "")),
        "failed": [j for j in workflow.jobs if j.status in views.FAILED],
        "shown": workflow.jobs[:WORKFLOW_JOBS_SHOWN],
        "unfinished": any(j.status not in TERMINAL for j in workflow.jobs),
        "graph_max": views.GRAPH_MAX_NODES,
    }
    return await d.page(request, "workflow.html", context)


async def batch_detail(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    cursor = request.query_params.get("cursor") or None
    try:
        batch = await d.queue.get_batch(request.path_params["batch_id"])
    except (BatchNotFound, InvalidArgument) as exc:
        return await d.page(request, "missing.html", {"error": str(exc)}, 404)
    try:
        members = await d.queue.batch_results(batch.id, cursor, limit=BATCH_PAGE)
    except InvalidArgument as exc:
        return await d.page(request, "missing.html", {"error": str(exc)}, 400)
    context = {"batch": batch, "members": members, "done": _batch_done(batch)}
    return await d.page(request, "batch.html", context)


def _batch_done(batch: BatchStatus) -> int:
    """How many of a batch's members have finished."""
    return batch.total - batch.unfinished


async def schedules(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    return await d.page(request, "schedules.html", {"schedules": await d.queue.schedules()})


async def login(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    error = None
    client = _client(request)
    if request.method == "POST":
        wait = d.throttle.retry_after(client)
        if wait:
            error = f"Too many wrong tokens from {client}: try again in {wait} seconds."
            wait_context = {"error": error, "next": _safe_next(request.query_params.get("next"))}
            return await d.page(
                request, "login.html", wait_context, 429, {"Retry-After": str(wait)}
            )
        form = await request.form()
        if not d.guard.csrf_ok(request, form.get("csrf")):
            error = "The form expired: try again."
        elif d.guard.matches(str(form.get("token", ""))):
            await d.guard.log_in(request)
            request.session["flash"] = "Logged in: actions are allowed."
            log.info("web.login", client=client)
            return _redirect(request, _safe_next(form.get("next")))
        else:
            error = "That is not the admin token."
            log.warning("web.login_refused", client=client)
            _failed(d, client)
    context = {"error": error, "next": _safe_next(request.query_params.get("next"))}
    return await d.page(request, "login.html", context, 400 if error else 200)


def _failed(d: Dashboard, client: str) -> None:
    """Count a wrong token against `client`, saying so once it must wait."""
    if d.throttle.failed(client):
        log.warning("web.throttled", client=client, retry_after=d.throttle.retry_after(client))


async def logout(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    form = await request.form()
    if d.guard.csrf_ok(request, form.get("csrf")):
        await d.guard.log_out(request)
    return _redirect(request, "/")


def _client(request: Request) -> str:
    return request.client.host if request.client else "-"


# --- actions --------------------------------------------------------------------------


def _form_fields(form: FormData) -> dict[str, Any]:
    return {
        "ids": form.getlist("ids"),
        **{k: form.get(k) for k in ACTION_FIELDS},
    }


async def act(request: Request) -> Response:
    """An action from a page: refused unless logged in with a valid CSRF
    token; a confirmation page first, then the deed and a redirect."""
    d: Dashboard = request.app.state.dashboard
    form = await request.form()
    back = _safe_next(form.get("next"))
    if not d.guard.csrf_ok(request, form.get("csrf")):
        return await d.page(
            request, "refused.html", {"reason": "The form expired: try again."}, 403
        )
    if not await d.guard.logged_in(request):
        reason = (
            "The dashboard is read-only: set JOBVISOR_ADMIN_TOKEN to allow actions."
            if d.guard.read_only
            else "Actions need the admin token: log in first."
        )
        return await d.page(request, "refused.html", {"reason": reason, "next": back}, 403)
    try:
        action = Action.parse(request.path_params["verb"], _form_fields(form))
    except InvalidArgument as exc:
        return await d.page(request, "refused.html", {"reason": str(exc), "next": back}, 400)
    if form.get("confirmed") != "1":
        context = {"action": action, "fields": action.fields(), "next": back}
        return await d.page(request, "confirm.html", context)
    try:
        done = await action.perform(d.queue)
    except JobvisorError as exc:
        return await d.page(request, "refused.html", {"reason": str(exc), "next": back}, 409)
    log.info("web.action", action=action.verb.value, count=done.count, client=_client(request))
    request.session["flash"] = done.message
    return _redirect(request, back)


# --- the JSON API ------------------------------------------------------------------------


def _json_default(value: object) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID | enum.Enum):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} is not JSON")


class ApiResponse(JSONResponse):
    """JSON of the queue's values: times in ISO 8601, ids as text."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, default=_json_default, ensure_ascii=False).encode()


def _api_error(status: int, message: str) -> Response:
    return ApiResponse({"error": message}, status_code=status, headers=NO_STORE)


async def api_queues(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    return ApiResponse({"queues": await dashboard_ops(d.queue).queue_states()})


async def api_jobs(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    filters = _filters(request)
    try:
        page = await _page(d.queue, request, filters, int(request.query_params.get("limit") or 50))
    except (InvalidArgument, ValueError) as exc:
        return _api_error(400, str(exc))
    return ApiResponse(page)


async def api_job(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    try:
        job = await d.queue.get(request.path_params["job_id"])
    except (JobNotFound, InvalidArgument) as exc:
        return _api_error(404, str(exc))
    shown = dataclasses.replace(job, claim_token=None)  # a claim token is a capability
    return ApiResponse(shown)


async def api_workflows(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    try:
        limit = int(request.query_params.get("limit") or WORKFLOW_PAGE_DEFAULT)
        page = await dashboard_ops(d.queue).workflow_page(
            cursor=request.query_params.get("cursor") or None, limit=limit
        )
    except (InvalidArgument, ValueError) as exc:
        return _api_error(400, str(exc))
    return ApiResponse(
        {
            "workflows": [
                {**_json_default(w), "state": w.state.value, "total": w.total}
                for w in page.workflows
            ],
            "next_cursor": page.next_cursor,
        }
    )


async def api_workflow(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    try:
        workflow = await d.queue.workflow(request.path_params["workflow_id"])
    except (JobNotFound, InvalidArgument) as exc:
        return _api_error(404, str(exc))
    counts = workflow.counts
    return ApiResponse(
        {**_json_default(workflow), "counts": counts, "state": state_of(counts).value}
    )


async def api_batch(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    try:
        batch = await d.queue.get_batch(request.path_params["batch_id"])
    except (BatchNotFound, InvalidArgument) as exc:
        return _api_error(404, str(exc))
    return ApiResponse(batch)


async def api_schedules(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    return ApiResponse({"schedules": await d.queue.schedules()})


async def api_supervisors(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    fleet, running = await asyncio.gather(
        dashboard_ops(d.queue).supervisors(), service_ops(d.queue).running_by_worker()
    )
    return ApiResponse({"supervisors": fleet, "running_by_worker": running})


async def api_throughput(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    return ApiResponse({"minutes": await dashboard_ops(d.queue).throughput()})


async def api_act(request: Request) -> Response:
    d: Dashboard = request.app.state.dashboard
    if d.guard.read_only:
        return _api_error(403, "read-only: set JOBVISOR_ADMIN_TOKEN to allow actions")
    client = _client(request)
    wait = d.throttle.retry_after(client)
    if wait:
        message = f"too many wrong tokens from {client}: try again in {wait} seconds"
        return ApiResponse(
            {"error": message}, status_code=429, headers={**NO_STORE, "Retry-After": str(wait)}
        )
    if not d.guard.bearer(request):
        log.warning("web.bearer_refused", client=client)
        _failed(d, client)
        return _api_error(401, "expected Authorization: Bearer <admin token>")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            return _api_error(413, f"body: expected at most {MAX_BODY_BYTES} bytes of JSON")
    try:
        body = parse_json(bytes(raw))
    except InvalidArgument as exc:
        return _api_error(400, str(exc))
    if not isinstance(body, dict):
        return _api_error(400, "body: expected a JSON object")
    try:
        action = Action.parse(request.path_params["verb"], body)
        done = await action.perform(d.queue)
    except InvalidArgument as exc:
        return _api_error(400, str(exc))
    except JobvisorError as exc:
        return _api_error(409, str(exc))
    log.info("web.action", action=action.verb.value, count=done.count, client=_client(request))
    return ApiResponse({"done": done.message, "count": done.count})


async def _not_found(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith(request.scope.get("root_path", "") + "/api/"):
        return _api_error(404, "no such endpoint")
    detail = exc.detail if isinstance(exc, HTTPException) else "Not Found"
    return PlainTextResponse(f"{detail}\n", 404, headers=PAGE_HEADERS)


SECURE_COOKIE: Final = ("auto", "on")


def app(
    queue: AsyncQueue,
    *,
    admin_token: str | None = None,
    secure_cookie: str = "auto",
    trust_proxy: bool = False,
) -> Starlette:
    """The dashboard over `queue` (an `AsyncQueue`, opened and closed by the
    caller), as an ASGI application: mount it in a Starlette or FastAPI app
    (`Mount("/jobvisor", app=jobvisor.web.app(queue))`) or serve it alone
    (`jobvisor web`). Read-only without `admin_token`; with it, actions need
    a login (pages) or `Authorization: Bearer` (the API).

    The session cookie is marked `Secure` on a request that came over HTTPS
    (`secure_cookie="auto"`) or always (`"on"`, behind a proxy that ends
    TLS). With `trust_proxy`, `X-Forwarded-Proto` and `X-Forwarded-For` say
    the scheme and the client address whoever sends them (see `web.proxy`).

    Raises `InvalidArgument` when `admin_token` is too short to resist
    guessing or holds a character an HTTP header cannot carry (the
    rule `JOBVISOR_ADMIN_TOKEN` follows); the error never shows the token."""
    if admin_token and not admin_token_ok(admin_token):
        raise InvalidArgument(f"admin_token=(not shown): expected {ADMIN_TOKEN_EXPECTED}")
    if secure_cookie not in SECURE_COOKIE:
        raise InvalidArgument(f"secure_cookie={secure_cookie!r}: expected auto or on")
    dashboard = Dashboard(queue, Guard(admin_token, queue), _templates(), Throttle())
    verbs = "{verb:str}"
    routes = [
        Route("/", overview, name="overview"),
        Route("/jobs", jobs, name="jobs"),
        Route("/jobs/{job_id:str}", job_detail, name="job"),
        Route("/workflows", workflows, name="workflows"),
        Route("/workflows/{workflow_id:str}", workflow_detail, name="workflow"),
        Route("/batches/{batch_id:str}", batch_detail, name="batch"),
        Route("/schedules", schedules, name="schedules"),
        Route("/login", login, methods=["GET", "POST"], name="login"),
        Route("/logout", logout, methods=["POST"], name="logout"),
        Route(f"/actions/{verbs}", act, methods=["POST"], name="act"),
        Route("/api/queues", api_queues),
        Route("/api/jobs", api_jobs),
        Route("/api/jobs/{job_id:str}", api_job),
        Route("/api/workflows", api_workflows),
        Route("/api/workflows/{workflow_id:str}", api_workflow),
        Route("/api/batches/{batch_id:str}", api_batch),
        Route("/api/schedules", api_schedules),
        Route("/api/supervisors", api_supervisors),
        Route("/api/throughput", api_throughput),
        Route(f"/api/actions/{verbs}", api_act, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(ForwardedHeaders)] if trust_proxy else []
    middleware.append(
        Middleware(
            SessionCookie,
            secret_key=dashboard.guard.session_key,
            session_cookie=SESSION_COOKIE,
            max_age=SESSION_MAX_AGE,
            always_secure=secure_cookie == "on",
        )
    )
    application = Starlette(routes=routes, middleware=middleware)
    application.state.dashboard = dashboard
    application.add_exception_handler(404, _not_found)
    return application
