"""A real ``capcal eval --model capcal-hf`` run (SmolLM2, capcal_arithmetic) stopped by real signals.

One run is stopped by SIGTERM, its re-run by SIGINT (``kill -INT``, what Ctrl-C sends), the next by SIGKILL,
each once it has committed a sample more than it started with; a last re-run completes. After each signal,
no process of the run's tree (recorded at the signal: the run and its watchdog) is alive 5 s later;
SIGTERM exits 143 and SIGINT 130 with one line naming the samples saved and the command that resumes (no
traceback); the completed run's samples equal an uninterrupted run's with its own cache. The stopped runs
decode one row at a time (batch size 1: a sample committed at a time); the last re-run and the
uninterrupted one at batch size 16, all samples left in one batch, so the comparison also holds capcal-hf to
its batch invariance (at batch size 1 every step is padded to the machine's row floor, 16 on Intel CPUs:
the reference at batch size 1 cost about 8x the CPU time).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # stop_checks.py
from stop_checks import committed, stop_run  # noqa: E402

pytestmark = pytest.mark.slow

LIMIT, K, MAX_GEN_TOKS = 4, 4, 32
EXPECTED_STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGKILL: -signal.SIGKILL}


def _arguments(model: Path, cache: Path, output: Path, batch_size: int = 1) -> list[str]:
    return [
        "eval", "--model", "capcal-hf", "--model_args", f"pretrained={model},seed=7,cache_path={cache}",
        "--tasks", "capcal_arithmetic", "--limit", str(LIMIT), "--repeats", str(K),
        "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}", "--batch_size", str(batch_size),
        "--apply_chat_template",
        "--log_samples", "--output_path", str(output),
    ]  # fmt: skip


def _runner(arguments: list[str]) -> str:
    """``capcal ARGUMENTS`` as a ``python -c`` program (run in a child of ``forked_cli``: the CLI's modules
    imported once per worker, not by each of the five runs)."""
    return f"from analysis.cli import main; raise SystemExit(main({arguments!r}))"


def logged_responses(output: Path, task: str) -> dict[tuple[int, int], str]:
    """lm-eval's logged responses per (doc id, repeat)."""
    (samples_file,) = output.rglob(f"samples_{task}_*.jsonl")
    responses = {}
    for line in samples_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for repeat, text in enumerate(record["resps"][0]):
            responses[(record["doc_id"], repeat)] = text
    return responses


def test_signals_stop_capcal_hf_leaving_nothing_and_the_rerun_completes(
    smollm2_path: Path, tmp_path: Path, forked_cli
) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    reference_arguments = _arguments(
        smollm2_path, tmp_path / "reference.sqlite", tmp_path / "reference", batch_size=LIMIT * K
    )
    reference = forked_cli.popen(_runner(reference_arguments), [], tmp_path, env)
    cache, output = tmp_path / "samples.sqlite", tmp_path / "out"
    arguments = _arguments(smollm2_path, cache, output)

    def start(run_env: dict, log: Path):
        return forked_cli.popen(_runner(arguments), [], tmp_path, run_env, stderr=log)

    stops = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            stops[sig] = stopped = stop_run(
                start, env, tmp_path, cache, tmp_path / f"{sig.name}.log", sig, timeout=300
            )
            assert stopped.exit_status == EXPECTED_STATUS[sig], stopped.log[-3000:]
            assert stopped.alive == [], (sig.name, stopped.tree)
            assert any("stopping.py" in process for process in stopped.tree), stopped.tree  # its watchdog
            assert "Traceback" not in stopped.log
            if sig != signal.SIGKILL:
                (line,) = stopped.stop_lines
                assert line == stopped.log.rstrip().splitlines()[-1]  # the last line
                assert line.startswith(
                    f"capcal eval: stopped by {sig.name}; samples this run committed are saved ("
                )
                assert f"in {cache}" in line and line.endswith(
                    f"resume with: {shlex.join(['capcal', *arguments])}"
                )
        # the last re-run at batch size 16 (a resume may change it): the rest of the samples in one batch,
        # where batch size 1 pads each row's every step to the row floor
        final_arguments = _arguments(smollm2_path, cache, output, batch_size=LIMIT * K)
        final = forked_cli.run(_runner(final_arguments), [], tmp_path, 600, env)
        assert final.returncode == 0, final.stderr[-3000:]
        assert reference.wait(timeout=600) == 0
    finally:
        if reference.poll() is None:
            reference.kill()
    assert len(committed(cache)) == LIMIT * K
    assert committed(cache) == committed(tmp_path / "reference.sqlite")
    responses = logged_responses(output, "capcal_arithmetic")
    assert len(responses) == LIMIT * K and responses == logged_responses(
        tmp_path / "reference", "capcal_arithmetic"
    )
    for sig, stopped in stops.items():
        print(
            f"{sig.name}: exit {stopped.exit_status} after {stopped.exit_seconds:.1f} s, "
            f"{stopped.rows_at_signal} samples committed at the signal; tree {stopped.tree}; "
            f"alive when the check gave up: {stopped.alive}"
        )
