"""Stock lm-eval ``vllm`` and ``capcal-vllm`` on capcal_gsm8k, one engine each, in capcal's vLLM environment.

test_vllm.py runs this script with ``.venv-vllm/bin/python`` (vLLM cannot be installed in the main
environment) and asserts on the JSON it writes. The engines run in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``): on the CPU, vLLM otherwise spawns an EngineCore and a Worker process
for each engine, each importing vLLM again, which took 16 s of each of the three engines' starts on the 2-core
AMD machine (2026-11-29; the whole script 151 s against 221 s). The samples are the same either way:
test_vllm.py's stopped-and-resumed ``capcal eval`` runs the engine in its own processes, as users do, and its
logged samples must equal this script's lm-eval run's.

- ``eval``: per-question expected accuracy: capcal-vllm end to end through lm-eval
  (``analysis.evaluation.evaluate``, log_samples), stock vllm from its samples and the task's
  ``process_results`` (lm-eval's evaluation around it is the same code for both backends);
- ``runs``: per question, the samples of ``generate_until`` on lm-eval-built requests (k clones each): stock
  vllm on all questions, capcal-vllm's lm-eval run, and on fewer questions capcal-vllm again (a second run,
  another batch), greedy decoding, a ``seed`` in the generation kwargs and a lower temperature (to show that
  the equivalence test can fail), and ``capcal_resumed``: all questions again after some samples of the
  lm-eval run were deleted from its sample cache (``resume``: what was deleted, the counts of cached and
  generated samples);
- ``engine_calls``: per backend and generation call, the [n, seed] of each request sent to vLLM;
- ``scores``: each sample's log-probability and token count under the model, recorded while sampling (both
  backends instrumented the same way), for the independence and equivalence statistics.
- ``adaptive``: an ``evaluate_adaptive`` run of capcal-vllm (its own engine and cache, started without
  ``VLLM_CPU_KVCACHE_SPACE``): per question its samples and n, and the run's ``capcal_adaptive`` summary.
- ``wrapped`` (with ``--wrapped-task``): a stock lm-eval task wrapped by capcal (capcal_tasks.sampled_task)
  run through lm-eval on capcal-vllm's engine (no sample cache; its rows from ``--data-dir``): its logged
  samples lines, its results row, the [n, seed] of each request it sent, its time; ``wrapped_stock``: the
  same on stock vllm's engine.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from pathlib import Path


def record_sample_logprobs(lm, contexts: dict[tuple[int, ...], str], store: dict, calls: list) -> None:
    """Instrument ``lm`` (stock or capcal, the same way) to record what it asks vLLM for and each sample's
    log-probability: every generation call appends its requests' [n, seed] to ``calls``; its requests also
    ask for the sampled tokens' log-probabilities (``logprobs=0``: raw model log-probabilities; the sampling
    itself is unchanged), and every output's (cumulative log-probability, token count) goes to
    ``store[question_id][text]``."""
    model_generate = lm._model_generate

    def _model_generate(requests, generate=False, sampling_params=None):
        if generate and sampling_params is not None:
            listed = (
                sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(requests)
            )
            calls.append([[params.n, params.seed] for params in listed])
            for params in listed:
                params.logprobs = 0
        outputs = model_generate(requests=requests, generate=generate, sampling_params=sampling_params)
        if generate:
            for prompt, output in zip(requests, outputs, strict=True):
                question = contexts.get(tuple(prompt))
                for completion in output.outputs:
                    entry = [completion.cumulative_logprob, len(completion.token_ids)]
                    store.setdefault(question, {})[completion.text] = entry
        return outputs

    lm._model_generate = _model_generate


def scores_of(samples: dict[str, list[str]], store: dict) -> dict[str, list[list[float]]]:
    """(log-probability, token count) of every sample, from ``record_sample_logprobs``'s store."""
    return {question: [store[question][text] for text in texts] for question, texts in samples.items()}


