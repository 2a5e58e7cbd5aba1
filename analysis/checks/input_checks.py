"""Checks of a run's inputs against the tasks it asks for, made before any model is loaded.

``analysis.evaluation.check_inputs`` calls these once the task names are resolved to their YAML configs:

- ``chat_template_problem``: an instruct (chat) model, recognised by a chat template in its checkpoint's
  tokenizer files, run without ``--apply_chat_template`` on a capcal task whose prompts are written for one
  (every capcal task except the base-model prompt variants, which declare ``capcal_questions_of``). Measured:
  SmolLM2-135M-Instruct answers capcal_arithmetic's plain prompt with the empty string for all 12 of 12
  responses. This is refused (exit status 2); ``plain_prompts=True`` (``--plain_prompts``) runs it anyway.
- ``run_settings_problem``: settings lm-eval would take and fail on only after the model is loaded (or,
  for an output folder that cannot be written, after the whole run): ``output_path``, ``gen_kwargs``
  (``max_gen_toks``, ``temperature``, ``top_p``, ``until``), ``num_fewshot``, ``batch_size``.
- ``device_problem``: a CUDA device for a Hugging Face model (``hf``, ``capcal-hf``) on a machine without it:
  ``cuda`` is refused (lm-eval would fail on loading the model), ``cuda:N`` falls back to the CPU (lm-eval's
  own fallback) and says so.
- ``repeats_notices``: what a ``repeats`` (k) below what capcal's analyses need leaves out: with k = 1
  mu_hat is 0 or 1, so capability calibration is response calibration; the consistency estimator uses
  k' in (5, 10, 20) responses below k, so it needs k >= ``CONSISTENCY_MIN_K``. These are warnings: the run
  is still valid.
- ``fewshot_problem``: ``--num_fewshot N > 0`` on a capcal task without a few-shot split of its own (lm-eval
  would draw the examples from the evaluation split itself); refused.
- ``sample_cache_problem``: capcal's engines' sample cache (``$CAPCAL_HOME/cache/<engine>/samples.sqlite`` or
  ``cache_path``) where it cannot be written; refused.
- ``log_samples_notice``: a run of capcal's sampling or confidence tasks without ``--log_samples`` leaves
  ``capcal check`` and ``report`` nothing to read; a warning.

Greedy decoding with k > 1 is refused by ``analysis.checks.greedy_decoding``.

Nothing here loads a model or a dataset; checkpoints are read as JSON files. Importing this module does not
import lm-eval (``check_inputs`` calls ``run_settings_problem`` before the task names are screened).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CONSISTENCY_MIN_K",
    "chat_template_problem",
    "checkpoint_has_chat_template",
    "device_problem",
    "expects_chat_template",
    "fewshot_problem",
    "log_samples_notice",
    "repeats_notices",
    "run_settings_problem",
    "MAX_REPEATS",
    "MAX_SAMPLES",
    "SAMPLE_CACHE_BACKENDS",
    "missing_chat_template_problem",
    "planned_samples",
    "repeats_problem",
    "sample_cache_problem",
    "sample_count_problem",
    "sample_plan_line",
    "writable_file_problem",
    "writable_folder_problem",
]

#: The smallest k with a consistency estimate (``analysis.report.registry.consistency``: k' in (5, 10, 20)
#: strictly below the responses per question).
CONSISTENCY_MIN_K = 6


def checkpoint_has_chat_template(folder: str | Path) -> bool | None:
    """Whether the tokenizer of the checkpoint in ``folder`` has a chat template (a non-empty
    ``chat_template`` in ``tokenizer_config.json``, or a ``chat_template.jinja`` / ``chat_template.json``
    file, as transformers reads them); None when ``folder`` is not a local folder (a hub id) or its
    tokenizer config cannot be read."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        return None
    manifest = _json_object(path / "capcal_model.json")  # a model prepared by ``capcal models prepare``
    if isinstance(manifest.get("has_chat_template"), bool):
        return manifest["has_chat_template"]
    if (path / "chat_template.jinja").is_file() or (path / "chat_template.json").is_file():
        return True
    try:
        config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return bool(config.get("chat_template")) if isinstance(config, dict) else None


