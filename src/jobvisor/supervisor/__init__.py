"""The supervisor: the parent process of `jobvisor run` (see `arbiter`)."""

from .arbiter import State, StopMode, Supervisor, main

__all__ = ["State", "StopMode", "Supervisor", "main"]
