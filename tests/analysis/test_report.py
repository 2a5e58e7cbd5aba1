"""The HTML report: self-contained, every figure loads in headless Chromium, model text stays text."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from analysis.report import Figure, ReportSection, format_interval, write_report
from analysis.report.calibration_table import calibration_table
from analysis.report.figures import Curve, curves_figure, reliability_figure, target_scatter_figure

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
    assert browser.console_errors(files.html, tmp_path / "profile3") == []
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


def _write(
    root, task: str, metadata: dict, lines: list[dict], date: str = DATE, model: str = MODEL_FOLDER
) -> None:
    """A samples file and its entry in the run's results file (one results file per run, as lm-eval)."""
    import json

    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_{task}_{date}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    path = folder / f"results_{date}.json"
    results = json.loads(path.read_text()) if path.exists() else {"model_name": model}
    results.setdefault("results", {})[task] = {}
    results.setdefault("configs", {})[task] = {"metadata": metadata}
    results.setdefault("n-samples", {})[task] = {"original": len(lines), "effective": len(lines)}
    path.write_text(json.dumps(results))


def _runs(root, response: str = "", calibration: list[str] | None = None, activations: str | None = None):
    """Runs with non-suffix task names: ``toy_eval`` (12 questions, dataset ``toy``) declares ``toy_calib``
    (24 questions, 2 of them also evaluation questions) and ``other_calib`` (dataset ``other``); P(True)
    tasks score each. A second, older run of toy_eval is left out. ``activations``: the folder the sampling
    runs record (capcal-hf's ``activations=DIR``)."""
    rng = np.random.default_rng(0)
    evaluation = [f"toy/e{i}" for i in range(12)]
    calib = [f"toy/c{i}" for i in range(22)] + evaluation[:2]
    other = [f"other/c{i}" for i in range(20)]
    sampling = {"capcal_task": "sampling", **({"activations": activations} if activations else {})}
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


def test_report_says_when_a_moved_run_loses_its_probe(tmp_path):
    """A run that recorded an activations folder no longer there (the folder moved without acts/, or acts/
    removed): the first screen's warning suggests --activations, and the section says the probe is left out,
    in its warnings and after its verdict (before: the ranking went on without it, nothing said)."""
    from analysis.report import build_report
    from analysis.report.input_notices import report_notices

    gone = tmp_path / "old" / "we" / "acts"
    runs = _runs(tmp_path / "runs", activations=str(gone))
    notices = [notice for notice in report_notices([runs]) if str(gone) in notice]  # capcal report's
    assert len(notices) == 1 and notices[0].startswith(f"activations {gone} recorded in ")
    assert notices[0].endswith("; the probe is left out: pass the folder with --activations DIR")
    markdown = build_report([runs], tmp_path / "report", options=_options()).markdown.read_text()
    head = markdown.split("\n### ", 1)[0]
    lost = (
        f"probe not computed: the activations folder its run recorded ({gone}) was not found (was the run's "
        "folder moved?); pass it with --activations DIR"
    )
    assert f"- warning: {lost}" in markdown
    assert f"Left out: {lost}." in head


def _options(**kwargs):
    from analysis.report import ReportOptions

    return ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=12, **kwargs)


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory) -> str:
    """The markdown of the report on ``_runs`` with ``_options()``, built once for the tests that only read
    it."""
    from analysis.report import build_report
    from analysis.report.figures import figures_not_rendered

    root = tmp_path_factory.mktemp("toy_report")
    with figures_not_rendered():  # the Markdown is the same; the figures are the rendering tests'
        return build_report([_runs(root / "runs")], root / "report", options=_options()).markdown.read_text()


@pytest.fixture(scope="module")
def two_task_report(tmp_path_factory) -> tuple:
    """``_two_task_runs`` and the markdown of its report with ``_options()``, built once for the tests that
    only read them: (runs folder, markdown)."""
    from analysis.report import build_report
    from analysis.report.figures import figures_not_rendered

    root = tmp_path_factory.mktemp("two_task_report")
    runs = _two_task_runs(root / "runs")
    with figures_not_rendered():  # the Markdown is the same; the figures are the rendering tests'
        return runs, build_report([runs], root / "report", options=_options()).markdown.read_text()


def test_report_follows_declared_relations_not_names(toy_report):
    text = toy_report
    assert "## toy-model · toy_eval" in text
    assert "toy_calib ·" not in text and "other_calib ·" not in text  # calibration splits are not reported
    assert (
        "| toy_eval | evaluation | toy_calib |  | toy-model/results_2026-01-02T03-04-05.000001.json |" in text
    )
    assert "| toy_calib | calibration |  |  | toy-model/results_2026-01-02T03-04-05.000001.json |" in text
    assert "| toy_eval_ptrue | confidence |  | toy_eval |" in text
    assert "| isotonic_p_true | toy_calib (22 questions, in-domain, declared in" in text
    assert "2 question(s) also in the evaluation set dropped" in text
    assert "| p_true |" in text and "| isotonic_p_true |" in text
    # runs used and left out, and the join that found a record without a sampled question
    assert "older than the used run 2026-01-02T03-04-05.000001" in text
    assert "1 toy_eval_ptrue records without toy_eval questions (first: toy/not-sampled)" in text


