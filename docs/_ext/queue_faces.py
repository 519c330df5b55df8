"""A griffe extension for the reference pages: `Queue` and `AsyncQueue` bind
each operation to their runner (`enqueue = _sync(ops.enqueue)`), so an
inspected method carries the operation's signature: a leading `ctx` the
caller never passes, and a `Plan[T]` the caller never sees. This shows the
method as it is called: without `ctx`, returning `T`."""

from __future__ import annotations

from typing import Any

import griffe


class QueueFaces(griffe.Extension):
    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        if not func.parameters or next(iter(func.parameters)).name != "ctx":
            return
        del func.parameters["ctx"]
        returns = str(func.returns) if func.returns is not None else ""
        if returns.startswith("Plan[") and returns.endswith("]"):
            func.returns = returns[len("Plan[") : -1]
