"""The README's main command, at a small size: real lm-eval runs on SmolLM2 and the second model
(Qwen2.5-Coder-0.5B-Instruct), then the report.

Checks that every part of the pipeline produced its section, that every generation step ran on capcal-hf
(the second model with its chat template, on the same questions as SmolLM2), that routing sends the questions
SmolLM2 is unlikely to solve to the second model, that
the probe and the recalibration were fitted on the training questions only, and that every figure of the
report loads in headless Chromium; and what the demo's report concludes (its summary, grids and ``capcal
table`` on the same runs). Both tests share one demo run (``small_demo``) in one file, so that one worker
runs it once (with ``--dist loadfile`` two files ran it on both workers).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from analysis.demo import DEFAULT_STRONG_MODEL, LOGLIKELIHOOD_MODEL, SAMPLER
from analysis.report import format_interval
from analysis.runs import load_run


def _strong_verbalized_failures(output) -> int:
    """Parse failures of the second model's verbalized-confidence run, from its lm-eval results file."""
    failures = []
    for path in (output / "lm_eval").rglob("results_*.json"):
        results = json.loads(path.read_text())
        if "capcal_arithmetic_verbalized" in results["results"] and DEFAULT_STRONG_MODEL in str(
            results["config"]["model_args"]
        ):
            failures.append(int(results["results"]["capcal_arithmetic_verbalized"]["parse_failures,none"]))
    (failed,) = failures  # one run
    return failed