def test_report_calibration_override_cross_and_mixed_domain(tmp_path):
    from analysis.report import build_report

    runs = _runs(tmp_path / "runs")
    cross = build_report(
        [runs], tmp_path / "cross", options=_options(calibration={"toy_eval": ["other_calib"]})
    )
    text = cross.markdown.read_text()
    assert "| isotonic_p_true | other_calib (20 questions, cross-domain, override" in text
    mixed = build_report(
        [runs], tmp_path / "mixed", options=_options(calibration={"toy_eval": ["toy_calib", "other_calib"]})
    )
    assert "toy_calib + other_calib (42 questions, mixed-domain, override" in mixed.markdown.read_text()


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the report's own text: left as it is (no \\(, \\[, &lt; or -&gt;)
        ("toy_calib (22 questions, in-domain)", "toy_calib (22 questions, in-domain)"),
        ("0.119 [0.080, 0.162]", "0.119 [0.080, 0.162]"),
        ("Routing: smollm2 -> qwen, a < b, p >= 0.5, Q&A", "Routing: smollm2 -> qwen, a < b, p >= 0.5, Q&A"),
        ("consistency_lf_k5 (leaky)", "consistency_lf_k5 (leaky)"),
        # what would open markup: one backslash each, no entity
        ("<b>x</b> &amp; &#60;", "\\<b>x\\</b> \\&amp; \\&\\#60;"),
        ("[a](b) [c][d] [e]: f", "[a\\](b) [c\\][d] [e\\]: f"),
        ("*x* _y_ `z` ~w~ a|b #1 $2$", "\\*x\\* \\_y\\_ \\`z\\` \\~w\\~ a\\|b \\#1 \\$2\\$"),
        ("\\(x\\) \\alpha \\", "\\\\(x\\\\) \\alpha \\\\"),
    ],
)
def test_markdown_text_escapes_only_what_markdown_reads(text, expected):
    """report.md stays plain readable Markdown: a character is escaped only where a Markdown renderer would
    read markup there (raw HTML, an entity, a link, emphasis, code, a table cell, math), and then with one
    backslash, never as an HTML entity; parentheses and brackets that open nothing stay bare (a backslash
    before them is a math delimiter to Jupyter and pandoc)."""
    from analysis.report import markdown_text

    assert markdown_text(text) == expected
    # and a CommonMark renderer shows exactly the text
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(f"x {expected}")
    import html

    assert html.unescape(re.sub(r"</?p>|\n", "", rendered)) == f"x {text}"


def test_report_markdown_is_plain_readable_text(tmp_path):
    """A sentence, fact, warning, note, table and figure caption holding parentheses, brackets, ``->``, ``<``
    and ``&``: report.md shows them bare; a sentence starting like a list item or quote stays a paragraph;
    the figure's image link holds its caption as it is."""
    text = "a (b) [0.1, 0.2] -> c < d & e"
    png = target_scatter_figure({"p": np.array([0.5])}, np.array([0.5]), np.array([1.0]))
    section = ReportSection(
        title=f"t {text}",
        sentences=[f"s {text}", "- not a list", "1. not a list", "> not a quote"],
        facts={f"k {text}": f"v {text}"},
        warnings=[f"w {text}"],
        notes=[f"n {text}"],
        tables=[(f"c {text}", pd.DataFrame({"x (y)": [f"cell {text}"]}))],
        figures=[Figure(f"f {text}", png)],
    )
    markdown = write_report([section], tmp_path / "r", title="t").markdown.read_text()
    # the title, sentence, fact key and value, warning, note, table caption, cell, figure heading, alt
    assert markdown.count(text) == 10
    for raw in ("\\(", "\\[", "&lt;", "&gt;", "&amp;"):
        assert raw not in markdown, raw
    from markdown_it import MarkdownIt

    page = MarkdownIt("commonmark").render(markdown)
    for sentence in ("- not a list", "1. not a list", "&gt; not a quote"):
        assert f"<p>{sentence}</p>" in page
    assert "<ol" not in page and "<blockquote" not in page and page.count("<img") == 1


def test_figure_caption_with_an_unmatched_bracket_still_makes_the_image(tmp_path):
    png = target_scatter_figure({"p": np.array([0.5])}, np.array([0.5]), np.array([1.0]))
    for caption in ("f ] x", "f [ x", "f ] [ x"):
        section = ReportSection(title="t", figures=[Figure(caption, png)])
        markdown = write_report([section], tmp_path / "r", title="t").markdown.read_text()
        images = [attrs for tag, attrs in _rendered_tags(markdown) if tag == "img"]
        assert [(image["alt"], image["src"]) for image in images] == [(caption, "figures/s1-t-1.png")]


