"""Writers of real lm-eval output folders (samples + results files) for the hostile-input corpus."""

from __future__ import annotations

import json
from pathlib import Path

from capcal_tasks.sampling import score_responses

DATE = "2026-01-02T03-04-05.123456"
LATER = "2026-02-03T04-05-06.000000"
TASK = "capcal_toy"
MODEL_FOLDER = "model__x"


def sampling_line(
    doc_id: int,
    answers: list[str | None],
    gold: str = "4",
    question: str | None = None,
    question_id: str | None = None,
    responses: list[str] | None = None,
) -> dict:
    """One capcal sampling samples line, scored by the real ``score_responses``."""
    if responses is None:
        responses = [f"... \\boxed{{{a}}}" if a is not None else "no idea" for a in answers]
    record = score_responses(
        responses,
        extract=lambda r: r.rsplit("{", 1)[1].rstrip("}") if "\\boxed{" in r else None,
        judge=lambda a: a == gold,
    )
    question = question if question is not None else f"What is {doc_id} + 4 - {doc_id}?"
    return {
        "doc_id": doc_id,
        "doc": {"question": question, "question_id": question_id or f"toy/{doc_id:04d}"},
        "target": gold,
        "arguments": {"gen_args_0": {"arg_0": question, "arg_1": {}}},
        "resps": [responses],
        "filtered_resps": [responses],
        "filter": "all_responses",
        "metrics": list(record),
        "doc_hash": f"hash{doc_id}",
        **record,
    }


def results_json(task: str = TASK, model: str = "toy-model", kind: str = "sampling") -> dict:
    return {
        "results": {task: {}},
        "configs": {task: {"metadata": {"capcal_task": kind}}},
        "model_name": model,
    }


def write_run(
    root: Path,
    lines: list[dict | str | bytes],
    *,
    task: str = TASK,
    folder: str = MODEL_FOLDER,
    date: str = DATE,
    results: dict | str | bytes | None = None,
    with_results: bool = True,
) -> Path:
    """Write ``samples_<task>_<date>.jsonl`` (dicts as JSON lines, str/bytes verbatim plus a newline) and its
    results file (``results``: a dict, or raw text/bytes; default a valid sampling-task results file)."""
    directory = root / folder
    directory.mkdir(parents=True, exist_ok=True)
    samples = directory / f"samples_{task}_{date}.jsonl"
    chunks = []
    for line in lines:
        if isinstance(line, dict):
            chunks.append(json.dumps(line).encode() + b"\n")
        elif isinstance(line, str):
            chunks.append(line.encode("utf-8", "surrogatepass") + b"\n")
        else:
            chunks.append(line)
    samples.write_bytes(b"".join(chunks))
    if with_results:
        content = results if results is not None else results_json(task)
        if isinstance(content, dict):
            content = json.dumps(content)
        data = content if isinstance(content, bytes) else content.encode()
        (directory / f"results_{date}.json").write_bytes(data)
    return samples


def samples_path(root: Path, task: str = TASK, folder: str = MODEL_FOLDER, date: str = DATE) -> Path:
    return root / folder / f"samples_{task}_{date}.jsonl"


def results_path(root: Path, folder: str = MODEL_FOLDER, date: str = DATE) -> Path:
    return root / folder / f"results_{date}.json"


def confidence_line(number: int, kind: str = "verbalized", /, **fields: object) -> str:
    """One confidence-task samples line (raw JSON text, so NaN/Infinity can be written as lm-eval would)."""
    base: dict[str, object] = {
        "doc_id": number,
        "doc": {"question_id": f"toy/{number:04d}", "question_text": "q"},
        "resps": [["\\boxed{0.5}"]],
    }
    if kind == "verbalized":
        base.update(verbalized_confidence=0.5, parse_success=1, parse_failures=0)
    elif kind == "ptrue":
        base.update(p_true=0.5, logprob_yes=-0.7, logprob_no=-0.7)
    elif kind == "selfcheck":
        base.update(p_yes=[0.5, 0.5], p_yes_normalized=[0.5, 0.5], response_correctness=[1, 0])
    base.update(fields)
    return json.dumps(base)  # allow_nan: float('nan') -> NaN, float('inf') -> Infinity
