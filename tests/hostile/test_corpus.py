"""Every case of the hostile-input corpus (``cases.py``) gets its stated behaviour, within its time limit.

Each case runs in a forked child process that is killed at the case's time limit (scaled by the machine's
measured contention, tests/time_limits.py), so a hang (even inside C code, where ``signal.alarm`` cannot
interrupt) fails that one test instead of hanging the suite.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import traceback
from collections import Counter
from pathlib import Path

import pytest

from .cases import CASES, Case, Raises, contention
from .logs import results_path, samples_path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ["analysis", "capcal_metrics", "capcal_models", "capcal_tasks"]


def _check(case: Case, folder: Path) -> str | None:
    """None when ``case`` got its expected behaviour, else what went wrong."""
    paths = {"tmp": str(folder), "samples": str(samples_path(folder)), "results": str(results_path(folder))}
    try:
        value = case.run(folder)
    except BaseException as error:  # noqa: BLE001 - any failure is reported to the parent
        if not isinstance(case.expect, Raises):
            return f"raised {type(error).__name__}: {error}\n{traceback.format_exc()}"
        where = case.expect.where.format(**paths)
        message = str(error)
        if not isinstance(error, case.expect.error):
            return f"raised {type(error).__name__} ({message}), expected {case.expect.error.__name__}"
        if where not in message or case.expect.message not in message:
            return f"message {message!r:.500} lacks {where!r} or {case.expect.message!r}"
        return None
    if isinstance(case.expect, Raises):
        return f"returned {value!r:.300} instead of raising {case.expect.error.__name__}"
    try:
        case.expect.check(value)
    except AssertionError as error:
        return f"wrong value: {error}\n{traceback.format_exc()}"
    return None


def _child(case: Case, folder: Path, connection) -> None:
    try:
        connection.send(_check(case, folder))
    except BaseException as error:  # noqa: BLE001
        connection.send(f"could not report: {type(error).__name__}: {error}")
    finally:
        connection.close()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.category.replace(' ', '-')}:{c.name}" for c in CASES])
def test_case(case: Case, tmp_path: Path) -> None:
    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        # mutmut's coverage pass (tests/README.md, "Mutation testing") records which functions each test
        # calls in this process; a forked child's calls would be lost, and the code the corpus reaches would
        # count as untested. That pass runs the unmutated code, so no hang guard is needed; mutant runs fork.
        problem = _check(case, tmp_path)
        assert problem is None, f"{case.name} ({case.why}): {problem}"
        return
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(case, tmp_path, sender), daemon=True)
    limit = case.time_limit_s * contention()  # a hang guard in wall-clock time: scaled on a busy machine
    child.start()
    sender.close()
    if not receiver.poll(limit):
        child.kill()
        child.join()
        pytest.fail(f"{case.name} did not finish within {limit:.0f} s (a hang); why: {case.why}")
    try:
        problem = receiver.recv()
    except EOFError:
        child.join()
        pytest.fail(f"{case.name}: the child died without a report (exit code {child.exitcode})")
    child.join(timeout=10)
    assert problem is None, f"{case.name} ({case.why}): {problem}"


def test_corpus_size_and_documentation() -> None:
    """At least 50 cases; every case says why it behaves as it does."""
    assert len(CASES) >= 50, Counter(c.category for c in CASES)
    assert all(c.why.strip() for c in CASES)


def test_script_in_a_response_does_not_run_in_chromium(tmp_path: Path, browser) -> None:
    """load_run -> build_report on responses holding <script> and <img onerror>: Chromium runs none of it."""
    from .cases import build_hostile_report, write_hostile_run

    files = build_hostile_report(write_hostile_run(tmp_path), tmp_path / "report")
    loaded, total, pwned, dom = browser.check_page(files.html, tmp_path / "profile")
    assert total > 0 and loaded == total
    assert not pwned, "a script from model text ran in the report"
    assert "window.__capcal_pwned = 1" in dom  # shown as text


def _safe_loader(node: ast.expr | None, safe_classes: set[str]) -> bool:
    """Whether a ``Loader=`` argument is yaml's SafeLoader (or CSafeLoader) or a class of this module that
    derives from it."""
    if isinstance(node, ast.Attribute):
        return node.attr in {"SafeLoader", "CSafeLoader"}
    return isinstance(node, ast.Name) and (
        node.id in {"SafeLoader", "CSafeLoader"} or node.id in safe_classes
    )


def unsafe_calls(source: str) -> list[int]:
    """Lines of calls that run data as code: eval/exec, pickle.load(s), yaml.load without a safe loader.
    Read from the syntax tree, so text in strings and comments does not count."""
    tree = ast.parse(source)
    safe_classes = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and any(_safe_loader(base, set()) for base in node.bases)
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"eval", "exec"}:
            lines.append(node.lineno)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner, name = func.value.id, func.attr
            if owner == "pickle" and name in {"load", "loads"}:
                lines.append(node.lineno)
            elif owner == "yaml" and name == "load":
                loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
                if loader is None and len(node.args) > 1:
                    loader = node.args[1]
                if not _safe_loader(loader, safe_classes):
                    lines.append(node.lineno)
    return sorted(lines)


def test_model_output_is_never_evaluated_as_code() -> None:
    """No eval/exec, pickle.load or yaml.load without a SafeLoader in capcal's packages (lm-eval's own
    ``!function`` YAML loading is lm-eval's, not reimplemented here)."""
    offenders = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            for number in unsafe_calls(source):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {lines[number - 1].strip()}")
    assert offenders == []


def test_unsafe_call_check_catches_what_it_should() -> None:
    """The check of the test above can fail."""
    for bad in (
        "eval(text)",
        "x = exec(code)",
        "pickle.load(f)",
        "pickle.loads(b)",
        "yaml.load(f)",
        "yaml.load(f, Loader=yaml.Loader)",
        "class L(yaml.Loader): pass\nyaml.load(f, Loader=L)",
    ):
        assert unsafe_calls(bad), bad
    for fine in (
        "model.eval()",
        "self.evaluate(x)",
        "yaml.load(f, Loader=yaml.SafeLoader)",
        "class L(yaml.SafeLoader): pass\nyaml.load(f, Loader=L)",
        "ast.literal_eval(s)",
        '"""Registers them with lm-eval (after its own models)"""',
        "x = 1  # eval(text)",
    ):
        assert not unsafe_calls(fine), fine
