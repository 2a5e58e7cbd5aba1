"""Strict reading of capcal's on-disk JSON: the error type and the checks every record reader shares.

Every reader of a capcal log (sampling records in ``capcal_tasks.sampling``, confidence records in
``capcal_tasks.confidence.records``, lm-eval results files and activation indexes) parses JSON with
``strict_json`` and reports a violation as ``RunFormatError("<file>:<line>: <what is wrong>")``: one line,
never a traceback, never a guess. Strict means:

- duplicate keys in one object are rejected (Python's json keeps the last one silently);
- ``NaN``, ``Infinity`` and ``-Infinity`` (accepted by Python's json, not JSON) are rejected (a reader of a
  file that is not capcal's alone, such as lm-eval's results file, collects them and says where they may
  stand);
- nesting too deep for the parser is an error naming the file and line, not a ``RecursionError``;
- a string with a lone UTF-16 surrogate escape is rejected (not valid Unicode);
- ``null`` is kept as ``None``; readers never turn it into text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "RunFormatError",
    "check_binary",
    "check_count",
    "check_finite",
    "check_probability",
    "iter_json_lines",
    "parse_json_object",
    "read_json_file",
    "read_json_with_digest",
    "strict_json",
]

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class RunFormatError(ValueError):
    """A malformed, contradictory or partial capcal/lm-eval log; the message names the file (and line)."""


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _NonFinite(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _line_of(text: str, key: str) -> int:
    """The line of the second ``"key":`` in ``text`` (where a duplicate key sits), else 1."""
    pattern = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    matches = list(pattern.finditer(text))
    if len(matches) < 2:
        return 1
    return text.count("\n", 0, matches[1].start()) + 1


def strict_json(
    text: str, path: Path | str, line: int | None = None, nonfinite: list[str] | None = None
) -> Any:
    """``text`` parsed as strict JSON (see the module docstring); ``RunFormatError`` naming ``path`` and the
    line (``line`` for one JSON line of a JSON-lines file, else the line inside ``text``).

    ``nonfinite``: a list that collects the NaN/Infinity constants (parsed as floats) instead of rejecting
    them, for files that are not capcal's alone (lm-eval writes NaN for an undefined aggregate); the caller
    then decides where they may stand.
    """

    def where(inner_line: int) -> str:
        return f"{path}:{line if line is not None else inner_line}"

    def constant(name: str) -> float:
        if nonfinite is None:
            raise _NonFinite(name)
        nonfinite.append(name)
        return float(name.replace("Infinity", "inf"))

    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=constant)
    except json.JSONDecodeError as error:
        raise RunFormatError(
            f"{where(error.lineno)}: malformed or truncated JSON, not valid JSON ({error.msg}); "
            "the file may have been cut while writing"
        ) from None
    except _DuplicateKey as error:
        raise RunFormatError(
            f"{where(_line_of(text, error.key))}: duplicate key {error.key!r} in one JSON object "
            "(which one is meant is not known)"
        ) from None
    except _NonFinite as error:
        position = text.find(error.constant)
        inner = text.count("\n", 0, position) + 1 if position >= 0 else 1
        raise RunFormatError(
            f"{where(inner)}: non-finite number {error.constant} (not JSON; not a valid value for any field)"
        ) from None
    except RecursionError:
        raise RunFormatError(f"{where(1)}: JSON nested too deeply to read") from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise RunFormatError(
                f"{where(1)}: a string holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape); "
                "not valid Unicode"
            ) from None
        except RecursionError:
            raise RunFormatError(f"{where(1)}: JSON nested too deeply to read") from None
    return value


def parse_json_object(text: str, where: str, *, echo: bool = False) -> dict:
    """``text`` as a JSON object, parsed as Python's json parses it (not ``strict_json``: for inputs that are
    not capcal's logs, a local data file's line or a value typed on a command line); otherwise ``ValueError``
    in one line, ``"<where>: not valid JSON (<why>)"`` or ``"<where>: expected a JSON object"``. ``echo``
    adds the column of a syntax error and the text itself (for a value the user typed)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        if echo:
            raise ValueError(
                f"{where}: not valid JSON ({error.msg} at column {error.colno}): {text}"
            ) from None
        raise ValueError(f"{where}: not valid JSON ({error.msg})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{where}: expected a JSON object" + (f", got {text}" if echo else ""))
    return parsed


