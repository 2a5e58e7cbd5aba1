"""The HTML report: self-contained, every figure loads in headless Chromium, model text stays text."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from analysis.calibration_table import calibration_table
from analysis.figures import Curve, curves_figure, reliability_figure, target_scatter_figure
from analysis.report import Figure, ReportSection, format_interval, write_report

HOSTILE = "<script>window.__capcal_pwned = 1</script><img src=x onerror='window.__capcal_pwned=1'>"


def _table(n_questions: int = 60, k: int = 8, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.7, 0.7, n_questions)
    correctness = [list(rng.binomial(1, m, k)) for m in mu]
    return pd.DataFrame(
        {
            "question_id": [f"toy/{i}" for i in range(n_questions)],
            "question": [f"What is {i} + {i}? {HOSTILE}" for i in range(n_questions)],
            "correctness": correctness,
            "n": k,
            "expected_accuracy": [float(np.mean(z)) for z in correctness],
            "good": np.clip(mu + rng.normal(0, 0.1, n_questions), 0, 1),
            "noise": rng.uniform(0, 1, n_questions),
        }
    )


def test_calibration_table_ranks_a_good_estimator_above_noise():
    table = _table()
    metrics = calibration_table(table, ["good", "noise"], n_resamples=200)
    value = metrics.set_index(["estimator", "metric"])["estimate"]
    assert value["good", "soft_auroc"] > value["noise", "soft_auroc"] + 0.15
    assert value["good", "capability_brier"] < value["noise", "capability_brier"]
    row = metrics.set_index(["estimator", "metric"]).loc[("good", "capability_ece")]
    assert row["low"] <= row["estimate"] <= row["high"]
    assert value["random (expected)", "soft_auroc"] == 0.5


def test_calibration_table_counts_missing_confidences():
    table = _table()
    table.loc[:9, "good"] = np.nan
    metrics = calibration_table(table, ["good"], n_resamples=50)
    assert set(metrics.loc[metrics.estimator == "good", "questions_missing"]) == {10}
    assert set(metrics.loc[metrics.estimator == "good", "questions"]) == {50}


def test_format_interval():
    assert format_interval(0.1234, 0.1, 0.15) == "0.123 [0.100, 0.150]"
    assert format_interval(0.5, float("nan"), float("nan")) == "0.500"
    assert format_interval(float("nan"), 0, 1) == "n/a"


@pytest.mark.slow
def test_report_renders_in_chromium_with_every_figure_and_escaped_text(tmp_path, browser):
    table = _table()
    mu = table["expected_accuracy"].to_numpy()
    z = np.array([c[0] for c in table["correctness"]], dtype=float)
    confidences = {"good": table["good"].to_numpy(), "noise": table["noise"].to_numpy()}
    band = Curve("a", [1, 2, 4], [0.1, 0.2, 0.3], [0, 0.1, 0.2], [0.2, 0.3, 0.4])
    figures = [
        Figure("capability reliability", reliability_figure(confidences, mu, "mu_hat")),
        Figure("response reliability", reliability_figure(confidences, z, "z")),
        Figure("targets", target_scatter_figure(confidences, mu, z)),
        Figure("curve", curves_figure([band], "t", "x", "y", log_x=True)),
    ]
    section = ReportSection(
        title=f"toy model {HOSTILE}",
        facts={"questions": len(table)},
        tables=[("examples", table[["question_id", "question"]].head(3))],
        figures=figures,
    )
    files = write_report([section], tmp_path / "report", title="capcal test report")
    page = files.html.read_text()
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "http://" not in page and "https://" not in page, "the report must not need the network"
    assert len(files.figures) == 4 and all(path.stat().st_size > 1000 for path in files.figures)
    assert "figures/" in files.markdown.read_text()

    loaded, total, pwned, dom = browser.check_page(files.html, tmp_path / "profile")
    assert total == 4 and loaded == 4
    assert not pwned
    assert "window.__capcal_pwned = 1" in dom  # shown as text
    shot = browser.screenshot(files.html, tmp_path / "report.png", tmp_path / "profile2")
    assert shot.stat().st_size > 10_000


# ------------------------------------------------------ report from runs: relations, overrides, joins

MODEL_FOLDER = "toy-model"
DATE, LATER = "2026-01-02T03-04-05.000001", "2026-01-03T03-04-05.000001"
GFM_AUTOLINK = re.compile(r"(?i)www\.|https?://|mailto:|xmpp:|[\w.+-]@[\w-]")
MARKDOWN_ATTACKS = [
    "[click](javascript:alert(1))",
    "![pixel](data:image/svg+xml;base64,PHN2Zz4=)",
    "<a href='javascript:alert(2)'>x</a>",
    "<javascript:alert(3)>",
    "<img src=x onerror='alert(4)'>",
    "<script>alert(5)</script>",
    "see www.evil.example and https://evil.example/x",
    "write to mailto:x@evil.example or user@evil.example",
    "[ref][r]\n\n[r]: javascript:alert(6)",
    "# heading\n| a | b |\n`code` **bold** _em_",
]


def _sampling_line(doc_id: int, question_id: str, correct: int, k: int = 4, response: str = "") -> dict:
    from capcal_tasks.sampling import score_responses

    responses = [f"{response} \\boxed{{{4 if i < correct else 5}}}" for i in range(k)]
    record = score_responses(
        responses, extract=lambda r: r.rsplit("{", 1)[1].rstrip("}"), judge=lambda a: a == "4"
    )
    doc = {"question": f"question {question_id} {response}", "question_id": question_id}
    return {"doc_id": doc_id, "doc": doc, "target": "4", "resps": [responses], "filtered_resps": [responses],
            "filter": "all_responses", "metrics": list(record), **record}  # fmt: skip


def _ptrue_line(doc_id: int, question_id: str, p: float) -> dict:
    from capcal_tasks.confidence.ptrue import process_results

    record = process_results({}, [(float(np.log(p)), False), (float(np.log(1 - p)), False)])
    return {"doc_id": doc_id, "doc": {"question_id": question_id}, "metrics": list(record), **record}


def _write(root, task: str, metadata: dict, lines: list[dict], date: str = DATE) -> None:
    """A samples file and its entry in the run's results file (one results file per run, as lm-eval)."""
    import json

    folder = root / MODEL_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_{task}_{date}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = folder / f"results_{date}.json"
    results = json.loads(path.read_text()) if path.exists() else {"model_name": "toy-model"}
    results.setdefault("results", {})[task] = {}
    results.setdefault("configs", {})[task] = {"metadata": metadata}
    results.setdefault("n-samples", {})[task] = {"original": len(lines), "effective": len(lines)}
    path.write_text(json.dumps(results))