def test_html_tables_wrap_names_at_underscores_and_keep_model_text_escaped(tmp_path):
    """Headers and name cells get a line-break opportunity after each underscore (a ranking table of long
    metric names fits the page); model text stays escaped text, and the Markdown is unchanged."""
    frame = pd.DataFrame(
        {
            "estimator": ["consistency_lf_k5", HOSTILE],
            "corrected_capability_brier ↓": ["0.119 [0.080, 0.162]", "x"],
        }
    )
    files = write_report([ReportSection(title="t", tables=[("ranking", frame)])], tmp_path / "r", title="t")
    page = files.html.read_text()
    assert "<th>corrected_<wbr>capability_<wbr>brier ↓</th>" in page
    assert ">consistency_<wbr>lf_<wbr>k5</td>" in page
    assert "&lt;script&gt;window.__capcal_pwned = 1&lt;/script&gt;" in page and "<script" not in page
    assert "| consistency_lf_k5 |" in files.markdown.read_text().replace("\\_", "_")


def test_report_markdown_escapes_hostile_model_text(tmp_path):
    from analysis.report import build_report

    response = " ".join(MARKDOWN_ATTACKS)
    files = build_report(
        [_runs(tmp_path / "runs", response=response)], tmp_path / "report", options=_options()
    )
    markdown = files.markdown.read_text()
    # escaped only where Markdown reads markup: \<script, no entity, no \( (a math delimiter to Jupyter)
    assert "\\<script>alert(5)\\</script>" in markdown and "&lt;" not in markdown and "\\(" not in markdown
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
    from analysis.report.figures import figures_not_rendered

    runs = _runs(tmp_path / "runs")
    older = "2025-12-01T00-00-00.000001"
    with figures_not_rendered():  # the appendix's run table only
        status = main(
            ["report", str(runs), "--output", str(tmp_path / "report"), "--resamples", "20", "--run", older]
        )
    assert status == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| toy_eval | sampling | 2025-12-01T00-00-00.000001 | True | selected |" in text
    assert main(["report", str(runs), "--output", str(tmp_path / "r2"), "--run", "2031-01-01"]) == 2


# ------------------------------------------------------ the summary, the grids and the paper tables


def test_report_opens_with_a_summary_that_ranks_concludes_and_warns(tmp_path, report_markdown):
    """Summary first and the appendix last; the ranking by corrected Brier holds the section table's
    numbers; the best's advantage is the paired bootstrap difference on the same resamples (recomputed here
    from the section's arrays); the sentence follows the interval; the warnings name N, k and the fitted
    estimator's training size; the caller's notices are shown escaped; the paper-form consistency is not
    ranked, its leakage-free form is."""
    import capcal_metrics as cm
    from analysis.report import build_report
    from analysis.report.analyze import analyze_runs

    runs = _runs(tmp_path / "runs")
    notice = f"activations folder {HOSTILE} does not exist"
    files = build_report([runs], tmp_path / "report", options=_options(), notices=[notice])
    markdown, page = files.markdown.read_text(), files.html.read_text()
    headings = re.findall(r"(?m)^## (.*)$", markdown)
    assert headings[0] == "Summary" and headings[1] == "Across models and tasks"
    assert headings.index("toy-model · toy_eval") < headings.index("Appendix: runs and task relations")
    assert all(
        h.startswith("Appendix") for h in headings[headings.index("Appendix: runs and task relations") :]
    )
    assert markdown.index("Runs used and left out") > markdown.index("## Appendix")
    assert "<script" not in page and "activations folder &lt;script&gt;" in page  # the notice, escaped

    rows = report_markdown.ranking_rows(markdown, "toy-model", "toy_eval")
    ranked = [row["estimator"] for row in rows]
    assert "consistency_k2" not in ranked and "consistency_lf_k2" in ranked
    assert "Not ranked (leaky): consistency_k2" in markdown
    brier = "corrected_capability_brier ↓"
    section = report_markdown.tables(report_markdown.section_of(markdown, "## toy-model · toy_eval"))
    (capability,) = [t for c, t in section.items() if c.startswith("Capability calibration")]
    by_name = {row["estimator"]: row for row in capability}
    for row in rows:  # the ranking's numbers are the section table's
        if row["estimator"] in by_name:
            assert row[brier] == by_name[row["estimator"]][brier]
    estimates = [float(row[brier].split(" ")[0]) for row in rows]
    assert estimates == sorted(estimates)

    (result,) = analyze_runs([runs], options=_options()).results
    inputs = result.inputs
    names = [name.replace("\\", "") for name in ranked]
    n = inputs.counts[0].astype(float)
    arrays = {}
    for name in names:
        if name.startswith("consistency_lf"):
            lf = inputs.leakage_free
            arrays[name] = (
                lf[name].to_numpy(float),
                lf["mu_hat_lf"].to_numpy(float),
                lf["n_lf"].to_numpy(float),
            )
        else:
            arrays[name] = (inputs.confidences[name], inputs.mu, n)
    # every row's corrected Brier recomputed (the order is the metric's), and every row's paired difference
    brier_of = {name: cm.corrected_capability_brier_score(*arrays[name]) for name in names}
    assert names == sorted(names, key=brier_of.__getitem__), brier_of
    for row, name in zip(rows, names, strict=True):
        assert row[brier].split(" ")[0] == f"{brier_of[name]:.3f}", (name, row[brier], brier_of[name])
    differences = cm.bootstrap_differences(
        {name: (cm.corrected_capability_brier_score, arrays[name]) for name in names},
        names[0],
        n_resamples=20,
        seed=0,
    )
    from analysis.report import markdown_text
    from analysis.report.summary import DIFFERENCE

    assert len(rows) >= 3 and rows[0][markdown_text(DIFFERENCE)] == "best"
    for row, name in zip(rows[1:], names[1:], strict=True):  # every row, not the second alone
        expected = format_interval(*differences[name])  # brackets left as they are: no link can form
        assert row[markdown_text(DIFFERENCE)] == expected, name
    difference = differences[names[1]]
    summary = report_markdown.section_of(markdown, "### Summary · toy-model · toy_eval")
    if difference.low > 0:
        assert f"{ranked[0]} beats {ranked[1]} on corrected capability Brier by" in summary
    else:
        assert f"{ranked[0]} and {ranked[1]} are not distinguishable" in summary
    for warning in (
        "- warning: N = 12 evaluation questions, below 100",
        "- warning: k = 4 samples per question, below 10",
        "- warning: isotonic_p_true was fitted on 22 questions, below 50",
    ):
        assert warning in summary, warning


