"""The responses of an earlier capcal sampling run, as the documents of a response-level confidence task.

``capcal_<dataset>_verbalized_rc``, ``capcal_<dataset>_ptrue_rc`` and ``capcal_<dataset>_selfcheck`` score the
model's own responses from an earlier ``capcal_<dataset>`` (or train/calibration split) run. The run's samples
file (lm-eval ``--log_samples``) is given through task metadata::

    --metadata '{"samples_file": "out/MODEL/samples_capcal_gsm8k_2025-01-01T00-00-00.jsonl"}'

or, for a run over several datasets, a mapping from capcal dataset name (the question-id prefix: gsm8k, math,
aime, triviaqa, simpleqa, mmlu, gpqa) to samples file. Each line of the file is one question: its ``doc`` (the
processed document, with the stable ``question_id``), ``resps`` (the k responses) and the capcal sampling
fields (``correctness``, ``extracted_answers``). The task's documents are these docs, keyed by ``question_id``
(one line per question; a question must belong to the task's dataset), with three fields added:

- ``responses``: the k responses, in sampling order;
- ``response_correctness``: their 0/1 correctness (the earlier run's ``correctness``);
- ``response_answers``: the answers extracted from them.

A missing file, malformed JSON, a line that is not a capcal sampling record, or a question from another
dataset raises an error naming the file (and line).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import datasets

__all__ = ["RESPONSES_SPLIT", "load_earlier_responses", "read_earlier_responses"]

RESPONSES_SPLIT = "responses"


def _samples_file_for(metadata: Mapping, dataset: str) -> Path:
    setting = metadata.get("samples_file")
    if isinstance(setting, Mapping):
        setting = setting.get(dataset)
    if not setting:
        raise ValueError(
            f"capcal's response-level {dataset} tasks score the responses of an earlier {dataset} run: "
            "pass its samples file as task metadata, e.g. lm_eval/capcal eval ... "
            '--metadata \'{"samples_file": "OUTPUT/MODEL/samples_capcal_' + dataset + "_TIME.jsonl\"}' "
            f'(or a mapping {{"{dataset}": FILE, ...}} for several datasets)'
        )
    return Path(str(setting)).expanduser()


def _record(path: Path, line_number: int, line: str, dataset: str) -> dict:
    where = f"{path}:{line_number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: malformed or truncated JSON ({error.msg})") from None
    if not isinstance(record, dict) or "correctness" not in record:
        raise ValueError(
            f"{where}: not a capcal sampling record (no 'correctness'); is this a capcal_* samples file?"
        )
    doc = record.get("doc")
    if not isinstance(doc, dict) or not isinstance(doc.get("question_id"), str):
        raise ValueError(f"{where}: 'doc' has no question_id")
    if not doc["question_id"].startswith(f"{dataset}/"):
        raise ValueError(
            f"{where}: question {doc['question_id']} is not a {dataset} question; "
            f"pass the samples file of a capcal {dataset} run"
        )
    resps = record.get("resps")
    if not (isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list) and resps[0]):
        raise ValueError(f"{where}: 'resps' must hold one non-empty list of responses")
    responses = [str(response) for response in resps[0]]
    correctness = record["correctness"]
    extracted = record.get("extracted_answers")
    if not (
        isinstance(correctness, list)
        and all(isinstance(z, int) and not isinstance(z, bool) and z in (0, 1) for z in correctness)
    ):
        raise ValueError(f"{where}: 'correctness' must be a list of 0/1")
    if (
        len(correctness) != len(responses)
        or not isinstance(extracted, list)
        or len(extracted) != len(responses)
    ):
        raise ValueError(f"{where}: responses, correctness and extracted_answers differ in length")
    return {
        **doc,
        "responses": responses,
        "response_correctness": [int(z) for z in correctness],
        "response_answers": [None if answer is None else str(answer) for answer in extracted],
    }


def read_earlier_responses(path: Path, dataset: str) -> list[dict]:
    """The documents (see the module docstring) of the samples file ``path``, for questions of ``dataset``."""
    if not path.is_file():
        raise FileNotFoundError(f"samples file {path} not found")
    docs: dict[str, dict] = {}
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(f"{path}:{line_number}: not valid UTF-8 (byte {error.start})") from None
            if not line.strip():
                continue
            doc = _record(path, line_number, line, dataset)
            if doc["question_id"] in docs:
                raise ValueError(f"{path}:{line_number}: question {doc['question_id']} appears twice")
            docs[doc["question_id"]] = doc
    if not docs:
        raise ValueError(f"{path}: no samples")
    return list(docs.values())


def load_earlier_responses(**metadata) -> datasets.DatasetDict:
    """custom_dataset of the response-level tasks: the earlier run's questions and responses.

    ``metadata`` (lm-eval passes the task's metadata merged with ``--metadata`` and the model arguments) must
    hold ``capcal_dataset`` (set by the task YAML) and ``samples_file``.
    """
    dataset = metadata.get("capcal_dataset")
    if not dataset:
        raise ValueError("response-level capcal task without 'capcal_dataset' in its metadata")
    path = _samples_file_for(metadata, dataset)
    return datasets.DatasetDict(
        {RESPONSES_SPLIT: datasets.Dataset.from_list(read_earlier_responses(path, dataset))}
    )
