"""Workflows: jobs that run after other jobs, with their results.

    wf = jobvisor.Workflow("nightly-report")
    a = wf.add(fetch_orders, day="2026-12-04")
    b = wf.add(fetch_refunds, day="2026-12-04")
    c = wf.add(build_report, orders=a.result, refunds=b.result)   # after a and b
    wf.after(c, on_parent_failure="run").add("notify", {"channel": "ops"})
    wf_id = queue.enqueue_workflow(wf)

`wf.add` takes a task (`@registry.task`) or a Django task (`@task` on
`jobvisor.contrib.django.JobvisorBackend`) with its own arguments, or a job
type with a payload and `enqueue`'s options. A node's `result` is a placeholder for
what its job returns: passed as an argument (anywhere inside one, a list or
a dict too), it makes the new job a child of that node and is replaced by the
result when the child runs. To a type checker a placeholder is the value it
stands for, so `build_report(orders: list[Order])` accepts the result of a
task that returns `list[Order]` and refuses one that returns something else.

A job may depend only on nodes added before it, so a workflow has no cycles.
`after=` (job types) or `wf.after(...)` (any node) adds dependencies whose
results the job does not take: it only runs after them. A job of a plain
job type takes a result by a placeholder in its payload
(`wf.add("report", {"orders": a.result})`); its handler reads the payload
with the result in place, and `job.parent_results` by node key. Only results
a job takes are handed to it: a fan-in that only waits copies none.

`on_parent_failure` says per dependency what a parent's death or cancel
does to the child: "cancel" (the default: the child and, through their own
defaults, its descendants end cancelled), "run"
(it runs anyway; the failed parent's placeholder is None and
`job.failed_parents` names it) or "wait" (it waits until the parent is
retried and completes).

`chain` and `group` are short forms that build a `Workflow`.
"""

from __future__ import annotations

import re
from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeAlias, TypeGuard, TypeVar, overload

from .queue.errors import InvalidArgument
from .queue.placeholders import placeholder, placeholder_nodes
from .queue.validate import short
from .queue.workflows import (
    NODE_KEY,
    FailurePolicy,
    NodeSpec,
    WorkflowJob,
    WorkflowNotFound,
    WorkflowStatus,
)
from .tasks import Task, TaskCall

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ParamSpec, Protocol

    P = ParamSpec("P")
    R_co = TypeVar("R_co", covariant=True)

    class FrameworkTask(Protocol[P, R_co]):
        """What a workflow reads of a Django task (`@task`, from
        `django.tasks` or the `django-tasks` backport)."""

        @property
        def func(self) -> Callable[P, R_co]: ...

        @property
        def module_path(self) -> str: ...

        def get_backend(self) -> Any: ...


R = TypeVar("R")
T = TypeVar("T")


class _Placeholder(dict[str, str]):
    """A parent's result in a child's arguments: the JSON object
    `{RESULT_KEY: node key}`, which the codec stores as it is."""


if TYPE_CHECKING:
    Placeholder: TypeAlias = Annotated[T, "a parent's result, filled in when the child runs"]
else:
    Placeholder = _Placeholder


__all__ = [
    "FailurePolicy",
    "Node",
    "Placeholder",
    "Workflow",
    "WorkflowJob",
    "WorkflowNotFound",
    "WorkflowStatus",
    "chain",
    "group",
]

Policy: TypeAlias = FailurePolicy | str


class Node(Generic[R]):
    """One job of a workflow under construction."""

    __slots__ = ("index", "key", "workflow")

    def __init__(self, workflow: Workflow, index: int, key: str) -> None:
        self.workflow, self.index, self.key = workflow, index, key

    @property
    def result(self) -> Placeholder[R]:
        """A placeholder for this job's result, to pass as a child's argument."""
        value: Any = _Placeholder(placeholder(self.key))
        return value  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Node({self.key!r})"


def _policy(value: Policy) -> FailurePolicy:
    try:
        return FailurePolicy(value)
    except ValueError:
        raise InvalidArgument(
            f"on_parent_failure={short(value)}: expected one of 'cancel', 'run', 'wait'"
        ) from None


