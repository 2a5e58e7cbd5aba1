"""The README's main command, at a small size: real lm-eval runs on SmolLM2 and Gemma, then the report.

Checks that every part of the pipeline produced its section, that every generation step ran on capcal-hf
(Gemma, a base model, in the task's "Question: ... Answer:" variant, on the same questions as SmolLM2), that
the probe and the recalibration were fitted on the training questions only, and that every figure of the
report loads in headless Chromium.
"""

from __future__ import annotations

import json

import pytest

from analysis.evaluation.demo import LOGLIKELIHOOD_MODEL, SAMPLER
from analysis.runs import load_run


@pytest.mark.slow
def test_demo_runs_every_step_and_writes_the_report(small_demo, tmp_path, browser):
    output, stdout = small_demo
    assert "capcal demo finished" in stdout
    report = (output / "report" / "report.md").read_text()
    for heading in (
        "smollm2 · capcal_arithmetic",
        "gemma3-270m · capcal_arithmetic",
        "Capability calibration",
        "Response calibration",
        "pass@k prediction",
        "Routing · capcal_arithmetic",
    ):
        assert heading in report, heading
    for estimator in ("consistency_k", "p_true", "selfcheck_mean", "isotonic_p_true", "probe"):
        assert f"| {estimator}" in report, estimator
    assert "parse failures:" in report
    routing = report[report.index("Routing · capcal_arithmetic") :]
    routed = "no stronger model" not in routing.splitlines()[0]
    if routed:
        assert "Routing · capcal_arithmetic: smollm2 -> gemma3-270m" in routing
    else:  # the report says so instead of routing to the weaker model
        assert "Not routed: gemma3-270m is not more accurate than smollm2" in routing

    engines = {}  # task -> the lm-eval model of the run that wrote it
    for path in (output / "lm_eval").rglob("results_*.json"):
        results = json.loads(path.read_text())
        engines.update(dict.fromkeys(results["configs"], results["config"]["model"]))
    generation = ["capcal_arithmetic", "capcal_arithmetic_train", "capcal_arithmetic_verbalized"]
    assert {task: engines[task] for task in [*generation, "capcal_arithmetic_qa"]} == dict.fromkeys(
        [*generation, "capcal_arithmetic_qa"], SAMPLER
    )
    assert engines["capcal_arithmetic_ptrue"] == engines["capcal_arithmetic_selfcheck"] == LOGLIKELIHOOD_MODEL
    assert "evaluated on 10 capcal_arithmetic questions" in report

    table = load_run(output / "lm_eval")
    gemma = table[table["model"].str.endswith("gemma3-270m")]
    assert set(gemma["task"]) == {"capcal_arithmetic_qa"} and set(gemma["n"]) == {4}
    smollm2 = table[table["model"].str.endswith("smollm2")]
    train_ids = set(smollm2.loc[smollm2["task"] == "capcal_arithmetic_train", "question_id"])
    test_ids = set(smollm2.loc[smollm2["task"] == "capcal_arithmetic", "question_id"])
    assert len(test_ids) == 10 and len(train_ids) == 20 and not (train_ids & test_ids)
    assert set(gemma["question_id"]) == test_ids  # both models answer the same questions
    assert set(smollm2["n"]) == {6}

    loaded, total, pwned, _ = browser.check_page(output / "report" / "report.html", tmp_path / "profile")
    # SmolLM2: 2 reliability diagrams, the target scatter, pass@k, budget, test-time scaling; plus routing
    assert total >= 6 + routed and loaded == total
    assert not pwned
