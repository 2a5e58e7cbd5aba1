"""The CPU proxy of GPU decoding speed: operators (and host reads) one decode step dispatches, per engine.

On a GPU a small model's decode step is launch-bound: its time is about the number of operators (kernels) it
dispatches, plus a stall at every host read of a device value. So a step's operator count, measured on the
CPU, is the proxy of its GPU time that any machine can measure. This script runs ``capcal_arithmetic``
through ``analysis.evaluation.evaluate`` (what ``capcal eval`` runs) with stock lm-eval ``hf`` and with
capcal-hf (``sample_cache=False``), on a random-weight model of a real architecture shrunk to a few layers
(``tiny_model``: SmolLM2's config, 2 layers, hidden 64, its tokenizer), and counts with torch's profiler
(CPU) every operator dispatched while the model samples:

- ``operators``: every profiler event (nested operators included, as the profiler lists them);
- ``host_reads``: operators and calls that read a tensor's value on the host, a device synchronisation on a
  GPU: ``aten::_local_scalar_dense`` (``.item()``, ``bool(tensor)``), ``aten::nonzero``,
  ``aten::masked_select``, ``aten::equal``, and ``Tensor.tolist()`` / ``Tensor.numpy()`` calls (counted by
  wrapping them: on the CPU they dispatch no operator);
- per decode step: each configuration runs twice, with ``max_new_tokens`` and with half as many, and the
  differences are divided by the difference in decode steps (model calls with one token per row), so the
  prefill, loading and setup cancel out. ``decode_steps``: the model calls of the longer run.

Times are wall seconds of the sampling phase of a third run, without the profiler; per decode step: that
time over its decode steps (prefills included). capcal-hf runs with ``attention=batched``, what it uses on
a GPU, unless ``--capcal-attention exact`` (its CPU default).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/decode_step_ops.py --batch-sizes 64 256
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import machine_info  # noqa: E402  (benchmarks/machine_info.py: the machine record of every benchmark)

HOST_READ_OPERATORS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::equal")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def tiny_model(
    source: str | Path,
    target: str | Path,
    layers: int | None = 2,
    hidden: int | None = 64,
    seed: int = 0,
    dtype: str = "float32",
) -> Path:
    """A random-weight model with ``source``'s architecture and tokenizer, saved (safetensors) in ``target``:
    shrunk to ``layers`` layers of width ``hidden`` (head dimension 16, two key/value heads, MLP 4 x hidden),
    or at full size when both are None. ``source`` needs only the config and tokenizer files. The same seed
    gives the same weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    source, target = Path(source), Path(target)
    config = AutoConfig.from_pretrained(source)
    if layers is not None and hidden is not None:
        heads = max(2, hidden // 16)
        config.update(
            {
                "num_hidden_layers": layers,
                "hidden_size": hidden,
                "intermediate_size": 4 * hidden,
                "num_attention_heads": heads,
                "num_key_value_heads": 2 if heads % 2 == 0 else 1,
                "head_dim": hidden // heads,
            }
        )
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:layers]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, target / name)
    return target


