"""A write that failed is a failed run (issue 36): real writes onto a really full file system.

Each test mounts a small tmpfs (the suite runs as root; skipped with the reason when mounting is impossible)
and unmounts it afterwards. ``capcal eval`` runs the real SmolLM2 through lm-eval onto a 40 KB tmpfs, as in
the issue: lm-eval swallows ``OSError(28)``; capcal must exit 1 with one line, name the files incomplete and
say the samples are in the sample cache, and the command it prints must write them out again.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from analysis.checks.output_checks import (
    complete_json_lines,
    failed_write_message,
    lm_eval_save_errors,
    mark_incomplete,
    recording_written_files,
    remove_partial_files,
    sample_cache_note,
    saved_run_problems,
)
from analysis.cli import main

QUESTIONS = 30
REPEATS = 6  # the consistency estimator needs k >= 6: capcal table has a row to write


def _mount_tmpfs(folder: Path, size: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    return folder


def _unmount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], check=True)


def _fill(folder: Path) -> None:
    """Write to ``folder`` until its file system is full (ENOSPC)."""
    with open(folder / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"x" * 1024)
        except OSError as error:
            assert error.errno == errno.ENOSPC


@pytest.fixture
def small_disk(tmp_path):
    """A 40 KB tmpfs, unmounted afterwards."""
    disk = _mount_tmpfs(tmp_path / "disk", "40k")
    yield disk
    _unmount(disk)


@pytest.fixture
def full_disk(small_disk):
    """A tmpfs with no byte left."""
    _fill(small_disk)
    return small_disk


# --- the library functions --------------------------------------------------------------------------------


def test_complete_json_lines_counts_up_to_a_cut_line(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n{"c": ', encoding="utf-8")
    assert complete_json_lines(path) == (2, True)
    path.write_text('{"a": 1}\n{"b": 2}\n', encoding="utf-8")
    assert complete_json_lines(path) == (2, False)


def test_lm_eval_tracker_swallows_enospc_and_the_capture_sees_it(small_disk):
    """lm-eval's real ``EvaluationTracker`` on a full disk: no exception, a WARNING; the capture holds the
    OS error, and the file it cut is reported with its count."""
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(small_disk / "out"))
    tracker.general_config_tracker.model_name_sanitized = "m"
    tracker.date_id = "t"
    samples = [
        {"doc_id": i, "arguments": [["prompt " * 500, {}]], "resps": [["x" * 200]], "filtered_resps": ["x"],
         "target": "1"}
        for i in range(5)
    ]  # fmt: skip
    _fill_to(small_disk, free_bytes=4096)  # room for part of the file only
    with lm_eval_save_errors() as errors:
        tracker.save_results_samples(task_name="task", samples=samples)  # returns: lm-eval swallows it
    assert len(errors) == 1 and errors[0].startswith("Could not save sample results")
    assert "No space left on device" in errors[0] and "28" in errors[0]
    path = small_disk / "out" / "m" / "samples_task_t.jsonl"
    problems = saved_run_problems(small_disk / "missing.json", {"task": path}, {"task": 5})
    assert problems[0] == "missing.json was not written"
    lines, cut = complete_json_lines(path)
    assert lines < 5 and problems[1].startswith(f"samples_task_t.jsonl holds {lines} of 5 questions")


def _fill_to(folder: Path, free_bytes: int) -> None:
    """Fill ``folder``'s file system until at most ``free_bytes`` (rounded to pages) are left."""
    stats = os.statvfs(folder)
    to_write = stats.f_bavail * stats.f_frsize - free_bytes
    if to_write > 0:
        (folder / "filler").write_bytes(b"x" * to_write)


def test_lm_eval_save_errors_restores_the_logger():
    tracker_logger = logging.getLogger("lm_eval.loggers.evaluation_tracker")
    level = tracker_logger.level
    with lm_eval_save_errors():
        assert tracker_logger.isEnabledFor(logging.INFO)
    assert tracker_logger.level == level and not tracker_logger.filters


def test_mark_incomplete_renames_out_of_the_readers_patterns(tmp_path):
    results = tmp_path / "results_t.json"
    results.write_text("{", encoding="utf-8")
    assert mark_incomplete([results, tmp_path / "absent.jsonl"]) == [tmp_path / "results_t.json.incomplete"]
    assert not results.exists()


