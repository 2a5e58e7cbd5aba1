"""Where capcal-hf's decoding time goes: ``sample_continuations`` on zero-shot GSM8K chat prompts.

Runs capcal-hf's decoding loop directly (no lm-eval around it) on the first ``--questions`` GSM8K test
questions with SmolLM2's chat template, k samples each, and prints the wall and CPU time, the generated
tokens, the time spent in the shared-prefix attention, in drawing tokens and in the layers' weight products
(``nn.Linear``), and this machine's two references (the prefill ceiling and one decoding step, as in
``sampling_throughput.py``). ``--repo`` runs the capcal code of another checkout (to compare commits side by
side); ``--no-packing`` decodes without MKL-packed weights, ``--packing`` with them on any CPU (capcal-hf
packs on Intel CPUs only). Profiling numbers; the backend comparison is ``sampling_throughput.py``.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/decoding_profile.py --questions 4 --k 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _timed(function, totals: dict, name: str):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - start

    return wrapper


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument(
        "--repo", default=str(REPO), help="the capcal checkout to profile (default: this one)"
    )
    packing = parser.add_mutually_exclusive_group()
    packing.add_argument("--no-packing", action="store_true", help="decode without MKL-packed weights")
    packing.add_argument(
        "--packing",
        action="store_true",
        help="decode with MKL-packed weights on any CPU (default: Intel only)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(Path(args.repo).resolve()))
    import torch
    from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer

    import capcal_models.decoding as decoding
    import capcal_models.kv_cache as kv_cache
    from capcal_models.prepare import prepare_model

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    path = prepare_model("smollm2").path
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    lines = (Path(args.data_dir) / "gsm8k" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    jobs = []
    for index, line in enumerate(lines[: args.questions]):
        messages = [{"role": "user", "content": json.loads(line)["question"]}]
        prompt = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        jobs.append(decoding.PromptJob(list(prompt), list(range(index * args.k, (index + 1) * args.k))))

    totals = {"attention": 0.0, "sampling": 0.0, "products": 0.0}
    AttentionInterface.register(
        kv_cache.ATTENTION_NAME, _timed(kv_cache.shared_prefix_attention, totals, "attention")
    )
    decoding.sample_tokens = _timed(decoding.sample_tokens, totals, "sampling")
    torch.nn.Linear.forward = _timed(torch.nn.Linear.forward, totals, "products")
    packed_linear = sys.modules.get("capcal_models.packed_linear")
    if packed_linear is not None:
        packed_linear._packed_forward = _timed(packed_linear._packed_forward, totals, "products")
    if args.no_packing and hasattr(decoding, "packed_linears"):
        decoding.packed_linears = lambda *args: contextlib.nullcontext(False)
    if args.packing and hasattr(decoding, "packing_pays"):
        decoding.packing_pays = lambda: True
    params = decoding.SamplingParams(do_sample=True, temperature=1.0, top_k=None)
    start, start_cpu = time.perf_counter(), time.process_time()
    decoding.sample_continuations(
        model, jobs, params, args.max_new_tokens, None, {tokenizer.eos_token_id}, args.batch_size
    )
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    tokens = sum(len(output) for job in jobs for output in job.outputs)
    products = totals["products"]  # before the references below, which run the layers too

    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, model.config.vocab_size, (args.batch_size, 64), generator=generator)
    with torch.inference_mode():
        ceiling = min(_seconds(lambda: model(input_ids=input_ids, logits_to_keep=1)) for _ in range(2))
        step = min(_seconds(lambda: model(input_ids=input_ids[:, :1], use_cache=False)) for _ in range(3))
    result = {
        "repo": str(Path(args.repo).resolve()),
        # a checkout from before packing_pays packed on every CPU
        "packing": args.packing
        or (
            not args.no_packing
            and hasattr(decoding, "packed_linears")
            and getattr(decoding, "packing_pays", lambda: True)()
        ),
        "questions": args.questions,
        "k": args.k,
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "generated_tokens": tokens,
        "tokens_per_second": tokens / wall,
        "attention_seconds": totals["attention"],
        "sampling_seconds": totals["sampling"],
        "products_seconds": products,
        "ceiling_tokens_per_second": args.batch_size * 64 / ceiling,
        "decode_step_tokens_per_second": args.batch_size / step,
    }
    print(
        f"wall {wall:.1f} s (CPU {cpu:.1f} s), {tokens} tokens, {tokens / wall:.1f} tok/s; attention "
        f"{totals['attention']:.1f} s, sampling {totals['sampling']:.1f} s, weight products "
        f"{products:.1f} s; ceiling "
        f"{result['ceiling_tokens_per_second']:.1f} tok/s, one decoding step "
        f"{result['decode_step_tokens_per_second']:.1f} tok/s"
    )
    return result


def _seconds(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
