"""A run on disk whose results file records greedy decoding with k > 1 (issue 47): ``capcal check`` flags it
(complete, one ``warning:`` line, exit status 0), the report warns and gives no verdict for it; the same
run sampled at temperature 0.7 gets its verdict as before."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from analysis.cli import main
from analysis.report import ReportOptions
from analysis.report.analyze import analyze_runs
from analysis.report.input_notices import report_notices
from analysis.runs.completeness import check_run

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: the hostile corpus' log writers
from hostile.logs import confidence_line, sampling_line, write_run  # noqa: E402

MODEL = "toy-model"
TASK = "toy_eval"
K = 8
WARNING = (
    f"{TASK} ({MODEL}) was decoded greedily (temperature=0 in the results file's generation_kwargs) with "
    f"k = {K}: its k responses per question are one response repeated, so mu_hat is only 0 or 1 and no "
    "estimator can be judged on it (no verdict); run it again with sampling (the task's own "
    "generation_kwargs, without temperature=0 or do_sample=false)"
)


def _runs(root: Path, temperature: float) -> Path:
    """A sampling run of ``TASK`` (24 questions x k = 8) recorded with ``temperature``, and a P(True) run
    scoring it, as lm-eval writes them."""
    lines = [
        sampling_line(i, ["4"] * (i % (K + 1)) + ["5"] * (K - i % (K + 1)), question_id=f"{TASK}/{i}")
        for i in range(24)
    ]
    config = {
        "output_type": "generate_until",
        "repeats": K,
        "generation_kwargs": {"until": [], "do_sample": True, "temperature": temperature, "max_gen_toks": 16},
        "metadata": {"capcal_task": "sampling", "capcal_role": "evaluation", "capcal_calibration_tasks": []},
    }
    results = {"results": {TASK: {}}, "configs": {TASK: config}, "model_name": MODEL}
    write_run(root, lines, task=TASK, folder=f"{MODEL}_{TASK}", results=results)
    chances = [0.1 + 0.8 * i / 24 for i in range(24)]
    ptrue = [
        confidence_line(
            i,
            "ptrue",
            doc={"question_id": f"{TASK}/{i}"},
            p_true=p,
            logprob_yes=float(np.log(p)),
            logprob_no=float(np.log(1 - p)),
        )
        for i, p in enumerate(chances)
    ]
    declared = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": TASK}
    confidence = {"results": {"toy_ptrue": {}}, "configs": {"toy_ptrue": {"metadata": declared}}}
    write_run(
        root,
        ptrue,
        task="toy_ptrue",
        folder=f"{MODEL}_toy_ptrue",
        results={**confidence, "model_name": MODEL},
    )
    return root


@pytest.fixture
def greedy(tmp_path) -> Path:
    return _runs(tmp_path / "greedy", 0)  # as lm-eval records --gen_kwargs temperature=0


@pytest.fixture
def sampled(tmp_path) -> Path:
    return _runs(tmp_path / "sampled", 0.7)


OPTIONS = ReportOptions(n_resamples=50, consistency_ks=(2,), max_examples=2)


def test_check_flags_a_greedy_run_and_still_calls_it_complete(greedy, capsys):
    checks = check_run([greedy])
    assert checks.attrs["greedy"] == [WARNING]
    assert bool(checks["complete"].all())
    assert main(["check", str(greedy)]) == 0
    out = capsys.readouterr().out
    assert f"warning: {WARNING}\n" in out
    assert out.rstrip().endswith("2 of 2 run(s) complete")


def test_check_says_nothing_of_a_sampled_run(sampled, capsys):
    assert check_run([sampled]).attrs["greedy"] == []
    assert main(["check", str(sampled)]) == 0
    assert "greedily" not in capsys.readouterr().out


def test_the_report_gives_a_greedy_run_a_warning_instead_of_a_verdict(greedy, sampled):
    [result] = analyze_runs([greedy], options=OPTIONS).results
    assert result.ranking.verdict == f"No verdict: {WARNING}."
    assert result.ranking.warnings[0] == f"{WARNING}."
    assert WARNING in report_notices([greedy])
    [control] = analyze_runs([sampled], options=OPTIONS).results
    assert control.ranking.verdict.startswith("Use ")  # the same numbers, sampled: a verdict as before
    assert not any("greedily" in warning for warning in control.ranking.warnings)
    assert not any("greedily" in notice for notice in report_notices([sampled]))