def test_failed_write_message_is_one_whole_line():
    """The file (the error's, else the last one opened), the errno and reason, and the partial files removed;
    nothing after the reason when none was removed."""
    full = OSError(errno.ENOSPC, "No space left on device", "/out/report.md")
    assert failed_write_message("report", full, [], []) == (
        "capcal report: error: could not write /out/report.md: [Errno 28] No space left on device"
    )
    removed = [Path("/out/report.md"), Path("/out/report.html")]
    assert failed_write_message("report", full, removed, removed) == (
        "capcal report: error: could not write /out/report.md: [Errno 28] No space left on device; removed "
        "the partial file(s) /out/report.md, /out/report.html"
    )
    assert failed_write_message("table", OSError("disk gone"), [Path("/out/t.csv")], []) == (
        "capcal table: error: could not write /out/t.csv: disk gone"
    )
    assert (
        failed_write_message("eval", OSError("disk gone"), [], [])
        == "capcal eval: error: could not write: disk gone"
    )


def test_sample_cache_note_says_where_the_samples_are():
    kinds = {"capcal_arithmetic": "generate_until", "capcal_arithmetic_ptrue": "loglikelihood"}
    note = sample_cache_note("capcal-hf", {"cache_path": "/c/s.sqlite"}, kinds)
    assert "capcal_arithmetic are in the sample cache /c/s.sqlite" in note
    assert "not those of capcal_arithmetic_ptrue" in note
    assert "not in a sample cache (sample_cache=false)" in sample_cache_note(
        "capcal-hf", {"sample_cache": "false"}, kinds
    )
    assert "hf keeps no sample cache" in sample_cache_note("hf", {}, kinds)


def test_remove_partial_files_only_under_the_outputs(full_disk, tmp_path):
    outside = tmp_path / "cache.json"
    with recording_written_files() as written:
        outside.write_text("{}", encoding="utf-8")
        with pytest.raises(OSError) as raised:
            (full_disk / "report.md").write_text("x" * 10_000, encoding="utf-8")
    assert raised.value.errno == errno.ENOSPC
    assert written == [outside, full_disk / "report.md"]
    assert remove_partial_files(written, [full_disk]) == [full_disk / "report.md"]
    assert outside.exists() and not (full_disk / "report.md").exists()


def test_recording_ends_with_its_block_and_nested_blocks_record_apart(tmp_path):
    """Each block gets the files opened for writing while it is the innermost one, and nothing after it ends
    (a second command of the same process must not see the first one's files as its own)."""
    a, b, c, d = (tmp_path / name for name in "abcd")
    with recording_written_files() as first:
        a.write_text("a", encoding="utf-8")
    b.write_text("b", encoding="utf-8")  # outside every block
    with recording_written_files() as outer:
        with recording_written_files() as inner:
            c.write_text("c", encoding="utf-8")
        d.write_text("d", encoding="utf-8")
    (tmp_path / "e").write_text("e", encoding="utf-8")
    assert (first, inner, outer) == ([a], [c], [d])


# --- the commands -----------------------------------------------------------------------------------------


