"""Step records: a step is reused only with the same settings, inputs and untouched output; otherwise it runs
again, or stops with one line under ``reuse="strict"``."""

from __future__ import annotations

import json

import pytest

from analysis.self_calibration.fingerprint import (
    STEP_RECORD,
    StaleStepError,
    content_digest,
    read_step_record,
    run_step,
    step_fingerprint,
    step_state,
)


class Writer:
    """An action that writes one output file and counts its calls."""

    def __init__(self, folder, text: str = "output") -> None:
        self.folder, self.text, self.calls = folder, text, 0

    def __call__(self) -> None:
        self.calls += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "result.json").write_text(json.dumps({"text": self.text, "call": self.calls}))


def test_reused_only_with_the_same_settings_inputs_and_output(tmp_path):
    folder = tmp_path / "step"
    action = Writer(folder)
    settings, inputs = {"learning_rate": 5e-5, "docs": [1, 2]}, {"model": "sha256:aa"}
    assert run_step("train", folder, settings, inputs, action) is True and action.calls == 1
    record = read_step_record(folder)
    assert record["complete"] and record["fingerprint"] == step_fingerprint("train", settings, inputs)
    assert record["output"] == content_digest(folder) and record["settings"] == settings
    assert run_step("train", folder, dict(settings), dict(inputs), action) is False and action.calls == 1
    # a changed setting: the step runs again, in a cleared folder
    (folder / "left_over.txt").write_text("from the old run")
    changed = {**settings, "learning_rate": 3e-4}
    assert run_step("train", folder, changed, inputs, action) is True and action.calls == 2
    assert not (folder / "left_over.txt").exists() and read_step_record(folder)["settings"] == changed
    # a changed input identity (another model): runs again
    assert run_step("train", folder, changed, {"model": "sha256:bb"}, action) is True and action.calls == 3


def test_a_tampered_output_is_not_reused(tmp_path):
    folder = tmp_path / "step"
    action = Writer(folder)
    run_step("sample", folder, {"n": 1}, {}, action)
    (folder / "result.json").write_text('{"text": "edited by hand"}')
    state, reason = step_state("sample", folder, {"n": 1}, {})
    assert state == "stale" and "modified after the step wrote it" in reason
    assert run_step("sample", folder, {"n": 1}, {}, action) is True and action.calls == 2
    assert json.loads((folder / "result.json").read_text())["call"] == 2
    (folder / "extra.txt").write_text("a file added afterwards")
    assert step_state("sample", folder, {"n": 1}, {})[0] == "stale"


def test_strict_reuse_stops_with_one_line_naming_the_change(tmp_path):
    folder = tmp_path / "step"
    action = Writer(folder)
    run_step("train", folder, {"learning_rate": 5e-5}, {"data": "sha256:1"}, action)
    with pytest.raises(StaleStepError) as error:
        run_step("train", folder, {"learning_rate": 3e-4}, {"data": "sha256:1"}, action, reuse="strict")
    message = str(error.value)
    assert "step 'train'" in message and "setting learning_rate" in message and "\n" not in message
    assert action.calls == 1 and read_step_record(folder)["settings"] == {"learning_rate": 5e-5}
    assert (
        run_step("train", folder, {"learning_rate": 5e-5}, {"data": "sha256:1"}, action, reuse="strict")
        is False
    )
    with pytest.raises(ValueError, match="reuse must be one of"):
        run_step("train", folder, {}, {}, action, reuse="sometimes")


def test_output_without_a_record_is_stale_and_an_unfinished_run_resumes(tmp_path):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "results_2026.json").write_text("{}")
    assert step_state("sample", legacy, {}, {})[0] == "stale"
    with pytest.raises(StaleStepError, match="no step record"):
        run_step("sample", legacy, {}, {}, Writer(legacy), reuse="strict")
    # an interrupted step: the record says incomplete; the same fingerprint keeps the folder (checkpoints)
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / STEP_RECORD).write_text(
        json.dumps({"fingerprint": step_fingerprint("train", {"a": 1}, {}), "complete": False})
    )
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "checkpoint-2").write_text("state")
    assert step_state("train", folder, {"a": 1}, {})[0] == "resumable"
    action = Writer(folder)
    assert run_step("train", folder, {"a": 1}, {}, action) is True
    assert (folder / "checkpoints" / "checkpoint-2").is_file()  # kept for the resume
    # another fingerprint: the unfinished run's checkpoints are not resumed from
    (folder / STEP_RECORD).write_text(json.dumps({"fingerprint": "sha256:other", "complete": False}))
    assert run_step("train", folder, {"a": 1}, {}, action) is True
    assert not (folder / "checkpoints").exists()


def test_content_digest_is_of_the_bytes_not_the_place(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "a.txt").write_text("alpha")
        (folder / "checkpoints").mkdir()
    (two / "checkpoints" / "state").write_text("not part of the output")
    (two / STEP_RECORD).write_text("{}")
    assert content_digest(one) == content_digest(two)
    (two / "sub" / "a.txt").write_text("alphA")
    assert content_digest(one) != content_digest(two)
    (two / "sub" / "a.txt").write_text("alpha")
    (two / "sub" / "a.txt").rename(two / "sub" / "b.txt")  # a renamed file is another output
    assert content_digest(one) != content_digest(two)
    with pytest.raises(FileNotFoundError):
        content_digest(tmp_path / "missing")


def test_the_stale_reason_names_every_change_in_order_settings_then_inputs_six_at_most(tmp_path):
    """Each changed, added or removed setting and input is named, settings first, each part in name order;
    past six, the rest are counted."""
    folder = tmp_path / "step"
    old_settings = {"alpha": 1, "beta": 2, "delta": 4, "kept": 0}
    run_step("train", folder, old_settings, {"data": "sha256:1", "model": "sha256:m"}, Writer(folder))

    def reason(settings: dict, inputs: dict) -> str:
        state, why = step_state("train", folder, settings, inputs)
        assert state == "stale"
        return why

    # beta changed, delta removed, gamma added; data changed (model unchanged, kept unchanged)
    settings = {"alpha": 1, "beta": 3, "gamma": 5, "kept": 0}
    assert reason(settings, {"data": "sha256:2", "model": "sha256:m"}) == (
        "changed since it ran: setting beta, setting delta, setting gamma, input data"
    )
    six = {**old_settings, **{f"b{i}": i for i in range(1, 7)}}  # exactly six: all named
    assert reason(six, {"data": "sha256:1", "model": "sha256:m"}) == "changed since it ran: " + ", ".join(
        f"setting b{i}" for i in range(1, 7)
    )
    many = {name: 9 for name in ("a1", "a2", "a3", "a4", "a5", "a6", "a7", "kept")}
    assert reason({**many, "kept": 0}, {"data": "sha256:1", "model": "sha256:m", "zz": "x"}) == (
        "changed since it ran: setting a1, setting a2, setting a3, setting a4, setting a5, setting a6 "
        "and 5 more"
    )
