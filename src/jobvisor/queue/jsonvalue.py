"""JSON values as jobvisor stores them: payloads, results and progress as
compact text that reads back the same from both engines."""

from __future__ import annotations

import decimal
import json
import re
from typing import Any

from . import validate
from .errors import InvalidArgument


def payload_json(payload: Any) -> str:
    """A payload as compact JSON text; `InvalidArgument` naming it when it is
    not JSON, nests deeper than `MAX_PAYLOAD_DEPTH`, holds a NUL or text that
    is not UTF-8. The size limit is the queue's (see `Ctx.max_payload_bytes`)."""
    try:
        text = _ENCODER.encode(_portable({} if payload is None else payload))
    except RecursionError:
        text = None
    except _KeyNotText as exc:
        raise InvalidArgument(
            f"payload={validate.short(payload)}: key {validate.short(exc.key)}: expected str "
            "keys only (JSON would turn it into a string, which may collide with another key)"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(
            f"payload={validate.short(payload)}: expected a JSON-serialisable value ({exc})"
        ) from None
    # Nesting deeper than the bound needs that many brackets: count them (in C)
    # before walking the payload.
    if text is None or (
        text.count("[") + text.count("{") > validate.MAX_PAYLOAD_DEPTH
        and validate.payload_depth(payload) > validate.MAX_PAYLOAD_DEPTH
    ):
        raise InvalidArgument(
            f"payload={validate.short(payload)}: expected JSON nested at most "
            f"{validate.MAX_PAYLOAD_DEPTH} deep"
        )
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(
                f"payload={validate.short(payload)}: expected text that encodes as UTF-8 ({exc})"
            ) from None
    if "\\u0000" in text and _JSON_NUL.search(text):
        raise InvalidArgument(
            f"payload={validate.short(payload)}: expected JSON without NUL characters "
            "(PostgreSQL cannot store \\u0000)"
        )
    if "e+" in text or "-0.0" in text:
        text = _JSON_TOKEN.sub(_portable_number, text)
    return text


# The same JSON must read back the same from both engines, and PostgreSQL's
# jsonb keeps neither key order nor how a number was written: it orders an
# object's keys by their length in UTF-8 bytes, then bytewise, and prints a
# number as a decimal (1e308 as 309 digits, which then reads back as an int;
# -0.0 as 0.0). So every object is written in jsonb's key order, a float
# with an exponent as digits with a decimal point, and -0.0 as 0.0. A key
# that is not a string is refused: JSON would turn it into one, and
# {1: "a", "1": "b"} would keep only one of them.


class _KeyNotText(Exception):
    def __init__(self, key: Any) -> None:
        self.key = key


def _key_rank(item: tuple[str, Any]) -> tuple[int, bytes]:
    raw = item[0].encode("utf-8", "surrogatepass")
    return len(raw), raw


def _portable(value: Any) -> Any:
    """`value` with every dict's keys in jsonb's order (a copy only where one
    differs); `_KeyNotText` at a key that is not a string."""
    if isinstance(value, dict):
        items = []
        changed = False
        for key, item in value.items():
            if not isinstance(key, str):
                raise _KeyNotText(key)
            new = _portable(item)
            changed = changed or new is not item
            items.append((key, new))
        if len(items) > 1:
            ordered = sorted(items, key=_key_rank)
            changed = changed or ordered != items
            items = ordered
        return dict(items) if changed else value
    if isinstance(value, list | tuple):
        parts = [_portable(item) for item in value]
        changed = any(new is not old for new, old in zip(parts, value, strict=True))
        return parts if changed else value
    return value


# A JSON string (skipped) or number, in compact JSON text.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')


def _portable_number(match: re.Match[str]) -> str:
    token = match.group()
    if token.startswith('"'):
        return token
    if token == "-0.0":
        return "0.0"
    if "e+" not in token:
        return token
    digits = format(decimal.Decimal(token), "f")
    return digits if "." in digits else digits + ".0"


MAX_PROGRESS_NOTE = 200  # characters of a progress note


def progress_json(fraction: float, note: str | None = None) -> str:
    """A handler's progress as the JSON text `renew_many` writes:
    `{"fraction": 0.0..1.0, "note": str | None}`. `InvalidArgument` naming
    the bad value otherwise (a note is at most `MAX_PROGRESS_NOTE` characters)."""
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not 0.0 <= fraction <= 1.0
    ):
        raise InvalidArgument(f"fraction={validate.short(fraction)}: expected a number 0.0..1.0")
    if note is not None and not (isinstance(note, str) and len(note) <= MAX_PROGRESS_NOTE):
        raise InvalidArgument(
            f"note={validate.short(note)}: expected text of at most {MAX_PROGRESS_NOTE} characters"
        )
    try:
        return payload_json({"fraction": float(fraction), "note": note})
    except InvalidArgument:
        raise InvalidArgument(
            f"note={validate.short(note)}: expected text without NUL that encodes as UTF-8"
        ) from None


# Compact JSON, as every payload, result and progress is stored; one encoder
# for all (json.dumps with options builds a new one on every call).
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)

# A \u0000 escape in JSON text: one preceded by an even number of backslashes.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