def _json_object(path: Path) -> dict:
    """The JSON object in ``path``, empty when it is missing, unreadable or not an object."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def missing_chat_template_problem(
    model_args: Mapping[str, Any], apply_chat_template: bool | str
) -> str | None:
    """The one-line refusal for ``--apply_chat_template`` on a model whose local tokenizer has no chat
    template (``checkpoint_has_chat_template`` False: transformers would raise only after the model
    loaded), or None (not asked, a hub id, or a template present)."""
    if not apply_chat_template:
        return None
    source = model_args.get("tokenizer") or model_args.get("pretrained")
    if not isinstance(source, str) or checkpoint_has_chat_template(source) is not False:
        return None
    return (
        f"--apply_chat_template: {source} has no chat template (a base model); run it without "
        "--apply_chat_template, on a task's base-model prompt variant where there is one (e.g. "
        "capcal_arithmetic_qa)"
    )


def expects_chat_template(config: Mapping[str, Any]) -> bool:
    """Whether a task config's prompts are written for a chat template: a capcal task
    (``metadata.capcal_task``) that is not a base-model prompt variant (``metadata.capcal_questions_of``,
    ``capcal_tasks.relations``)."""
    metadata = config.get("metadata") or {}
    return (
        isinstance(metadata, Mapping)
        and bool(metadata.get("capcal_task"))
        and not metadata.get("capcal_questions_of")
    )


def chat_template_problem(
    model_args: Mapping[str, Any],
    configs: Mapping[str, Mapping[str, Any]],
    apply_chat_template: bool | str,
    plain_prompts: bool = False,
) -> str | None:
    """The one-line refusal for a chat model run without its chat template on tasks that expect one, or
    None. The tokenizer is ``model_args["tokenizer"]``, else ``model_args["pretrained"]``, read only when it
    is a local folder (``checkpoint_has_chat_template``). ``configs``: task name -> YAML config."""
    if apply_chat_template or plain_prompts:
        return None
    source = model_args.get("tokenizer") or model_args.get("pretrained")
    if not isinstance(source, str) or not checkpoint_has_chat_template(source):
        return None
    expecting = sorted(name for name, config in configs.items() if expects_chat_template(config))
    if not expecting:
        return None
    return (
        f"{source} is a chat model (its tokenizer has a chat template) and the prompts of "
        f"{_shown(expecting)} are written for "
        "a chat template: add --apply_chat_template (without it such a model may answer nothing at all), or "
        "--plain_prompts to run the plain prompts anyway"
    )


def repeats_notices(repeats: int | None, configs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Warnings for a ``repeats`` (k) that leaves capcal's analyses out, for the tasks in ``configs`` that
    sample k responses per question (``REPEATED_SAMPLING_KINDS``); a ``repeats`` that no task uses is one
    warning too. Empty when ``repeats`` is None (each task's own k) or enough."""
    if repeats is None:
        return []
    from capcal_tasks.task_manager import REPEATED_SAMPLING_KINDS  # lm-eval's task code: not imported before

    sampling = sorted(
        name
        for name, config in configs.items()
        if ((config.get("metadata") or {}).get("capcal_task") if isinstance(config, Mapping) else None)
        in REPEATED_SAMPLING_KINDS
    )
    if not sampling:
        return [f"--repeats {repeats} has no effect: none of the tasks samples k responses per question"]
    names = _shown(sampling)
    if repeats == 1:
        return [
            f"--repeats 1 on {names}: with one response per question mu_hat is 0 or 1, so capability "
            "calibration is only response calibration; the consistency estimator "
            f"(k >= {CONSISTENCY_MIN_K}), pass@k for k > 1 and majority vote will be missing; use "
            "--repeats 16 (the tasks' default)"
        ]
    if repeats < CONSISTENCY_MIN_K:
        return [
            f"--repeats {repeats} on {names}: the consistency estimator needs k >= {CONSISTENCY_MIN_K} and "
            f"will be missing, and mu_hat takes only {repeats + 1} values; use --repeats 16 (the tasks' "
            "default)"
        ]
    return []


def writable_folder_problem(folder: str | Path) -> str | None:
    """Why ``folder`` cannot be created or written into (its nearest existing ancestor is a file, or not
    writable: denied by its permissions, or a file made there and removed at once fails, as on a read-only
    file system, where permissions do not tell and root passes ``os.access``), or None."""
    existing = Path(folder).expanduser()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        return f"{existing} is not writable ({error.strerror or error})"
    return None