def _eval_argv(model: Path, cache: Path, output: Path) -> list[str]:
    return [
        "eval", "--model", "capcal-hf", "--model_args", f"pretrained={model},cache_path={cache}",
        "--tasks", "capcal_arithmetic", "--repeats", str(REPEATS), "--gen_kwargs", "max_gen_toks=8",
        "--apply_chat_template", "--log_samples", "--output_path", str(output), "--limit", str(QUESTIONS),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def full_disk_eval(tmp_path_factory, smollm2_path):
    """``capcal eval`` of 30 questions x k onto a 40 KB tmpfs (a copy of what it left there is kept), then
    the command its error line gives, with ``--output_path`` on a disk with room: a dict of both runs."""
    work = tmp_path_factory.mktemp("full_disk_eval")
    disk = _mount_tmpfs(work / "disk", "40k")
    argv = _eval_argv(smollm2_path, work / "samples.sqlite", disk)
    left = work / "left"
    left.mkdir()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            status = main(argv)
        for path in disk.rglob("*"):
            if path.is_file():
                (left / path.name).write_bytes(path.read_bytes())
    finally:
        _unmount(disk)
    errors = [line for line in stderr.getvalue().splitlines() if "capcal eval: error" in line]
    command = shlex.split(errors[0].split("write them again: ", 1)[1]) if len(errors) == 1 else []
    roomy = work / "out"
    rerun = [*command[1:-3], str(roomy), *command[-2:]]  # the same command, --output_path with room
    rerun_status = main(rerun) if command else None
    return {
        "status": status, "errors": errors, "argv": argv, "command": command, "left": left,
        "cache": work / "samples.sqlite", "rerun": rerun, "rerun_status": rerun_status, "roomy": roomy,
    }  # fmt: skip


@pytest.mark.slow  # full_disk_eval: two real capcal eval runs (70-100 s)
def test_capcal_eval_on_a_full_disk_exits_1_in_one_line(full_disk_eval):
    """The issue's case: 30 questions onto a 40 KB tmpfs (lm-eval swallows ENOSPC). Exit 1, one line naming
    the cut samples file, the OS error, the sample cache and the command; the files renamed *.incomplete."""
    run = full_disk_eval
    assert run["status"] == 1 and len(run["errors"]) == 1
    line = run["errors"][0]
    assert f"of {QUESTIONS} questions" in line and "samples_capcal_arithmetic_" in line
    assert "No space left on device" in line and "Could not save sample results" in line
    assert f"in the sample cache {run['cache']}" in line and "reads them back without decoding" in line
    assert run["command"][:2] == ["capcal", "eval"] and run["command"][1:] == run["argv"]
    incomplete = sorted(run["left"].glob("*.incomplete"))
    assert [path.name.split("_")[0] for path in incomplete] == ["results", "samples"]
    assert not list(run["left"].glob("samples_*.jsonl")) and not list(run["left"].glob("results_*.json"))
    written, cut = complete_json_lines(incomplete[1])
    assert 0 < written < QUESTIONS and cut
    assert f"holds {written} of {QUESTIONS} questions and a cut line {written + 1}" in line


@pytest.mark.slow  # full_disk_eval: two real capcal eval runs (70-100 s)
def test_the_printed_command_writes_every_sample_from_the_cache(full_disk_eval):
    """The command of the error line, pointed at a disk with room: all 30 questions, every sample read from
    the sample cache (none decoded again), the same samples the failed run had written."""
    run = full_disk_eval
    assert run["rerun"][-4] == "--output_path" and run["rerun_status"] == 0
    results = json.loads(next(run["roomy"].rglob("results_*.json")).read_text(encoding="utf-8"))
    assert results["config"]["capcal_cached_samples_used"] == QUESTIONS * REPEATS
    assert results["config"]["capcal_samples_generated"] == 0
    assert results["config"]["capcal_batch_size"]["chosen_by"] == "capcal default"
    samples_file = next(run["roomy"].rglob("samples_capcal_arithmetic_*.jsonl"))
    assert complete_json_lines(samples_file) == (QUESTIONS, False)
    recovered = [json.loads(line) for line in samples_file.read_text(encoding="utf-8").splitlines()]
    cut_samples = next(run["left"].glob("samples_*.incomplete"))
    written, _ = complete_json_lines(cut_samples)
    with open(cut_samples, encoding="utf-8") as handle:
        first = [json.loads(next(handle)) for _ in range(written)]
    assert [row["resps"] for row in recovered[:written]] == [row["resps"] for row in first]


@pytest.mark.slow  # full_disk_eval: two real capcal eval runs (70-100 s)
@pytest.mark.parametrize("command", ["analyze", "table", "report"])
def test_commands_on_a_full_disk_exit_1_in_one_line_and_leave_no_partial_file(
    command, full_disk, full_disk_eval, capsys
):
    output_dir = full_disk_eval["roomy"]
    target = full_disk / {"analyze": "questions.jsonl", "table": "table.md", "report": "report"}[command]
    argv = {
        "analyze": ["analyze", str(output_dir), "--output", str(target)],
        "table": ["table", str(output_dir), "--output", str(target), "--resamples", "20"],
        "report": ["report", str(output_dir), "--output", str(target), "--resamples", "20"],
    }[command]
    assert main(argv) == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if f"capcal {command}: error" in line]
    assert len(errors) == 1 and "Traceback" not in err
    assert "[Errno 28] No space left on device" in errors[0] and "could not write" in errors[0]
    assert "removed the partial file(s)" in errors[0]
    left = [path.name for path in full_disk.rglob("*") if path.is_file()]
    assert left == ["filler"]
