"""A task's arguments and return value as JSON, and back.

`dump` turns a Python value into plain JSON values (what a payload or a
result holds); `load` rebuilds a value from JSON by a type hint, so a task
declared `def ship(order: Order, at: datetime)` gets an `Order` and a
`datetime` back in the worker.

What round-trips: JSON's own values (None, bool, int, finite float, str,
lists, dicts with string keys), tuples and sets (as lists), dataclasses (as
objects of their fields), pydantic models (`model_dump(mode="json")`, when
pydantic is installed; jobvisor's `pydantic` extra), `datetime`, `date`,
`time` (ISO 8601), `UUID` and `Decimal` (as text) and enums (as their
value). Anything else is refused by `dump` with an `InvalidArgument` naming
where it was found, so a task is refused at enqueue, never at run time.

The rebuild follows the hint only: a value whose hint is missing, `Any`,
unresolvable (a class local to a function, a name imported only for type
checkers), or a type not listed above comes back as the plain JSON value.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import math
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .queue import validate
from .queue.errors import InvalidArgument

EXPECTED = (
    "a JSON value, a dataclass, a pydantic model, a datetime, date, time, UUID, "
    "Decimal or Enum (or a list, tuple, set or str-keyed dict of them)"
)

_SCALARS = (str, int, bool, type(None))
_TEXT_TYPES: dict[type, Callable[[str], Any]] = {
    dt.datetime: dt.datetime.fromisoformat,
    dt.date: dt.date.fromisoformat,
    dt.time: dt.time.fromisoformat,
    uuid.UUID: uuid.UUID,
    decimal.Decimal: decimal.Decimal,
}
_SEQUENCES = (list, tuple, set, frozenset)


def _pydantic_model(value: Any) -> bool:
    """Whether `value` is a pydantic model instance (without importing pydantic)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


def _pydantic_class(hint: Any) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(hint, type) and issubclass(hint, pydantic.BaseModel)


def dump(value: Any, where: str) -> Any:
    """`value` as plain JSON values; `InvalidArgument` naming `where` (and the
    path inside the value) when some part of it cannot be stored as JSON."""
    if isinstance(value, enum.Enum):
        return dump(value.value, where)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{where}={value!r}: expected a finite number")
        return value
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: dump(getattr(value, f.name), f"{where}.{f.name}")
            for f in dataclasses.fields(value)
        }
    if _pydantic_model(value):
        return value.model_dump(mode="json")
    if isinstance(value, _SEQUENCES):
        return [dump(item, f"{where}[{n}]") for n, item in enumerate(value)]
    if isinstance(value, Mapping):
        return _dump_mapping(value, where)
    raise InvalidArgument(
        f"{where}={validate.short(value)}: cannot be stored as JSON "
        f"({type(value).__name__}); expected {EXPECTED}"
    )


def _dump_mapping(value: Mapping[Any, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidArgument(
                f"{where} key {validate.short(key)}: expected a str key (as JSON objects have)"
            )
        out[key] = dump(item, f"{where}[{key!r}]")
    return out


def load(hint: Any, value: Any) -> Any:
    """Rebuild a value of type `hint` from its JSON form (see the module's
    docstring for what is rebuilt). A value that does not fit its hint raises
    the type's own error (`TypeError`, `ValueError`, pydantic's
    `ValidationError`)."""
    if value is None or hint is Any or isinstance(hint, str | typing.TypeVar):
        return value
    origin = typing.get_origin(hint)
    if origin is not None:
        return _load_generic(origin, typing.get_args(hint), value)
    if not isinstance(hint, type):
        return value
    if hint in _TEXT_TYPES and isinstance(value, str):
        return _TEXT_TYPES[hint](value)
    if issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
        return _load_dataclass(hint, value)
    if _pydantic_class(hint):
        return hint.model_validate(value)  # type: ignore[attr-defined]
    if hint in (tuple, set, frozenset) and isinstance(value, list):
        return hint(value)
    return value


def _load_generic(origin: Any, args: tuple[Any, ...], value: Any) -> Any:
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        return load(options[0], value) if len(options) == 1 else value
    if origin is typing.Annotated:
        return load(args[0], value)
    if origin in (list, set, frozenset, tuple) and isinstance(value, list):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return tuple(load(a, v) for a, v in zip(args, value, strict=False))
        item = args[0] if args else Any
        return origin(load(item, v) for v in value)
    if origin in (dict, Mapping) and isinstance(value, Mapping) and len(args) == 2:
        return {k: load(args[1], v) for k, v in value.items()}
    return value


def _load_dataclass(cls: type, value: Mapping[str, Any]) -> Any:
    hints = _class_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}")
    return cls(**{name: load(hints.get(name, Any), v) for name, v in value.items()})


@functools.lru_cache(maxsize=1024)
def _class_hints(cls: type) -> dict[str, Any]:
    """A dataclass's field hints, resolved once (resolving them is slow)."""
    return type_hints(cls)


def type_hints(target: Any) -> dict[str, Any]:
    """The resolved type hints of a function or class. When some cannot be
    resolved (a name imported only under TYPE_CHECKING, a class local to a
    function), the others are resolved one by one and those are left out,
    so their values come back as plain JSON."""
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:
        pass
    module = sys.modules.get(getattr(target, "__module__", ""), None)
    namespace = getattr(target, "__globals__", None) or vars(module or typing)
    hints: dict[str, Any] = {}
    for name, annotation in getattr(target, "__annotations__", {}).items():
        try:
            # What get_type_hints does, one annotation at a time.
            hints[name] = (
                eval(annotation, dict(namespace)) if isinstance(annotation, str) else annotation
            )
        except Exception:
            continue
    return hints
