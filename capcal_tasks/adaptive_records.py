"""The per-question record of an adaptive (group-sequential) sampling run, and its strict check.

An adaptive run (``analysis.evaluation.adaptive``) samples each question at fixed looks ``l_1 < ... < l_m``
(``l_m = k_max``) and stops at the first look where its stopping rule fires on (n, s), the samples drawn and
the successes among them (``capcal_metrics.sequential``). Its samples-file record is the fixed-k record of
those n samples (``correctness`` has n entries, ``n_samples = n``) with three changes, because s/n and Chen's
pass@m are biased after a data-dependent stop (docs/methods.md, "Adaptive sampling: estimates after
stopping"):

- ``expected_accuracy`` holds the unbiased estimate of mu, ``N_{1,0}(n, s) / N(n, s)``
  (``capcal_metrics.sequential.unbiased_mean``), not s/n (which is ``adaptive.sample_mean``);
- ``pass_at_{m}`` is the unbiased ``unbiased_pass_at_k`` for m <= l_1 and left out for m > l_1 (no unbiased
  estimate exists there);
- an ``adaptive`` object: ``looks``, ``rule`` (``{"name": "unanimity"}`` or ``{"name": "confidence_width",
  "width": W, "alpha": A}``), ``n``, ``s``, ``stopped`` ("unanimous at 16", "interval narrower than 0.2 at
  32", "k_max"), ``mu_hat`` (= ``expected_accuracy``), ``mu_squared_hat`` (``unbiased_mean_square``),
  ``sample_mean`` (s/n) and ``interval`` (the anytime-valid ``confidence_sequence`` at (n, s), level
  1 - alpha, alpha 0.05 for the unanimity rule).

``check_adaptive_record`` validates all of it against the correctness vector, including that the rule did
not fire at an earlier look on the vector's prefix. ``majority_vote_accuracy`` is the vote over the n
samples, as at fixed k.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from capcal_metrics.sequential import (
    DEFAULT_ALPHA,
    SequentialPlan,
    confidence_sequence,
    confidence_width_rule,
    unanimity_rule,
    unbiased_mean,
    unbiased_mean_square,
    unbiased_pass_at_k,
)
from capcal_tasks.records import RunFormatError, check_finite

__all__ = [
    "RULE_NAMES",
    "adaptive_fields",
    "check_adaptive_record",
    "parse_rule",
    "sequential_plan",
    "stop_reason",
]

RULE_NAMES = ("unanimity", "confidence_width")
TOLERANCE = 1e-9


def parse_rule(text: str) -> dict[str, Any]:
    """A stopping rule setting as a record's ``rule``: ``"unanimity"`` -> ``{"name": "unanimity"}``;
    ``"width:W"`` or ``"width:W:ALPHA"`` -> ``{"name": "confidence_width", "width": W, "alpha": ALPHA}``
    (0 < W <= 1, 0 < ALPHA < 1, default 0.05). Raises ``ValueError`` (one line) for anything else."""
    value = str(text).strip()
    if value == "unanimity":
        return {"name": "unanimity"}
    name, _, rest = value.partition(":")
    if name != "width" or not rest:
        raise ValueError(f"adaptive rule {text!r}: expected unanimity or width:W (e.g. width:0.2)")
    parts = rest.split(":")
    try:
        numbers = [float(part) for part in parts]
    except ValueError:
        raise ValueError(f"adaptive rule {text!r}: W (and alpha) must be numbers, e.g. width:0.2") from None
    if len(numbers) > 2:
        raise ValueError(f"adaptive rule {text!r}: expected width:W or width:W:ALPHA")
    width, alpha = numbers[0], numbers[1] if len(numbers) == 2 else DEFAULT_ALPHA
    if not (0.0 < width <= 1.0):
        raise ValueError(f"adaptive rule {text!r}: the width W must be in (0, 1]")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"adaptive rule {text!r}: alpha must be in (0, 1)")
    return {"name": "confidence_width", "width": width, "alpha": alpha}


@functools.lru_cache(maxsize=64)
def _plan(looks: tuple[int, ...], name: str, width: float, alpha: float) -> SequentialPlan:
    if name == "unanimity":
        return unanimity_rule(looks)
    return confidence_width_rule(looks, width, alpha)


def sequential_plan(looks: tuple[int, ...] | list[int], rule: dict[str, Any]) -> SequentialPlan:
    """The ``capcal_metrics.sequential`` plan of ``looks`` and a ``parse_rule`` rule (cached)."""
    if rule.get("name") == "unanimity":
        return _plan(tuple(looks), "unanimity", 0.0, DEFAULT_ALPHA)
    return _plan(tuple(looks), "confidence_width", float(rule["width"]), float(rule["alpha"]))


def stop_reason(plan: SequentialPlan, rule: dict[str, Any], n: int, s: int) -> str:
    """Why a question stopped at (n, s): "k_max" at the last look, else the rule's reason at look n."""
    if n == plan.k_max:
        return "k_max"
    if rule["name"] == "unanimity":
        return f"unanimous at {n}"
    return f"interval narrower than {rule['width']:g} at {n}"