def writable_file_problem(path: str | Path) -> str | None:
    """Why the file ``path`` cannot be written (a folder there, an existing file that is not writable, or a
    folder it cannot be created in: ``writable_folder_problem``), or None."""
    target = Path(path).expanduser()
    if target.is_dir():
        return f"{target} is a folder, not a file"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{target} is not writable"
    return writable_folder_problem(target.parent)


def _output_path_problem(output_path: str | Path) -> str | None:
    """Why results cannot be written under ``output_path`` (a folder, or a ``.json`` file name), or None."""
    path = Path(output_path).expanduser()
    if path.is_file() and path.suffix != ".json":
        return f"output_path {output_path}: a file, not a folder"
    problem = writable_folder_problem(path.parent if path.suffix == ".json" else path)
    return None if problem is None else f"output_path {output_path}: {problem}"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def run_settings_problem(
    output_path: str | Path | None = None,
    gen_kwargs: Mapping[str, Any] | None = None,
    num_fewshot: int | None = None,
    batch_size: int | str | None = None,
) -> str | None:
    """The first setting that cannot work, as one line, or None: ``output_path`` not writable (a file, or
    under a file or a folder without write permission); ``gen_kwargs``' ``max_gen_toks`` not a positive
    integer, ``temperature`` negative or not a number, ``top_p`` outside (0, 1], ``until`` not text or a
    list of texts; ``num_fewshot`` negative; ``batch_size`` not a positive integer, ``auto`` or ``auto:N``."""
    if output_path is not None:
        problem = _output_path_problem(output_path)
        if problem is not None:
            return problem
    settings = dict(gen_kwargs or {})
    tokens = settings.get("max_gen_toks")
    if "max_gen_toks" in settings and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        return f"gen_kwargs max_gen_toks={tokens!r}: must be a positive integer"
    temperature = settings.get("temperature")
    if "temperature" in settings and (not _is_number(temperature) or temperature < 0):
        return f"gen_kwargs temperature={temperature!r}: must be a number >= 0"
    top_p = settings.get("top_p")
    if "top_p" in settings and (not _is_number(top_p) or not 0 < top_p <= 1):
        return f"gen_kwargs top_p={top_p!r}: must be in (0, 1]"
    until = settings.get("until")
    if "until" in settings and not (
        isinstance(until, str) or (isinstance(until, list) and all(isinstance(u, str) for u in until))
    ):
        return f"gen_kwargs until={until!r}: must be a text or a list of texts"
    if num_fewshot is not None and (not isinstance(num_fewshot, int) or num_fewshot < 0):
        return f"num_fewshot {num_fewshot!r}: must be an integer >= 0"
    if batch_size is not None:
        text = str(batch_size)
        if not (re.fullmatch(r"[1-9]\d*", text) or re.fullmatch(r"auto(:[1-9]\d*)?", text)):
            return f"batch_size {batch_size!r}: must be a positive integer, auto or auto:N"
    return None