class _After:
    """`Workflow.after`: the next `add` depends on these nodes too."""

    def __init__(self, workflow: Workflow, nodes: Sequence[Node[Any]], policy: Policy) -> None:
        self.workflow, self.nodes, self.policy = workflow, nodes, policy

    @overload
    def add(
        self, task: Task[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Node[R]: ...

    @overload
    def add(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Node[R]: ...

    @overload
    def add(self, task: TaskCall[Any], /) -> Node[Any]: ...

    @overload
    def add(
        self,
        task: FrameworkTask[P, Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Node[R]: ...

    @overload
    def add(self, task: FrameworkTask[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Node[R]: ...

    @overload
    def add(self, task: str, payload: Any = None, /, **options: Any) -> Node[Any]: ...

    def add(self, task: Any, /, *args: Any, **kwargs: Any) -> Node[Any]:
        return self.workflow._add(task, args, kwargs, after=self.nodes, policy=self.policy)


class Workflow:
    """A graph of jobs to enqueue together (`Queue.enqueue_workflow`)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument(f"workflow name {short(name)}: expected a non-empty string")
        self.name = name
        self.nodes: list[Node[Any]] = []
        self.specs: list[NodeSpec] = []
        self._keys: dict[str, int] = {}

    @overload
    def add(
        self, task: Task[P, Coroutine[Any, Any, R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> Node[R]: ...

    @overload
    def add(self, task: Task[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Node[R]: ...

    @overload
    def add(self, task: TaskCall[Any], /) -> Node[Any]: ...

    @overload
    def add(
        self,
        task: FrameworkTask[P, Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Node[R]: ...

    @overload
    def add(self, task: FrameworkTask[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Node[R]: ...

    @overload
    def add(
        self,
        task: str,
        payload: Any = None,
        /,
        *,
        after: Iterable[Node[Any]] = (),
        on_parent_failure: Policy = FailurePolicy.CANCEL,
        **options: Any,
    ) -> Node[Any]: ...

    def add(self, task: Any, /, *args: Any, **kwargs: Any) -> Node[Any]:
        """Add a job: a task with its arguments, or a job type with a payload
        and `enqueue`'s options (`after=` and `on_parent_failure=` for a job
        type; `after(...)` for either). Each placeholder among the arguments
        makes the job a child of its node. Returns the new node."""
        after = kwargs.pop("after", ())
        policy = kwargs.pop("on_parent_failure", FailurePolicy.CANCEL)
        return self._add(task, args, kwargs, after=after, policy=policy)

    def after(self, *nodes: Node[Any], on_parent_failure: Policy = FailurePolicy.CANCEL) -> _After:
        """`wf.after(a, b).add(...)`: the job added next runs after `a` and `b`
        (besides the nodes its arguments take results from), each dependency
        with `on_parent_failure`."""
        _policy(on_parent_failure)
        return _After(self, nodes, on_parent_failure)

    def _add(
        self,
        task: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        after: Iterable[Node[Any]],
        policy: Policy,
    ) -> Node[Any]:
        policy = _policy(policy)
        job = _job_of(task, args, kwargs)
        parents: dict[int, FailurePolicy] = {}
        if isinstance(after, Node):
            after = (after,)
        for parent in after:
            if not isinstance(parent, Node) or parent.workflow is not self:
                raise InvalidArgument(
                    f"after={short(parent)}: expected a node added to this workflow before"
                )
            parents.setdefault(parent.index, policy)
        for key in sorted(placeholder_nodes(job["payload"])):
            index = self._keys.get(key)
            if index is None:
                raise InvalidArgument(
                    f"{job['job_type']}: a placeholder of node {key!r}, which is not in this "
                    "workflow (a job takes results only of nodes added before it)"
                )
            parents.setdefault(index, policy)
        key = self._key_for(job["job_type"])
        node: Node[Any] = Node(self, len(self.nodes), key)
        self.nodes.append(node)
        self.specs.append(NodeSpec(key, job, tuple(parents.items())))
        self._keys[key] = node.index
        return node

    def _key_for(self, job_type: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.:@/+-]", "_", job_type)[:180] or "job"
        key, n = base, 1
        while key in self._keys:
            n += 1
            key = f"{base}-{n}"
        assert NODE_KEY.fullmatch(key)
        return key

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, {len(self.nodes)} jobs)"


def _job_of(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`enqueue`'s arguments for a task call or a job type and payload."""
    if isinstance(task, Task):
        return {"job_type": task.name, "payload": task.payload(*args, **kwargs), **task.options}
    if isinstance(task, TaskCall):
        if args or kwargs:
            raise InvalidArgument(f"{task.job_type}: a task call takes no further arguments")
        return task.enqueue_arguments()
    if _is_framework_task(task):
        return _framework_job(task, args, kwargs)
    if isinstance(task, str):
        if len(args) > 1:
            raise InvalidArgument(
                f"{task}: expected a job type, one payload and enqueue options by keyword"
            )
        return {"job_type": task, "payload": args[0] if args else None, **kwargs}
    raise InvalidArgument(
        f"{short(task)}: expected a task, a task call, a Django task or a job type"
    )


def _is_framework_task(task: Any) -> TypeGuard[FrameworkTask[..., Any]]:
    """Whether `task` is a Django task (`django.tasks` or the backport's):
    read by its shape, so that a workflow needs no Django to be built."""
    return (
        not isinstance(task, str | Task | TaskCall)
        and callable(getattr(task, "get_backend", None))
        and isinstance(getattr(task, "module_path", None), str)
        and callable(getattr(task, "func", None))
    )


def _framework_job(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """`enqueue`'s arguments for a Django task's call, from its backend
    (`jobvisor.contrib.django.JobvisorBackend.workflow_job`): the job its
    `enqueue` would write. A task on another backend is refused: no worker
    of this queue would run it as that backend does."""
    backend = task.get_backend()
    make = getattr(backend, "workflow_job", None)
    if not callable(make):
        raise InvalidArgument(
            f"{task.module_path}: a Django task on backend {short(getattr(task, 'backend', None))} "
            f"({type(backend).__module__}.{type(backend).__qualname__}); a workflow takes a "
            "Django task whose backend is jobvisor.contrib.django.JobvisorBackend"
        )
    job: dict[str, Any] = make(task, args, kwargs)
    return job


Step: TypeAlias = "Task[Any, Any] | TaskCall[Any] | FrameworkTask[..., Any] | str | tuple[str, Any]"


def _first(wf: Workflow, step: Step) -> Node[Any]:
    if isinstance(step, tuple):
        job_type, payload = step
        return wf.add(job_type, payload)
    if isinstance(step, Task):
        return wf.add(step.args())
    if isinstance(step, TaskCall) or _is_framework_task(step):
        return wf.add(step)
    return wf.add(step)


def chain(*steps: Step, name: str = "chain") -> Workflow:
    """A workflow of jobs one after the other, each taking the one before's
    result. The first step is a task call (`fetch.args(day=...)`), a task
    or Django task taking no arguments, a job type, or a `(job_type,
    payload)` pair; each later one is a task or a Django task, called with
    the previous result as its one positional argument, or a job type, whose
    payload is
    `{"previous": <the previous result>}`. A failure cancels the rest."""
    if not steps:
        raise InvalidArgument("chain: expected at least one step")
    wf = Workflow(name)
    previous = _first(wf, steps[0])
    for index, step in enumerate(steps[1:], start=1):
        if isinstance(step, Task) or _is_framework_task(step):
            previous = wf.add(step, previous.result)
        elif isinstance(step, str):
            previous = wf.add(step, {"previous": previous.result})
        else:
            raise InvalidArgument(
                f"chain: steps[{index}]={short(step)}: expected a task or a job type "
                "(it takes the previous step's result)"
            )
    return wf


def group(*steps: Step, name: str = "group") -> Workflow:
    """A workflow of independent jobs (task calls, job types, or
    `(job_type, payload)` pairs); add a job after them with
    `wf.after(*wf.nodes).add(...)`, or pass `[n.result for n in wf.nodes]`
    to a task to gather their results."""
    if not steps:
        raise InvalidArgument("group: expected at least one step")
    wf = Workflow(name)
    for step in steps:
        _first(wf, step)
    return wf
