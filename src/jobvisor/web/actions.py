"""What the dashboard can do to jobs, queues and schedules: one vocabulary
for the pages' forms and the JSON API.

An action is a name and its fields (`ids`, `job_type`, `queue`, `schedule`,
`workflow`; `signal` and `payload`, JSON text, for a signal to one job).
`Action.parse` checks them (raising `InvalidArgument` naming the value, so
nothing is done on bad input), `describe` says what it would do (the
confirmation step), and `perform` does it and says what was done."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..queue import validate
from ..queue.api import AsyncQueue
from ..queue.errors import InvalidArgument, JobNotFound
from ..queue.model import JobStatus

MAX_SELECTED: Final = 500  # ids one action may name
MAX_BODY_BYTES: Final = 256 * 1024  # an API action's JSON: 500 ids take about 20 KiB
MAX_JSON_DEPTH: Final = 8  # an action's fields are a list at most: two levels
CANCEL_REASON: Final = "from the dashboard"


class Verb(enum.StrEnum):
    REQUEUE = "requeue"  # dead jobs back to pending
    DISCARD = "discard"  # dead jobs deleted
    CANCEL = "cancel"  # pending, retryable or running jobs
    PAUSE = "pause"
    RESUME = "resume"
    RUN_SCHEDULE = "run-schedule"
    CANCEL_WORKFLOW = "cancel-workflow"  # every unfinished job of a workflow
    RETRY_WORKFLOW = "retry-workflow"  # a workflow's failed part, started again
    SIGNAL = "signal"  # a signal (`queue.signal`) to one unfinished job


_NEEDS: Final = {
    Verb.REQUEUE: "ids or job_type",
    Verb.DISCARD: "ids or job_type",
    Verb.CANCEL: "ids",
    Verb.PAUSE: "queue",
    Verb.RESUME: "queue",
    Verb.RUN_SCHEDULE: "schedule",
    Verb.CANCEL_WORKFLOW: "workflow",
    Verb.RETRY_WORKFLOW: "workflow",
    Verb.SIGNAL: "ids",
}

# The fields a form may carry, beside `ids`.
ACTION_FIELDS: Final = ("job_type", "queue", "schedule", "workflow", "signal", "payload")


@dataclasses.dataclass(frozen=True, slots=True)
class Done:
    """What an action did: a sentence for the page, and the jobs it changed."""

    message: str
    count: int


@dataclasses.dataclass(frozen=True, slots=True)
class Action:
    verb: Verb
    ids: tuple[uuid.UUID, ...] = ()
    job_type: str | None = None
    queue: str | None = None
    schedule: str | None = None
    workflow: uuid.UUID | None = None
    signal: str | None = None
    payload: str | None = None  # the signal's payload, JSON text (None: no payload)

    @classmethod
    def parse(cls, verb: str, fields: Mapping[str, Any]) -> Action:
        """An action from its name and fields (a form's or a JSON body's):
        `ids` a list of job ids, `workflow` a workflow id, the others one
        name each."""
        try:
            what = Verb(verb)
        except ValueError:
            expected = ", ".join(v.value for v in Verb)
            raise InvalidArgument(f"action={verb!r}: expected one of {expected}") from None
        action = cls(
            what,
            ids=_ids(fields.get("ids") or ()),
            job_type=_name("job_type", fields.get("job_type")),
            queue=_name("queue", fields.get("queue")),
            schedule=_name("schedule", fields.get("schedule")),
            workflow=_workflow(fields.get("workflow")),
            signal=_name("signal", fields.get("signal")),
            payload=_payload(fields.get("payload")),
        )
        action._check()
        return action

    def _check(self) -> None:
        if self.verb is Verb.SIGNAL:
            if len(self.ids) != 1 or self.signal is None:
                raise InvalidArgument(
                    f"signal: expected one job id and a signal name, got {len(self.ids)} ids"
                    f" and signal={self.signal!r}"
                )
            return
        if self.signal is not None or self.payload is not None:
            raise InvalidArgument(f"{self.verb.value}: signal and payload go with a signal only")
        given = {
            "ids": bool(self.ids),
            "job_type": self.job_type is not None,
            "queue": self.queue is not None,
            "schedule": self.schedule is not None,
            "workflow": self.workflow is not None,
        }
        wanted = _NEEDS[self.verb].split(" or ")
        if sum(given[w] for w in wanted) != 1 or sum(given.values()) != 1:
            named = ", ".join(k for k, v in given.items() if v) or "nothing"
            raise InvalidArgument(
                f"{self.verb.value}: expected {_NEEDS[self.verb]} (one of them), got {named}"
            )

    def describe(self) -> str:
        """What it would do, for the confirmation step."""
        target = self._target()
        return {
            Verb.REQUEUE: f"Requeue {target}: back to pending, attempts reset.",
            Verb.DISCARD: f"Discard {target}: deleted for good.",
            Verb.CANCEL: f"Cancel {target}: waiting ones never run, running ones are stopped.",
            Verb.PAUSE: f"Pause queue {self.queue!r}: no job of it is claimed until resumed.",
            Verb.RESUME: f"Resume queue {self.queue!r}: its jobs are claimed again.",
            Verb.RUN_SCHEDULE: f"Run schedule {self.schedule!r} now: enqueue one job of it.",
            Verb.CANCEL_WORKFLOW: f"Cancel workflow {self.workflow}: its jobs not yet finished"
            " never run, running ones are stopped.",
            Verb.RETRY_WORKFLOW: f"Retry workflow {self.workflow}: its dead and cancelled jobs,"
            " and those they held back, start again; completed ones keep their results.",
            Verb.SIGNAL: f"Send the signal {self.signal!r} to job {self.ids[0] if self.ids else ''}"
            + (f" with the payload {self.payload}." if self.payload is not None else "."),
        }[self.verb]

    def _target(self) -> str:
        if self.ids:
            kind = "dead " if self.verb in (Verb.REQUEUE, Verb.DISCARD) else ""
            return f"{_jobs(len(self.ids), kind)} ({', '.join(str(i) for i in self.ids[:3])}" + (
                ", …)" if len(self.ids) > 3 else ")"
            )
        return f"every dead job of type {self.job_type!r}"

    def fields(self) -> dict[str, Any]:
        """The fields again, as the confirmation form carries them."""
        found: dict[str, Any] = {"ids": [str(i) for i in self.ids]}
        for name in ("job_type", "queue", "schedule", "signal", "payload"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        if self.workflow is not None:
            found["workflow"] = str(self.workflow)
        return found

    async def perform(self, queue: AsyncQueue) -> Done:
        """Do it; a `JobvisorError` when the database refuses (nothing done)."""
        if self.verb is Verb.PAUSE:
            assert self.queue is not None
            await queue.pause(self.queue)
            return Done(f"Paused queue {self.queue!r}.", 0)
        if self.verb is Verb.RESUME:
            assert self.queue is not None
            await queue.resume(self.queue)
            return Done(f"Resumed queue {self.queue!r}.", 0)
        if self.verb is Verb.RUN_SCHEDULE:
            assert self.schedule is not None
            job_id = await queue.schedule_run(self.schedule)
            return Done(f"Enqueued job {job_id} of schedule {self.schedule!r}.", 1)
        if self.verb is Verb.CANCEL:
            return await _cancel(queue, self.ids)
        if self.verb is Verb.SIGNAL:
            assert self.signal is not None
            payload = None if self.payload is None else json.loads(self.payload)
            await queue.signal(self.ids[0], self.signal, payload)
            return Done(f"Sent the signal {self.signal!r} to job {self.ids[0]}.", 1)
        if self.workflow is not None:
            return await _on_workflow(queue, self.verb, self.workflow)
        if self.job_type is not None:
            return await _of_type(queue, self.verb, self.job_type)
        return await _each_dead(queue, self.verb, self.ids)


# A JSON string, escapes included, so that brackets inside one are not counted.
_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_JSON_BRACKETS: Final = re.compile(rb"[\[\]{}]")


def parse_json(raw: bytes) -> Any:
    """An API body's JSON, nested at most `MAX_JSON_DEPTH` deep; else
    `InvalidArgument`. The depth is counted before parsing, without
    recursion, so that a body of many thousand nested arrays costs a scan,
    not the parser's stack."""
    depth = 0
    for bracket in _JSON_BRACKETS.findall(_JSON_STRING.sub(b"", raw)):
        depth += 1 if bracket in (b"[", b"{") else -1
        if depth > MAX_JSON_DEPTH:
            raise InvalidArgument(
                f"body: nested more than {MAX_JSON_DEPTH} deep, expected a JSON object"
                f" nested at most {MAX_JSON_DEPTH} deep"
            )
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidArgument("body: expected a JSON object") from None