def delete_cached_samples(cache_path: Path, k: int) -> list[list]:
    """Delete from a sample cache repeats 1, 2 and k - 1 of its first request and every repeat of its third
    (in insertion order); return the deleted [request key, repeat] pairs."""
    connection = sqlite3.connect(cache_path)
    try:
        keys = list(dict.fromkeys(key for (key,) in connection.execute("SELECT request_key FROM samples")))
        deleted = [[keys[0], 1], [keys[0], 2], [keys[0], k - 1]] + [[keys[2], r] for r in range(k)]
        with connection:
            connection.executemany("DELETE FROM samples WHERE request_key = ? AND repeat = ?", deleted)
    finally:
        connection.close()
    return deleted


def run_wrapped(lm, args: argparse.Namespace, calls: list) -> dict:
    """lm-eval's run of the stock task ``args.wrapped_task`` wrapped by capcal (``--repeats``: k samples per
    question, each scored by the task's own metric), its rows from ``args.data_dir``, chat template applied:
    its samples lines (JSON-ready), its results row, the [n, seed] of the requests it sent (``calls``, the
    instrumented engine's list) and its time."""
    from analysis.evaluation import evaluate

    task, sent_before, started = args.wrapped_task, len(calls), time.perf_counter()
    results = evaluate(
        lm,
        task,
        repeats=args.wrapped_k,
        data_dir=args.data_dir,
        limit=args.wrapped_questions,
        log_samples=True,
        apply_chat_template=True,
        gen_kwargs=f"max_gen_toks={args.wrapped_max_gen_toks}",
        bootstrap_iters=0,
    )
    return {
        "task": task,
        "seconds": time.perf_counter() - started,
        "samples": json.loads(json.dumps(results["samples"][task], default=str)),
        "results": json.loads(json.dumps(results["results"][task], default=str)),
        "engine_calls": [request for call in calls[sent_before:] for request in call],
    }