def test_every_metric_column_states_its_direction(toy_report):
    from analysis.report.calibration_table import HIGHER_IS_BETTER

    markdown = toy_report
    headers = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    names = {name.replace("_", "_") for name in HIGHER_IS_BETTER} | set(HIGHER_IS_BETTER)
    seen = 0
    for header in headers:
        for cell in header.strip("|").split(" | "):
            cell = cell.strip()
            base = cell.split(" ")[0]
            if base in names:
                arrow = "↑" if HIGHER_IS_BETTER[base.replace("\\", "")] else "↓"
                assert cell.startswith(f"{base} {arrow}"), cell
                seen += 1
    assert seen >= 10


def _two_task_runs(root):
    """``_runs`` plus a second evaluation task ``toy_eval_b`` of the same model (10 questions, its own P(True)
    task), declaring the same calibration split."""
    root = _runs(root)
    rng = np.random.default_rng(1)
    ids = [f"toyb/e{i}" for i in range(10)]
    correct = rng.integers(0, 5, len(ids))
    meta = {"capcal_task": "sampling", "capcal_role": "evaluation", "capcal_calibration_tasks": ["toy_calib"],
            "capcal_dataset": "toyb"}  # fmt: skip
    _write(
        root,
        "toy_eval_b",
        meta,
        [_sampling_line(i, q, int(c)) for i, (q, c) in enumerate(zip(ids, correct, strict=True))],
    )
    ptrue = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": "toy_eval_b"}
    _write(
        root,
        "toy_eval_b_ptrue",
        ptrue,
        [_ptrue_line(i, q, 0.2 + 0.15 * c) for i, (q, c) in enumerate(zip(ids, correct, strict=True))],
    )
    return root


def test_grid_of_two_tasks_matches_every_section_cell_and_exports(
    tmp_path, report_markdown, monkeypatch, two_task_report
):
    import json

    from matplotlib.figure import Figure

    from analysis.cli import main
    from analysis.report.figures import Interval, forest_figure
    from analysis.report.paper_table import format_table, paper_table

    runs, markdown = two_task_report
    saved = []
    savefig = Figure.savefig
    monkeypatch.setattr(
        Figure, "savefig", lambda figure, *a, **k: saved.append(1) or savefig(figure, *a, **k)
    )
    # the table's numbers are the report's (below), and it draws none of the report's figures
    rows = paper_table([runs], options=_options())
    assert saved == []
    assert forest_figure([Interval("a", 0.5, 0.4, 0.6)], "x").startswith(b"\x89PNG") and saved == [1]
    assert set(rows["task"]) == {"toy_eval", "toy_eval_b"} and set(rows["model"]) == {"toy-model"}
    assert report_markdown.assert_grid_matches_sections(markdown, rows) >= 4 * 2 * 2
    grids = report_markdown.tables(report_markdown.section_of(markdown, "## Across models and tasks"))
    bootstrap = ": estimators x tasks, each cell with its 95% bootstrap interval"
    assert list(grids[f"corrected_capability_brier ↓{bootstrap}"][0]) == [
        "estimator",
        "toy_eval",
        "toy_eval_b",
    ]
    assert "consistency_k2 (leaky)" in {r["estimator"] for r in grids[f"soft_auroc ↑{bootstrap}"]}
    # each grid names the method of its intervals: the debiased ECE's are the jackknife's
    assert "capability_ece_debiased ↓: estimators x tasks, each cell with its 95% jackknife interval" in grids
    assert not [title for title in grids if "ece_debiased" in title and "bootstrap" in title]
    methods = rows[rows["estimator"] != "random (expected)"].groupby("metric")["interval_method"].agg(set)
    assert methods["capability_ece_debiased"] == {"jackknife normal"}
    assert methods["soft_auroc"] == {"bootstrap percentile"}

    csv = format_table(rows, ["soft_auroc"], "csv")
    back = pd.read_csv(__import__("io").StringIO(csv))
    chosen = rows[rows["metric"] == "soft_auroc"].reset_index(drop=True)
    assert list(back["estimator"]) == list(chosen["estimator"])
    np.testing.assert_allclose(back["estimate"], chosen["estimate"])
    records = json.loads(format_table(rows, ["soft_auroc"], "json"))
    assert len(records) == len(chosen) and {"low", "high", "higher_is_better"} <= set(records[0])
    assert "(estimate [95% jackknife interval])" in format_table(rows, ["capability_ece_debiased"])
    assert "(estimate [95% bootstrap interval])" in format_table(rows, ["soft_auroc"])
    latex = format_table(rows, ["corrected_capability_brier"], "latex")
    assert "\\begin{tabular}{lcc}" in latex and "toy\\_eval\\_b" in latex and "$\\downarrow$" in latex
    with pytest.raises(ValueError, match="format"):
        format_table(rows, None, "xlsx")

    output = tmp_path / "table.csv"
    args = [
        "table",
        str(runs),
        "--metric",
        "soft_auroc",
        "--format",
        "csv",
        "--resamples",
        "20",
        "--output",
        str(output),
    ]
    assert main(args) == 0
    cli = pd.read_csv(output)
    from analysis.report import ReportOptions

    default = paper_table([runs], ["soft_auroc"], options=ReportOptions(n_resamples=20))
    assert list(cli["estimator"]) == list(default["estimator"])
    np.testing.assert_allclose(cli["low"], default["low"])
    assert main(["table", str(runs), "--metric", "no_such_metric"]) == 2


