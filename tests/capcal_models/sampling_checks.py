"""Helpers of the vLLM and API sampling tests: lm-eval requests for capcal_gsm8k, and the statistics that
judge equivalence (same sampling distribution as the stock backend) and independence (no more duplicated
samples within a question than sampling explains). Imported by the tests (main environment) and by
vllm_runner.py (vLLM environment), so nothing here needs pytest or vLLM.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

TASK = "capcal_gsm8k"


def gsm8k_task(lm, limit: int):
    """The capcal_gsm8k lm-eval task with the requests of its first ``limit`` questions built (chat template
    applied by ``lm``), as lm-eval's evaluator builds them."""
    from analysis.evaluation import data_dir_setting
    from capcal_tasks.task_manager import CapcalTaskManager

    with data_dir_setting("bundled"):
        task = CapcalTaskManager(include_defaults=False).load([TASK])["tasks"][TASK]
        task.build_all_requests(
            limit=limit,
            apply_chat_template=True,
            chat_template=lm.apply_chat_template,
            tokenizer_name=getattr(lm, "tokenizer_name", ""),
        )
    return task


def cloned_requests(task, limit: int, k: int, **gen_kwargs) -> list:
    """The task's requests for its first ``limit`` questions, each cloned k times the way lm-eval's evaluator
    clones them (k references to one Instance), with ``gen_kwargs`` added to the task's generation kwargs."""
    from lm_eval.api.instance import Instance

    requests = []
    for instance in task.instances[:limit]:
        context, task_kwargs = instance.args
        clone = Instance(
            request_type=instance.request_type,
            doc=instance.doc,
            arguments=(context, {**task_kwargs, **gen_kwargs}),
            idx=instance.idx,
            metadata=(instance.task_name, instance.doc_id, k),
        )
        requests.extend([clone] * k)
    return requests


def expected_accuracy(task, samples: dict[str, list[str]]) -> dict[str, float]:
    """Per question, the expected accuracy the task's own ``process_results`` gives the samples."""
    docs = {instance.doc["question_id"]: instance.doc for instance in task.instances}
    return {
        question: float(task.process_results(docs[question], [texts])["expected_accuracy"])
        for question, texts in samples.items()
    }


def evaluate_gsm8k(lm, questions: int, k: int, max_gen_toks: int) -> dict:
    """lm-eval's run of capcal_gsm8k (k samples of the first ``questions``, chat template, bundled data) with
    ``lm``: its metrics, and per question the samples, expected accuracy and sample count."""
    from analysis.evaluation import evaluate

    results = evaluate(
        lm,
        TASK,
        repeats=k,
        data_dir="bundled",
        limit=questions,
        log_samples=True,
        apply_chat_template=True,
        gen_kwargs=f"max_gen_toks={max_gen_toks}",
        bootstrap_iters=0,
    )
    samples = results["samples"][TASK]
    return {
        "metrics": dict(results["results"][TASK]),
        "samples": {s["doc"]["question_id"]: s["resps"][0] for s in samples},
        "expected_accuracy": {s["doc"]["question_id"]: s["expected_accuracy"] for s in samples},
        "n_samples": {s["doc"]["question_id"]: s["n_samples"] for s in samples},
    }


def per_token_logprobs(scores: dict[str, list[list[float]]]) -> dict[str, list[float]]:
    """Per question, each sample's log-probability per token, from (log-probability, token count) scores."""
    return {q: [logprob / max(tokens, 1) for logprob, tokens in rows] for q, rows in scores.items()}


def token_counts(scores: dict[str, list[list[float]]]) -> dict[str, list[float]]:
    """Per question, each sample's token count, from (log-probability, token count) scores."""
    return {q: [tokens for _, tokens in rows] for q, rows in scores.items()}


def sample_logprobs(scores: dict[str, list[list[float]]]) -> dict[str, list[float]]:
    """Per question, each sample's log-probability, from (log-probability, token count) scores."""
    return {q: [logprob for logprob, _ in rows] for q, rows in scores.items()}


def stock_sample_logprobs(
    stock, contexts: dict[str, str], samples: dict[str, list[str]], checked: int = 2
) -> dict[str, list[float]]:
    """Per key, each sample's log-probability given its prompt ``contexts[key]`` under stock hf's model
    (``stock``: lm-eval's ``HFLM``): the tokens split as lm-eval's loglikelihood splits them
    (``HFLM._encode_pair``), the prompt's forward pass computed once per prompt and its KV cache copied for
    each sample. Stock ``loglikelihood`` runs the whole prompt again for every sample (57% of test_hf.py's
    runs fixture, 2026-11-29). The last sample of each of the first ``checked`` prompts (scored after the
    others, from the same prefix) is scored by stock ``loglikelihood`` too; each must agree within 1e-4."""
    import copy

    import torch
    from lm_eval.api.instance import Instance

    scores: dict[str, list[float]] = {}
    with torch.no_grad():
        for key, texts in samples.items():
            pairs = [stock._encode_pair(contexts[key], text) for text in texts]
            context = pairs[0][0]
            assert len(context) > 1 and all(pair[0] == context for pair in pairs), key
            prefix = stock.model(torch.tensor([context[:-1]]), use_cache=True, logits_to_keep=1)
            scores[key] = []
            for _, continuation in pairs:
                tokens = torch.tensor([[context[-1], *continuation[:-1]]])
                cache = copy.deepcopy(prefix.past_key_values)
                logits = stock.model(tokens, past_key_values=cache, use_cache=True).logits[0]
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                scores[key].append(float(logprobs[torch.arange(len(continuation)), continuation].sum()))
    check = list(samples)[:checked]
    requests = [
        Instance("loglikelihood", {}, (contexts[key], samples[key][-1]), idx=0, metadata=("score", n, 1))
        for n, key in enumerate(check)
    ]
    for key, (logprob, _) in zip(check, stock.loglikelihood(requests, disable_tqdm=True), strict=True):
        assert abs(scores[key][-1] - logprob) <= 1e-4, (key, scores[key][-1], logprob)
    return scores


