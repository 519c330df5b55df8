"""Placeholders: where a workflow job's payload takes a parent's result.

A placeholder is the JSON object `{RESULT_KEY: node key}`; the builder
(`jobvisor.workflows`) puts one where an argument is a parent's result, the
hand-over trigger gathers each completed parent's result into the child's
`meta` ("parents", by node key; "failed_parents" for the parents that failed
under the "run" policy), and the worker `substitute`s them before the
handler sees the payload. Pure functions over JSON values: the worker and
the queue both use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

RESULT_KEY: Final = "$jobvisor.result"
"""The one key of a placeholder object in a payload: its value is the node
key of the parent whose result takes its place."""


def placeholder(node: str) -> dict[str, str]:
    """The payload value that stands for the result of the node `node`."""
    return {RESULT_KEY: node}


def placeholder_nodes(value: Any, found: set[str] | None = None) -> set[str]:
    """The node keys of every placeholder inside a JSON value."""
    found = set() if found is None else found
    if isinstance(value, dict):
        if len(value) == 1 and RESULT_KEY in value:
            found.add(str(value[RESULT_KEY]))
            return found
        for item in value.values():
            placeholder_nodes(item, found)
    elif isinstance(value, list):
        for item in value:
            placeholder_nodes(item, found)
    return found


def substitute(value: Any, parents: Mapping[str, Any]) -> Any:
    """`value` with each placeholder replaced by its parent's result (None
    for a parent that failed under the "run" policy)."""
    if isinstance(value, dict):
        if len(value) == 1 and RESULT_KEY in value:
            return parents.get(value[RESULT_KEY])
        return {key: substitute(item, parents) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, parents) for item in value]
    return value


def parent_results(meta: Any) -> dict[str, Any]:
    """The results of a workflow job's completed parents, by node key."""
    found = meta.get("parents") if isinstance(meta, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def failed_parents(meta: Any) -> dict[str, str]:
    """The parents of a workflow job that failed ("run" policy), each with
    its status (dead or cancelled), by node key."""
    found = meta.get("failed_parents") if isinstance(meta, dict) else None
    return dict(found) if isinstance(found, dict) else {}
