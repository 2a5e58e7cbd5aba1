"""Where strict JSON reading points: the line of a duplicate key or of a non-finite constant inside a
multi-line JSON text, and the warning of the verbalized-confidence failure count (in-process, fast)."""

from __future__ import annotations

import logging

import pytest

from capcal_tasks.confidence.verbalized import failure_count
from capcal_tasks.records import RunFormatError, read_json_with_digest, strict_json

# the duplicate "a" sits on line 5; a value "a" and a key "ab" are not the key "a"
DUPLICATE_TEXT = '{\n "ab": "a",\n "a": 1,\n "b": {"c": 2},\n "a" : 3,\n "d": 4\n}'


def _message(text: str, line: int | None = None) -> str:
    with pytest.raises(RunFormatError) as error:
        strict_json(text, "run.json", line)
    return str(error.value)


def test_duplicate_key_error_names_the_line_of_the_second_occurrence():
    """The line is that of the duplicate (second) key: newlines before it are counted, not after it, and two
    occurrences are enough to locate it."""
    assert _message(DUPLICATE_TEXT) == (
        "run.json:5: duplicate key 'a' in one JSON object (which one is meant is not known)"
    )
    # a one-line text (the first line) and a JSON-lines caller's own line number
    assert _message('{"a": 1, "a": 2}').startswith("run.json:1: duplicate key 'a'")
    assert _message(DUPLICATE_TEXT, line=17).startswith("run.json:17: duplicate key 'a'")
    # a third occurrence does not move the reported line from the second
    three = '{\n "a": 1,\n\n "a": 2,\n "a": 3\n}'
    assert _message(three).startswith("run.json:4: duplicate key 'a'")


@pytest.mark.parametrize(("constant", "line"), [("NaN", 3), ("Infinity", 2), ("-Infinity", 4)])
def test_non_finite_constant_error_names_the_constant_and_its_line(constant, line):
    rows = ['"a": 1', '"b": 2', '"c": 3']
    rows.insert(line - 2, f'"x": {constant}')
    text = "{\n" + ",\n".join(rows) + "\n}"
    assert _message(text) == (
        f"run.json:{line}: non-finite number {constant} (not JSON; not a valid value for any field)"
    )
    collected: list[str] = []
    assert strict_json(text, "run.json", nonfinite=collected)["b"] == 2
    assert collected == [constant]


def test_failure_count_warns_with_both_counts(caplog):
    """The aggregation warns "<failures> of <responses>" and returns the number of failures; no failures, no
    warning."""
    with caplog.at_level(logging.WARNING, logger="capcal_tasks.confidence.verbalized"):
        assert failure_count([1, 0, 1, 0, 0]) == 2
        assert failure_count([0, 0]) == 0
    assert caplog.messages == [
        "verbalized confidence: 2 of 5 responses had no \\boxed{P} with P in [0, 1] (logged as null)"
    ]


def test_invalid_utf8_error_names_the_line_of_the_bad_byte(tmp_path):
    """``read_json_with_digest`` reports the line holding the first invalid byte: the newlines before it are
    counted, not those after it (a count over the whole file would name the last line)."""
    path = tmp_path / "results.json"
    path.write_bytes(b'{\n "a": 1,\n "b": "\xff",\n "c": 3,\n "d": 4\n}\n')
    with pytest.raises(RunFormatError) as error:
        read_json_with_digest(path)
    assert str(error.value) == f"{path}:3: not valid UTF-8"
    # a bad byte on the first line of a one-line file is line 1
    path.write_bytes(b'{"a": "\xc3"}')
    with pytest.raises(RunFormatError) as error:
        read_json_with_digest(path)
    assert str(error.value) == f"{path}:1: not valid UTF-8"
