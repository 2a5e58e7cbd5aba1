"""The README's worked example, run as written (its shell blocks, reduced by ``--limit`` and a smaller k) in
a temporary folder, with real SmolLM2 and Qwen2.5-Coder-0.5B runs through lm-eval: it ends in ``capcal
check`` exit 0 and a report, so the README cannot drift from the code. The same report is then made from
another working folder (issue 32: a relative path recorded at run time was resolved against the current
folder, and the probe disappeared), also for a run that recorded its activations folder relative, as runs
did before.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMIT = 4  # questions per task (the calibration split too)
K = 6  # responses per question (the consistency estimator needs k >= 6)

pytestmark = pytest.mark.slow


STOCK = "Stock lm-eval runs capcal's tasks too"  # the paragraph that introduces the stock lm-eval block


def _section_blocks() -> tuple[list[str], list[str]]:
    """The ``bash`` blocks of the README's worked-example section: (those of the worked example, those of its
    stock lm-eval paragraph)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## A worked example") :]
    section = section[: section.index("\n## ", 1)]
    assert STOCK in section, "the worked example's stock lm-eval paragraph moved: update STOCK"
    worked, stock = section.split(STOCK, 1)

    def blocks(part: str) -> list[str]:
        return re.findall(r"```bash\n(.*?)```", part, re.DOTALL)

    return blocks(worked), blocks(stock)


def worked_example_script() -> str:
    """The README's worked example's ``bash`` blocks, joined, each ``capcal eval`` reduced to ``LIMIT``
    questions and ``--repeats`` to ``K``."""
    blocks = _section_blocks()[0]
    assert blocks, "the worked example has no bash block"
    script = "\n".join(blocks)
    assert script.count("capcal eval ") == 4, script  # sampling, elicitation, self-check, second model
    script = script.replace("capcal eval ", f"capcal eval --limit {LIMIT} ")
    return re.sub(r"--repeats \d+", f"--repeats {K}", script)


def _capcal_bin(folder: Path) -> Path:
    """A folder with a ``capcal`` command that runs this checkout's CLI with the test's Python."""
    folder.mkdir(parents=True, exist_ok=True)
    command = folder / "capcal"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m analysis.cli "$@"\n', encoding="utf-8")
    command.chmod(0o755)
    return folder


def _env(bin_dir: Path) -> dict[str, str]:
    # the README's commands run in the activated venv (``source .venv/bin/activate``): lm_eval is on the PATH
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    python_path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PATH": path, "PYTHONPATH": python_path, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def worked_example(
    tmp_path_factory, smollm2_path
) -> tuple[Path, dict[str, str], subprocess.CompletedProcess]:
    """(the folder it ran in, the environment, the finished ``bash -e`` run of the README's blocks)."""
    from capcal_models.prepare import prepare_model

    prepare_model("qwen2.5-coder-0.5b")
    root = tmp_path_factory.mktemp("readme")
    env = _env(_capcal_bin(root / "bin"))
    folder = root / "work"
    folder.mkdir()
    script = "set -euo pipefail\n" + worked_example_script()
    run = subprocess.run(
        ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=1200
    )
    return folder, env, run


def test_the_worked_example_runs_as_written_and_ends_in_a_complete_check_and_a_report(worked_example):
    folder, _, run = worked_example
    assert run.returncode == 0, run.stderr[-4000:] + run.stdout[-2000:]
    assert re.search(r"^(\d+) of \1 run\(s\) complete$", run.stdout, re.MULTILINE), run.stdout[-3000:]
    # SmolLM2 never states \boxed{P}, even where it ends before the limit: a note, not "raise max_gen_toks"
    notes = [line for line in run.stdout.splitlines() if line.startswith("note: ")]
    verbalized = [n for n in notes if "capcal_arithmetic_verbalized" in n]
    assert verbalized and all("raising the limit" in n for n in verbalized), notes
    assert "may cut" not in run.stdout and "cut " not in "\n".join(notes)
    report = (folder / "report" / "report.md").read_text(encoding="utf-8")
    assert "probe" in report and "no activations index" not in report
    # the self-check and the second model made it into the report
    assert "selfcheck_mean" in report
    assert "qwen2.5-coder-0.5b" in report.lower()


