"""End to end on the real SmolLM2 through the real ``capcal eval`` and stock ``lm_eval`` command lines,
offline, on the real data (GPQA on its fixture):

A. ``capcal eval --tasks capcal_core,... --repeats 2 --limit 2 --apply_chat_template``: the seven sampling
   tasks and the capability-form P(True) and verbalized tasks;
B. stock ``lm_eval --include_path $(capcal tasks-dir)`` without a chat template: capcal_core (the YAML's
   k = 16) and the response-level tasks on run A's samples files;
C. the same response-level tasks with the chat template, in this process (``lm_eval.simple_evaluate`` with
   capcal's task manager and the samples files as task metadata).

P(True) and the self-check confidences are recomputed from the model's next-token logits in this process.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.runs import load_run
from capcal_tasks import tasks_dir
from capcal_tasks.confidence.verbalized import parse_verbalized_confidence

CORE_TASKS = {
    "capcal_gsm8k": "gsm8k",
    "capcal_math500": "math",
    "capcal_aime25": "aime",
    "capcal_triviaqa": "triviaqa",
    "capcal_simpleqa": "simpleqa",
    "capcal_mmlu": "mmlu",
    "capcal_gpqa": "gpqa",
}
LIMIT, K = 2, 2
LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))


def _env(data_dir: Path) -> dict[str, str]:
    return {**os.environ, "CAPCAL_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}


def _run(command: list[str], data_dir: Path) -> subprocess.CompletedProcess:
    """``command`` in a fresh process (stock ``lm_eval``: nothing of capcal imported before lm-eval's own)."""
    result = subprocess.run(command, env=_env(data_dir), capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def _samples(output: Path | dict, task: str) -> list[dict]:
    if isinstance(output, dict):
        return output[task]
    files = list(output.rglob(f"samples_{task}_2*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def _model_arguments(smollm2_path: Path, batch_size: int = 16) -> list[str]:
    return ["--model", "hf", "--model_args", f"pretrained={smollm2_path}", "--batch_size", str(batch_size)]


@pytest.fixture(scope="module")
def run_a(tmp_path_factory, smollm2_path, local_data, forked_cli) -> Path:
    output = tmp_path_factory.mktemp("run_a")
    tasks = ",".join(["capcal_core", "capcal_gsm8k_ptrue", "capcal_mmlu_ptrue", "capcal_gsm8k_verbalized"])
    # in a process of its own forked from ``forked_cli`` (tests/conftest.py: lm-eval and torch imported
    # once); the model loads in that process. Batch 4: stock hf pads a batch to its longest prompt, and
    # AIME's (up to 900 tokens) would pad the other datasets' (up to 360) in a batch of 16
    run = forked_cli.capcal(
        ["eval", *_model_arguments(smollm2_path, 4), "--tasks", tasks, "--repeats", str(K),
         "--limit", str(LIMIT), "--gen_kwargs", "max_gen_toks=16", "--apply_chat_template",
         "--seed", "7", "--log_samples", "--output_path", str(output)],
        Path.cwd(), 1200, env=_env(local_data),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    return output


def _earlier_samples_files(run: Path) -> str:
    files = {family: str(next(run.rglob(f"samples_{task}_2*.jsonl"))) for task, family in CORE_TASKS.items()}
    return json.dumps({"samples_file": files})


@pytest.fixture(scope="module")
def run_b(tmp_path_factory, smollm2_path, local_data, run_a) -> Path:
    output = tmp_path_factory.mktemp("run_b")
    tasks = ",".join(
        ["capcal_core", "capcal_gsm8k_ptrue", "capcal_gsm8k_verbalized_rc", "capcal_gsm8k_ptrue_rc",
         "capcal_gsm8k_selfcheck", "capcal_mmlu_selfcheck"]
    )  # fmt: skip
    _run(
        [LM_EVAL, *_model_arguments(smollm2_path), "--include_path", str(tasks_dir()), "--tasks", tasks,
         "--metadata", _earlier_samples_files(run_a), "--limit", "1", "--gen_kwargs", "max_gen_toks=16",
         "--log_samples", "--output_path", str(output)],
        local_data,
    )  # fmt: skip
    return output


@pytest.fixture(scope="module")
def run_c(smollm2_path, run_a) -> dict[str, list[dict]]:
    """Samples per task (as lm-eval logs them) of the response-level tasks, with the chat template."""
    from lm_eval import simple_evaluate

    from capcal_tasks.task_manager import CapcalTaskManager

    tasks = [
        "capcal_gsm8k_verbalized_rc",
        "capcal_gsm8k_ptrue_rc",
        "capcal_gsm8k_selfcheck",
        "capcal_gpqa_selfcheck",
    ]
    manager = CapcalTaskManager(include_defaults=False, metadata=json.loads(_earlier_samples_files(run_a)))
    results = simple_evaluate(
        model="hf", model_args=f"pretrained={smollm2_path}", tasks=tasks, task_manager=manager, device="cpu",
        batch_size=16,
        limit=LIMIT, gen_kwargs="max_gen_toks=24", apply_chat_template=True, log_samples=True,
    )  # fmt: skip
    return json.loads(json.dumps(results["samples"], default=str))  # logged as lm-eval writes them


class NextWordScorer:
    """log P(word | context) of one-token words from SmolLM2's next-token logits (independent of lm-eval)."""

    def __init__(self, path: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(1)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path).eval()

    def logprobs(self, context: str, words: tuple[str, ...]) -> list[float]:
        ids = [self.tokenizer.encode(word) for word in words]
        assert all(len(i) == 1 for i in ids), "each word must be one token"
        inputs = self.tokenizer(context, return_tensors="pt")
        with self.torch.no_grad():
            logits = self.model(**inputs).logits[0, -1]
        logprobs = self.torch.log_softmax(logits.double(), dim=-1)
        return [float(logprobs[i[0]]) for i in ids]

    def p_yes_normalized(self, context: str, words: tuple[str, str]) -> float:
        yes, no = self.logprobs(context, words)
        return math.exp(yes) / (math.exp(yes) + math.exp(no))


@pytest.fixture(scope="module")
def scorer(smollm2_path) -> NextWordScorer:
    return NextWordScorer(smollm2_path)


def _contexts(line: dict) -> list[tuple[str, str]]:
    """(context, continuation) of each request, from a samples file line or an in-memory sample."""
    arguments = line["arguments"]
    if isinstance(arguments, list):
        return [(context, continuation) for context, continuation in arguments]
    return [
        (arguments[key]["arg_0"], arguments[key]["arg_1"])
        for key in sorted(arguments, key=lambda k: int(k[9:]))
    ]


@pytest.mark.slow
def test_capcal_core_samples_every_dataset(run_a):
    results = json.loads(next(run_a.rglob("results_*.json")).read_text())
    for task, family in CORE_TASKS.items():
        lines = _samples(run_a, task)
        assert len(lines) == LIMIT
        for line in lines:
            assert len(line["resps"][0]) == K == len(line["correctness"]) == len(line["extracted_answers"])
            assert line["expected_accuracy"] == pytest.approx(sum(line["correctness"]) / K)
            assert line["doc"]["question_id"].startswith(f"{family}/")
            assert "<|im_start|>assistant\n" in line["arguments"]["gen_args_0"]["arg_0"]
        assert results["configs"][task]["repeats"] == K
        mean = results["results"][task]["expected_accuracy,all_responses"]
        assert mean == pytest.approx(sum(line["expected_accuracy"] for line in lines) / LIMIT)
        print(
            f"run A (capcal eval, chat template, k={K}, limit {LIMIT}): {task} "
            f"mean expected accuracy {mean:.3f}"
        )
    for task in ("capcal_triviaqa", "capcal_simpleqa"):
        assert all(len(line["exact_alias_correctness"]) == K for line in _samples(run_a, task))
    table = load_run(run_a)  # the analysis reader takes the sampling tasks and leaves the confidence tasks
    assert sorted(table["task"].unique()) == sorted(CORE_TASKS) and len(table) == len(CORE_TASKS) * LIMIT


@pytest.mark.slow
def test_ptrue_with_chat_template_matches_the_model(run_a, scorer):
    for task in ("capcal_gsm8k_ptrue", "capcal_mmlu_ptrue"):
        for line in _samples(run_a, task):
            (context, yes), (context_no, no) = _contexts(line)
            assert (yes, no) == ("Yes", "No") and context == context_no
            assert context.endswith(
                "Answer with only a single word: Yes or No.<|im_end|>\n<|im_start|>assistant\n"
            )
            expected = math.exp(line["logprob_yes"]) / (
                math.exp(line["logprob_yes"]) + math.exp(line["logprob_no"])
            )
            assert line["p_true"] == pytest.approx(expected, abs=1e-9)
            assert line["p_true"] == pytest.approx(scorer.p_yes_normalized(context, ("Yes", "No")), abs=1e-3)


@pytest.mark.slow
def test_verbalized_records_parse_failures(run_a):
    lines = _samples(run_a, "capcal_gsm8k_verbalized")
    assert len(lines) == LIMIT
    for line in lines:
        response = line["resps"][0][0]
        assert line["verbalized_confidence"] == parse_verbalized_confidence(response)
        assert (
            line["parse_success"]
            == int(line["verbalized_confidence"] is not None)
            == 1 - line["parse_failures"]
        )
    results = json.loads(next(run_a.rglob("results_*.json")).read_text())["results"][
        "capcal_gsm8k_verbalized"
    ]
    assert results["parse_failures,none"] == sum(line["parse_failures"] for line in lines)
    print(f"run A: verbalized parse failures {results['parse_failures,none']} of {LIMIT}")


@pytest.mark.slow
def test_stock_lm_eval_runs_every_dataset(run_b):
    for task, family in CORE_TASKS.items():
        (line,) = _samples(run_b, task)
        assert len(line["resps"][0]) == 16 == len(line["correctness"])  # the YAML's default repeats
        assert line["doc"]["question_id"].startswith(f"{family}/")
        print(
            f"run B (stock lm_eval, k=16, limit 1): {task} expected accuracy {line['expected_accuracy']:.4f}"
        )


@pytest.mark.slow
def test_plain_prompts_score_words_with_a_leading_space(run_b, scorer):
    (capability,) = _samples(run_b, "capcal_gsm8k_ptrue")
    (response_level,) = _samples(run_b, "capcal_gsm8k_ptrue_rc")
    for line in (capability, response_level):
        (context, yes), (_, no) = _contexts(line)
        assert (yes, no) == (" Yes", " No") and context.endswith("Answer with only a single word: Yes or No.")
        assert line["p_true"] == pytest.approx(scorer.p_yes_normalized(context, (" Yes", " No")), abs=1e-3)
        assert line["logprob_yes"] == pytest.approx(scorer.logprobs(context, (" Yes",))[0], abs=1e-3)


def _check_response_tasks(
    run: Path | dict, earlier: Path, scorer: NextWordScorer, words: tuple[str, str], limit: int
):
    earlier_lines = {line["doc"]["question_id"]: line for line in _samples(earlier, "capcal_gsm8k")}
    for task in ("capcal_gsm8k_verbalized_rc", "capcal_gsm8k_ptrue_rc", "capcal_gsm8k_selfcheck"):
        lines = _samples(run, task)
        assert len(lines) == limit
        for line in lines:
            earlier_line = earlier_lines[line["doc"]["question_id"]]  # joined on the stable question id
            assert line["doc"]["responses"] == earlier_line["resps"][0]
            if task == "capcal_gsm8k_selfcheck":
                assert line["response_correctness"] == earlier_line["correctness"]
                contexts = _contexts(line)
                assert len(contexts) == 2 * K and len(line["p_yes_normalized"]) == K
                for i, response in enumerate(earlier_line["resps"][0]):
                    (context, yes), (_, no) = contexts[2 * i], contexts[2 * i + 1]
                    assert (yes, no) == words and response.strip() in context
                    assert line["p_yes_normalized"][i] == pytest.approx(
                        scorer.p_yes_normalized(context, words), abs=1e-3
                    )
                    assert line["p_yes"][i] == pytest.approx(math.exp(line["logprob_yes"][i]), rel=1e-9)
            else:
                assert line["response_correct"] == earlier_line["correctness"][0]
                assert earlier_line["resps"][0][0].strip() in _contexts(line)[0][0]


@pytest.mark.slow
def test_response_level_tasks_without_chat_template(run_b, run_a, scorer):
    _check_response_tasks(run_b, run_a, scorer, (" Yes", " No"), limit=1)
    (mmlu,) = _samples(run_b, "capcal_mmlu_selfcheck")
    assert len(mmlu["p_yes"]) == K


@pytest.mark.slow
def test_response_level_tasks_with_chat_template(run_c, run_a, scorer):
    _check_response_tasks(run_c, run_a, scorer, ("Yes", "No"), limit=LIMIT)
    (gpqa_first, _) = _samples(run_c, "capcal_gpqa_selfcheck")
    context = _contexts(gpqa_first)[0][0]
    assert context.endswith(
        "<|im_start|>user\nIs the answer correct? (Yes/No)<|im_end|>\n<|im_start|>assistant\n"
    )
    assert context.count("<|im_start|>user\n") == 2 and context.count("<|im_start|>assistant\n") == 2
    for line in _samples(run_c, "capcal_gsm8k_selfcheck"):
        print(f"run C: selfcheck P(Yes) normalised {line['p_yes_normalized']}, un-normalised {line['p_yes']}")
