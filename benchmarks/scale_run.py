"""Scale benchmark: ``load_run``, ``capcal check`` and ``capcal report`` on a synthetic lm-eval run of
14,000 MMLU questions x 100 sampled responses of ~4 KB each (1.4 million responses).

The run is written in lm-eval 0.4.13's exact ``--log_samples`` format, as ``capcal_mmlu`` logs it
(``lm_eval.evaluator`` builds the record, ``EvaluationTracker.save_results_samples`` writes it with
``json.dumps(..., ensure_ascii=False)``): ``doc_id``, the processed ``doc`` (question, subject, choices,
answer, question_id, question_text, gold_answer), ``target``, ``arguments`` (the chat prompt and the
generation kwargs), ``resps`` and ``filtered_resps`` (both holding the k responses: the keep-all filter),
``filter``, ``metrics``, ``doc_hash`` / ``prompt_hash`` / ``target_hash`` (sha256 as lm-eval computes
them) and capcal's per-record fields from ``capcal_tasks.sampling.score_responses`` (extracted answers,
correctness, n_samples, expected accuracy, pass@m, majority vote), plus the results file with the task's
config (``repeats: 100``, capcal's metadata), ``n-samples`` and ``capcal_model``.

Synthetic data (seeded): mu ~ Beta(0.5, 0.7) per question; each response is a ~4 KB reasoning text (64
pre-made bodies of lower-case words, LaTeX braces, quotes, newlines and non-ASCII characters, each response
with its own prefix) ending in ``\\boxed{X}``: the gold letter with probability mu, else a wrong letter, or
(5%) no letter at all. Every extracted answer is what the task's own extractor finds in the response (checked
once per body and ending when writing), so the records pass ``capcal check``'s re-check.

Each measurement runs in its own child process (``python -c``: ``load_run``, and ``check_run`` and
``build_report``, which ``capcal check`` and ``capcal report`` call); wall time is the child's whole life
(interpreter start and imports included), CPU time its ``ru_utime + ru_stime`` and the peak memory its
``ru_maxrss`` (from ``os.wait4``): on a shared machine the CPU time depends much less on the load than the
wall time. Run (scratch space: ~12 GB at full size, deleted at the end unless ``--keep``)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/scale_run.py --scratch /tmp/capcal_scale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from machine_info import machine  # noqa: E402  (benchmarks/machine_info.py)

from capcal_tasks.answers.choices import LETTERS, extract_choice_letter, format_choices  # noqa: E402
from capcal_tasks.prompts import CHOICE_INSTRUCTION, sampling_prompt  # noqa: E402
from capcal_tasks.question_id import question_id  # noqa: E402
from capcal_tasks.sampling import score_responses  # noqa: E402

TASK = "capcal_mmlu"
DATE = "2026-11-23T12-00-00.000000"
MODEL = "/models/synthetic-8b"
MODEL_FOLDER = "__models__synthetic-8b"
GEN_KWARGS = {
    "until": [],
    "do_sample": True,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "max_gen_toks": 1024,
}
CHAT = "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n"
CHAT += "<|im_start|>assistant\n"
WORDS = (
    "the of and to in is that for it as with was on be by this are or from at which but not have an they "
    "we you one all were there their can has more if will would about so these other into its some than "
    "then them two may only could first any my now such like our over also new most see way well because "
    "each just those people how too little state good very make world still own long great even between "
    "under never same another know while last might us off always next end both few take left cell energy "
    "force mass law court market price theory model value rate sum product ratio angle area root"
).split()
SUBJECTS = ("anatomy", "astronomy", "college_physics", "econometrics", "high_school_biology", "virology")


def _bodies(count: int, size: int, rng: np.random.Generator) -> list[str]:
    """``count`` reasoning texts of about ``size`` UTF-8 bytes: lower-case words (no standalone A-D, no
    'answer'), LaTeX with braces, quotes, newlines and non-ASCII characters."""
    bodies = []
    extras = ["\\frac{1}{2}", "$x^{2} + 3x$", '"so-called"', "×", "é", "—", "\n\n", "(i)", "2.5e-3"]
    for _ in range(count):
        parts, length = [], 0
        while length < size:
            if rng.random() < 0.08:
                part = extras[rng.integers(len(extras))]
            else:
                part = WORDS[rng.integers(len(WORDS))]
            parts.append(part)
            length += len(part.encode()) + 1
        bodies.append(" ".join(parts)[:size].rstrip())
    return bodies


ENDINGS = {letter: f" Therefore, the final answer is \\boxed{{{letter}}}." for letter in LETTERS}
ENDINGS[None] = " i cannot decide between them."


def _escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _doc(index: int, rng: np.random.Generator) -> dict:
    subject = SUBJECTS[index % len(SUBJECTS)]
    question = (
        f"Question {index} of the synthetic {subject.replace('_', ' ')} set: which of the following "
        "statements about the relation between the quantities described in the passage above is true?"
    )
    choices = [
        f"statement {c.lower()} about quantity {index}, stated at some length for realism" for c in LETTERS
    ]
    answer = int(rng.integers(4))
    text = format_choices(question, choices)
    return {
        "question": question,
        "subject": subject,
        "choices": choices,
        "answer": answer,
        "question_id": question_id("mmlu", text),
        "question_text": text,
        "gold_answer": LETTERS[answer],
    }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_run(root: Path, questions: int, k: int, response_bytes: int, seed: int = 0) -> dict:
    """Write ``<root>/<model>/samples_capcal_mmlu_<date>.jsonl`` and its results file; the JSON text of the
    responses is assembled directly (pre-escaped bodies). Returns sizes and the time taken."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    bodies = _bodies(64, response_bytes - 60, rng)
    for body in bodies:  # the extractor finds exactly the ending's letter (or nothing) in every combination
        for letter, ending in ENDINGS.items():
            found = extract_choice_letter(f"[0.0] {body}{ending}")
            assert found == letter, (found, letter)
    escaped_bodies = [_escaped(body) for body in bodies]
    escaped_endings = {letter: _escaped(ending) for letter, ending in ENDINGS.items()}
    folder = root / MODEL_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    samples = folder / f"samples_{TASK}_{DATE}.jsonl"
    mu = rng.beta(0.5, 0.7, questions)
    scores = []
    with samples.open("w", encoding="utf-8") as handle:
        for index in range(questions):
            doc = _doc(index, rng)
            gold = doc["gold_answer"]
            correct = rng.random(k) < mu[index]
            wrong = rng.integers(0, 3, k)
            unparsed = rng.random(k) < 0.05
            others = [letter for letter in LETTERS if letter != gold]
            letters = [gold if correct[j] else (None if unparsed[j] else others[wrong[j]]) for j in range(k)]
            which = rng.integers(0, len(bodies), k)
            resps = ", ".join(
                f'"[{index}.{j}] {escaped_bodies[which[j]]}{escaped_endings[letters[j]]}"' for j in range(k)
            )
            record = score_responses(letters, extract=lambda a: a, judge=lambda a, g=gold: a == g)
            scores.append(record["expected_accuracy"])
            prompt = CHAT.format(sampling_prompt(doc["question_text"], CHOICE_INSTRUCTION))
            head = {
                "doc_id": index,
                "doc": doc,
                "target": gold,
                "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": GEN_KWARGS}},
            }
            tail = {
                "filter": "all_responses",
                "metrics": list(record),
                "doc_hash": _sha(json.dumps(doc, indent=2, ensure_ascii=False)),
                "prompt_hash": _sha(prompt),
                "target_hash": _sha(gold),
                **record,
            }
            head_text = json.dumps(head, ensure_ascii=False)[:-1]
            tail_text = json.dumps(tail, ensure_ascii=False)[1:]
            handle.write(f'{head_text}, "resps": [[{resps}]], "filtered_resps": [[{resps}]], {tail_text}\n')
    results = _results(questions, k, float(np.mean(scores)))
    (folder / f"results_{DATE}.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return {"seconds": time.perf_counter() - start, "bytes": samples.stat().st_size, "path": str(samples)}


def _results(questions: int, k: int, mean: float) -> dict:
    """The results file lm-eval 0.4.13 writes for the run (the task's config as dumped, capcal_model)."""
    metrics = ["expected_accuracy", "majority_vote_accuracy", "correctness", "extracted_answers", "n_samples"]
    levels = [2**i for i in range(11)]
    metric_list = [{"metric": m, "aggregation": "mean", "higher_is_better": True} for m in metrics]
    metric_list += [
        {"metric": f"pass_at_{m}", "aggregation": "mean", "higher_is_better": True} for m in levels
    ]
    return {
        "results": {
            TASK: {
                "alias": TASK,
                "expected_accuracy,all_responses": mean,
                "expected_accuracy_stderr,all_responses": "N/A",
            }
        },
        "group_subtasks": {},
        "configs": {
            TASK: {
                "task": TASK,
                "tag": ["capcal_sampling"],
                "dataset_path": "cais/mmlu",
                "dataset_name": "all",
                "test_split": "test",
                "doc_to_target": "gold_answer",
                "output_type": "generate_until",
                "repeats": k,
                "generation_kwargs": GEN_KWARGS,
                "filter_list": [
                    {
                        "name": "all_responses",
                        "filter": [{"function": "custom", "filter_fn": "<function keep_all_responses>"}],
                    }
                ],
                "metric_list": metric_list,
                "metadata": {
                    "version": 1.0,
                    "capcal_dataset": "mmlu",
                    "capcal_task": "sampling",
                    "capcal_role": "evaluation",
                    "capcal_calibration_tasks": ["capcal_mmlu_validation"],
                },
            }
        },
        "versions": {TASK: 1.0},
        "n-shot": {TASK: 0},
        "higher_is_better": {TASK: {m: True for m in metrics}},
        "n-samples": {TASK: {"original": questions, "effective": questions}},
        "config": {"model": "capcal-vllm", "model_args": {"pretrained": MODEL}, "batch_size": "auto"},
        "lm_eval_version": "0.4.13",
        "capcal_model": {"fingerprint": "sha256:" + "5" * 64, "label": MODEL},
        "model_name": MODEL,
        "model_name_sanitized": MODEL_FOLDER,
        "total_evaluation_time_seconds": "36000.0",
    }


CHILD = {
    "load_run": "from analysis.runs import load_run\nprint(len(load_run(sys.argv[1])))",
    # load_run with the task checker's re-check replaced by a no-op (benchmark only): what the re-check costs
    "load_run_no_recheck": (
        "import analysis.runs.records\nanalysis.runs.records.recheck_sampling_record = lambda *a: None\n"
        "print(len(analysis.runs.load_run(sys.argv[1])))"
    ),
    # what `capcal check DIR` and `capcal report DIR --output OUT` call (analysis/cli/ only parses)
    "check": "from analysis.runs.completeness import check_run\nprint(check_run(sys.argv[1]).to_string())",
    "report": "from analysis.report import build_report\nprint(build_report([sys.argv[1]], sys.argv[2]))",
}


def measure(step: str, run_dir: Path, scratch: Path) -> dict:
    """Run ``step`` on ``run_dir`` in a child process: wall time of the child's whole life (interpreter start
    and imports included), its CPU time (user + system) and peak resident set size (``ru_utime``,
    ``ru_stime``, ``ru_maxrss`` from ``os.wait4``), the exit status and the load average around it."""
    command = [
        sys.executable,
        "-c",
        "import sys\n" + CHILD[step],
        str(run_dir),
        str(scratch / f"report_{run_dir.name}"),
    ]
    log = scratch / f"{run_dir.name}_{step}.log"
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONPATH": str(REPO)}
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with log.open("w") as out:
        child = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    return {
        "step": step,
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024.0,
        "exit": child.returncode,
        "load": f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}",
        "log": str(log),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", type=Path, required=True, help="folder for the runs (outside the repo)")
    parser.add_argument("--questions", type=int, default=14_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--response-bytes", type=int, default=4000)
    parser.add_argument("--fractions", default="0.1,1", help="sizes to measure, as fractions of --questions")
    parser.add_argument("--steps", default="load_run,load_run_no_recheck,check,report")
    parser.add_argument("--keep", action="store_true", help="keep the generated runs")
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    if REPO in args.scratch.resolve().parents:
        parser.error("--scratch must be outside the repository")
    args.scratch.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    print(f"scratch: {args.scratch}: {shutil.disk_usage(args.scratch).free / 2**30:.0f} GiB free", flush=True)
    rows, sizes = [], {}
    try:
        for fraction in [float(f) for f in args.fractions.split(",")]:
            questions = max(1, round(args.questions * fraction))
            run_dir = args.scratch / f"run_{questions}"
            shutil.rmtree(run_dir, ignore_errors=True)
            written = write_run(run_dir, questions, args.k, args.response_bytes)
            sizes[questions] = written
            print(
                f"wrote {questions} x {args.k} responses: {written['bytes'] / 2**30:.2f} GiB of samples in "
                f"{written['seconds']:.0f} s",
                flush=True,
            )
            for step in args.steps.split(","):
                row = {
                    "questions": questions,
                    "responses": questions * args.k,
                    **measure(step, run_dir, args.scratch),
                }
                rows.append(row)
                print(
                    f"  {step:<20} {row['seconds']:7.1f} s  cpu {row['cpu_seconds']:7.1f} s  "
                    f"{row['peak_rss_mib']:7.0f} MiB  "
                    f"exit {row['exit']}  load {row['load']}",
                    flush=True,
                )
            if not args.keep:
                shutil.rmtree(run_dir)
    finally:
        if not args.keep:
            for questions in sizes:
                shutil.rmtree(args.scratch / f"run_{questions}", ignore_errors=True)
    _table(rows, sizes)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "sizes": sizes, "rows": rows}, indent=1))
    return 0 if all(row["exit"] == 0 for row in rows) else 1