def _alpha(rule: dict[str, Any]) -> float:
    return float(rule.get("alpha", DEFAULT_ALPHA))


def adaptive_fields(looks: list[int], rule: dict[str, Any], correctness: list[int]) -> dict[str, Any]:
    """The record fields an adaptive stop at ``n = len(correctness)`` sets: ``expected_accuracy``, the
    ``pass_at_{m}`` of m <= l_1 (powers of two) and ``adaptive`` (see the module docstring)."""
    plan = sequential_plan(looks, rule)
    n, s = len(correctness), int(sum(correctness))
    ns, ss = np.array([n]), np.array([s])  # the estimators take arrays of questions
    mu_hat = float(unbiased_mean(plan, ns, ss)[0])
    bounds = confidence_sequence(ns, ss, alpha=_alpha(rule))
    fields: dict[str, Any] = {"expected_accuracy": mu_hat}
    level = 1
    while level <= plan.looks[0]:
        fields[f"pass_at_{level}"] = float(unbiased_pass_at_k(plan, ns, ss, level)[0])
        level *= 2
    fields["adaptive"] = {
        "looks": list(plan.looks),
        "rule": dict(rule),
        "n": n,
        "s": s,
        "stopped": stop_reason(plan, rule, n, s),
        "mu_hat": mu_hat,
        "mu_squared_hat": float(unbiased_mean_square(plan, ns, ss)[0]),
        "sample_mean": s / n,
        "interval": [float(bounds.lower[0]), float(bounds.upper[0])],
        "alpha": _alpha(rule),
    }
    return fields


