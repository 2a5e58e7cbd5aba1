"""Log-likelihood throughput: stock lm-eval ``hf`` vs ``capcal-hf`` on real self-check and P(True) requests.

First samples k responses per question of ``capcal_arithmetic`` (all five levels, ``--per-level`` questions
each) with capcal-hf into a scratch folder: the earlier run that Self-Calibration's self-check scores. Then
lm-eval builds the requests of ``capcal_arithmetic_selfcheck`` (2k per question: " Yes"/" No" after each
response) and ``capcal_arithmetic_ptrue`` (2 per question) with its task API, with and without the chat
template, and each backend's ``loglikelihood`` is called on the same requests at the same batch size and timed
(wall and CPU seconds). Prints requests/s, capcal-hf's ratio to stock hf, the largest difference between the
two backends' log-likelihoods and whether every ``is_greedy`` agrees. Writes the numbers and the machine
(CPU, cores, load) to a JSON file. Run with one thread for stable numbers on a shared machine:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/loglikelihood_throughput.py --per-level 4 --k 16
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine_info import load_average  # noqa: E402
from sampling_throughput import cpu_seconds_with_children, machine  # noqa: E402

SAMPLING_TASK = "capcal_arithmetic"
SLICES = {"selfcheck": "capcal_arithmetic_selfcheck", "ptrue": "capcal_arithmetic_ptrue"}
BACKENDS = ("hf", "capcal-hf")


@dataclass
class Measurement:
    slice: str
    chat_template: bool
    backend: str
    batch_size: int
    requests: int
    distinct_contexts: int
    mean_context_tokens: float
    seconds: float
    cpu_seconds: float
    requests_per_second: float


def make_lm(backend: str, model_path: str, batch_size: int):
    if backend == "hf":
        from lm_eval.models.huggingface import HFLM

        return HFLM(pretrained=model_path, batch_size=batch_size, device="cpu", dtype="float32")
    from capcal_models.hf import CapcalHFLM

    return CapcalHFLM(
        pretrained=model_path, batch_size=batch_size, device="cpu", dtype="float32", sample_cache=False
    )


def earlier_run(model_path: str, per_level: int, k: int, seed: int, scratch: Path) -> Path:
    """The samples file of a capcal-hf run of capcal_arithmetic (k responses per question, chat template)."""
    from analysis.evaluation import evaluate

    lm = make_lm("capcal-hf", model_path, 64)
    results = evaluate(
        lm,
        SAMPLING_TASK,
        repeats=k,
        metadata={"arithmetic_per_level": per_level},
        output_path=scratch,
        log_samples=True,
        apply_chat_template=True,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
        bootstrap_iters=0,
        device="cpu",
    )
    return results["capcal_files"]["samples"][SAMPLING_TASK]


def build_requests(task_name: str, samples_file: Path, per_level: int, chat_template: bool, lm) -> list:
    """lm-eval's requests of one confidence task, built by the task itself (as the evaluator builds them)."""
    from capcal_tasks.task_manager import CapcalTaskManager

    metadata = {"samples_file": str(samples_file), "arithmetic_per_level": per_level}
    task = CapcalTaskManager(include_defaults=False, metadata=metadata).load([task_name])["tasks"][task_name]
    task.build_all_requests(
        apply_chat_template=chat_template,
        chat_template=lm.apply_chat_template if chat_template else None,
        tokenizer_name=lm.tokenizer_name,
    )
    return task.instances


