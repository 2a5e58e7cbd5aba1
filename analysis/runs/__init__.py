"""From lm-eval output folders to validated per-question tables: the data path, in order.

1. **Folders -> files** (``analysis.runs.files``): lm-eval's results and samples files, found by name and
   read strictly.
2. **Files -> runs** (``analysis.runs.identity``, ``analysis.runs.discovery``): each samples file paired with
   its results file; each run's content identity and its model's identity; copies read once.
3. **Runs -> records** (``analysis.runs.records``): every line of a run's samples file validated (and
   re-checked) into a row, streamed.
4. **Records -> tables** (``analysis.runs.selection``, ``analysis.runs.tables``): one run used per (model,
   task), the per-question and confidence tables, and an account of every run seen (``load_runs``).
5. **Tables -> checked and joined** (``analysis.runs.validation``: the checks of the tables' values that the
   estimators and applications take; ``analysis.runs.joins``: joins that say what they could not match;
   ``analysis.runs.completeness``: is each run complete, ``capcal check``; ``analysis.runs.activations``:
   prompt activations joined to a table's questions).

``load_runs``, ``load_run`` and the other names below are importable from ``analysis.runs`` itself.

lm-eval writes ``<output>/<model>/results_<time>.json`` and, with ``--log_samples``,
``samples_<task>_<time>.jsonl`` beside it. One *run* is one task's samples file with its results file.

- **Discovery** walks each folder, following symlinked folders; a folder reached again (a symlink loop, a
  folder given twice, a folder and its own sub-folder) is walked once. A directory named like a results or
  samples file is skipped, with the reason recorded (``RunCollection.skipped``).
- **Run identity** is the run's own content: ``run_key`` = sha256 of (its results file's sha256, its
  samples file's bytes). Two copies of one run (a ``backup/`` copy inside the output folder) are read
  once; the copy left out is listed in ``RunCollection.duplicates`` (as is a folder reached twice).
- **Model identity** (``capcal_models.model_identity``): the results file's ``capcal_model.fingerprint``,
  else the fingerprint of the checkpoint named in its ``config.model_args`` when that folder exists, else
  ``unresolved:<label>``. lm-eval's ``model_name`` is only a label: a trailing slash or a symlink to the
  same checkpoint joins; two checkpoints under one name do not.
- **Selection**: where a (model, task) has several runs, ``load_runs`` uses the latest (``run_id``, the
  time in the file name) unless ``select`` names others, and records in ``RunCollection.runs`` which runs it
  used and why it left out the others. Runs it never uses are listed there too, with the reason: a
  leaderboard task (``capcal_<dataset>_calibration``: its calibration columns are in the results file), a
  task of a results file without its samples file, or a samples file without capcal records.
- **Records** are validated by the module that writes them: sampling records by
  ``capcal_tasks.sampling.parse_sampling_record`` (and, for capcal's tasks with a cheap deterministic
  checker, re-scored by the task's own ``process_results`` against the gold in the logged doc), confidence
  records by
  ``capcal_tasks.confidence.records.parse_confidence_record``; JSON strictly by ``capcal_tasks.records``.
  Any violation raises ``RunFormatError`` (a ``ValueError``) naming the file and line.
- **Re-scored runs** (``capcal rescore``, ``analysis.rescore``): a results file with ``capcal_rescore``
  holds another checker's labels for a run's logged responses. It is a run of the same (model, task) like any
  other; its records are re-checked with the checker it records when that one is a cheap rule (not with the
  task's own, unless that is the one recorded), and the ``labels`` column of ``runs`` says which labels each
  run holds ("task checker" or "rescored: <checker> (<version>)[, judge <model>]"). Its questions carry
  ``source_correctness``.

The per-question table (``RunCollection.questions``, ``load_run``) has one row per (model, task, run,
question)::

    model, model_id, task, run_id, run_key, doc_id, question_id, question, target, first_response,
    extracted_answers, correctness, n, expected_accuracy, majority_vote_accuracy, pass_at_1, pass_at_2, ...

**Responses are streamed.** Each samples line is parsed, validated (and re-checked) and dropped; the table
keeps the first response of each question (``first_response``) and, only with ``responses=True``, every
response (a ``responses`` column of lists). A run of 14,000 questions x 100 responses of 4 KB (11 GB of
samples) is read in bounded memory that way (``benchmarks/scale_run.py``).
"""

from __future__ import annotations

from analysis.runs.discovery import LEADERBOARD_REASON, find_samples_files
from analysis.runs.files import iter_sample_records
from analysis.runs.identity import SamplesFile
from analysis.runs.tables import (
    CONFIDENCE_COLUMNS,
    QUESTION_COLUMNS,
    RUN_COLUMNS,
    RunCollection,
    load_run,
    load_runs,
    load_table,
    summarize,
    write_question_table,
)
from capcal_tasks.records import RunFormatError

__all__ = [
    "CONFIDENCE_COLUMNS",
    "LEADERBOARD_REASON",
    "QUESTION_COLUMNS",
    "RUN_COLUMNS",
    "RunCollection",
    "RunFormatError",
    "SamplesFile",
    "find_samples_files",
    "iter_sample_records",
    "load_run",
    "load_runs",
    "load_table",
    "summarize",
    "write_question_table",
]
