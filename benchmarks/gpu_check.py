"""The GPU check of issue 46: stock lm-eval ``hf`` against capcal-hf on one GPU, the issue's table and ratios.

Runs ``capcal_arithmetic`` (``--questions`` questions x k = ``--k``, ``--max-new-tokens`` new tokens, the
chat template, bfloat16) through ``analysis.evaluation.evaluate`` with stock ``hf`` and with capcal-hf
(``sample_cache=False``; ``attention`` auto, which is ``batched`` on a GPU) at each batch size, on a
random-weight model of Qwen2.5-0.5B's architecture (random weights almost never emit a stop token, so every
run generates the same number of tokens), and prints per engine and batch size the sampling phase's seconds,
samples/s and milliseconds per decode step, then capcal-hf's speed-up over stock hf at each batch size and
at each engine's best batch size. Defaults: the issue's shape (64 questions, k = 16, 128 new tokens, batch
sizes 64 and 256), about 5 minutes on an H100 before the fix (the issue's times: 306 s of sampling).

On a bare machine (one GPU, PyTorch, and capcal's other packages installed from wheels brought along; no
hub access): first pack the architecture's config and tokenizer where the model is prepared,

    python benchmarks/gpu_check.py --pack gpu_model    # from `capcal models path qwen2.5-coder-0.5b`

carry the folder ``gpu_model`` (12 MB) and the checkout, then on the GPU machine

    OMP_NUM_THREADS=4 python benchmarks/gpu_check.py --model-source gpu_model --output gpu_check.json

The random weights are made there (seed 0, bfloat16, about 1 GB). ``--tiny`` runs the same script on the
CPU at a tiny size (2 layers, hidden 64; 4 questions x k = 4, 8 new tokens, batch sizes 4 and 16) to test
it; its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import decode_step_ops  # noqa: E402  (benchmarks/decode_step_ops.py: the tiny model, one timed run)
import machine_info  # noqa: E402

ENGINES = ("hf", "capcal-hf")
PACKED_FILES = ("config.json", *decode_step_ops.TOKENIZER_FILES)


def pack(target: str | Path, source: str | Path | None = None) -> Path:
    """Copy the architecture's config and tokenizer files (no weights) from ``source`` (default: the prepared
    qwen2.5-coder-0.5b) into ``target``."""
    if source is None:
        from capcal_models.prepare import prepare_model

        source = prepare_model("qwen2.5-coder-0.5b").path
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    for name in PACKED_FILES:
        if (Path(source) / name).is_file():
            shutil.copy(Path(source) / name, target / name)
    return target


def run_table(
    model_path: str | Path,
    batch_sizes: list[int],
    questions: int,
    k: int,
    max_new_tokens: int,
    device: str,
    dtype: str,
) -> list[dict]:
    """One timed sampling run per engine and batch size (``decode_step_ops.run_once``, no profiler)."""
    rows = []
    for batch_size in batch_sizes:
        for engine in ENGINES:
            run = decode_step_ops.run_once(
                engine,
                model_path,
                batch_size,
                max_new_tokens,
                questions=questions,
                k=k,
                profile=False,
                device=device,
                model_args={"dtype": dtype},
            )
            row = {
                "engine": engine,
                "batch_size": batch_size,
                "seconds": run["seconds"],
                "samples": run["samples"],
                "samples_per_second": run["samples"] / run["seconds"],
                "decode_steps": run["decode_steps"],
                "ms_per_step": 1000 * run["seconds"] / max(1, run["decode_steps"]),
                "generated_tokens": run["generated_tokens"],
            }
            rows.append(row)
            print(
                f"{engine:10s} batch {batch_size:4d}: {row['seconds']:7.1f} s,",
                f"{row['samples_per_second']:7.1f} samples/s, {row['decode_steps']} decode steps,",
                f"{row['ms_per_step']:6.1f} ms/step",
                flush=True,
            )
    return rows


def ratios(rows: list[dict]) -> dict[str, float]:
    """capcal-hf's samples/s over stock hf's at each batch size, and at each engine's best batch size."""
    speed = {(row["engine"], row["batch_size"]): row["samples_per_second"] for row in rows}
    result = {
        f"batch {batch}": speed[("capcal-hf", batch)] / speed[("hf", batch)]
        for (engine, batch) in speed
        if engine == "hf" and ("capcal-hf", batch) in speed
    }
    best = {engine: max(v for (e, _), v in speed.items() if e == engine) for engine in ENGINES}
    result["best batch"] = best["capcal-hf"] / best["hf"]
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", metavar="DIR", help="only copy the config and tokenizer to DIR, then exit")
    parser.add_argument("--model-source", help="config + tokenizer folder (default: the prepared model)")
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--tiny", action="store_true", help="a tiny CPU run that tests the script")
    parser.add_argument("--output", help="write the table (JSON) here")
    args = parser.parse_args(argv)
    if args.pack:
        print(f"packed {pack(args.pack, args.model_source)}")
        return {}
    import torch

    if args.tiny:
        args.questions, args.k, args.max_new_tokens, args.batch_sizes = 4, 4, 8, [4, 16]
        args.device, args.dtype = "cpu", "float32"
    elif not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device here (use --tiny to test the script on the CPU)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        source = args.model_source or pack(Path(folder) / "source")
        shape = (2, 64) if args.tiny else (None, None)
        model_path = decode_step_ops.tiny_model(source, Path(folder) / "model", *shape, dtype=args.dtype)
        rows = run_table(
            model_path, args.batch_sizes, args.questions, args.k, args.max_new_tokens, args.device, args.dtype
        )
    found = ratios(rows)
    print(
        "capcal-hf / stock hf, samples/s: "
        + ", ".join(f"{name} {value:.2f}x" for name, value in found.items())
    )
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    record = {
        "device": device_name,
        "machine": machine_info.machine(["torch", "transformers", "lm_eval"]),
        "settings": {key: value for key, value in vars(args).items() if key not in ("output", "pack")},
        "rows": rows,
        "ratios": found,
        "wall_seconds": time.perf_counter() - start,
    }
    print(f"{device_name}: {record['wall_seconds']:.0f} s in all")
    if args.output:
        Path(args.output).write_text(json.dumps(record, indent=2), encoding="utf-8")
    return record


if __name__ == "__main__":
    main()