def test_pass_at_k_bands_are_clipped_to_the_unit_interval():
    from analysis.applications.pass_at_k_prediction import dataset_curve
    from analysis.report.sections import pass_at_k_curves

    n, c = np.full(2, 8), np.array([0, 4])
    confidence = np.array([0.05, 0.5])  # N = 2: the normal band at k = 1 is 0.275 +- 0.534
    raw = dataset_curve(confidence, n, c)
    # the unclipped band at k = 1 is the formula's and leaves [0, 1]: predicted 0.275, half width
    # 1.96 sqrt(0.05 * 0.95 + 0.5 * 0.5) / 2 = 0.534
    first = raw.iloc[0]
    half_width = 1.96 * np.sqrt(0.05 * 0.95 + 0.5 * 0.5) / 2
    assert first["k"] == 1 and first["predicted"] == pytest.approx(0.275)
    assert first["band_low"] == pytest.approx(0.275 - half_width) and first["band_low"] < 0
    assert first["band_high"] == pytest.approx(0.275 + half_width)
    curves = pass_at_k_curves({"c": confidence}, n, c)
    assert np.min(curves[0].band_low) >= 0 and np.max(curves[0].band_high) <= 1
    assert curves[-1].color == "black" and curves[-1].band_low is None


def test_reference_lines_are_distinct():
    from analysis.report.sections import BASELINE_STYLES

    uniform, oracle = BASELINE_STYLES["uniform"], BASELINE_STYLES["oracle"]
    assert uniform["style"] != oracle["style"] and uniform["color"] != oracle["color"]
    assert uniform["marker"] != oracle["marker"]


def test_files_are_named_relative_to_the_folder_given(tmp_path):
    """Copies read once are named by their paths relative to the output folder given, and the sections name
    the model by its display name, never by an absolute path."""
    import shutil

    from analysis.report import build_report

    runs = _runs(tmp_path / "runs")
    shutil.copytree(runs / MODEL_FOLDER, runs / "copy" / MODEL_FOLDER)
    markdown = build_report([runs], tmp_path / "report", options=_options()).markdown.read_text()
    assert str(tmp_path) not in markdown
    assert f"read once: runs/{MODEL_FOLDER}/samples_toy_eval_ptrue_" in markdown
    assert "(same content as runs/copy/toy-model/samples_toy_eval_ptrue_" in markdown


@pytest.mark.parametrize(
    ("advantage", "expected"),
    [
        (
            (0.12, 0.08, 0.16),
            "a beats b on corrected capability Brier by 0.120 [0.080, 0.160] (paired bootstrap, N = 40)",
        ),
        (
            (0.02, -0.01, 0.05),
            "a and b are not distinguishable on corrected capability Brier at N = 40: the paired difference "
            "0.020 [-0.010, 0.050] includes 0.",
        ),
        (
            (-0.05, -0.08, -0.02),
            "b is better than a on corrected capability Brier on the N = 40 questions both have, by 0.050 "
            "[0.020, 0.080]",
        ),
    ],
)
def test_the_sentence_follows_the_paired_interval(advantage, expected):
    from analysis.report.summary import conclusion

    ranked = pd.DataFrame(
        {
            "estimator": ["a", "b"],
            "advantage": [np.nan, advantage[0]],
            "advantage_low": [np.nan, advantage[1]],
            "advantage_high": [np.nan, advantage[2]],
            "paired_questions": [40, 40],
        }
    )
    assert conclusion(ranked, "corrected capability Brier").startswith(expected)


# ------------------------------------------------------ the first screen: verdicts, order, forest plot