def _shutdown(lm) -> None:
    lm.model.llm_engine.engine_core.shutdown()
    del lm.model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--max-gen-toks", type=int, default=32)
    parser.add_argument("--wrapped-task", help="a stock lm-eval task to run wrapped, e.g. gsm8k")
    parser.add_argument("--wrapped-questions", type=int, default=2)
    parser.add_argument("--wrapped-k", type=int, default=2)
    parser.add_argument("--wrapped-max-gen-toks", type=int, default=16)
    parser.add_argument("--data-dir", help="the wrapped task's local rows (CAPCAL_DATA_DIR)")
    args = parser.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # read when an engine is configured
    # no torch.compile of vLLM's sampler helpers (the engines are eager already): compiling the kernel that
    # ranks the sampled tokens' log-probabilities, which only this script asks for, took 10-17 s of it; every
    # sample and log-probability was the same without it (2026-11-29)
    os.environ["TORCHDYNAMO_DISABLE"] = "1"

    from lm_eval.api.registry import get_model
    from lm_eval.models.vllm_causallms import VLLM
    from sampling_checks import (
        cloned_requests,
        evaluate_gsm8k,
        expected_accuracy,
        gsm8k_task,
        samples_by_question,
    )

    from capcal_models.registry import register_models

    register_models()
    # the same engine settings for both, capcal-vllm's CPU defaults (capcal_models.vllm): chunked prefill off
    # and 32-token blocks, so that stock vllm's k clones of a prompt share its prefill as capcal's samples do
    engine = f"pretrained={args.model},dtype=float32,max_model_len=2048,enforce_eager=True"
    engine += ",enable_chunked_prefill=False,block_size=32"
    q, k, max_toks = args.questions, args.k, args.max_gen_toks
    report: dict = {"settings": vars(args), "eval": {}, "runs": {}, "timings": {}, "engine_calls": {}}
    logprobs: dict[str, dict] = {"stock": {}, "capcal": {}}
    task = None

    def start(name: str, create):
        nonlocal task
        started = time.perf_counter()
        lm = create()
        report["timings"][f"{name}_engine_start"] = time.perf_counter() - started
        task = task or gsm8k_task(lm, q)
        report["contexts"] = {i.doc["question_id"]: i.args[0] for i in task.instances}
        contexts = {tuple(lm.tok_encode(c)): question for question, c in report["contexts"].items()}
        record_sample_logprobs(lm, contexts, logprobs[name], report["engine_calls"].setdefault(name, []))
        return lm

    def run(name: str, lm, questions: int, clones: int = k, **gen_kwargs) -> None:
        requests = cloned_requests(task, questions, clones, max_gen_toks=max_toks, **gen_kwargs)
        started = time.perf_counter()
        texts = lm.generate_until(requests, disable_tqdm=True)
        report["timings"][name] = time.perf_counter() - started
        report["runs"][name] = samples_by_question(requests, texts)

    stock = start("stock", lambda: VLLM.create_from_arg_string(engine, {"batch_size": "auto"}))
    run("stock", stock, q)
    report["eval"]["stock"] = {"expected_accuracy": expected_accuracy(task, report["runs"]["stock"])}
    # stock greedy: one request per question (the greedy test reads its first text; capcal's runs all k)
    run("stock_greedy", stock, q // 2, clones=1, do_sample=False, temperature=0)
    run("stock_seed_in_gen_kwargs", stock, 2, seed=7)
    if args.wrapped_task:
        report["wrapped_stock"] = run_wrapped(stock, args, report["engine_calls"]["stock"])
    _shutdown(stock)

    capcal_vllm = get_model("capcal-vllm")
    cache_path = Path(args.output).parent / "capcal-vllm-samples.sqlite"
    capcal_engine = f"{engine},cache_path={cache_path}"
    capcal = start(
        "capcal", lambda: capcal_vllm.create_from_arg_string(capcal_engine, {"batch_size": "auto"})
    )
    started = time.perf_counter()
    report["eval"]["capcal"] = evaluate_gsm8k(capcal, q, k, max_toks)  # end to end through lm-eval
    report["timings"]["capcal_eval"] = time.perf_counter() - started
    report["runs"]["capcal"] = report["eval"]["capcal"]["samples"]
    report["resume"] = {"eval_stats": dict(capcal.stats), "cached_rows": len(capcal.cache)}
    cache, capcal.cache = capcal.cache, None  # these runs must sample, not read the lm-eval run's samples
    run("capcal_again", capcal, q // 2)
    run("capcal_greedy", capcal, q // 2, do_sample=False, temperature=0)
    run("capcal_seed_in_gen_kwargs", capcal, 2, seed=7)
    run("capcal_temperature_0.5", capcal, q // 2, temperature=0.5)
    if args.wrapped_task:
        report["wrapped"] = run_wrapped(capcal, args, report["engine_calls"]["capcal"])
    capcal.cache = cache
    report["resume"]["deleted"] = delete_cached_samples(cache.path, k)
    before = dict(capcal.stats)
    run("capcal_resumed", capcal, q)
    report["resume"]["stats"] = {name: capcal.stats[name] - before[name] for name in before}
    report["resume"]["cached_rows_after"] = len(cache)
    _shutdown(capcal)

    # an adaptive run (its own engine and cache; looks 4 and k, a width rule that never stops at 4, so every
    # question draws its second look too): its samples must be the lm-eval run's, look by look
    from analysis.evaluation import evaluate_adaptive

    # and without VLLM_CPU_KVCACHE_SPACE: capcal-vllm's own CPU default KV cache must let the engine start
    report["adaptive_kv_env"] = os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    adaptive_engine = f"{engine},cache_path={Path(args.output).parent / 'capcal-vllm-adaptive.sqlite'}"
    started = time.perf_counter()
    adaptive = evaluate_adaptive(
        "capcal-vllm",
        "capcal_gsm8k",
        adaptive_engine,
        looks=(k // 2,),
        rule="width:0.01",
        repeats=k,
        limit=q // 2,
        data_dir="bundled",
        apply_chat_template=True,
        gen_kwargs=f"max_gen_toks={max_toks}",
        bootstrap_iters=0,
        device="cpu",
    )
    report["timings"]["capcal_adaptive"] = time.perf_counter() - started
    records = adaptive["samples"]["capcal_gsm8k"]
    report["adaptive"] = {
        "samples": {r["doc"]["question_id"]: r["resps"][0] for r in records},
        "n": {r["doc"]["question_id"]: r["adaptive"]["n"] for r in records},
        "summary": adaptive["capcal_adaptive"],
    }

    report["scores"] = {
        name: scores_of(samples, logprobs[name.split("_")[0]]) for name, samples in report["runs"].items()
    }
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