def _report(cwd: Path, env: dict[str, str], out: Path, report: Path) -> str:
    run = subprocess.run(
        [str(Path(env["PATH"].split(os.pathsep)[0]) / "capcal"), "report", os.path.relpath(out, cwd),
         "--output", os.path.relpath(report, cwd), "--resamples", "50"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "probe fitted on" not in run.stderr or "of them (a quarter validates it)" in run.stderr
    return (report / "report.md").read_text(encoding="utf-8")


def _without_folder_names(text: str, *names: str) -> str:
    """``text`` with the output folder as each command named it (relative to its working folder) removed."""
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, "OUT")
    return text


def test_the_report_is_the_same_from_another_working_folder(worked_example, tmp_path):
    folder, env, run = worked_example
    assert run.returncode == 0, run.stderr[-3000:]
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    here = _report(folder, env, folder / "out", folder / "r1")
    there = _report(elsewhere, env, folder / "out", folder / "r2")
    names = (os.path.relpath(folder / "out", folder), os.path.relpath(folder / "out", elsewhere))
    assert "probe" in here
    assert _without_folder_names(here, *names) == _without_folder_names(there, *names)


def _copy_recording_activations(folder: Path, dest: Path, recorded: str) -> int:
    """The worked example's out/ and acts/ copied to ``dest``, every results file's recorded ``activations``
    set to ``recorded``; returns how many task configs recorded one."""
    shutil.copytree(folder / "out", dest / "out")
    shutil.copytree(folder / "acts", dest / "acts")
    rewritten = 0
    for results in (dest / "out").glob("*/results_*.json"):
        data = json.loads(results.read_text(encoding="utf-8"))
        for config in data.get("configs", {}).values():
            metadata = config.get("metadata") or {}
            if "activations" in metadata:
                metadata["activations"] = recorded
                rewritten += 1
        results.write_text(json.dumps(data), encoding="utf-8")
    return rewritten


def test_a_run_that_recorded_a_relative_activations_folder_is_read_relative_to_the_run(
    worked_example, tmp_path
):
    """A run from before this change recorded ``activations=acts/`` as given: it is found next to the run
    (the folder the run was started from), from any working folder, and the report says where it read it."""
    folder, env, run = worked_example
    assert run.returncode == 0, run.stderr[-3000:]
    old = tmp_path / "old"
    assert _copy_recording_activations(folder, old, "acts/") == 2  # the sampling run's two tasks
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here = _report(old, env, old / "out", old / "r1")
    there = _report(elsewhere, env, old / "out", old / "r2")
    names = (os.path.relpath(old / "out", old), os.path.relpath(old / "out", elsewhere))
    assert _without_folder_names(here, *names) == _without_folder_names(there, *names)
    assert "no activations index" not in here
    assert f"read from {old / 'acts'}, relative to the run's folder {old}" in here


def test_the_stock_lm_eval_command_runs_as_written(smollm2_path, tmp_path):
    """The README's stock ``lm_eval`` block, exactly as written (with ``M`` set as the worked example sets
    it): a results file with capcal_gsm8k's mean expected accuracy, 16 responses for each of 2 questions."""
    blocks = _section_blocks()[1]
    assert len(blocks) == 1 and blocks[0].lstrip().startswith("CAPCAL_DATA_DIR=bundled lm_eval "), blocks
    env = _env(_capcal_bin(tmp_path / "bin"))
    script = "set -euo pipefail\nM=$(capcal models path smollm2)\n" + blocks[0]
    run = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr[-4000:]
    (results,) = (tmp_path / "out").glob("*/results_*.json")
    metrics = json.loads(results.read_text(encoding="utf-8"))["results"]["capcal_gsm8k"]
    assert 0.0 <= metrics["expected_accuracy,all_responses"] <= 1.0, metrics
    (samples,) = (tmp_path / "out").glob("*/samples_capcal_gsm8k_*.jsonl")
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 2 and all(len(line["resps"][0]) == 16 for line in lines), [
        len(line["resps"][0]) for line in lines
    ]


def test_a_run_folder_moved_after_the_run_keeps_its_probe(worked_example, tmp_path):
    """``mv we we_moved`` (out/ and acts/ together) after ``capcal eval`` recorded the absolute activations
    folder: the report finds acts/ next to the moved run by the recorded path's tail and says so, so the
    probe stays ranked (before: the probe disappeared and the verdict flipped, exit 0, nothing said)."""
    folder, env, run = worked_example
    assert run.returncode == 0, run.stderr[-3000:]
    we = tmp_path / "we"
    assert _copy_recording_activations(folder, we, str(we / "acts")) == 2  # as capcal eval run from we/
    moved = tmp_path / "we_moved"
    we.rename(moved)
    report = _report(moved, env, moved / "out", moved / "r")
    assert f"read from {moved / 'acts'}, its tail acts next to the run's folder {moved}" in report
    assert "probe not computed" not in report
    assert re.search(r"^\| \d+ \| probe \|", report, re.MULTILINE), "the probe is ranked"