def _one_estimator_model(root, model: str = "a-model"):
    """A second model, ``a-model`` (its runs are read before toy-model's), with toy_eval sampled k = 4 and
    nothing else: its only ranked estimator is the leakage-free consistency."""
    rng = np.random.default_rng(2)
    ids = [f"toy/e{i}" for i in range(12)]
    meta = {"capcal_task": "sampling", "capcal_role": "evaluation", "capcal_calibration_tasks": ["toy_calib"],
            "capcal_dataset": "toy"}  # fmt: skip
    correct = rng.integers(0, 5, len(ids))
    lines = [_sampling_line(i, q, int(c)) for i, (q, c) in enumerate(zip(ids, correct, strict=True))]
    _write(root, "toy_eval", meta, lines, model=model)
    return root


def _verdicts(markdown: str) -> list[str]:
    """The verdict sentences of the summary's head (before its first subsection)."""
    head = markdown.split("## Summary\n", 1)[1].split("\n### Summary · ", 1)[0]
    return [line for line in head.splitlines() if " · toy_eval: " in line and not line.startswith("- ")]


def test_summary_opens_with_a_verdict_per_model_and_the_section_that_compares_first(tmp_path):
    """One verdict sentence per (model, task) at the top; the model that compares several estimators comes
    before the one with a single estimator (although its runs are read first), in the verdicts, the summary
    subsections and the per-task sections; its forest plot sits under the verdicts, before what was
    measured; the phrases read as sentences."""
    from analysis.report import build_report
    from analysis.report.analyze import analyze_runs
    from analysis.report.figures import figures_not_rendered

    runs = _one_estimator_model(_runs(tmp_path / "runs"))
    analysis = analyze_runs([runs], options=_options())
    assert [r.model for r in analysis.results][0] == "a-model"  # the order the runs come in
    with figures_not_rendered():  # the Markdown only
        files = build_report([runs], tmp_path / "report", options=_options())
    markdown = files.markdown.read_text()
    verdicts = _verdicts(markdown)
    assert len(verdicts) == 2
    assert verdicts[0].startswith("toy-model · toy_eval: Use ")
    assert verdicts[1].startswith("a-model · toy_eval: Use consistency_lf_k2")
    assert "best on corrected capability Brier, the only estimator ranked" in verdicts[1]
    headings = re.findall(r"(?m)^#{2,3} (.*)$", markdown)
    assert headings.index("Summary · toy-model · toy_eval") < headings.index("Summary · a-model · toy_eval")
    assert headings.index("toy-model · toy_eval") < headings.index("a-model · toy_eval")
    head = markdown.split("## Summary\n", 1)[1].split("\n### Summary · ", 1)[0]
    forest = "### Corrected capability Brier of each estimator (toy-model · toy_eval)"
    assert forest in head and head.index(verdicts[-1]) < head.index(forest) < head.index("- models:")
    assert "each estimator (a-model" not in markdown  # one estimator: nothing to plot against
    assert "its intervals cover" not in markdown and "best's advantage" not in markdown
    assert "- primary metric: corrected capability Brier (lower is better): a proper score" in markdown


RANKED = pd.DataFrame(
    {
        "estimator": ["a", "b", "c"],
        "advantage_low": [np.nan, -0.01, 0.02],
        "advantage_high": [np.nan, 0.03, 0.09],
        "paired_questions": [40, 40, 40],
    }
)


@pytest.mark.parametrize(
    ("ranked", "skills", "expected"),
    [
        (
            RANKED,
            {"a": (0.4, 0.1, 0.6), "b": (0.2, -0.1, 0.4), "c": (-0.5, -0.9, -0.1)},
            "Use a: best on corrected capability Brier, not distinguishable from b at N = 40, ahead of c "
            "(paired 95% interval above 0); it beats the base rate, while c is worse.",
        ),
        (
            RANKED.assign(advantage_low=[np.nan, 0.01, 0.02]),
            {"a": (0.3, -0.1, 0.6), "b": (-0.2, -0.5, -0.01), "c": (-0.5, -0.9, -0.1)},
            "Use a, tentatively: best on corrected capability Brier, ahead of b and c (paired 95% intervals "
            "above 0); but it is not distinguishable from the base rate (the mean mu_hat for every "
            "question), and b and c are worse than the base rate.",
        ),
        (
            RANKED.head(2),
            {"a": (-0.3, -0.6, -0.1), "b": (-0.4, -0.7, -0.1)},
            "Use none of them: a is best on corrected capability Brier but worse than the base rate, not "
            "distinguishable from b at N = 40; b is worse than the base rate.",
        ),
        (
            RANKED.head(1),
            {"a": (0.7, 0.5, 0.9)},
            "Use a: best on corrected capability Brier, the only estimator ranked (nothing to compare it "
            "with); it beats the base rate.",
        ),
        (
            RANKED.head(2).assign(advantage_low=[np.nan, -0.05], advantage_high=[np.nan, -0.01]),
            {},
            "Use a, tentatively: best on corrected capability Brier; b is better than it on the questions "
            "both have; whether it beats the base rate is unknown (its Brier skill is not available).",
        ),
    ],
)
def test_the_verdict_follows_the_paired_intervals_and_the_skill(ranked, skills, expected):
    from analysis.report.summary import verdict

    assert verdict(ranked, skills, "corrected capability Brier") == expected