def _shown(names: Sequence[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


#: ``--repeats`` above this is refused without ``allow_large``: mu_hat's standard error sqrt(mu(1-mu)/k) is at
#: most 0.5/sqrt(k) = 0.016 at k = 1000, far below the spread between questions that calibration measures
#: (the papers use k <= 100).
MAX_REPEATS = 1000
#: A run drawing more responses than this is refused without ``allow_large``: it is above a paper-scale run on
#: the largest bundled evaluation set (GSM8K's 1,319 questions x k = 100 = 131,900), and at the 2-core CPU's
#: rate in the demo (1,120 responses in 81 s, docs/benchmarks.md) it would take about 10 hours. Cluster runs
#: (docs/scaling-out.md) pass ``--allow_large``.
MAX_SAMPLES = 500_000


def repeats_problem(repeats: int | None, allow_large: bool = False) -> str | None:
    """The one-line refusal of a ``repeats`` above ``MAX_REPEATS`` without ``allow_large``, or None."""
    if repeats is None or allow_large or repeats <= MAX_REPEATS:
        return None
    return (
        f"--repeats {repeats} is above {MAX_REPEATS} responses per question (mu_hat's standard error is "
        f"already at most 0.016 at k = {MAX_REPEATS}); add --allow_large if you mean it"
    )


def planned_samples(
    tasks: Mapping[str, Any], limit: float | None, samples: Mapping[str, Sequence[int]] | None = None
) -> list[tuple[str, int, int]]:
    """(task, questions, k) for each loaded lm-eval task: its evaluation documents cut by ``limit`` as
    lm-eval cuts them (a fraction below 1 rounded up, else a count), or the documents ``samples`` names for
    it (lm-eval's ``--samples``), and its ``repeats``."""
    rows = []
    for name, task in tasks.items():
        questions = len(task.eval_docs)
        if samples and name in samples:
            questions = min(questions, len(samples[name]))
        elif limit is not None:
            questions = min(questions, math.ceil(questions * limit) if limit < 1 else int(limit))
        rows.append((str(name), questions, int(getattr(task.config, "repeats", None) or 1)))
    return rows


def sample_plan_line(rows: Sequence[tuple[str, int, int]]) -> str:
    """``will draw N responses (task: Q questions x k = K, ...)``: what a run is about to sample."""
    total = sum(questions * k for _, questions, k in rows)
    parts = ", ".join(f"{name}: {questions} questions x k = {k}" for name, questions, k in rows)
    return f"will draw {total:,} responses ({parts})"


def sample_count_problem(rows: Sequence[tuple[str, int, int]], allow_large: bool = False) -> str | None:
    """The one-line refusal of a run drawing more than ``MAX_SAMPLES`` responses without ``allow_large``."""
    total = sum(questions * k for _, questions, k in rows)
    if allow_large or total <= MAX_SAMPLES:
        return None
    return (
        f"this run would draw {total:,} responses, above {MAX_SAMPLES:,} (a paper-scale run; about 10 hours "
        "on a 2-core CPU); lower --repeats or --limit, or add --allow_large if you mean it"
    )


def fewshot_problem(num_fewshot: int | None, configs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The one-line refusal of ``num_fewshot`` > 0 (``--num_fewshot``, else a task YAML's own) on capcal's
    tasks (``metadata.capcal_task``) that have no few-shot split of their own, or None. lm-eval 0.4.13 draws
    a task's examples from its ``fewshot_split``, else its training or validation split, else, with a
    warning only, from the evaluation split itself (``Task.fewshot_docs``): a prompt would then show other
    test questions with their bare gold answers, and a gold that is a number stops lm-eval with
    ``AssertionError: Answer is not a string!``. A few-shot source counts when it is a split other than
    ``test_split`` (``fewshot_split``, ``training_split``, ``validation_split``) or
    ``fewshot_config.samples``; capcal_arithmetic (and its base-model prompt variant capcal_arithmetic_qa,
    and the calibration task on its questions) draws its examples from the disjoint ``train`` split."""
    without, with_split = [], []
    for name, config in configs.items():
        metadata = config.get("metadata") or {}
        if not (isinstance(metadata, Mapping) and metadata.get("capcal_task")):
            continue
        shots = num_fewshot if num_fewshot is not None else config.get("num_fewshot")
        if not isinstance(shots, int) or shots <= 0:
            continue
        test = config.get("test_split")
        splits = [config.get(key) for key in ("fewshot_split", "training_split", "validation_split")]
        fewshot_config = config.get("fewshot_config")
        samples = fewshot_config.get("samples") if isinstance(fewshot_config, Mapping) else None
        if samples is not None or any(split is not None and split != test for split in splits):
            with_split.append(name)
        else:
            without.append(name)
    if not without:
        return None
    flag = f"--num_fewshot {num_fewshot}" if num_fewshot is not None else "num_fewshot (in the task's YAML)"
    return (
        f"{flag}: {_shown(sorted(without))} {'has' if len(without) == 1 else 'have'} no few-shot split, so "
        "lm-eval would draw the examples from the evaluation questions themselves; run without "
        "--num_fewshot (capcal's prompts are zero-shot; capcal_arithmetic and capcal_arithmetic_qa take "
        "examples from their train split)"
    )


#: capcal's models that keep an on-disk sample cache (``capcal_models.sample_cache``), by backend folder.
SAMPLE_CACHE_BACKENDS = {"capcal-hf": "hf", "capcal-vllm": "vllm", "capcal-api": "api"}


def sample_cache_problem(model: Any, model_args: Mapping[str, Any]) -> str | None:
    """The one-line refusal of a run whose sample cache cannot be written (the wrapper would fail with a
    bare ``OSError`` once the model is loaded), or None: for ``capcal-hf``, ``capcal-vllm`` and
    ``capcal-api`` with the cache on (``sample_cache``, default true), ``cache_path``, by default
    ``$CAPCAL_HOME/cache/<backend>/samples.sqlite`` (``capcal_models.sample_cache.open_sample_cache``), must
    be a writable file in a writable folder (``writable_file_problem``; SQLite writes a journal beside it)."""
    backend = SAMPLE_CACHE_BACKENDS.get(model) if isinstance(model, str) else None
    if backend is None:
        return None
    from capcal_tasks.settings import capcal_home, parse_bool

    try:
        enabled = parse_bool(model_args.get("sample_cache", True))
    except ValueError:
        return None  # the wrapper names the bad value itself
    if not enabled:
        return None
    given = model_args.get("cache_path")
    path = Path(str(given)) if given else capcal_home() / "cache" / backend / "samples.sqlite"
    problem = writable_file_problem(path)
    if problem is None:
        return None
    where = f"cache_path={given}" if given else f"the sample cache {path} (under CAPCAL_HOME)"
    return (
        f"{where}: {problem}; set CAPCAL_HOME to a writable folder, or add cache_path=FILE (a writable "
        "place) or sample_cache=false to --model_args"
    )


def log_samples_notice(
    log_samples: bool, output_path: str | Path | None, configs: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """The warning for a run of capcal's sampling or confidence tasks without ``log_samples``: ``capcal
    check``, ``analyze`` and ``report`` read the samples files (``samples_<task>_<time>.jsonl``), so such a
    run leaves them nothing (the leaderboard tasks ``capcal_<dataset>_calibration`` report their columns
    in the results file and are left out). A warning, not a refusal: lm-eval's aggregate table (printed,
    or saved with ``output_path``) is still a valid result. None when samples are logged or no such task
    runs."""
    if log_samples:
        return None
    tasks = sorted(
        name
        for name, config in configs.items()
        if isinstance(config.get("metadata"), Mapping)
        and config["metadata"].get("capcal_task") not in (None, "leaderboard")
    )
    if not tasks:
        return None
    fix = "add --log_samples" if output_path is not None else "add --log_samples --output_path DIR"
    return (
        f"no --log_samples: the responses of {_shown(tasks)} will not be saved, and capcal check, analyze "
        f"and report read nothing but them; {fix} to keep this run for them"
    )


#: lm-eval's Hugging Face model names, whose ``--device`` ``device_problem`` checks.
HF_MODEL_NAMES = frozenset({"hf", "hf-auto", "huggingface", "capcal-hf"})


def device_problem(model: Any, device: str | None) -> tuple[str | None, str | None]:
    """(refusal, notice) for ``--device`` of a Hugging Face model given by name; (None, None) otherwise.

    Without a usable CUDA device (torch without CUDA, or no GPU): ``cuda`` is refused in one line (lm-eval's
    ``HFLM`` takes it as given and fails on loading the model: "Torch not compiled with CUDA enabled");
    ``cuda:N`` is kept, and the notice says that lm-eval runs the model on the CPU instead (``HFLM`` falls
    back to the CPU for a device it does not list). With CUDA, ``cuda:N`` beyond the GPUs falls back to
    ``cuda`` (the notice says so). Imports torch (not lm-eval).
    """
    if not isinstance(model, str) or model not in HF_MODEL_NAMES or not isinstance(device, str):
        return None, None
    name = device.strip().lower()
    if name != "cuda" and not re.fullmatch(r"cuda:\d+", name):
        return None, None
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if name == "cuda":
        if count:
            return None, None
        version = torch.__version__
        return f"--device {device}: this machine has no CUDA device (torch {version}); use --device cpu", None
    if int(name.split(":")[1]) < count:
        return None, None
    fallback = "cuda" if count else "the CPU"
    return None, f"--device {device}: no such CUDA device here; the model runs on {fallback}"