def _table(rows: list[dict], sizes: dict) -> None:
    """Markdown table: each step at each size, with the growth from the smallest to the largest size."""
    smallest, largest = min(sizes), max(sizes)
    print(
        "\n| step | questions | responses | samples file | wall | CPU | peak RSS | wall ratio | CPU ratio |"
        " RSS ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    first = {row["step"]: row for row in rows if row["questions"] == smallest}
    for row in rows:
        base = first[row["step"]]
        ratios = ("", "", "")
        if row["questions"] == largest and largest != smallest:
            ratios = tuple(
                f"{row[key] / base[key]:.1f}x" for key in ("seconds", "cpu_seconds", "peak_rss_mib")
            )
        print(
            f"| {row['step']} | {row['questions']:,} | {row['responses']:,} | "
            f"{sizes[row['questions']]['bytes'] / 2**30:.2f} GiB | {row['seconds']:.1f} s | "
            f"{row['cpu_seconds']:.1f} s | {row['peak_rss_mib']:.0f} MiB | " + " | ".join(ratios) + " |"
        )
    full = [
        row for row in rows if row["questions"] == largest and row["step"] in ("load_run", "check", "report")
    ]
    met = all(row["seconds"] <= 180 and row["peak_rss_mib"] <= 4096 and row["exit"] == 0 for row in full)
    print(f"\ntargets at {largest:,} questions (<= 3 min, <= 4 GiB each): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    raise SystemExit(main())
