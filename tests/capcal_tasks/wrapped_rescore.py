"""The re-score check of a wrapped stock task's logged samples (capcal_tasks.sampled_task), whatever
engine drew them: every samples line is a capcal sampling record with k responses, and each response's 0/1
label is the UNMODIFIED lm-eval task's own score of that response alone (its YAML as lm-eval defines it,
nothing of capcal's: its whole filter pipeline, ``take_first`` included, then its own ``process_results``).
The same check of a wrapped calibration task's lines (capcal_tasks.sampled_calibration): its sampling
responses and labels. Used by test_sampled_task_runs.py (capcal-hf, stock ``lm_eval``), test_vllm.py
(capcal-vllm) and test_api.py (capcal-api); loaded by path through the ``wrapped_rescore`` fixture
(tests/conftest.py): the test folders are not packages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import datasets
from lm_eval.api.task import ConfigurableTask
from lm_eval.tasks._yaml_loader import load_yaml

from capcal_tasks.sampling import parse_sampling_record
from capcal_tasks.task_names import lm_eval_tasks_dir


def unmodified_task(relative: str, data_dir: Path) -> ConfigurableTask:
    """lm-eval's task as its YAML ``relative`` (under lm-eval's task folder) defines it (nothing of capcal's),
    its rows from ``data_dir``."""
    from capcal_tasks.local_rows import local_dataset

    path = lm_eval_tasks_dir() / relative
    config = load_yaml(path, resolve_func=True)
    for key in ("tag", "group"):
        config.pop(key, None)
    raw = load_yaml(path, resolve_func=False, recursive=True)
    rows = local_dataset(config["task"], raw, root=data_dir)()
    config["custom_dataset"] = lambda **_: datasets.DatasetDict(dict(rows))
    return ConfigurableTask(config=config)


def check_labels_are_the_unmodified_tasks_scores(
    lines: Sequence[dict],
    task: str,
    relative: str,
    pipeline: str,
    metric: str,
    data_dir: Path,
    k: int,
) -> None:
    """Assert that the samples ``lines`` of the wrapped task ``task`` are capcal sampling records of ``k``
    responses from pipeline ``pipeline``, on the unmodified task's docs, each ``correctness[i]`` the
    unmodified task's ``metric`` of response i alone and each extracted answer that pipeline's output (a
    regex filter's fallback scored incorrect logged as null), with ``expected_accuracy`` = c/k and the task's
    own metric its mean over the k responses."""
    for line in _checked_lines(lines, task, relative, pipeline, metric, data_dir, k):
        where = f"{task} doc {line['doc_id']}"
        record = parse_sampling_record(line, where, task)  # a capcal sampling record (RunFormatError if not)
        assert record["n"] == k and line["n_samples"] == k, (where, record["n"])
        assert abs(line[metric] - line["expected_accuracy"]) < 1e-9, (where, line[metric])


def check_calibration_labels_are_the_unmodified_tasks_scores(
    lines: Sequence[dict],
    task: str,
    relative: str,
    pipeline: str,
    metric: str,
    data_dir: Path,
    k: int,
) -> None:
    """As ``check_labels_are_the_unmodified_tasks_scores`` for the samples ``lines`` of a wrapped calibration
    task (``capcal_tasks.sampled_calibration``): its sampling request's k responses (the first of each line's
    requests) labelled as the unmodified task labels each alone, and ``expected_accuracy`` = c/k."""
    for line in _checked_lines(lines, task, relative, pipeline, metric, data_dir, k):
        assert "n_samples" not in line, line["doc_id"]  # a calibration row, not a sampling record


def _checked_lines(
    lines: Sequence[dict],
    task: str,
    relative: str,
    pipeline: str,
    metric: str,
    data_dir: Path,
    k: int,
) -> Sequence[dict]:
    """``lines`` once each line's k responses (``resps[0]``), pipeline, doc, ``correctness``,
    ``extracted_answers`` and ``expected_accuracy`` are checked against the unmodified task."""
    unmodified = unmodified_task(relative, data_dir)
    unmodified.build_all_requests(limit=max(line["doc_id"] for line in lines) + 1, rank=0, world_size=1)
    instances = {instance.doc_id: instance for instance in unmodified.instances}
    for instance in instances.values():
        instance.resps = [""]  # each response below is scored with the other questions' responses empty
    for line in lines:
        where = f"{task} doc {line['doc_id']}"
        assert line["filter"] == pipeline, (where, line["filter"])
        responses = line["resps"][0]
        assert len(responses) == len(line["correctness"]) == k, where
        instance = instances[line["doc_id"]]
        assert line["doc"] == json.loads(json.dumps(instance.doc, default=str)), where
        for index, response in enumerate(responses):
            instance.resps = [response]  # this response alone, through the task's whole pipeline
            unmodified.apply_filters()
            filtered = instance.filtered_resps[pipeline]
            label = unmodified.process_results(instance.doc, [filtered])[metric]
            assert line["correctness"][index] == int(label), (where, index, response)
            logged = line["extracted_answers"][index]
            assert logged == filtered or (logged is None and filtered == "[invalid]" and not label), (
                where,
                index,
                logged,
                filtered,
            )
        assert line["expected_accuracy"] == sum(line["correctness"]) / k, where
    return lines
