"""An exception as text, the one way every log line, failed attempt and
wrapped driver error says it."""

from __future__ import annotations

import sqlite3

from jobvisor.errortext import describe, driver_text, error_text, flat_message, one_line


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_one_line_names_the_type_and_the_first_line() -> None:
    assert one_line(ValueError("boom\nmore")) == "ValueError: boom"
    assert one_line(ValueError()) == "ValueError"
    assert one_line(ValueError("  ")) == "ValueError"


def test_describe_keeps_the_whole_message() -> None:
    assert describe(ValueError("boom\nmore")) == "ValueError: boom\nmore"
    assert describe(KeyError()) == "KeyError"


def test_an_exception_that_cannot_be_printed_is_named_by_its_type() -> None:
    assert one_line(Unprintable()) == "Unprintable"
    assert describe(Unprintable()) == "Unprintable"
    assert driver_text(Unprintable()).endswith("Unprintable: (no message)")


def test_error_text_ends_with_the_innermost_frames() -> None:
    try:
        raise ValueError("boom")
    except ValueError as exc:
        text = error_text(exc)
    head, _, tail = text.partition("\n")
    assert head == "ValueError: boom"
    assert "test_error_text_ends_with_the_innermost_frames" in tail


def test_driver_text_is_the_qualified_class_and_one_line() -> None:
    exc = sqlite3.OperationalError("database is\n  locked")
    assert driver_text(exc) == "sqlite3.OperationalError: database is locked"
    assert flat_message(sqlite3.Error()) == "(no message)"
