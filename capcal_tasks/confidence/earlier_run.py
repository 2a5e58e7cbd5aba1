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

from collections.abc import Mapping
from pathlib import Path

import datasets

from capcal_tasks.records import RunFormatError, iter_json_lines
from capcal_tasks.sampling import is_sampling_record, parse_sampling_record

__all__ = ["RESPONSES_SPLIT", "load_earlier_responses", "read_earlier_responses"]

RESPONSES_SPLIT = "responses"


def _samples_file_for(metadata: Mapping, dataset: str) -> Path:
    """The samples file ``metadata`` names for ``dataset``; missing, an error whose example names the file
    lm-eval writes for the task's target (``samples_<capcal_target_task>_TIME.jsonl``: lm-eval names a
    samples file after the task, ``samples_capcal_math500_...``, not after the dataset)."""
    setting = metadata.get("samples_file")
    if isinstance(setting, Mapping):
        setting = setting.get(dataset)
    if not setting:
        target = metadata.get("capcal_target_task") or f"capcal_{dataset}"
        raise ValueError(
            f"capcal's response-level {dataset} tasks score the responses of an earlier {target} run: "
            "pass its samples file as task metadata, e.g. lm_eval/capcal eval ... "
            '--metadata \'{"samples_file": "OUTPUT/MODEL/samples_' + target + "_TIME.jsonl\"}' "
            f'(or a mapping {{"{dataset}": FILE, ...}} for several datasets)'
        )
    return Path(str(setting)).expanduser()


def _record(path: Path, line_number: int, record: dict, dataset: str) -> dict:
    where = f"{path}:{line_number}"
    if not is_sampling_record(record):
        raise RunFormatError(
            f"{where}: not a capcal sampling record (no 'correctness'); is this a capcal_* samples file?"
        )
    doc = record.get("doc")
    if not isinstance(doc, dict) or not isinstance(doc.get("question_id"), str):
        raise RunFormatError(f"{where}: 'doc' has no question_id")
    if not doc["question_id"].startswith(f"{dataset}/"):
        raise RunFormatError(
            f"{where}: question {doc['question_id']} is not a {dataset} question; "
            f"pass the samples file of a capcal {dataset} run"
        )
    fields = parse_sampling_record(record, where, f"capcal_{dataset}")
    return {
        **doc,
        "responses": fields["responses"],
        "response_correctness": fields["correctness"],
        "response_answers": fields["extracted_answers"],
    }


def read_earlier_responses(path: Path, dataset: str) -> list[dict]:
    """The documents (see the module docstring) of the samples file ``path``, for questions of ``dataset``;
    each line validated as a sampling record (``capcal_tasks.sampling.parse_sampling_record``)."""
    if not path.is_file():
        raise FileNotFoundError(f"samples file {path} not found")
    docs: dict[str, dict] = {}
    for line_number, record in iter_json_lines(path):
        doc = _record(path, line_number, record, dataset)
        if doc["question_id"] in docs:
            raise RunFormatError(f"{path}:{line_number}: question {doc['question_id']} appears twice")
        docs[doc["question_id"]] = doc
    if not docs:
        raise RunFormatError(f"{path}: no samples")
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
