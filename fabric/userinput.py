"""Files users write, read so that nothing in them can crash or flood an error message.

``json.loads`` takes NaN and Infinity by default, hands a 5000-digit number to ``int()``,
which raises a bare ValueError past 4300 digits, and recurses until RecursionError on deep
nesting. ``decode_json`` refuses each with one line naming where in the document it is.
``brief`` quotes a user's value in a message bounded: it may be a megabyte of text, or
(through YAML aliases) a list of a billion elements.
"""
from __future__ import annotations

import json
import math
import os
import reprlib
from typing import Any

# config_db numbers are 64-bit at most (20 digits); a longer integer is a typo or an attack
MAX_INT_DIGITS = 30
MAX_KEY_SHOWN = 80  # a key longer than this is cut in messages, which stay one short line
MAX_SHOWN = 100  # characters of a quoted value in a message


def read_text(path: str | os.PathLike[str], error: type[ValueError],
              undecodable: str = "not UTF-8 text") -> str:
    """A file a user wrote, as UTF-8 text: a missing or unreadable file, or one that is not
    UTF-8 (``undecodable`` says so), is one ``error`` line naming it."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise error(f"{name}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{name}: {undecodable}") from None


class JsonError(ValueError):
    """``file: where: problem`` in one line; ``where`` is ``TABLE|key|field`` (or empty)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


def decode_json(text: str, name: str) -> Any:
    """The JSON document in *text*; *name* only names the source in error messages."""
    bad: list[_BadNumber] = []

    def refuse(problem: str) -> _BadNumber:
        bad.append(_BadNumber(problem))
        return bad[-1]

    def integer(text: str) -> int | _BadNumber:
        digits = len(text.removeprefix("-"))
        if digits > MAX_INT_DIGITS:
            return refuse(f"an integer of {digits} digits is out of range")
        return int(text)

    def real(text: str) -> float | _BadNumber:
        value = float(text)
        return value if math.isfinite(value) else refuse(f"{brief(text)} is out of range")

    def constant(word: str) -> _BadNumber:
        return refuse(f"{word} is not a JSON number (JSON has no NaN or infinities)")

    try:
        data = json.loads(text, parse_int=integer, parse_float=real, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise JsonError(f"{name}: invalid JSON: line {e.lineno} column {e.colno}: {e.msg}") \
            from None
    except RecursionError:
        raise JsonError(f"{name}: invalid JSON: nested too deeply to parse") from None
    if bad:
        path = _path_to(data, bad[0])
        where = "|".join(path[:2]) + "".join(f": {step}" for step in path[2:])
        message = f"{name}: {where or '(top level)'}: {bad[0].problem}"
        raise JsonError(message.replace("\n", "\\n"), "|".join(path[:3]))
    return data


class _BadNumber:
    """A JSON number refused while decoding, left in place so that the error can name the
    keys leading to it (json's hooks are not told where they are)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _path_to(data: Any, target: object) -> list[str]:
    """The keys (an index as ``key[i]``) leading to *target*; iterative, since the document
    may be nested as deep as json allows."""
    stack: list[tuple[Any, list[str]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if value is target:
            return path
        if isinstance(value, dict):
            stack.extend((v, [*path, shown_key(k)]) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, [*path[:-1], f"{path[-1]}[{i}]"] if path else [f"[{i}]"])
                         for i, v in enumerate(value))
    return []


def shown_key(key: str) -> str:
    """A key from the file as messages show it: whole unless it is absurdly long."""
    if len(key) <= MAX_KEY_SHOWN:
        return key
    return f"{key[:MAX_KEY_SHOWN // 2]}...({len(key)} characters)"


class _BriefRepr(reprlib.Repr):
    """repr() bounded in depth and width, and safe for integers repr() itself refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother = 2, 60, 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4

    def repr_int(self, value: int, level: int) -> str:
        if value.bit_length() > 4 * MAX_INT_DIGITS:
            return f"<an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits>"
        return super().repr_int(value, level)


_BRIEF = _BriefRepr()


def brief(value: object) -> str:
    """repr() for an error message that quotes what the user wrote, at most MAX_SHOWN
    characters."""
    text = _BRIEF.repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN - 5]} ...)"