@pytest.mark.slow
def test_demo_runs_every_step_and_writes_the_report(small_demo, tmp_path, browser):
    output, stdout = small_demo
    assert "capcal demo finished" in stdout
    report = (output / "report" / "report.md").read_text()
    for heading in (
        "smollm2 · capcal_arithmetic",
        f"{DEFAULT_STRONG_MODEL} · capcal_arithmetic",
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
    # the second model is far more accurate on these questions (0.75 against 0.16 at the full demo's size)
    assert f"Routing · capcal_arithmetic: smollm2 -> {DEFAULT_STRONG_MODEL}" in routing  # plain: no "-&gt;"
    assert "Not routed" not in routing

    engines = {}  # task -> the lm-eval model of the run that wrote it
    for path in (output / "lm_eval").rglob("results_*.json"):
        results = json.loads(path.read_text())
        engines.update(dict.fromkeys(results["configs"], results["config"]["model"]))
    generation = ["capcal_arithmetic", "capcal_arithmetic_train", "capcal_arithmetic_verbalized"]
    assert {task: engines[task] for task in generation} == dict.fromkeys(generation, SAMPLER)
    assert engines["capcal_arithmetic_ptrue"] == engines["capcal_arithmetic_selfcheck"] == LOGLIKELIHOOD_MODEL
    assert "evaluated on 10 capcal_arithmetic questions" in report

    table = load_run(output / "lm_eval")
    second = table[table["model"].str.endswith(DEFAULT_STRONG_MODEL)]
    assert set(second["task"]) == {"capcal_arithmetic"} and set(second["n"]) == {4}
    assert second["expected_accuracy"].mean() > table.loc[table["model"].str.endswith("smollm2")
                                                          & (table["task"] == "capcal_arithmetic"),
                                                          "expected_accuracy"].mean()  # fmt: skip
    smollm2 = table[table["model"].str.endswith("smollm2")]
    train_ids = set(smollm2.loc[smollm2["task"] == "capcal_arithmetic_train", "question_id"])
    test_ids = set(smollm2.loc[smollm2["task"] == "capcal_arithmetic", "question_id"])
    assert len(test_ids) == 10 and len(train_ids) == 20 and not (train_ids & test_ids)
    assert set(second["question_id"]) == test_ids  # both models answer the same questions
    assert set(smollm2["n"]) == {6}

    # the second model's verbalized confidence (--strong_verbalized 32) joins its own section: every one of
    # its 10 questions is counted as parsed or failed there, and the summary says how often it failed
    failed = _strong_verbalized_failures(output)
    section = report[report.index(f"## {DEFAULT_STRONG_MODEL} · capcal_arithmetic") :]
    assert f"_parse failures: verbalized {failed}/10_" in section.split("\n## ")[0]
    # the second model ranks one estimator at most (k = 4 is too few for consistency): its summary comes
    # after SmolLM2's, which compares several
    assert report.index("### Summary · smollm2") < report.index(f"### Summary · {DEFAULT_STRONG_MODEL}")
    summary = report[report.index(f"### Summary · {DEFAULT_STRONG_MODEL}") :].split("\n### ")[0]
    if failed == 10:
        assert "verbalized confidence (capcal_arithmetic_verbalized) never parsed (10/10" in summary
    elif failed > 2:
        assert f"failed to parse on {failed}/10 questions" in summary
    else:
        assert "| verbalized_confidence |" in summary

    loaded, total, pwned, _ = browser.check_page(output / "report" / "report.html", tmp_path / "profile")
    # SmolLM2: 2 reliability diagrams, the target scatter, pass@k, budget, test-time scaling; plus routing
    assert total >= 7 and loaded == total
    assert total == len(list((output / "report" / "figures").glob("*.png")))  # every figure written, shown
    assert not pwned


@pytest.mark.slow
def test_real_demo_report_summary_grid_and_chromium(small_demo, tmp_path, browser, report_markdown):
    """On the real demo run (SmolLM2 on 10 graded-arithmetic questions, k = 6; probe and isotonic P(True)
    fitted on 20 training questions; the second model on the same questions): the summary comes first, ranks
    the honest estimators (not the paper-form consistency) with paired intervals equal to those recomputed
    from the section's arrays, and warns about N, k and the probe's training size; the grid of the two
    (model, task) sections matches every section cell, also through ``capcal table``; the report renders in
    headless Chromium with no console error (every figure shown: the test above, on the same page). The
    report read is the demo's own (``--resamples 100``, seed 0: the demo's report options), not a second
    build of it."""
    import capcal_metrics as cm
    from analysis.cli import main
    from analysis.report import ReportOptions, markdown_text
    from analysis.report.analyze import analyze_runs
    from analysis.report.figures import figures_not_rendered
    from analysis.report.paper_table import metric_rows
    from analysis.report.summary import DIFFERENCE

    output, _ = small_demo
    runs, activations = output / "lm_eval", output / "activations"
    options = ReportOptions(n_resamples=100, seed=0)  # the demo's (analysis.demo._write_report)
    html = output / "report" / "report.html"
    markdown = (output / "report" / "report.md").read_text()
    headings = re.findall(r"(?m)^## (.*)$", markdown)
    assert headings[:2] == ["Summary", "Across models and tasks"] and headings[-1].startswith("Appendix")
    assert "__" not in markdown.split("## Appendix")[0]  # no mangled lm-eval folder names before the appendix

    rows = report_markdown.ranking_rows(markdown, "smollm2", "capcal_arithmetic")
    ranked = [row["estimator"].replace("\\", "") for row in rows]
    assert len(ranked) >= 4 and {"p_true", "probe", "isotonic_p_true"} <= set(ranked)
    assert not any(re.fullmatch(r"consistency_k\d+", name) for name in ranked)
    assert "- warning: consistency_lf_k5 is not ranked: its target mu_hat_lf rests on 1 held-out" in markdown
    parsed_strong = _strong_verbalized_failures(output) < 10  # its verbalized confidence, 32 tokens
    if not parsed_strong:
        assert (
            f"{DEFAULT_STRONG_MODEL} · capcal_arithmetic: N = 10, k = 4 (no confidence estimator" in markdown
        )

    with figures_not_rendered():  # the numbers only (they do not depend on drawing the figures)
        analysis = analyze_runs([runs], activations, options)
    (result,) = [r for r in analysis.results if r.model == "smollm2"]
    inputs = result.inputs
    best = ranked[0]

    def arrays(name):
        if name.startswith("consistency_lf"):
            lf = inputs.leakage_free
            return lf[name].to_numpy(float), lf["mu_hat_lf"].to_numpy(float), lf["n_lf"].to_numpy(float)
        return inputs.confidences[name], inputs.mu, inputs.counts[0].astype(float)

    for row, name in zip(rows[1:], ranked[1:], strict=True):
        a, b = arrays(best), arrays(name)
        shared = np.isfinite(a[0]) & np.isfinite(b[0])
        difference = cm.bootstrap_differences(
            {
                "best": (cm.corrected_capability_brier_score, tuple(x[shared] for x in a)),
                "other": (cm.corrected_capability_brier_score, tuple(x[shared] for x in b)),
            },
            "best",
            n_resamples=100,
            seed=0,
        )["other"]
        assert row[markdown_text(DIFFERENCE)] == markdown_text(format_interval(*difference)), name
    summary = report_markdown.section_of(markdown, "### Summary · smollm2 · capcal_arithmetic")
    second = rows[1][markdown_text(DIFFERENCE)]
    low = float(second.split("[")[1].split(",")[0])
    expected = "beats" if low > 0 else "are not distinguishable"
    assert f"{markdown_text(best)} {'beats' if low > 0 else 'and'}" in summary and expected in summary
    # the first screen: SmolLM2's verdict first, naming the best and what it is not distinguishable from,
    # then its forest plot
    head = markdown.split("## Summary\n", 1)[1].split("\n### Summary · ", 1)[0]
    (verdict,) = [line for line in head.splitlines() if line.startswith("smollm2 · capcal_arithmetic: Use")]
    assert head.index(verdict) == min(
        head.index(line) for line in head.splitlines() if " · capcal_arith" in line
    )
    assert markdown_text(best) in verdict.split(" on corrected capability Brier")[0]  # the best is named
    if low <= 0:
        assert f"not distinguishable from {markdown_text(ranked[1])}" in verdict
    assert "### Corrected capability Brier of each estimator (smollm2 · capcal_arithmetic)" in head
    for warning in (
        "- warning: N = 10 evaluation questions, below 100",
        "- warning: k = 6 samples per question, below 10",
        "- warning: probe was fitted on 15 questions, below 50",
    ):
        assert warning in summary, warning
    # a confidence source that failed on more than 20% of its questions is a warning in the summary
    failures = re.search(
        r"parse failures: (.*)_", report_markdown.section_of(markdown, "## smollm2 · capcal_arithmetic")
    )
    assert failures is not None
    for kind, failed, total in re.findall(r"(\w+) (\d+)/(\d+)", failures.group(1)):
        if int(failed) == int(total):
            assert f"{kind} confidence" in summary and f"never parsed ({failed}/{total}" in summary
        elif int(failed) > 0.2 * int(total):
            assert f"failed to parse on {failed}/{total} questions" in summary

    grid_rows = metric_rows(analysis.results)
    # (the second model's section has no estimator unless its verbalized confidence parsed: k = 4 is too few
    # for consistency)
    sections = set(zip(grid_rows["model"], grid_rows["task"], strict=True))
    assert ("smollm2", "capcal_arithmetic") in sections
    assert sections - {("smollm2", "capcal_arithmetic")} <= {(DEFAULT_STRONG_MODEL, "capcal_arithmetic")}
    assert parsed_strong or len(sections) == 1
    assert report_markdown.assert_grid_matches_sections(markdown, grid_rows) >= 12
    table = tmp_path / "table.csv"
    command = ["table", str(runs), "--activations", str(activations), "--resamples", "100", "--format", "csv"]
    assert main([*command, "--output", str(table)]) == 0
    exported = pd.read_csv(table)
    chosen = grid_rows[grid_rows["metric"].isin(set(exported["metric"]))].reset_index(drop=True)
    assert list(exported["estimator"]) == list(chosen["estimator"])
    np.testing.assert_allclose(
        exported[["estimate", "low", "high"]], chosen[["estimate", "low", "high"]], equal_nan=True
    )

    assert browser.console_errors(html, tmp_path / "profile") == []


def test_the_second_models_verbalized_confidence_is_refused_early_without_a_chat_second_model(tmp_path):
    """``strong_verbalized_max_gen_toks`` without a second model, with a bound that is not positive, or with a
    second model that has no chat template: one ``ValueError`` naming the fix, before any lm-eval run (the
    output folder stays empty)."""
    from analysis.demo import run_demo
    from capcal_models.prepare import prepare_model

    output = tmp_path / "demo"
    with pytest.raises(
        ValueError, match=r"needs a second model: name one with strong_model \(--strong_model\)"
    ):
        run_demo(output, strong_model=None, strong_verbalized_max_gen_toks=256)
    with pytest.raises(ValueError, match="must be a positive number of tokens, not 0"):
        run_demo(output, strong_verbalized_max_gen_toks=0)
    prepare_model("gemma3-270m")  # prepared once per machine (other tests use it); no model is loaded here
    with pytest.raises(ValueError, match="gemma3-270m has no chat template.*qwen2.5-coder-1.5b"):
        run_demo(output, strong_model="gemma3-270m", strong_verbalized_max_gen_toks=64)
    assert not output.exists() or not any(output.rglob("*.json"))


def test_the_demos_result_holds_its_folders_its_seconds_and_its_runs_as_measured(tmp_path):
    """``run_demo``'s record: each field from its own source (the seconds and step seconds as measured, the
    folders under the output folder, the runs by name), and every run's common arguments from the demo's
    settings (the one seed in lm-eval's four seeds, the batch size, the bundled data)."""
    from analysis.demo import DemoResult, _DemoRuns
    from analysis.report import ReportFiles

    demo = _DemoRuns.create(tmp_path / "out", per_level=2, train_per_level=3, batch_size=8, seed=5)
    out = (tmp_path / "out").resolve()
    assert demo.common == {
        "output_path": out / "lm_eval",
        "log_samples": True,
        "data_dir": "bundled",
        "batch_size": 8,
        "random_seed": 5,
        "numpy_random_seed": 5,
        "torch_random_seed": 5,
        "fewshot_random_seed": 5,
    }
    assert demo.metadata == {"arithmetic_per_level": 2, "arithmetic_train_per_level": 3}
    demo.runs["sample capcal_arithmetic"] = {"results": out / "r.json", "samples": {}}
    report = ReportFiles(out / "report" / "report.html", out / "report" / "report.md", [])
    steps = {"prepare models": 0.4, "sample": 30.2, "report": 2.1}
    assert demo.result(report, 33.5, steps) == DemoResult(
        output_dir=out,
        report_html=out / "report" / "report.html",
        report_markdown=out / "report" / "report.md",
        seconds=33.5,
        step_seconds={"prepare models": 0.4, "sample": 30.2, "report": 2.1},
        lm_eval_dir=out / "lm_eval",
        activations_dir=out / "activations",
        runs={"sample capcal_arithmetic": {"results": out / "r.json", "samples": {}}},
    )


def test_the_demos_closing_lines_give_its_seconds_per_step_and_its_folders(tmp_path, capsys):
    """The lines ``capcal demo`` ends with: the total and each step's seconds as measured (rounded to whole
    seconds), then the lm-eval, activations and report paths, each under its own label."""
    from analysis.demo import _DemoRuns, _print_summary
    from analysis.report import ReportFiles

    demo = _DemoRuns.create(tmp_path / "out", per_level=2, train_per_level=3, batch_size=8, seed=5)
    out = (tmp_path / "out").resolve()
    report = ReportFiles(out / "report" / "report.html", out / "report" / "report.md", [])
    _print_summary(demo, report, 33.5, {"prepare models": 0.4, "sample": 30.2, "report": 2.9})
    assert capsys.readouterr().out == (
        "\ncapcal demo finished in 34 s (prepare models 0 s, sample 30 s, report 3 s)\n"
        f"lm-eval outputs: {out / 'lm_eval'}\n"
        f"activations:     {out / 'activations'}\n"
        f"report:          {out / 'report' / 'report.html'}\n"
        f"summary:         {out / 'report' / 'report.md'}\n"
    )