def _runs(root, response: str = "", calibration: list[str] | None = None):
    """Runs with non-suffix task names: ``toy_eval`` (12 questions, dataset ``toy``) declares ``toy_calib``
    (24 questions, 2 of them also evaluation questions) and ``other_calib`` (dataset ``other``); P(True)
    tasks score each. A second, older run of toy_eval is left out."""
    rng = np.random.default_rng(0)
    evaluation = [f"toy/e{i}" for i in range(12)]
    calib = [f"toy/c{i}" for i in range(22)] + evaluation[:2]
    other = [f"other/c{i}" for i in range(20)]
    sampling = {"capcal_task": "sampling"}
    role = {
        "capcal_role": "evaluation",
        "capcal_calibration_tasks": ["toy_calib"] if calibration is None else calibration,
    }
    for task, ids, meta in (
        ("toy_eval", evaluation, {**sampling, **role, "capcal_dataset": "toy"}),
        ("toy_calib", calib, {**sampling, "capcal_role": "calibration", "capcal_dataset": "toy"}),
        ("other_calib", other, {**sampling, "capcal_role": "calibration", "capcal_dataset": "other"}),
    ):
        correct = rng.integers(0, 5, len(ids))
        _write(root, task, meta, [_sampling_line(i, q, int(c), response=response) for i, (q, c) in
                                  enumerate(zip(ids, correct, strict=True))])  # fmt: skip
        ptrue_meta = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": task}
        confidences = [
            _ptrue_line(i, q, 0.1 + 0.2 * c) for i, (q, c) in enumerate(zip(ids, correct, strict=True))
        ]
        if task == "toy_eval":
            confidences.append(_ptrue_line(len(ids), "toy/not-sampled", 0.5))  # a record without a question
        _write(root, f"{task}_ptrue", ptrue_meta, confidences)
    old = [_sampling_line(i, q, 0) for i, q in enumerate(evaluation)]
    _write(
        root,
        "toy_eval",
        {**sampling, **role, "capcal_dataset": "toy"},
        old,
        date="2025-12-01T00-00-00.000001",
    )
    return root


def _options(**kwargs):
    from analysis.report import ReportOptions

    return ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=12, **kwargs)


def test_report_follows_declared_relations_not_names(tmp_path):
    from analysis.report import build_report

    files = build_report([_runs(tmp_path / "runs")], tmp_path / "report", options=_options())
    text = files.markdown.read_text()
    assert "## toy-model · toy_eval" in text
    assert "toy_calib ·" not in text and "other_calib ·" not in text  # calibration splits are not reported
    assert (
        "| toy_eval | evaluation | toy_calib |  | toy-model/results_2026-01-02T03-04-05.000001.json |" in text
    )
    assert "| toy_calib | calibration |  |  | toy-model/results_2026-01-02T03-04-05.000001.json |" in text
    assert "| toy_eval_ptrue | confidence |  | toy_eval |" in text
    assert "| isotonic_p_true | toy_calib \\(22 questions, in-domain, declared in" in text
    assert "2 question\\(s\\) also in the evaluation set dropped" in text
    assert "| p_true |" in text and "| isotonic_p_true |" in text
    # runs used and left out, and the join that found a record without a sampled question
    assert "older than the used run 2026-01-02T03-04-05.000001" in text
    assert "1 toy_eval_ptrue records without toy_eval questions \\(first: toy/not-sampled\\)" in text


