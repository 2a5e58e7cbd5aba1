"""capcal eval's default batch size against the best one: the README's worked example, step 1.

Runs the README's step 1 (capcal-hf, SmolLM2, capcal_arithmetic + capcal_arithmetic_train, k = 16,
max_gen_toks 16, chat template, activations, samples logged) as ``capcal eval`` subprocesses, once with no
``--batch_size`` (capcal's default, ``capcal_models.batch_size``) and once per batch size in
``--batch_sizes``, in rounds (every setting once per round, so a change in the machine's load hits all of
them), with ``--limit`` questions per task and the sample cache off (every run decodes every sample). Times
each whole command in wall and CPU seconds (model load included: what a user waits for), reads the batch
size the default chose from the results file (``config.capcal_batch_size``), and writes the times, each
setting's best round, the ratio of the default's best to the best setting's best, and the machine
(``benchmarks/machine_info.py``) to a JSON file.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/default_batch_size.py --limit 4 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine_info import machine  # noqa: E402

DEFAULT = "default"


def step_one(model_path: str, work: Path, limit: int, batch_size: str) -> list[str]:
    """The README's step 1 as a ``capcal eval`` command line, with ``--limit`` and the sample cache off."""
    command = [
        sys.executable, "-m", "analysis.cli", "eval", "--model", "capcal-hf",
        "--model_args", f"pretrained={model_path},activations={work / 'acts'},sample_cache=false",
        "--tasks", "capcal_arithmetic,capcal_arithmetic_train", "--repeats", "16",
        "--gen_kwargs", "max_gen_toks=16", "--apply_chat_template", "--log_samples",
        "--output_path", str(work / "out"), "--limit", str(limit),
    ]  # fmt: skip
    return command if batch_size == DEFAULT else [*command, "--batch_size", batch_size]


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(model_path: str, limit: int, batch_size: str) -> tuple[float, float, object]:
    """Wall seconds and CPU seconds (user + system) of one command, and the batch size its results file
    records. With one thread per process the CPU seconds hardly change with other processes' load."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        start, cpu_start = time.perf_counter(), _children_cpu_seconds()
        subprocess.run(step_one(model_path, work, limit, batch_size), check=True, capture_output=True)
        seconds, cpu = time.perf_counter() - start, _children_cpu_seconds() - cpu_start
        results = json.loads(next((work / "out").rglob("results_*.json")).read_text())
        return seconds, cpu, results["config"].get("capcal_batch_size", {}).get("value")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=4, help="questions per task")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch_sizes", default="16,32,64,128", help="explicit batch sizes to compare")
    parser.add_argument("--once", default="1", help="batch sizes run in the first round only (slow ones)")
    parser.add_argument("--output", default=str(REPO / "benchmarks/results/default_batch_size.json"))
    args = parser.parse_args()
    from capcal_models.prepare import model_path

    path = str(model_path("smollm2"))
    settings = [DEFAULT, *args.batch_sizes.split(",")]
    once = [size for size in args.once.split(",") if size]
    times: dict[str, list[float]] = {setting: [] for setting in [*settings, *once]}
    cpu_times: dict[str, list[float]] = {setting: [] for setting in [*settings, *once]}
    chosen = None
    for round_index in range(args.rounds):
        for setting in settings + (once if round_index == 0 else []):
            seconds, cpu, recorded = run_once(path, args.limit, setting)
            times[setting].append(round(seconds, 2))
            cpu_times[setting].append(round(cpu, 2))
            if setting == DEFAULT:
                chosen = recorded
            print(
                f"round {round_index + 1}: batch size {setting}: {seconds:.1f} s, {cpu:.1f} s CPU", flush=True
            )
    best = {setting: min(values) for setting, values in times.items()}
    best_cpu = {setting: min(values) for setting, values in cpu_times.items()}
    fastest = min(best, key=best.get)
    fastest_cpu = min(best_cpu, key=best_cpu.get)
    record = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(step_one("$M", Path("$WORK"), args.limit, "<batch size>")[1:]),
        "questions_per_task": args.limit,
        "samples": 2 * args.limit * 16,
        "default_chose": chosen,
        "seconds": times,
        "best_seconds": best,
        "fastest": fastest,
        "default_over_fastest": round(best[DEFAULT] / best[fastest], 3),
        "one_over_default": round(best["1"] / best[DEFAULT], 2) if "1" in best else None,
        "cpu_seconds": cpu_times,
        "best_cpu_seconds": best_cpu,
        "fastest_cpu": fastest_cpu,
        "default_over_fastest_cpu": round(best_cpu[DEFAULT] / best_cpu[fastest_cpu], 3),
        "one_over_default_cpu": round(best_cpu["1"] / best_cpu[DEFAULT], 2) if "1" in best_cpu else None,
        "machine": machine(["torch", "transformers", "lm_eval"]),
    }
    Path(args.output).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    keys = (
        "default_chose",
        "best_seconds",
        "default_over_fastest",
        "best_cpu_seconds",
        "default_over_fastest_cpu",
    )
    print(json.dumps({key: record[key] for key in keys}))


if __name__ == "__main__":
    main()