def _rule(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or value.get("name") not in RULE_NAMES:
        raise RunFormatError(
            f"{where}: adaptive.rule must be {{'name': one of {', '.join(RULE_NAMES)}, ...}}"
        )
    if value["name"] == "unanimity":
        if set(value) != {"name"}:
            raise RunFormatError(f"{where}: adaptive.rule unanimity takes no parameters, got {value}")
        return {"name": "unanimity"}
    if set(value) != {"name", "width", "alpha"}:
        raise RunFormatError(f"{where}: adaptive.rule confidence_width needs exactly width and alpha")
    width = check_finite(value["width"], where, "adaptive.rule.width")
    alpha = check_finite(value["alpha"], where, "adaptive.rule.alpha")
    try:
        return parse_rule(f"width:{width!r}:{alpha!r}")
    except ValueError as error:
        raise RunFormatError(f"{where}: {error}") from None


def _looks(value: Any, where: str) -> list[int]:
    valid = (
        isinstance(value, list)
        and value
        and all(type(look) is int and look >= 1 for look in value)
        and all(a < b for a, b in zip(value, value[1:], strict=False))
    )
    if not valid:
        raise RunFormatError(f"{where}: adaptive.looks must be strictly increasing whole numbers >= 1")
    if value[0] < 2:
        raise RunFormatError(f"{where}: adaptive.looks must start at 2 or more (mu^2 needs two draws)")
    return list(value)


def check_adaptive_record(record: dict, correctness: list[int], where: str) -> dict[str, Any]:
    """Validate an adaptive record against its correctness vector; return its ``adaptive`` object.

    Checks: ``adaptive`` holds exactly the module's keys; looks and rule valid; n = len(correctness) is a
    look, s = sum(correctness); the rule did not stop at an earlier look on the vector's prefix and stops at
    n; ``stopped``, ``mu_hat``, ``mu_squared_hat``, ``sample_mean`` and ``interval`` equal their
    recomputation; ``expected_accuracy`` = ``mu_hat``; the ``pass_at_{m}`` fields are exactly the m <= l_1
    ones, each the unbiased value. Raises ``RunFormatError`` naming ``where``.
    """
    adaptive = record.get("adaptive")
    keys = {"looks", "rule", "n", "s", "stopped", "mu_hat", "mu_squared_hat", "sample_mean", "interval"}
    keys.add("alpha")
    if not isinstance(adaptive, dict) or set(adaptive) != keys:
        raise RunFormatError(f"{where}: 'adaptive' must be an object with keys {', '.join(sorted(keys))}")
    looks = _looks(adaptive["looks"], where)
    rule = _rule(adaptive["rule"], where)
    n, s = len(correctness), sum(correctness)
    if adaptive["n"] != n or type(adaptive["n"]) is not int:
        raise RunFormatError(f"{where}: adaptive.n {adaptive['n']!r} is not the {n} responses logged")
    if adaptive["s"] != s or type(adaptive["s"]) is not int:
        raise RunFormatError(f"{where}: adaptive.s {adaptive['s']!r} is not the {s} correct responses logged")
    if n not in looks:
        raise RunFormatError(f"{where}: {n} responses, not one of the looks {looks}")
    plan = sequential_plan(looks, rule)
    for index, look in enumerate(looks[: looks.index(n)]):
        if plan.stop[index, sum(correctness[:look])]:
            raise RunFormatError(
                f"{where}: the rule stops at look {look} on the first {look} responses, yet {n} were drawn"
            )
    if not plan.stop[looks.index(n), s]:
        raise RunFormatError(f"{where}: the rule does not stop at {s} of {n}, yet sampling stopped")
    expected = adaptive_fields(looks, rule, correctness)
    for key in ("stopped", "alpha"):
        if adaptive[key] != expected["adaptive"][key]:
            raise RunFormatError(
                f"{where}: adaptive.{key} {adaptive[key]!r} is not {expected['adaptive'][key]!r}"
            )
    for key in ("mu_hat", "mu_squared_hat", "sample_mean"):
        value = check_finite(adaptive[key], where, f"adaptive.{key}")
        if not math.isclose(value, expected["adaptive"][key], abs_tol=TOLERANCE):
            raise RunFormatError(
                f"{where}: adaptive.{key} {value!r} is not the value of ({n}, {s}) under the plan "
                f"({expected['adaptive'][key]!r})"
            )
    interval = adaptive["interval"]
    if not (isinstance(interval, list) and len(interval) == 2) or not all(
        math.isclose(check_finite(bound, where, "adaptive.interval"), want, abs_tol=TOLERANCE)
        for bound, want in zip(interval, expected["adaptive"]["interval"], strict=True)
    ):
        raise RunFormatError(
            f"{where}: adaptive.interval {interval!r} is not the confidence sequence at ({n}, {s}) "
            f"({expected['adaptive']['interval']!r})"
        )
    if not math.isclose(
        check_finite(record.get("expected_accuracy"), where, "expected_accuracy"),
        expected["expected_accuracy"],
        abs_tol=TOLERANCE,
    ):
        raise RunFormatError(
            f"{where}: expected_accuracy {record.get('expected_accuracy')!r} of an adaptive record must be "
            f"the unbiased estimate {expected['expected_accuracy']!r} (adaptive.mu_hat)"
        )
    logged = {key for key in record if key.startswith("pass_at_")}
    wanted = {key for key in expected if key.startswith("pass_at_")}
    if logged != wanted:
        raise RunFormatError(
            f"{where}: an adaptive record logs pass@m for m <= the first look {looks[0]} only "
            f"({', '.join(sorted(wanted))}), got {', '.join(sorted(logged)) or 'none'}"
        )
    for key in sorted(wanted):
        value = check_finite(record[key], where, key)
        if not math.isclose(value, expected[key], abs_tol=TOLERANCE):
            raise RunFormatError(
                f"{where}: {key} = {value!r}, the unbiased value at ({n}, {s}) is {expected[key]!r}"
            )
    return adaptive