def _jobs(n: int, kind: str = "") -> str:
    return f"{n} {kind}job" + ("" if n == 1 else "s")


def _name(label: str, value: Any) -> str | None:
    return None if value is None or value == "" else validate.name(label, value)


def _payload(value: Any) -> str | None:
    """A signal's payload: JSON text (None or "": no payload), checked here."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"payload={validate.short(value)}: expected JSON text")
    try:
        json.loads(value)
    except ValueError:
        raise InvalidArgument(f"payload={validate.short(value)}: expected JSON text") from None
    return value


def _workflow(value: Any) -> uuid.UUID | None:
    if value is None or value == "":
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgument(f"workflow={validate.short(value)}: expected a workflow id") from None


def _ids(values: Any) -> tuple[uuid.UUID, ...]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Sequence):
        raise InvalidArgument(f"ids={validate.short(values)}: expected a list of job ids")
    if len(values) > MAX_SELECTED:
        raise InvalidArgument(f"ids: {len(values)} given, expected at most {MAX_SELECTED}")
    found: list[uuid.UUID] = []
    for value in values:
        try:
            found.append(uuid.UUID(str(value)))
        except ValueError:
            raise InvalidArgument(f"ids: {validate.short(value)} is not a job id") from None
    return tuple(dict.fromkeys(found))


def _skipped(n: int, why: str) -> str:
    return f" {_jobs(n)} skipped ({why})." if n else ""


async def _each_dead(queue: AsyncQueue, verb: Verb, ids: Sequence[uuid.UUID]) -> Done:
    done = 0
    refused: list[str] = []
    for job_id in ids:
        try:
            if verb is Verb.REQUEUE:
                await queue.dead.requeue(job_id)
            else:
                await queue.dead.discard(job_id)
            done += 1
        except (JobNotFound, InvalidArgument) as exc:
            refused.append(str(exc))
    past = "Requeued" if verb is Verb.REQUEUE else "Discarded"
    why = "; ".join(refused[:3]) + ("; …" if len(refused) > 3 else "")
    return Done(f"{past} {_jobs(done, 'dead ')}." + _skipped(len(refused), why), done)


async def _of_type(queue: AsyncQueue, verb: Verb, job_type: str) -> Done:
    if verb is Verb.REQUEUE:
        result = await queue.dead.requeue_type(job_type)
        held = _skipped(len(result.held), "a live job holds their dedupe key")
        message = f"Requeued {_jobs(result.requeued, 'dead ')} of type {job_type!r}." + held
        return Done(message, result.requeued)
    count = await queue.dead.discard_type(job_type)
    return Done(f"Discarded {_jobs(count, 'dead ')} of type {job_type!r}.", count)


async def _cancel(queue: AsyncQueue, ids: Sequence[uuid.UUID]) -> Done:
    cancelled = asked = 0
    refused: list[str] = []
    for job_id in ids:
        try:
            status = await queue.cancel(job_id, reason=CANCEL_REASON)
        except JobNotFound as exc:
            refused.append(str(exc))
            continue
        if status is JobStatus.RUNNING:
            asked += 1
        else:
            cancelled += 1
    message = f"Cancelled {_jobs(cancelled)}."
    if asked:
        message += f" Asked the workers of {_jobs(asked, 'running ')} to stop them."
    return Done(message + _skipped(len(refused), "; ".join(refused[:3])), cancelled + asked)


async def _on_workflow(queue: AsyncQueue, verb: Verb, workflow_id: uuid.UUID) -> Done:
    """Cancel or retry a workflow (`WorkflowNotFound`, a `JobvisorError`, if
    there is none)."""
    if verb is Verb.CANCEL_WORKFLOW:
        count = await queue.cancel_workflow(workflow_id, reason=CANCEL_REASON)
        return Done(
            f"Cancelled {_jobs(count)} of workflow {workflow_id} (a running one ends"
            " cancelled once its worker stops it).",
            count,
        )
    count = await queue.retry_workflow(workflow_id)
    if not count:
        return Done(f"Nothing to retry in workflow {workflow_id}: no job of it failed.", 0)
    return Done(f"Requeued {_jobs(count)} of workflow {workflow_id}.", count)