def timed(lm, requests: list) -> tuple[list, float, float]:
    start, start_cpu = time.perf_counter(), cpu_seconds_with_children()
    results = lm.loglikelihood(requests, disable_tqdm=True)
    return results, time.perf_counter() - start, cpu_seconds_with_children() - start_cpu


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model-path", help="HF checkpoint (default: capcal's prepared SmolLM2)")
    parser.add_argument("--per-level", type=int, default=4, help="questions per arithmetic level (5 levels)")
    parser.add_argument("--k", type=int, default=16, help="responses per question (default 16)")
    parser.add_argument("--batch-size", type=int, default=16, help="batch size of both backends (default 16)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--slices", default=",".join(SLICES), help=f"comma-separated, of {list(SLICES)}")
    parser.add_argument(
        "--chat-template", choices=("on", "off", "both"), default="both", help="default: both"
    )
    parser.add_argument("--output", help="JSON results file (default benchmarks/results/<time>.json)")
    args = parser.parse_args(argv)

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for variable in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "DISABLE_MULTIPROC"):
        os.environ.setdefault(variable, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if args.model_path is None:
        from capcal_models.prepare import prepare_model

        args.model_path = str(prepare_model("smollm2").path)
    slices = [name for name in args.slices.split(",") if name]
    if unknown := [name for name in slices if name not in SLICES]:
        parser.error(f"unknown slice: {unknown}")
    chat_settings = {"on": [True], "off": [False], "both": [True, False]}[args.chat_template]

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    output = Path(args.output or REPO / "benchmarks" / "results" / f"loglikelihood_throughput-{started}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "started_utc": started,
        "settings": {key: value for key, value in vars(args).items() if key != "output"},
        "machine": machine(),
        "load_during_run": [load_average()],
        "measurements": [],
        "agreement": [],
    }
    measurements: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="capcal-loglikelihood-bench-") as scratch:
        print("sampling the earlier run ...", file=sys.stderr, flush=True)
        samples_file = earlier_run(args.model_path, args.per_level, args.k, args.seed, Path(scratch))
        result["load_during_run"].append(load_average())
        lms = {backend: make_lm(backend, args.model_path, args.batch_size) for backend in BACKENDS}
        tokenizer = lms["hf"].tokenizer
        for slice_name in slices:
            for chat in chat_settings:
                requests = build_requests(SLICES[slice_name], samples_file, args.per_level, chat, lms["hf"])
                contexts = {request.args[0] for request in requests}
                context_tokens = [len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in contexts]
                answers = {}
                for backend in BACKENDS:
                    print(f"[{slice_name}, chat {chat}] {backend} ...", file=sys.stderr, flush=True)
                    answers[backend], seconds, cpu_seconds = timed(lms[backend], requests)
                    measurement = Measurement(
                        slice=slice_name,
                        chat_template=chat,
                        backend=backend,
                        batch_size=args.batch_size,
                        requests=len(requests),
                        distinct_contexts=len(contexts),
                        mean_context_tokens=sum(context_tokens) / len(context_tokens),
                        seconds=seconds,
                        cpu_seconds=cpu_seconds,
                        requests_per_second=len(requests) / seconds,
                    )
                    measurements.append(measurement)
                    result["measurements"].append(asdict(measurement))
                    result["load_during_run"].append(load_average())
                    print(f"  {measurement}", file=sys.stderr, flush=True)
                pairs = list(zip(answers["hf"], answers["capcal-hf"], strict=True))
                result["agreement"].append(
                    {
                        "slice": slice_name,
                        "chat_template": chat,
                        "max_abs_loglikelihood_difference": max(abs(a[0] - b[0]) for a, b in pairs),
                        "is_greedy_disagreements": sum(a[1] != b[1] for a, b in pairs),
                    }
                )
                output.write_text(json.dumps(result, indent=1), encoding="utf-8")  # partial results survive
                gc.collect()
    print_table(measurements, result["agreement"])
    output.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"results: {output}")
    return result


def print_table(measurements: list[Measurement], agreement: list[dict]) -> None:
    header = (
        f"{'slice':9} {'chat':5} {'backend':9} {'batch':>5} {'requests':>8} {'contexts':>8} {'ctx tok':>7} "
        f"{'wall s':>7} {'req/s':>6} {'speed-up':>8} {'cpu s':>7} {'req/cpu-s':>9} {'cpu speed-up':>12} "
        f"{'max |diff|':>10} {'greedy diff':>11}"
    )
    print(header)
    print("-" * len(header))
    stock = {(m.slice, m.chat_template): m for m in measurements if m.backend == "hf"}
    agrees = {(a["slice"], a["chat_template"]): a for a in agreement}
    for m in measurements:
        base = stock[(m.slice, m.chat_template)]
        per_cpu = m.requests / m.cpu_seconds
        match = agrees.get((m.slice, m.chat_template)) if m.backend != "hf" else None
        print(
            f"{m.slice:9} {m.chat_template!s:5} {m.backend:9} {m.batch_size:5d} {m.requests:8d} "
            f"{m.distinct_contexts:8d} {m.mean_context_tokens:7.1f} {m.seconds:7.1f} "
            f"{m.requests_per_second:6.2f} {m.requests_per_second / base.requests_per_second:7.2f}x "
            f"{m.cpu_seconds:7.1f} {per_cpu:9.2f} {per_cpu / (base.requests / base.cpu_seconds):11.2f}x "
            + (
                f"{match['max_abs_loglikelihood_difference']:10.2e} {match['is_greedy_disagreements']:11d}"
                if match
                else ""
            )
        )


if __name__ == "__main__":
    main()
