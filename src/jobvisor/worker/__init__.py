"""One worker process: handlers by job type (`Registry`) and the event loop
that claims and runs their jobs (`Worker`). `python -m jobvisor.worker` is the
process the supervisor starts."""

from ..handler import Cancel, Handler, JobContext, Snooze
from .registry import AppError, Registry, load_app

__all__ = ["AppError", "Cancel", "Handler", "JobContext", "Registry", "Snooze", "load_app"]