def test_the_forest_plot_draws_the_ranking_and_the_base_rate_where_the_skill_is_zero(tmp_path):
    """The forest plot's rows are the ranking (rank order, the best highlighted, the leakage-free consistency
    hollow) and its base-rate line is the Brier where the skill is 0: 1 - Brier / base rate is each
    estimator's Brier skill in the table."""
    import capcal_metrics as cm
    from analysis.report.analyze import analyze_runs
    from analysis.report.summary import forest_intervals

    (result,) = analyze_runs([_runs(tmp_path / "runs")], options=_options()).results
    ranking, inputs = result.ranking, result.inputs
    rows = forest_intervals(ranking)
    assert [r.estimate for r in rows] == list(ranking.long["estimate"])
    assert [r.highlight for r in rows] == [True] + [False] * (len(rows) - 1)
    assert {r.label for r in rows if r.hollow} == {"consistency_lf_k2 (vs mu_hat_lf)"}
    assert ranking.base_rate == pytest.approx(cm.base_rate_variance(inputs.mu, inputs.counts[0]))
    skills = inputs.metrics[inputs.metrics["metric"] == "capability_brier_skill"].set_index("estimator")
    checked = 0
    for row in ranking.long.itertuples(index=False):
        if row.target == "mu_hat":
            assert 1 - row.estimate / ranking.base_rate == pytest.approx(skills.at[row.estimator, "estimate"])
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize(
    ("metric", "value", "marks"),
    [
        ("corrected_capability_brier", (0.004, -0.009, 0.021), "‡"),  # the N = 6 Brier interval
        ("capability_ece_debiased", (-0.026, -0.140, 0.089), "‡"),  # the demo's debiased ECE
        ("capability_brier_skill", (3.880, 1.582, 3.880), "§"),  # N = 3
        ("capability_brier_skill", (-47.0, np.nan, np.nan), "¶"),  # the "random" row at N = 3
        ("capability_brier_skill", (-0.5, -4.3, 0.1), ""),  # an endpoint below -1 alone: not marked
        ("capability_brier_skill", (0.455, -0.137, 0.667), ""),
        ("capability_brier", (0.05, 0.0, 0.09), ""),
        ("soft_auroc", (0.9, 0.8, 1.0), ""),
        ("corrected_capability_brier", (np.nan, np.nan, np.nan), ""),
        ("capability_brier_skill", (np.nan, 1.2, 1.5), ""),  # shown as n/a: no mark for an unseen interval
        ("corrected_capability_brier", (0.01, -0.02, np.nan), ""),  # half an interval is not shown
        ("capability_brier_skill", (1.2, np.nan, 0.5), "§"),  # the estimate alone is shown
    ],
)
def test_values_outside_their_range_are_marked(metric, value, marks):
    from analysis.report.metric_ranges import marked_interval, range_footnotes, range_marks

    assert range_marks(metric, *value) == marks
    text = marked_interval(metric, *value)
    assert text == (f"{format_interval(*value)} {marks}" if marks else format_interval(*value))
    notes = range_footnotes([(metric, *value)])
    assert [note.split(" ", 2)[:2] for note in notes] == [[mark, f"{metric}:"] for mark in marks]


def _numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+", cell)]


def test_every_value_outside_its_range_is_marked_where_shown_with_its_reason(
    report_markdown, two_task_report
):
    """In the ranking tables, the section tables and the grids of a small report (N = 10 and 12, k = 4),
    a cell carries ‡ exactly when a shown value of the corrected Brier or debiased ECE is below 0, § when a
    skill is above 1, ¶ when a skill's estimate is below -1 (up to the 3 decimals shown), and each mark
    has its reason in a footnote under the same table."""
    _, markdown = two_task_report
    body = markdown.split("## Appendix")[0]
    tables, notes = report_markdown.tables(body), report_markdown.footnotes(body)
    seen = {"‡": 0, "§": 0, "¶": 0}
    for caption, rows in tables.items():
        grid = re.match(r"(\w+) [↑↓]: estimators x tasks", caption.replace("\\", ""))
        for row in rows:
            for header, cell in row.items():
                metric = grid[1] if grid and header != "estimator" else header.replace("\\", "").split(" ")[0]
                values = _numbers(cell)
                if not values:
                    continue
                expected = ""
                if metric in ("corrected_capability_brier", "capability_ece_debiased") and min(values) < 0:
                    expected += "‡"
                if metric == "capability_brier_skill" and max(values) > 1.0005:
                    expected += "§"
                if metric == "capability_brier_skill" and values[0] < -1.0005:
                    expected += "¶"
                marks = "".join(m for m in "‡§¶" if m in cell)
                assert marks == expected, (caption, header, cell)
                for mark in marks:
                    seen[mark] += 1
                    assert any(n.startswith(f"{mark} {metric}: ") for n in notes.get(caption, [])), (
                        caption,
                        mark,
                    )
    assert all(count > 0 for count in seen.values()), seen  # the small report has each case