def read_json_file(path: Path) -> Any:
    """A whole JSON file, strictly parsed; ``RunFormatError`` for unreadable bytes, invalid UTF-8 or JSON."""
    return read_json_with_digest(path)[0]


def read_json_with_digest(path: Path, nonfinite: list[str] | None = None) -> tuple[Any, str]:
    """``read_json_file(path)`` and the sha256 (hex) of the file's bytes, from one read (``nonfinite`` as
    for ``strict_json``)."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise RunFormatError(f"{path}: a folder where a JSON file was expected") from None
    except OSError as error:
        raise RunFormatError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise RunFormatError(f"{path}:{line}: not valid UTF-8") from None
    return strict_json(text, path, nonfinite=nonfinite), hashlib.sha256(raw).hexdigest()


_CHUNK_BYTES = 1 << 24


def _raw_lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file without their ``\\n``, read in 16 MiB blocks (a line of any length is
    joined from its blocks): faster than line-by-line reads for lines of hundreds of kilobytes."""
    pending: list[bytes] = []
    while chunk := handle.read(_CHUNK_BYTES):
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            pending.append(chunk)
            continue
        pending.append(parts[0])
        yield b"".join(pending)
        yield from parts[1:-1]
        pending = [parts[-1]]
    last = b"".join(pending)
    if last:
        yield last


def iter_json_lines(
    path: Path, nonfinite_allowed: Callable[[dict], bool] | None = None
) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every non-empty line of a JSON-lines file, strictly parsed; a line that is not
    valid UTF-8, not strict JSON or not a JSON object raises ``RunFormatError`` naming the file and line.

    A line with NaN/Infinity is rejected, unless ``nonfinite_allowed(record)`` says that record is not one
    of capcal's (a line of another lm-eval task in the same folder, which capcal skips)."""
    try:
        handle = path.open("rb")
    except IsADirectoryError:
        raise RunFormatError(f"{path}: a folder where a samples file was expected") from None
    except OSError as error:
        raise RunFormatError(f"{path}: cannot be read ({error.strerror})") from None
    with handle:
        for line_number, raw in enumerate(_raw_lines(handle), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RunFormatError(
                    f"{path}:{line_number}: not valid UTF-8 (byte {error.start} of the line)"
                ) from None
            if not line or line.isspace():  # not line.strip(): no copy of a long line
                continue
            constants: list[str] = []
            record = strict_json(line, path, line_number, nonfinite=constants if nonfinite_allowed else None)
            if not isinstance(record, dict):
                raise RunFormatError(
                    f"{path}:{line_number}: expected a JSON object, got {type(record).__name__}"
                )
            if constants and not nonfinite_allowed(record):
                raise RunFormatError(
                    f"{path}:{line_number}: non-finite number {constants[0]} "
                    "(not JSON; not a valid value for any field)"
                )
            yield line_number, record


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_finite(value: Any, where: str, name: str) -> float:
    """``value`` as a float; ``RunFormatError`` unless it is a finite JSON number (not bool, not text)."""
    if not _is_number(value) or not math.isfinite(value):
        raise RunFormatError(f"{where}: {name} must be a finite number, got {value!r}")
    return float(value)


def check_probability(value: Any, where: str, name: str) -> float:
    """``value`` as a float in [0, 1]; ``RunFormatError`` otherwise (text, bool, null, out of range)."""
    if not _is_number(value):
        raise RunFormatError(f"{where}: {name} must be a number, got {value!r}")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise RunFormatError(f"{where}: {name} = {value!r} is not a probability in [0, 1]")
    return value


def check_binary(value: Any, where: str, name: str) -> int:
    """``value`` as 0 or 1; ``RunFormatError`` for anything else (true/false, 1.0, "1", null)."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1):
        raise RunFormatError(f"{where}: {name} must be 0 or 1, got {value!r}")
    return int(value)


def check_count(value: Any, where: str, name: str, minimum: int = 0) -> int:
    """``value`` as an integer >= ``minimum``; ``RunFormatError`` otherwise (bool, float, text)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RunFormatError(f"{where}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
