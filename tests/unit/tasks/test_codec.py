"""`jobvisor.codec`: what `dump` accepts and refuses (naming where), and what
`load` rebuilds from a hint; and tasks whose signatures use positional-only
parameters, `*args` and `**kwargs`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Annotated, Any, Optional

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobvisor import InvalidArgument, Registry, codec


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 2


class Point(pydantic.BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Shape:
    name: str
    corners: tuple[Point, ...]
    colour: Colour
    tags: frozenset[str] = frozenset()
    meta: dict[str, dt.date] = dataclasses.field(default_factory=dict)
    parent: Shape | None = None


SHAPE = Shape(
    name="tri",
    corners=(Point(x=0, y=0), Point(x=1, y=0), Point(x=0, y=1)),
    colour=Colour.BLUE,
    tags=frozenset({"a"}),
    meta={"drawn": dt.date(2026, 1, 2)},
    parent=Shape("root", (), Colour.RED),
)


def round_trip(hint: Any, value: Any) -> Any:
    """`value` dumped, through JSON text, and loaded by `hint`."""
    return codec.load(hint, json.loads(json.dumps(codec.dump(value, "value"))))


@pytest.mark.parametrize(
    ("hint", "value"),
    [
        (Shape, SHAPE),
        (dt.datetime, dt.datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=dt.UTC)),
        (dt.date, dt.date(1999, 12, 31)),
        (dt.time, dt.time(23, 59, 1)),
        (uuid.UUID, uuid.UUID("12345678-1234-5678-1234-567812345678")),
        (decimal.Decimal, decimal.Decimal("0.10")),
        (Colour, Colour.RED),
        (tuple[int, str], (1, "a")),
        (tuple[Point, ...], (Point(x=1, y=2),)),
        (set[int], {1, 2, 3}),
        (list[Optional[dt.date]], [None, dt.date(2026, 1, 1)]),  # noqa: UP045 (the old spelling)
        (dict[str, list[Point]], {"a": [Point(x=1, y=1)]}),
        (Annotated[dt.date, "a note"], dt.date(2026, 2, 3)),
        (Point | None, None),
        (Any, {"free": ["form", 1, 2.5, True, None]}),
    ],
    ids=lambda v: getattr(v, "__name__", None) or type(v).__name__,
)
def test_values_round_trip_by_their_hint(hint: Any, value: Any) -> None:
    assert round_trip(hint, value) == value


def test_without_a_usable_hint_the_json_value_comes_back() -> None:
    assert round_trip(Any, dt.date(2026, 1, 1)) == "2026-01-01"
    assert round_trip("Unresolved", {"x": 1}) == {"x": 1}
    assert round_trip(int | str, 5) == 5  # a union of several types is not guessed at


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (object(), "value=<object object"),
        (float("inf"), "value=inf: expected a finite number"),
        ({"a": [1, {"b": b"bytes"}]}, "value['a'][1]['b']=b'bytes': cannot be stored as JSON"),
        ({2: "x"}, "value key 2: expected a str key"),
        (Shape("s", (), Colour.RED, meta={"d": dt.timedelta(1)}), "value.meta['d']"),  # type: ignore[dict-item]
        (lambda: None, "(function)"),
    ],
    ids=["object", "inf", "nested-bytes", "int-key", "dataclass-field", "function"],
)
def test_dump_refuses_what_json_cannot_hold_naming_where(value: Any, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        codec.dump(value, "value")
    assert message in str(caught.value)


def test_load_raises_the_type_s_own_error_for_a_value_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match="Invalid isoformat"):
        codec.load(dt.date, "yesterday")
    with pytest.raises(TypeError, match="Shape has no field 'colour_name'"):
        codec.load(Shape, {"name": "x", "corners": [], "colour_name": "red"})
    with pytest.raises(pydantic.ValidationError):
        codec.load(Point, {"x": "left"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)  # fmt: skip


@given(json_values)
def test_json_values_pass_through_unchanged(value: Any) -> None:
    assert codec.dump(value, "value") == value
    assert codec.load(Any, value) == value


registry = Registry()


@registry.task
def spread(first: int, /, *rest: dt.date, scale: float = 1.0, **named: Point) -> dict[str, Any]:
    return {
        "first": first,
        "years": [d.year for d in rest],
        "scale": scale,
        "named": {k: p.x + p.y for k, p in named.items()},
    }


def test_positional_only_star_args_and_star_kwargs_are_stored_by_name() -> None:
    payload = spread.payload(1, dt.date(2020, 1, 1), dt.date(2021, 1, 1), a=Point(x=1, y=2))
    assert payload == {
        "first": 1,
        "rest": ["2020-01-01", "2021-01-01"],
        "named": {"a": {"x": 1, "y": 2}},
    }
    bound = spread.arguments(json.loads(json.dumps(payload)))
    assert spread.func(*bound.args, **bound.kwargs) == {
        "first": 1,
        "years": [2020, 2021],
        "scale": 1.0,
        "named": {"a": 3},
    }


def test_a_hint_that_cannot_be_resolved_leaves_only_its_own_argument_plain() -> None:
    @dataclasses.dataclass
    class Local:  # local to this function: a string annotation cannot name it
        n: int

    local = Registry()

    @local.task
    def mixed(when: dt.date, local: Local, point: Point) -> None: ...

    bound = mixed.arguments({"when": "2026-01-02", "local": {"n": 1}, "point": {"x": 1, "y": 2}})
    assert bound.arguments == {
        "when": dt.date(2026, 1, 2),
        "local": {"n": 1},  # plain JSON: `Local` is not resolvable from a string
        "point": Point(x=1, y=2),
    }