def test_blank_cells_say_why(tmp_path, report_markdown):
    """The ranking never leaves a cell blank (the leakage-free consistency has its skill and debiased ECE);
    the random row's blank cells in a section table and a grid's blank cells are explained under the
    table."""
    from analysis.report import build_report
    from analysis.report.figures import figures_not_rendered
    from analysis.report.paper_table import BLANK_NOTE
    from analysis.report.sections import RANDOM_ROW_NOTE

    runs = _one_estimator_model(_two_task_runs(tmp_path / "runs"))
    with figures_not_rendered():  # the Markdown only
        markdown = build_report([runs], tmp_path / "report", options=_options()).markdown.read_text()
    rows = report_markdown.ranking_rows(markdown, "toy-model", "toy_eval")
    assert all(cell != "" for row in rows for cell in row.values())
    (lf,) = [row for row in rows if row["estimator"] == "consistency_lf_k2"]
    assert _numbers(lf["capability_brier_skill ↑"]) and _numbers(lf["capability_ece_debiased ↓"])
    body = markdown.split("## Appendix")[0]
    tables, notes = report_markdown.tables(body), report_markdown.footnotes(body)
    blanks = 0
    for caption, table in tables.items():
        if any(cell == "" for row in table for key, cell in row.items() if key):
            blanks += 1
            section_table = caption.startswith(("Capability calibration", "Response calibration"))
            expected = RANDOM_ROW_NOTE if section_table else BLANK_NOTE
            assert expected in notes.get(caption, []), caption
    assert blanks >= 3  # the random rows, and the grids where a-model has no P(True)


def test_routing_and_budget_captions_name_the_lines_their_legends_show(toy_report):
    """Each reference line of the routing figure is named in its caption by the style it is drawn in
    (exactly once, each style its own), under the name its legend shows; the black dashed line is one
    oracle only; the tie that puts oracle_cheap near random is said; the paper-form consistency is
    labelled leaky. The budget and pass@k guides name their reference lines the same way."""
    from analysis.applications.routing import routing_curves
    from analysis.report.figures import Curve, line_description
    from analysis.report.sections import routing_guide, routing_lines

    assert line_description(Curve("x", [0], [0], style="--", marker="^", color="black")) == (
        "black dashed line with triangles"
    )
    mu_cheap = np.array([0.0] * 6 + [0.25, 0.5, 0.75, 1.0])
    mu_strong = np.array([1.0, 0.75, 0.5, 0.25, 1.0, 0.0, 1.0, 1.0, 0.5, 1.0])
    rng = np.random.default_rng(0)
    confidences = {"consistency_k5": rng.uniform(size=10), "p_true": rng.uniform(size=10)}
    lines = routing_lines(routing_curves(confidences, mu_cheap, mu_strong))
    guide = routing_guide(lines, mu_cheap, "cheap")
    labels = [line.label for line in lines]
    assert labels[:2] == ["consistency_k5 (leaky)", "p_true"]
    references = [line for line in lines if line.color is not None]
    names = [line.label.split(" ")[0] for line in references]
    assert names == ["random", "oracle_cheap", "oracle_gain"]
    descriptions = [line_description(line) for line in references]
    assert len(set(descriptions)) == 3 and guide.count("black dashed") == 1
    for name, description in zip(names, descriptions, strict=True):
        assert guide.count(description) == 1
        after = guide.split(description, 1)[1]
        assert after.startswith(" (random routing)" if name == "random" else f" is {name},"), after[:40]
    assert "6 of the 10 questions have mu_hat = 0 for cheap" in guide
    assert "consistency_k5 (leaky): the paper-form consistency" in guide

    markdown = toy_report
    assert "grey dotted line with squares (uniform allocation)" in markdown
    assert "black dashed line with triangles (the oracle, allocating by mu_hat itself)" in markdown
    assert "black dashed line with circles (actual (unbiased pass@k))" in markdown


@pytest.mark.slow
def test_the_first_screen_in_chromium_concludes(tmp_path, browser):
    """In a 1280 x 1000 Chromium window, before any scrolling: the title, one verdict per model (the model
    that compares several estimators first) and its forest plot, decoded, wholly inside the window."""
    from analysis.report import build_report

    runs = _one_estimator_model(_runs(tmp_path / "runs"))
    files = build_report([runs], tmp_path / "report", options=_options(), title="capcal test report")
    screen = browser.first_screen(files.html, tmp_path / "profile")
    seen = screen["seen"]
    texts = [item["text"] for item in seen]
    assert texts[0] == "capcal test report" and texts[1] == "Summary"
    verdicts = [i for i, text in enumerate(texts) if re.match(r"(toy|a)-model · toy_eval: Use ", text)]
    assert [texts[i].split(" ")[0] for i in verdicts] == ["toy-model", "a-model"]
    (forest,) = [item for item in seen if item["tag"] == "img"]
    assert forest["text"] == "Corrected capability Brier of each estimator (toy-model · toy_eval)"
    assert forest["loaded"] and forest["bottom"] <= screen["height"]
    assert seen.index(forest) > verdicts[-1]