def test_report_calibration_override_cross_and_mixed_domain(tmp_path):
    from analysis.report import build_report

    runs = _runs(tmp_path / "runs")
    cross = build_report(
        [runs], tmp_path / "cross", options=_options(calibration={"toy_eval": ["other_calib"]})
    )
    text = cross.markdown.read_text()
    assert "| isotonic_p_true | other_calib \\(20 questions, cross-domain, override" in text
    mixed = build_report(
        [runs], tmp_path / "mixed", options=_options(calibration={"toy_eval": ["toy_calib", "other_calib"]})
    )
    assert "toy_calib + other_calib \\(42 questions, mixed-domain, override" in mixed.markdown.read_text()


def test_report_says_when_no_calibration_split_is_declared(tmp_path):
    from analysis.report import build_report

    files = build_report([_runs(tmp_path / "runs", calibration=[])], tmp_path / "report", options=_options())
    text = files.markdown.read_text()
    assert "- calibration split: no calibration split declared" in text
    assert "| isotonic_p_true |" not in text and "| p_true |" in text


def test_report_override_must_name_a_calibration_task(tmp_path):
    from analysis.report import build_report
    from capcal_tasks.relations import RelationError

    runs = _runs(tmp_path / "runs")
    with pytest.raises(RelationError, match="toy_eval: toy_eval is not a calibration task|own calibration"):
        build_report([runs], tmp_path / "r1", options=_options(calibration={"toy_eval": ["toy_eval"]}))
    with pytest.raises(RelationError, match="calibration task no_such_task is not a known task"):
        build_report([runs], tmp_path / "r2", options=_options(calibration={"toy_eval": ["no_such_task"]}))


def test_declared_calibration_task_that_is_an_evaluation_task_is_an_error(tmp_path):
    from analysis.report import build_report
    from capcal_tasks.relations import RelationError

    runs = _runs(tmp_path / "runs", calibration=["toy_eval_ptrue"])
    with pytest.raises(
        RelationError, match=r"results_.*\.json: task toy_eval: toy_eval_ptrue is not a calibration"
    ):
        build_report([runs], tmp_path / "report", options=_options())


def _rendered_tags(markdown: str) -> list[tuple[str, dict]]:
    """(tag, attributes) of every HTML element a CommonMark renderer makes of ``markdown``."""
    from html.parser import HTMLParser

    from markdown_it import MarkdownIt

    tags: list[tuple[str, dict]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, dict(attrs)))

    Collect().feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return tags


@pytest.mark.parametrize("attack", MARKDOWN_ATTACKS)
def test_markdown_text_leaves_no_markup(attack):
    from analysis.report import markdown_text

    tags = _rendered_tags(f"| a |\n|---|\n| {markdown_text(attack)} |\n\n_{markdown_text(attack)}_\n")
    assert {tag for tag, _ in tags} <= {"table", "thead", "tbody", "tr", "th", "td", "p", "em"}, tags
    # GitHub's extended autolinks (not CommonMark): www., http(s)://, mailto:, xmpp:, bare e-mail addresses
    assert not GFM_AUTOLINK.search(markdown_text(attack))


def test_report_markdown_escapes_hostile_model_text(tmp_path):
    from analysis.report import build_report

    response = " ".join(MARKDOWN_ATTACKS)
    files = build_report(
        [_runs(tmp_path / "runs", response=response)], tmp_path / "report", options=_options()
    )
    markdown = files.markdown.read_text()
    assert "alert(5)" not in markdown and "<script" not in markdown  # escaped: alert\(5\), &lt;script
    tags = _rendered_tags(markdown)
    images = [attrs for tag, attrs in tags if tag == "img"]
    assert images and all(
        attrs["src"].startswith("figures/") for attrs in images
    )  # only the report's figures
    assert not {tag for tag, _ in tags} & {"a", "script", "iframe", "code", "strong"}
    assert [tag for tag, _ in tags if tag == "h1"] == ["h1"]  # the title only, no heading from the data
    for _, attrs in tags:
        assert not any("javascript" in str(v) or str(v).startswith("data:") for v in attrs.values()), attrs


def test_capcal_report_run_option_chooses_the_older_run(tmp_path):
    """``capcal report --run RUN_ID`` uses that run of its (model, task) and lists the latest as left out."""
    from analysis.cli import main

    runs = _runs(tmp_path / "runs")
    older = "2025-12-01T00-00-00.000001"
    status = main(
        ["report", str(runs), "--output", str(tmp_path / "report"), "--resamples", "20", "--run", older]
    )
    assert status == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| toy_eval | sampling | 2025-12-01T00-00-00.000001 | True | selected |" in text
    assert main(["report", str(runs), "--output", str(tmp_path / "r2"), "--run", "2031-01-01"]) == 2