@contextlib.contextmanager
def counted_host_reads(counts: dict[str, int]) -> Iterator[None]:
    """Count ``Tensor.tolist()`` and ``Tensor.numpy()`` calls in ``counts`` while the block runs."""
    import torch

    originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy")}

    def counting(name: str, method: Callable) -> Callable:
        def wrapper(self, *args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return method(self, *args, **kwargs)

        return wrapper

    for name, method in originals.items():
        setattr(torch.Tensor, name, counting(name, method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(torch.Tensor, name, method)


def _decode_steps(model, counter: dict[str, int]):
    def count(module, args, kwargs) -> None:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if input_ids is not None and input_ids.shape[-1] == 1:
            counter["decode_steps"] += 1

    return model.register_forward_pre_hook(count, with_kwargs=True)


def run_once(
    engine: str,
    model_path: str | Path,
    batch_size: int,
    max_new_tokens: int,
    *,
    questions: int = 16,
    k: int = 16,
    profile: bool = True,
    device: str = "cpu",
    model_args: dict | None = None,
) -> dict:
    """Sample ``capcal_arithmetic`` (``questions`` x ``k``) with ``engine`` ("hf" or "capcal-hf"); returns the
    sampling phase's seconds, decode steps, generated tokens and, with ``profile``, its operator counts."""
    import torch
    from lm_eval.api.registry import get_model

    from analysis.evaluation import evaluate

    arguments = {
        "pretrained": str(model_path),
        "batch_size": batch_size,
        "device": device,
        "dtype": "float32",
    }
    if engine == "capcal-hf":
        arguments["sample_cache"] = False
    arguments.update(model_args or {})
    lm = get_model(engine)(**arguments)
    record: dict = {"decode_steps": 0}
    hook = _decode_steps(lm.model, record)
    original = lm.generate_until

    def generate_until(requests, *args, **kwargs):
        reads: dict[str, int] = {}
        profiler = (
            torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            if profile
            else contextlib.nullcontext()
        )
        start = time.perf_counter()
        with profiler as prof, counted_host_reads(reads):
            outputs = original(requests, *args, **kwargs)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
        record["seconds"] = time.perf_counter() - start
        record["samples"] = len(outputs)
        record["generated_tokens"] = sum(len(lm.tok_encode(text)) for text in outputs)
        if profile:
            names: dict[str, int] = {}
            for event in prof.events():
                names[event.name] = names.get(event.name, 0) + 1
            record["operators"] = sum(names.values())
            record["host_read_operators"] = {name: names.get(name, 0) for name in HOST_READ_OPERATORS}
            record["host_read_calls"] = reads
            record["host_reads"] = sum(record["host_read_operators"].values()) + sum(reads.values())
        return outputs

    lm.generate_until = generate_until
    evaluate(
        lm,
        ["capcal_arithmetic"],
        repeats=k,
        limit=questions,
        gen_kwargs=f"max_gen_toks={max_new_tokens}",
        apply_chat_template=True,
        log_samples=False,
        bootstrap_iters=0,
        device=device,
        random_seed=0,
        numpy_random_seed=0,
        torch_random_seed=0,
        fewshot_random_seed=0,
    )
    hook.remove()
    return record


def per_step(engine: str, model_path: str | Path, batch_size: int, max_new_tokens: int, **kwargs) -> dict:
    """Operators, host reads and seconds per decode step: runs of ``max_new_tokens`` and half as many,
    differenced (see the module docstring), with the longer run's totals."""
    short_tokens = max(1, max_new_tokens // 2)
    # a warm-up run: one-time work (capcal-hf's batch-invariant row floor probe) is not a step's
    run_once(engine, model_path, batch_size, 2, **dict(kwargs, profile=False, questions=1, k=1))
    long = run_once(engine, model_path, batch_size, max_new_tokens, **kwargs)
    short = run_once(engine, model_path, batch_size, short_tokens, **kwargs)
    steps = long["decode_steps"] - short["decode_steps"]
    result = {"engine": engine, "batch_size": batch_size, "max_new_tokens": max_new_tokens, "run": long}
    result["steps_difference"] = steps
    if kwargs.get("profile", True):
        result["operators_per_step"] = (long["operators"] - short["operators"]) / steps
        result["host_reads_per_step"] = (long["host_reads"] - short["host_reads"]) / steps
    timed = run_once(engine, model_path, batch_size, max_new_tokens, **dict(kwargs, profile=False))
    result["seconds"] = timed["seconds"]
    result["seconds_per_step"] = timed["seconds"] / timed["decode_steps"]
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--engines", nargs="+", default=["hf", "capcal-hf"])
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--capcal-attention", choices=["batched", "exact"], default="batched")
    parser.add_argument("--output", help="write the results (JSON) here")
    args = parser.parse_args(argv)
    import torch

    from capcal_models.prepare import prepare_model

    torch.set_num_threads(1)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        model_path = tiny_model(prepare_model("smollm2").path, folder, args.layers, args.hidden)
        for batch_size in args.batch_sizes:
            for engine in args.engines:
                batched = engine == "capcal-hf" and args.capcal_attention == "batched"
                extra = {"attention": "batched"} if batched else {}
                result = per_step(
                    engine,
                    model_path,
                    batch_size,
                    args.max_new_tokens,
                    questions=args.questions,
                    k=args.k,
                    model_args=extra,
                )
                results.append(result)
                run = result["run"]
                print(
                    f"{engine:10s} batch {batch_size:4d}:",
                    f"{result['operators_per_step']:8.1f} operators/step,",
                    f"{result['host_reads_per_step']:6.2f} host reads/step,",
                    f"{1000 * result['seconds_per_step']:7.2f} ms/step;",
                    f"whole run {run['operators']} operators,",
                    f"{run['host_reads']} host reads, {run['decode_steps']} decode steps,",
                    f"{run['generated_tokens']} tokens, {result['seconds']:.2f} s",
                    flush=True,
                )
    record = {"machine": machine_info.machine(["torch", "transformers", "lm_eval"]), "results": results}
    if args.output:
        Path(args.output).write_text(json.dumps(record, indent=2), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
