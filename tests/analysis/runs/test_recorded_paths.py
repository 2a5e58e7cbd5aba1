"""``analysis.runs.recorded_paths``: a path a run recorded means the same from any working folder (issue 32).
The real runs with activations are in tests/test_readme_example.py; here the resolution rules, and a stock
lm-eval run that recorded its checkpoint as a relative path (the real SmolLM2, linked)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from analysis.runs import load_runs
from analysis.runs.recorded_paths import resolve_recorded_path


def _layout(root: Path) -> Path:
    """root/acts/ and root/out/model/results_*.json: ``capcal eval --output_path out/`` run from root."""
    (root / "acts").mkdir(parents=True)
    results = root / "out" / "model" / "results_2026-01-02T03-04-05.json"
    results.parent.mkdir(parents=True)
    results.write_text("{}", encoding="utf-8")
    return results


def test_a_relative_path_is_found_next_to_the_run_from_any_folder(tmp_path, monkeypatch):
    results = _layout(tmp_path / "project")
    for cwd in (tmp_path, tmp_path / "project" / "out", Path("/")):
        monkeypatch.chdir(cwd)
        found = resolve_recorded_path("acts/", results, "activations")
        assert found.path == tmp_path / "project" / "acts", cwd
        assert found.note == (
            f"activations acts/ (relative) recorded in {results.name}: read from "
            f"{tmp_path / 'project' / 'acts'}, relative to the run's folder {tmp_path / 'project'}"
        )


def test_the_current_folder_is_the_fallback_and_a_missing_path_is_named(tmp_path, monkeypatch):
    results = _layout(tmp_path / "project")
    (tmp_path / "elsewhere" / "other_acts").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere")
    found = resolve_recorded_path("other_acts", results, "activations")
    assert found.path == tmp_path / "elsewhere" / "other_acts"
    assert found.note.endswith("relative to the current folder")
    missing = resolve_recorded_path("gone/", results, "activations")
    assert missing.path is None
    assert missing.note == (
        f"activations gone/ (relative) recorded in {results}: not found relative to the run's folders "
        f"({results.parent} and above) or the current folder"
    )
    absolute = resolve_recorded_path(str(tmp_path / "project" / "acts"), results)
    assert (absolute.path, absolute.note) == (tmp_path / "project" / "acts", None)
    gone = resolve_recorded_path("/no/such/gone", results)  # named "path" unless told what it is
    assert (gone.path, gone.note) == (
        None,
        f"path /no/such/gone recorded in {results}: no such file or folder, nor any tail of it (down to "
        f"gone) next to the run's folders ({results.parent} and above)",
    )


def test_an_absolute_path_of_a_moved_run_folder_is_found_by_its_tail(tmp_path, monkeypatch):
    """``mv we we_moved`` (out/ and acts/ together) after a run that recorded ``/.../we/acts``: the recorded
    path is gone, its tail ``acts`` is next to the moved run (found from any working folder, and said so),
    also when the folder was moved elsewhere under its own name; a tail is not looked for at the file
    system's root."""
    results = _layout(tmp_path / "we")
    recorded = str(tmp_path / "we" / "acts")
    (tmp_path / "we").rename(tmp_path / "we_moved")
    moved = tmp_path / "we_moved" / "out" / "model" / results.name
    for cwd in (tmp_path, Path("/")):
        monkeypatch.chdir(cwd)
        found = resolve_recorded_path(recorded, moved, "activations")
        assert found.path == tmp_path / "we_moved" / "acts", cwd
        assert found.note == (
            f"activations {recorded} recorded in {moved.name}: no such file or folder (was the run's folder "
            f"moved?); read from {tmp_path / 'we_moved' / 'acts'}, its tail acts next to the run's folder "
            f"{tmp_path / 'we_moved'}"
        )
    # moved as a whole into another folder, name kept: the tail we/acts is found from new/
    (tmp_path / "new").mkdir()
    (tmp_path / "we_moved").rename(tmp_path / "new" / "we")
    again = resolve_recorded_path(recorded, tmp_path / "new" / "we" / "out" / "model" / results.name)
    assert again.path == tmp_path / "new" / "we" / "acts" and "(was the run's folder moved?)" in again.note
    # a bare name is not taken from the root: /tmp exists, but a recorded /gone/tmp is not found there
    root = resolve_recorded_path("/gone/tmp", moved)
    assert Path("/tmp").exists() and root.path is None


def test_a_stock_run_with_a_relative_checkpoint_has_one_identity_from_any_folder(
    tmp_path, monkeypatch, smollm2_path
):
    """``lm_eval --model hf --model_args pretrained=models/smollm2`` recorded the path as given: before, from
    another folder the model was unresolved (a label), and its runs no longer joined the others."""
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    os.symlink(smollm2_path, project / "models" / "smollm2")
    folder = project / "out" / "models__smollm2"
    folder.mkdir(parents=True)
    date = "2026-01-02T03-04-05.000000"
    record = {"doc_id": 0, "doc": {"question_id": "toy/0"}, "resps": [["\\boxed{0.5}"]],
              "verbalized_confidence": 0.5, "parse_success": 1, "parse_failures": 0}  # fmt: skip
    (folder / f"samples_capcal_toy_verbalized_{date}.jsonl").write_text(json.dumps(record) + "\n")
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence", "capcal_target_task": "capcal_toy"}
    results = {
        "results": {"capcal_toy_verbalized": {}},
        "configs": {"capcal_toy_verbalized": {"metadata": metadata}},
        "config": {"model": "hf", "model_args": "pretrained=models/smollm2"},
        "model_name": "hf",
    }
    (folder / f"results_{date}.json").write_text(json.dumps(results))
    identities = []
    for cwd in (project, tmp_path):
        monkeypatch.chdir(cwd)
        collection = load_runs([project / "out"])
        (model_id,) = set(collection.confidences["model_id"])
        identities.append(model_id)
    assert identities[0] == identities[1]
    assert not identities[0].startswith("unresolved:")
