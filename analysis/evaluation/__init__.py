"""Producing lm-eval runs: the libraries behind ``capcal eval`` and ``capcal rescore`` (and ``capcal demo``,
``analysis.demo``, which runs them and then the report).

- ``harness``: ``evaluate`` (lm-eval's ``simple_evaluate`` with capcal's tasks and models; ``capcal eval``),
  with its input checks and its saved files; its names are importable from ``analysis.evaluation`` itself
  (``from analysis.evaluation import evaluate``).
- ``adaptive``: ``evaluate_adaptive`` (``capcal eval --adaptive``): each question sampled at fixed looks
  until its stopping rule fires, records with the estimates that stay unbiased after the stop.
- ``lm_eval_messages``: lm-eval's misleading log lines, filtered while ``evaluate`` runs.
- ``rescore``: a run's logged responses judged again by another checker, written as a new run
  (``capcal rescore``).

The checks of what a run is given and what it returns are in :mod:`analysis.checks`.
"""

from __future__ import annotations

from analysis.evaluation.adaptive import evaluate_adaptive
from analysis.evaluation.harness import (
    CheckedInputs,
    EvaluationInputError,
    accepted_model_arguments,
    check_inputs,
    data_dir_setting,
    evaluate,
    format_results,
    parse_key_values,
    saved_files,
)

__all__ = [
    "CheckedInputs",
    "EvaluationInputError",
    "accepted_model_arguments",
    "check_inputs",
    "data_dir_setting",
    "evaluate",
    "evaluate_adaptive",
    "format_results",
    "parse_key_values",
    "saved_files",
]