def samples_by_question(requests: Sequence, texts: Sequence[str]) -> dict[str, list[str]]:
    """question_id -> the texts of its clones, in request order."""
    grouped: dict[str, list[str]] = {}
    for request, text in zip(requests, texts, strict=True):
        grouped.setdefault(request.doc["question_id"], []).append(text)
    return grouped


def duplicate_pairs(samples: Sequence[str]) -> int:
    """Pairs (i < j) of exactly equal samples."""
    return sum(count * (count - 1) // 2 for count in Counter(samples).values())


def expected_duplicate_pairs(sample_logprobs: Sequence[float]) -> float:
    """Expected duplicate pairs among k independent samples of one question: C(k, 2) * sum_y p(y)^2, estimated
    without bias by C(k, 2) * mean_i p(y_i) (E[p(Y)] = sum_y p(y)^2), from each sample's log-probability."""
    k = len(sample_logprobs)
    return k * (k - 1) / 2 * float(np.mean(np.exp(np.asarray(sample_logprobs, dtype=float))))


def duplicate_excess(samples: dict[str, list[str]], logprobs: dict[str, list[float]]) -> dict:
    """Observed duplicate pairs over all questions against what independent sampling explains: the expected
    count, and the Poisson 0.999 quantile of it (the most duplicate pairs a test should accept)."""
    from scipy.stats import poisson

    observed = sum(duplicate_pairs(texts) for texts in samples.values())
    expected = sum(expected_duplicate_pairs(logprobs[question]) for question in samples)
    allowed = int(poisson.ppf(0.999, expected)) if expected > 0 else 0
    return {"observed": observed, "expected": expected, "allowed": allowed}


def stratified_permutation_pvalue(
    a: dict[str, Sequence[float]], b: dict[str, Sequence[float]], permutations: int = 20000, seed: int = 0
) -> float:
    """Two-sided p-value of H0 "per question, a's and b's values come from one distribution".

    Statistic: sum over questions of (mean of a - mean of b); its null distribution comes from permuting the
    a/b labels within each question (exact under H0, no distributional assumption).
    """
    rng = np.random.default_rng(seed)
    observed = 0.0
    null = np.zeros(permutations)
    for question in sorted(a):
        x, y = np.asarray(a[question], dtype=float), np.asarray(b[question], dtype=float)
        pooled = np.concatenate([x, y])
        observed += x.mean() - y.mean()
        shuffled = rng.permuted(np.tile(pooled, (permutations, 1)), axis=1)
        null += shuffled[:, : len(x)].mean(axis=1) - shuffled[:, len(x) :].mean(axis=1)
    return float((1 + np.sum(np.abs(null) >= abs(observed) - 1e-12)) / (permutations + 1))


def mean_difference_z(a: dict[str, float], b: dict[str, float]) -> float:
    """z of the mean paired difference of per-question values (e.g. expected accuracy); 0 when all equal."""
    differences = np.array([a[q] - b[q] for q in sorted(a)], dtype=float)
    spread = differences.std(ddof=1) / math.sqrt(len(differences)) if len(differences) > 1 else 0.0
    if spread == 0.0:
        return 0.0 if differences.mean() == 0.0 else math.inf
    return float(differences.mean() / spread)


def transformers_scores(logits, params):
    """transformers' own warped next-token scores (temperature, top-k, top-p, min-p warpers) for capcal's
    ``SamplingParams``: the reference capcal-hf's ``filter_logits`` and sampling are checked against."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList()
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    if params.min_p is not None:
        warpers.append(MinPLogitsWarper(params.min_p))
    return warpers(None, logits.float().clone())


def chi_square(counts, probabilities) -> tuple[float, float]:
    """Chi-square goodness of fit of token counts (torch) to probabilities; tokens expected fewer than 5
    times are pooled into one bin."""
    import torch
    from scipy.stats import chisquare

    expected = probabilities / probabilities.sum() * counts.sum()
    large = expected >= 5
    observed = torch.cat([counts[large], counts[~large].sum().reshape(1)])
    expected = torch.cat([expected[large], expected[~large].sum().reshape(1)])
    keep = expected > 0
    statistic, p_value = chisquare(observed[keep].numpy(), expected[keep].numpy())
    return float(statistic), float(p_value)
