"""Adaptive sampling's wall time with one lm-eval pass per look (before) against passes that skip the looks
where no question can stop (after: under unanimity a question mixed at l_1 draws k_max in its second pass),
in one run (issue 47, item 13; docs/benchmarks.md, "Adaptive sampling: passes, not looks").

The "before" code is capcal at ``--before`` (a git revision, exported with ``git archive`` to a temporary
folder), the "after" code this checkout; both run the same command: ``capcal eval --adaptive`` with the same
plan (``--looks``, default 8,16, and k_max = ``--k_max``, default 32), seed and questions (capcal_arithmetic,
4 per level: 20, answers of at most 16 tokens), each in a fresh process with a sample cache of its own
(nothing reused), alternating before/after ``--rounds`` times, and a fixed-k run (``--repeats K``, no
``--adaptive``) per round for reference (unless ``--no_fixed``). Per command: wall seconds, CPU seconds of the
process and its children, lm-eval passes (progress lines), samples drawn; and whether the two codes' records
hold the same responses and correctness (they must: same seeds, samples numbered by repeat index).

    python benchmarks/adaptive_passes.py --before 3382693 --root /tmp/adaptive_passes \
        --output benchmarks/results/adaptive_passes.json
    python benchmarks/adaptive_passes.py --before 3382693 --root /tmp/adaptive_passes_64 --k_max 64 \
        --looks 8,16,32 --no_fixed --output benchmarks/results/adaptive_passes-k64.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine_info import load_average, machine  # noqa: E402
from capcal_models.prepare import model_path  # noqa: E402

TASK, SEED, MAX_GEN_TOKS, PER_LEVEL = "capcal_arithmetic", 7, 16, 4


def _export(revision: str, folder: Path) -> Path:
    """capcal at ``revision`` as plain files under ``folder`` (``git archive``; the repository untouched)."""
    archive = folder / "before.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), revision], check=True)
    target = folder / "before"
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    return target


def _command(output: Path, cache: Path, adaptive: bool, k_max: int, looks: str) -> list[str]:
    model = model_path("smollm2")
    argv = [
        sys.executable, "-m", "analysis.cli", "eval", "--model", "capcal-hf",
        "--model_args", f"pretrained={model},seed={SEED},cache_path={cache}", "--tasks", TASK,
        "--metadata", json.dumps({"arithmetic_per_level": PER_LEVEL}), "--repeats", str(k_max),
        "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}", "--apply_chat_template", "--device", "cpu",
        "--log_samples", "--output_path", str(output),
    ]  # fmt: skip
    return [*argv, "--adaptive", "--looks", looks] if adaptive else argv


def _timed(argv: list[str], code: Path, log: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with log.open("w") as out:
        subprocess.run(argv, cwd=code, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = log.read_text()
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "passes": text.count("capcal eval: adaptive look "),
        "load_average": load_average(),
    }


def _records(output: Path) -> dict[int, dict]:
    (samples,) = output.rglob(f"samples_{TASK}_*.jsonl")
    return {r["doc_id"]: r for r in map(json.loads, samples.read_text(encoding="utf-8").splitlines())}


def _drawn(output: Path) -> int:
    return sum(len(record["correctness"]) for record in _records(output).values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="git revision of the look-by-look code")
    parser.add_argument("--root", required=True, help="folder for the runs (emptied subfolders per run)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--k_max", type=int, default=32, help="--repeats of every run")
    parser.add_argument("--looks", default="8,16", help="--looks of the adaptive runs (k_max appended)")
    parser.add_argument("--no_fixed", action="store_true", help="leave out the fixed-k reference runs")
    parser.add_argument("--output", help="JSON result file")
    args = parser.parse_args(argv)
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        codes = {"before": _export(args.before, Path(scratch)), "after": REPO}
        runs: list[dict] = []
        for round_number in range(args.rounds):
            variants = [("before", codes["before"], True), ("after", codes["after"], True)]
            for name, code, adaptive in variants + ([] if args.no_fixed else [("fixed", REPO, False)]):
                folder = root / f"{name}-{round_number}"
                folder.mkdir(parents=True, exist_ok=True)
                timing = _timed(
                    _command(folder / "out", folder / "cache.sqlite", adaptive, args.k_max, args.looks),
                    code,
                    folder / "log.txt",
                )
                runs.append(
                    {"code": name, "round": round_number, **timing, "samples": _drawn(folder / "out")}
                )
                print(json.dumps(runs[-1]), flush=True)
    same = all(
        {d: (r["resps"], r["correctness"]) for d, r in _records(root / f"before-{i}" / "out").items()}
        == {d: (r["resps"], r["correctness"]) for d, r in _records(root / f"after-{i}" / "out").items()}
        for i in range(args.rounds)
    )
    summary = {}
    for name in ("before", "after", "fixed"):
        mine = [run for run in runs if run["code"] == name]
        if not mine:
            continue
        summary[name] = {key: sum(run[key] for run in mine) / len(mine) for key in ("wall_s", "cpu_s")}
    ratios = [
        {
            key: next(r[key] for r in runs if r["code"] == "after" and r["round"] == i)
            / next(r[key] for r in runs if r["code"] == "before" and r["round"] == i)
            for key in ("wall_s", "cpu_s")
        }
        for i in range(args.rounds)
    ]
    result = {
        "command": _command(Path("OUT"), Path("CACHE"), True, args.k_max, args.looks)[1:],
        "before": args.before,
        "runs": runs,
        "mean": summary,
        "after_over_before": ratios,
        "same_records": same,
        "machine": machine(["torch", "transformers", "lm_eval"]),
    }
    print(json.dumps({"mean": summary, "after_over_before": ratios, "same_records": same}, indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
