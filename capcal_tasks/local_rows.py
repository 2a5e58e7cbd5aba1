"""Local copies of the hub datasets that lm-eval's stock tasks read, for a machine without the hub.

A stock task names its rows by ``dataset_path`` / ``dataset_name`` / split; with a local data folder
(``CAPCAL_DATA_DIR``, ``capcal eval --data_dir DIR``) a task capcal wraps (``capcal_tasks.sampled_task``)
reads them from the file ``LOCAL_FILES`` maps that triple to, converted to the hub's schema, so the task's
own ``doc_to_text``, filters and metric see the rows they see from the hub:

- ``openai/gsm8k`` (``gsm8k``), test and train: ``gsm8k/<split>.jsonl``, as is (question, answer);
- ``SaylorTwift/bbh`` and ``lukaemon/bbh``, test: ``bbh/<dataset_name>.json``, its ``examples`` (input,
  target);
- ``google-research-datasets/nq_open`` (``nq_open``), validation and train: ``nq_open/NQ-open.dev.jsonl``,
  ``nq_open/NQ-open.train.jsonl``, as is (question, answer list);
- ``mandarjoshi/trivia_qa`` (``trivia_qa``), validation and train: ``triviaqa/triviaqa_sm_sub.jsonl``,
  ``triviaqa/train.jsonl``, as question, answer {value, aliases};
- ``HuggingFaceH4/MATH-500``, test: ``math500/test.jsonl``, as is;
- ``math-ai/aime25``, test: MathArena's folder ``aime2025``, as id, problem, answer;
- ``cais/mmlu``, test, validation and dev: ``mmlu/{test,val,dev}/<subject>_<split>.csv``, as question,
  subject, choices, answer (0-3).

Departures, declared: the local TriviaQA file is llm-foundry's 3,000-question subsample of the validation
split with aliases of at most 10 words (``capcal_tasks.triviaqa.task.read_triviaqa_jsonl``); a split the task
needs only for few-shot examples that has no local file is empty (a zero-shot run never reads it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import datasets

from capcal_tasks.data_sources import local_data_dir, read_csv, read_jsonl
from capcal_tasks.settings import DATA_DIR_ENV

__all__ = ["LOCAL_FILES", "MissingLocalRows", "local_dataset", "local_file", "needed_splits"]


class MissingLocalRows(FileNotFoundError):
    """A split a wrapped task needs has no local file (or no mapping); the message names the file."""


def _bbh_rows(path: Path) -> list[dict]:
    from capcal_tasks.records import parse_json_object

    record = parse_json_object(path.read_text(encoding="utf-8"), str(path))
    examples = record.get("examples")
    if not isinstance(examples, list):
        raise ValueError(f"{path}: expected BIG-Bench Hard's {{'examples': [...]}}")
    return [{"input": str(row["input"]), "target": str(row["target"])} for row in examples]


def _triviaqa_rows(path: Path) -> list[dict]:
    from capcal_tasks.triviaqa.task import read_triviaqa_jsonl

    return read_triviaqa_jsonl(path)


def _aime_rows(path: Path) -> list[dict]:
    from capcal_tasks.aime.task import read_matharena_folder

    return read_matharena_folder(path)


_MMLU_LETTERS = ("A", "B", "C", "D")


def _mmlu_rows(path: Path) -> list[dict]:
    """One subject's Hendrycks CSV (no header: question, A-D, letter) as the hub's cais/mmlu rows."""
    subject = path.stem.rsplit("_", 1)[0]
    rows = []
    for line, record in enumerate(read_csv(path, fieldnames=("question", *_MMLU_LETTERS, "answer")), 1):
        letter = record["answer"].strip()
        if letter not in _MMLU_LETTERS:
            raise ValueError(f"{path}: row {line}: answer {letter!r} is not one of A-D")
        choices = [record[choice] for choice in _MMLU_LETTERS]
        rows.append(
            {
                "question": record["question"],
                "subject": subject,
                "choices": choices,
                "answer": _MMLU_LETTERS.index(letter),
            }
        )
    return rows


_MMLU_SPLIT = {"test": "test", "validation": "val", "dev": "dev"}

Reader = Callable[[Path], list[dict]]
#: dataset_path -> (dataset_name, split) -> (relative local path or None, reader)
LOCAL_FILES: dict[str, Callable[[str | None, str], tuple[str | None, Reader]]] = {}


def _register(
    paths: tuple[str, ...], mapping: Callable[[str | None, str], tuple[str | None, Reader]]
) -> None:
    for path in paths:
        LOCAL_FILES[path] = mapping


_register(
    ("openai/gsm8k", "gsm8k"),
    lambda name, split: (f"gsm8k/{split}.jsonl" if split in ("test", "train") else None, read_jsonl),
)
_register(
    ("SaylorTwift/bbh", "lukaemon/bbh"),
    lambda name, split: (f"bbh/{name}.json" if split == "test" and name else None, _bbh_rows),
)
_register(
    ("google-research-datasets/nq_open", "nq_open"),
    lambda name, split: (
        {"validation": "nq_open/NQ-open.dev.jsonl", "train": "nq_open/NQ-open.train.jsonl"}.get(split),
        read_jsonl,
    ),
)
_register(
    ("mandarjoshi/trivia_qa", "trivia_qa"),
    lambda name, split: (
        {"validation": "triviaqa/triviaqa_sm_sub.jsonl", "train": "triviaqa/train.jsonl"}.get(split)
        if name in (None, "rc.nocontext")
        else None,
        _triviaqa_rows,
    ),
)
_register(
    ("HuggingFaceH4/MATH-500",),
    lambda name, split: ("math500/test.jsonl" if split == "test" else None, read_jsonl),
)
_register(("math-ai/aime25",), lambda name, split: ("aime2025" if split == "test" else None, _aime_rows))
_register(
    ("cais/mmlu",),
    lambda name, split: (
        f"mmlu/{_MMLU_SPLIT[split]}/{name}_{_MMLU_SPLIT[split]}.csv"
        if split in _MMLU_SPLIT and name and name != "all"
        else None,
        _mmlu_rows,
    ),
)


def local_file(dataset_path: str | None, dataset_name: str | None, split: str) -> str | None:
    """The local file (relative to the data folder) holding ``split`` of the hub dataset, None when capcal
    maps none."""
    mapping = LOCAL_FILES.get(str(dataset_path))
    return None if mapping is None else mapping(dataset_name, split)[0]


def needed_splits(config: Mapping[str, Any], num_fewshot: int | None) -> tuple[str, list[str]]:
    """(the evaluation split, the few-shot splits a run with ``num_fewshot`` examples reads) of a task
    config: the evaluation split is ``test_split``, else ``validation_split``; the few-shot split is
    ``fewshot_split``, else ``training_split``/``validation_split`` as lm-eval picks it, and none when the
    task brings its own examples (``fewshot_config.samples``) or runs zero-shot."""
    evaluation = config.get("test_split") or config.get("validation_split")
    if evaluation is None:
        raise MissingLocalRows("the task names neither a test_split nor a validation_split")
    fewshot_config = config.get("fewshot_config") or {}
    shots = num_fewshot if num_fewshot is not None else config.get("num_fewshot") or 0
    if not shots or (isinstance(fewshot_config, Mapping) and fewshot_config.get("samples")):
        return str(evaluation), []
    split = config.get("fewshot_split") or config.get("training_split") or config.get("validation_split")
    return str(evaluation), [] if split is None or split == evaluation else [str(split)]


def local_dataset(
    task: str, config: Mapping[str, Any], num_fewshot: int | None = None, root: Path | None = None
) -> Callable[..., datasets.DatasetDict]:
    """A ``custom_dataset`` function that gives the task's splits from the local data folder (``root``, else
    ``CAPCAL_DATA_DIR``): the evaluation split and the few-shot split it needs must exist
    (``MissingLocalRows`` in one line, naming the file, raised here, before any row is read:
    ``analysis.evaluation.harness`` calls it before a model loads); every other split it names is read when
    its file is there, else empty (a run that does not ask for its examples never reads it)."""
    path, name = config.get("dataset_path"), config.get("dataset_name")
    evaluation, fewshot = needed_splits(config, num_fewshot)
    named = {
        config.get(key)
        for key in ("test_split", "validation_split", "training_split", "fewshot_split")
        if config.get(key)
    }
    folder = root if root is not None else local_data_dir()
    if folder is None:
        raise MissingLocalRows(f"task {task}: no local data folder is set ({DATA_DIR_ENV}, --data_dir)")
    reads: dict[str, tuple[Path, Reader]] = {}
    mapping = LOCAL_FILES.get(str(path))
    for split in [evaluation, *fewshot]:
        relative, reader = mapping(name, split) if mapping is not None else (None, read_jsonl)
        if relative is None:
            shown = f"{path}" + (f" ({name})" if name else "") + f", split {split}"
            raise MissingLocalRows(
                f"task {task} reads {shown}, which capcal maps to no local file (capcal_tasks.local_rows); "
                f"unset {DATA_DIR_ENV} to read it from the hub"
            )
        if not (folder / relative).exists():
            raise MissingLocalRows(
                f"task {task} reads {path}" + (f" ({name})" if name else "") + f", split {split}, from "
                f"{folder / relative}, which is not there; put that file there or unset {DATA_DIR_ENV}"
            )
        reads[split] = (folder / relative, reader)

    for split in sorted(str(split) for split in named - set(reads)):  # read when there, else empty below
        relative, reader = mapping(name, split) if mapping is not None else (None, read_jsonl)
        if relative is not None and (folder / relative).exists():
            reads[split] = (folder / relative, reader)

    def custom_dataset(**_: Any) -> datasets.DatasetDict:
        splits = {split: datasets.Dataset.from_list(reader(file)) for split, (file, reader) in reads.items()}
        for split in named - set(splits):  # named by the task, not there, and not needed by this run
            splits[str(split)] = datasets.Dataset.from_list([])
        return datasets.DatasetDict(splits)

    return custom_dataset
