"""jobvisor in a FastAPI application.

A request enqueues a typed task; another waits for its result with a timeout;
a third does both, answering 504 with the job's id when the job takes longer.
The lifespan opens the app's `AsyncQueue`, binds it on the registry (so
`build_report.enqueue_async` goes there) and closes it at shutdown; the
dashboard is mounted at /jobvisor when this jobvisor has one (`jobvisor.web`).

Run it (from this folder, with `pip install jobvisor fastapi uvicorn`):

    export JOBVISOR_DATABASE_URL=sqlite:///example.db   # or postgresql://...
    JOBVISOR_APP=app:registry jobvisor run               # the workers
    uvicorn app:app                                      # the web app

    curl -X POST localhost:8000/reports/now -H 'content-type: application/json' \
         -d '{"customer": "ada", "month": "2026-05", "amounts": [12.5, 7.5]}'
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pydantic
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse

import jobvisor.asgi
from jobvisor import AsyncQueue, Job, JobNotFound, Registry

registry = Registry()


class ReportRequest(pydantic.BaseModel):
    customer: str = pydantic.Field(min_length=1, max_length=100)
    month: str = pydantic.Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$")
    amounts: list[float] = pydantic.Field(max_length=10_000)


class Report(pydantic.BaseModel):
    customer: str
    month: str
    count: int
    total: float


@registry.task(queue="reports", timeout=30, max_attempts=3)
async def build_report(spec: ReportRequest) -> Report:
    """Runs in a worker: `spec` arrives as a `ReportRequest` again."""
    await asyncio.sleep(0)  # stands for the real work: queries, rendering...
    return Report(
        customer=spec.customer,
        month=spec.month,
        count=len(spec.amounts),
        total=round(sum(spec.amounts), 2),
    )


def mount_dashboard(app: FastAPI, aq: AsyncQueue) -> bool:
    """Mount jobvisor's dashboard at /jobvisor when this jobvisor ships one."""
    if importlib.util.find_spec("jobvisor.web") is None:
        return False
    web = importlib.import_module("jobvisor.web")
    # A mount left by an earlier start of the app (tests start it more than
    # once) serves a closed queue: the new one takes its place.
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", "") != "/jobvisor"]
    app.mount("/jobvisor", web.app(aq))  # the dashboard's mount line
    return True


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    async with jobvisor.asgi.lifespan(registry=registry, migrate=True)(app) as state:
        mount_dashboard(app, state[jobvisor.asgi.STATE_KEY])
        yield state


app = FastAPI(title="jobvisor example", lifespan=lifespan)


def app_queue(request: Request) -> AsyncQueue:
    """The queue the lifespan opened (a dependency)."""
    return jobvisor.asgi.queue(request)


Queue = Annotated[AsyncQueue, Depends(app_queue)]
Wait = Annotated[float, Query(ge=0, le=30, description="seconds to wait for the job to end")]


def job_view(job: Job) -> dict[str, Any]:
    return {
        "id": str(job.id),
        "status": str(job.status),
        "result": job.result,
        "error": job.last_error.split("\n", 1)[0] if job.last_error else None,
    }


@app.post("/reports", status_code=202)
async def enqueue_report(report: ReportRequest) -> dict[str, str]:
    """Enqueue a report; poll `GET /reports/{id}` for it."""
    job_id = await build_report.enqueue_async(report)
    return {"id": str(job_id)}


@app.get("/reports/{job_id}")
async def get_report(job_id: uuid.UUID, aq: Queue, wait: Wait = 0) -> JSONResponse:
    """The job as it stands, after waiting up to `wait` seconds for it to end:
    200 once it has ended, 202 while it has not, 404 for an unknown id."""
    try:
        job = await aq.wait(job_id, timeout=wait)
    except TimeoutError:
        job = await aq.get(job_id)
    except JobNotFound:
        raise HTTPException(404, f"no job {job_id}") from None
    return JSONResponse(job_view(job), status_code=200 if job.status.terminal else 202)


@app.post("/reports/now")
async def report_now(report: ReportRequest, aq: Queue, wait: Wait = 10) -> JSONResponse:
    """Enqueue a report and answer with it once a worker has built it: the
    `Report` itself. 504 with the job's id (to poll) when it takes longer than
    `wait` seconds; 500 with its error when it failed for good."""
    job_id = await build_report.enqueue_async(report)
    try:
        job = await aq.wait(job_id, timeout=wait)
    except TimeoutError:
        return JSONResponse(job_view(await aq.get(job_id)), status_code=504)
    if job.status != "completed":
        return JSONResponse(job_view(job), status_code=500)
    built: Report = build_report.result(job)  # rebuilt from the task's return type
    return JSONResponse(built.model_dump(), status_code=200)
