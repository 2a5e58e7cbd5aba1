"""Running lm-eval with capcal's tasks and models: the library behind ``capcal eval``.

``evaluate`` is ``lm_eval.simple_evaluate`` with a ``CapcalTaskManager`` (capcal's tasks on the include
path, ``repeats`` applied to capcal's sampling tasks) and ``data_dir`` (task data from a local folder, or
``"bundled"`` for the data shipped with capcal, instead of the hub). Given ``output_path`` it saves the
results (and, with ``log_samples``, the samples) as ``lm_eval --output_path`` does, with lm-eval's
``EvaluationTracker``, plus the top-level key ``"capcal_model"`` (what checkpoint was evaluated). It checks
its inputs (``check_inputs``) before a model is loaded: each problem is one ``EvaluationInputError`` line,
and what would only weaken the analysis is a notice (``CheckedInputs.notices``, handed to ``notify``).
After the run, ``analysis.checks.response_checks.response_notices`` says which tasks' responses came back
mostly empty or unparseable, and why when it can tell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import logging
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from capcal_tasks.settings import BUNDLED, CONFIDENCES_KEY, DATA_DIR_ENV

__all__ = [
    "CheckedInputs",
    "EvaluationInputError",
    "accepted_model_arguments",
    "check_inputs",
    "data_dir_setting",
    "earlier_run_model_problem",
    "evaluate",
    "format_results",
    "parse_key_values",
    "save_run",
    "saved_files",
]

# lm-eval models whose ``pretrained`` is a checkpoint on this machine (or a hub id): a value that looks like a
# path must exist. API models name a model on a server instead.
LOCAL_CHECKPOINT_MODELS = frozenset({"hf", "hf-auto", "huggingface", "capcal-hf", "vllm", "capcal-vllm"})

# Keyword arguments that HFLM passes on to transformers' ``from_pretrained`` (besides its own parameters).
HF_FROM_PRETRAINED_ARGUMENTS = frozenset(
    """adapter_kwargs adapter_name attn_implementation bnb_4bit_compute_dtype bnb_4bit_quant_type
    bnb_4bit_use_double_quant cache_dir config device_map force_download generation_config
    ignore_mismatched_sizes key_mapping load_in_4bit load_in_8bit local_files_only low_cpu_mem_usage
    max_memory offload_buffers output_loading_info proxies quantization_config token torch_dtype
    use_flash_attention_2 use_kernels use_safetensors variant weights_only""".split()
)


class EvaluationInputError(ValueError):
    """An input of ``evaluate`` (or ``capcal eval``) that cannot work; the message is one line naming it."""


@dataclasses.dataclass(frozen=True)
class CheckedInputs:
    """What ``check_inputs`` resolved: the task manager (its index built once), the task names or configs
    to load, the model arguments, the task metadata (``model_args | metadata``, as lm-eval's CLI merges
    them), each task's YAML config by name, and the notices (one line each: what the run will lack)."""

    task_manager: Any
    tasks: list[str | dict]
    model_args: dict[str, Any]
    metadata: dict[str, Any]
    configs: dict[str, dict] = dataclasses.field(default_factory=dict)
    notices: list[str] = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def data_dir_setting(data_dir: str | Path | None) -> Iterator[None]:
    """Within the block, tasks read local data from ``data_dir`` (None leaves the current setting)."""
    if data_dir is None:
        yield
        return
    value = BUNDLED if str(data_dir) == BUNDLED else str(Path(data_dir).expanduser().resolve())
    previous = os.environ.get(DATA_DIR_ENV)
    os.environ[DATA_DIR_ENV] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(DATA_DIR_ENV, None)
        else:
            os.environ[DATA_DIR_ENV] = previous


def parse_key_values(
    value: str | Mapping[str, Any] | None, what: str = "model arguments", list_keys: Collection[str] = ()
) -> dict[str, Any]:
    """lm-eval's dictionary arguments (model arguments, ``gen_kwargs``, task metadata) as a dict, values
    parsed as lm-eval parses them (``capcal_models.model_identity.parse_model_args`` with ``typed=True``;
    ``list_keys``: keys whose value is a comma-separated list). Raises ``EvaluationInputError`` naming
    ``what``."""
    from capcal_models.model_identity import parse_model_args

    try:
        return parse_model_args(value, typed=True, what=what, list_keys=list_keys)
    except ValueError as error:
        raise EvaluationInputError(str(error)) from None


def accepted_model_arguments(model_class: type) -> frozenset[str]:
    """The model-argument names ``model_class`` accepts: the named parameters of every ``__init__`` along its
    class hierarchy, plus what HFLM hands to transformers' ``from_pretrained`` and vLLM to its engine."""
    names: set[str] = set()
    for klass in model_class.__mro__:
        init = vars(klass).get("__init__")
        if klass is object or init is None:
            continue
        for parameter in inspect.signature(init).parameters.values():
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                names.add(parameter.name)
    names.discard("self")
    module_names = {klass.__module__ for klass in model_class.__mro__}
    if "lm_eval.models.huggingface" in module_names:
        names |= HF_FROM_PRETRAINED_ARGUMENTS
    if "lm_eval.models.vllm_causallms" in module_names:
        from vllm import EngineArgs

        names |= {field.name for field in dataclasses.fields(EngineArgs)}
    return frozenset(names)


def _looks_like_path(value: str) -> bool:
    """A local path rather than a hub id (``org/name``): absolute, relative with ./ ../ or ~, or deeper."""
    return value.startswith(("/", "./", "../", "~", ".\\")) or value.count("/") >= 2 or value.endswith("/")


def _check_model(model: str, model_args: dict[str, Any]) -> None:
    from lm_eval.api.registry import MODEL_REGISTRY

    from capcal_models.registry import register_models

    register_models()
    if model not in MODEL_REGISTRY:
        close = difflib.get_close_matches(model, list(MODEL_REGISTRY), n=3, cutoff=0.6)
        hint = f"; did you mean {_alternatives(close)}?" if close else ""
        raise EvaluationInputError(f"unknown model {model}{hint}")
    try:
        model_class = MODEL_REGISTRY.get(model)
    except ImportError as error:
        raise EvaluationInputError(f"model {model} cannot be loaded here: {error}") from None
    accepted = accepted_model_arguments(model_class)
    for name in model_args:
        if name not in accepted:
            close = difflib.get_close_matches(name, sorted(accepted), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            where = f"{model_class.__module__}.{model_class.__qualname__}"
            raise EvaluationInputError(f"unknown model argument {name} for {model} ({where}){hint}")
    keys = ("pretrained", "tokenizer") if model in LOCAL_CHECKPOINT_MODELS else ("tokenizer",)
    for key in keys:
        value = model_args.get(key)
        if isinstance(value, str) and _looks_like_path(value) and not Path(value).expanduser().exists():
            raise EvaluationInputError(f"{key}={value}: no such file or folder")
    from analysis.checks.input_checks import writable_folder_problem

    activations = model_args.get("activations")  # capcal-hf writes there after the model has run
    problem = writable_folder_problem(activations) if isinstance(activations, str) else None
    if problem is not None:
        raise EvaluationInputError(f"activations={activations}: {problem}")


def _alternatives(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _data_root(data_dir: str | Path | None) -> Path | None:
    """The local data folder the tasks read (``data_dir``, else ``CAPCAL_DATA_DIR``), None for the hub."""
    from capcal_tasks.data_sources import BUNDLED_DATA_DIR, local_data_dir

    if data_dir is None:
        try:
            return local_data_dir()
        except FileNotFoundError as error:
            raise EvaluationInputError(str(error)) from None
    root = BUNDLED_DATA_DIR if str(data_dir) == BUNDLED else Path(data_dir).expanduser()
    if not root.is_dir():
        raise EvaluationInputError(f"data_dir {data_dir}: no such folder")
    return root.resolve()


# ``dataset_path`` values of lm-eval tasks that name a local file format, not a hub dataset.
_LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow", "generator", "pandas", "webdataset"})


def _missing_data_message(name: str, what: str, local_path: str | None, reason: str) -> str:
    """One line: task ``name`` cannot read ``what``, why, and the fix (``--data_dir bundled`` when capcal
    ships ``local_path``, else a folder holding it)."""
    from capcal_tasks.data_sources import shipped_with_capcal

    if local_path is not None and shipped_with_capcal(local_path):
        fix = "capcal ships this dataset: add --data_dir bundled"
    elif local_path is not None:
        fix = f"pass --data_dir DIR, a folder holding {local_path} (docs/tasks-and-data.md)"
    else:
        fix = "download it where the hub is reachable first"
    return f"task {name} reads {what}, but {reason}; {fix}"


def _capcal_twin(task_manager: Any, name: Any) -> str | None:
    """capcal's task for the dataset of lm-eval's task ``name`` (``capcal_<name>``, e.g. ``capcal_gsm8k``
    for ``gsm8k``) when capcal has one and ships its data, else None."""
    from capcal_tasks.data_sources import data_read_by, shipped_with_capcal

    twin = f"capcal_{name}" if isinstance(name, str) and not name.startswith("capcal_") else None
    if twin is None or twin not in task_manager.all_tasks:
        return None
    loader = task_manager.custom_dataset_of(twin)
    try:
        config = task_manager.task_configs([twin]).get(twin) or {}
        arguments = {**(config.get("metadata") or {}), **(config.get("dataset_kwargs") or {})}
        reads = data_read_by(loader, **arguments) if loader is not None else []
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return twin if reads and all(shipped_with_capcal(read.local_path) for read in reads) else None


def _check_data(task_manager, configs: dict[str, dict], root: Path | None, metadata: dict[str, Any]) -> None:
    """The data every task in ``configs`` reads can be read: with a local data folder ``root``, every file
    capcal's tasks read there exists; without one, every hub dataset they (and lm-eval's tasks) read is
    cached or reachable (``hub_split_problem``). A task reading an earlier run (``samples_file``) or
    generating its data is checked by running its loader."""
    from capcal_tasks.data_sources import (
        BUNDLED_DATA_DIR,
        HubSplit,
        data_read_by,
        hub_split_problem,
        shipped_with_capcal,
    )

    for name, config in configs.items():
        if "custom_dataset" not in config:
            path = config.get("dataset_path")
            kwargs = config.get("dataset_kwargs") or {}
            hub_dataset = (
                root is None
                and isinstance(path, str)
                and path not in _LOCAL_BUILDERS
                and not Path(path).expanduser().exists()
                and not (isinstance(kwargs, dict) and ("data_files" in kwargs or "data_dir" in kwargs))
            )
            if hub_dataset:
                split = str(config.get("test_split") or config.get("validation_split") or "test")
                source = HubSplit(path, config.get("dataset_name"), split)
                reason = hub_split_problem(source)
                if reason is not None:
                    twin = _capcal_twin(task_manager, name)
                    message = _missing_data_message(name, str(source), None, reason)
                    if twin is not None:  # lm-eval's gsm8k offline: capcal's capcal_gsm8k reads bundled data
                        message = (
                            f"task {name} reads {source}, but {reason}; capcal ships this dataset with its "
                            f"own task: --tasks {twin} --data_dir bundled"
                        )
                    raise EvaluationInputError(message)
            continue
        loader = task_manager.custom_dataset_of(name) if isinstance(name, str) else None
        if loader is None or not getattr(loader, "__module__", "").startswith("capcal_tasks."):
            continue
        task_metadata = {**(config.get("metadata") or {}), **metadata}
        try:
            reads = data_read_by(loader, **task_metadata, **(config.get("dataset_kwargs") or {}))
        except (OSError, ValueError) as error:
            raise EvaluationInputError(f"task {name}: {error}") from None
        for read in reads:
            if root is not None:
                if not (root / read.local_path).exists():
                    shipped = shipped_with_capcal(read.local_path) and root != BUNDLED_DATA_DIR.resolve()
                    hint = "; capcal ships it: --data_dir bundled" if shipped else ""
                    raise EvaluationInputError(
                        f"task {name} reads {read.local_path}, which is not in {root}{hint}"
                    )
                continue
            for source in read.hub:
                reason = hub_split_problem(source)
                if reason is not None:
                    raise EvaluationInputError(
                        _missing_data_message(
                            name, f"{source} from the Hugging Face hub", read.local_path, reason
                        )
                    )


def _check_sampled_tasks(
    task_manager: Any,
    resolved: Sequence[Any],
    repeats: int | None,
    root: Path | None,
    metadata: dict,
    num_fewshot: int | None = None,
) -> dict[str, dict]:
    """With ``repeats``, the stock tasks ``CapcalTaskManager`` will sample k times
    (``capcal_tasks.sampled_task``), as ``{name: {"output_type", "generation_kwargs" (the settings it samples
    with, ``sampling_generation_kwargs``), "metadata": {"capcal_task": "sampling"}}}``; every task the
    static rule refuses (``capcal_tasks.task_admission.admit``), whose prompt does not allow the verbalized
    confidence that ``capcal_confidences`` asks for (``capcal_tasks.sampled_confidence.verbalized_problem``),
    or whose rows are not in the local data folder ``root`` (the few-shot split too when ``num_fewshot`` asks
    for examples), is one line of the ``EvaluationInputError`` (before any model loads); so is a
    ``capcal_confidences`` that names no confidence capcal knows (``requested_confidences``)."""
    confidences: tuple[str, ...] = ()
    if metadata and CONFIDENCES_KEY in metadata:  # lm-eval's task code is imported only when asked for
        from capcal_tasks.sampled_confidence import requested_confidences

        try:
            confidences = requested_confidences(metadata)
        except ValueError as error:
            raise EvaluationInputError(str(error)) from None
    if repeats is None or repeats < 2:
        wrapped = [name for name in resolved if isinstance(name, str) and task_manager.calibration_base(name)]
        if wrapped:  # capcal_tasks.sampled_calibration: k >= 2 responses per question, k from --repeats
            raise EvaluationInputError(
                "\n".join(
                    f"task {name}: the calibration task of {task_manager.calibration_base(name)} samples k "
                    f"responses per question, k from --repeats (got {repeats}); give --repeats K with K >= 2"
                    for name in wrapped
                )
            )
    if repeats is None:
        return {}
    from capcal_tasks.local_rows import MissingLocalRows, local_dataset
    from capcal_tasks.sampled_confidence import verbalized_problem
    from capcal_tasks.sampled_task import sampling_generation_kwargs
    from capcal_tasks.task_admission import RefusedTask, admit, refusal_lines

    stock = task_manager.stock_task_configs([entry for entry in resolved if isinstance(entry, str)])
    refusals: list[tuple[str, str]] = []
    for name, config in stock.items():
        try:
            admit(name, config, metadata)
            asked = "verbalized" in confidences and task_manager.calibration_base(name) is None
            problem = verbalized_problem(config) if asked else None  # a calibration task records it
            if problem is not None:
                raise RefusedTask(problem)
            if root is not None:
                local_dataset(name, config, num_fewshot, root=root)
        except RefusedTask as refusal:
            refusals.append((name, str(refusal)))
        except MissingLocalRows as missing:
            refusals.append((name, str(missing).removeprefix(f"task {name} ")))
    if refusals:
        raise EvaluationInputError(refusal_lines(refusals))
    return {
        name: {
            "output_type": "generate_until",
            "generation_kwargs": sampling_generation_kwargs(
                config.get("generation_kwargs"), metadata.get("temperature")
            )[0],
            "metadata": {"capcal_task": "sampling"},
        }
        for name, config in stock.items()
    }


# the confidence tasks that score the responses of an earlier sampling run (``samples_file``)
EARLIER_RUN_KINDS = ("selfcheck", "verbalized_rc", "ptrue_rc")


def _short(fingerprint: str) -> str:
    """A checkpoint fingerprint as a message shows it: 12 hex digits, without ``sha256:``."""
    return fingerprint.split(":")[-1][:12]


def earlier_run_model_problem(
    model: str, model_args: Mapping[str, Any], configs: Mapping[str, dict], metadata: Mapping[str, Any]
) -> str | None:
    """One line when a response-level task (``EARLIER_RUN_KINDS``) is given the samples file of another
    model's run: the model the results file beside it records (``analysis.runs.identity.samples_file_model``)
    is not the checkpoint ``model`` / ``model_args`` loads (both fingerprinted; an unresolved one is not
    compared). A self-check or a response-level confidence scores the model's own responses."""
    from analysis.runs.identity import UNRESOLVED, samples_file_model
    from capcal_models.model_identity import model_fingerprint_from_args

    ours: dict | None = None
    for name, config in configs.items():
        declared = config.get("metadata") or {}
        if declared.get("capcal_task") not in EARLIER_RUN_KINDS:
            continue
        setting = metadata.get("samples_file")
        if isinstance(setting, Mapping):
            setting = setting.get(declared.get("capcal_dataset"))
        if not isinstance(setting, str) or not setting:
            continue
        recorded = samples_file_model(setting)
        if recorded is None or recorded[0].startswith(UNRESOLVED):
            continue
        ours = ours or model_fingerprint_from_args(model, dict(model_args))
        if ours.get("fingerprint") and ours["fingerprint"] != recorded[0]:
            target = declared.get("capcal_target_task") or "the sampling task"
            return (
                f"task {name}: samples_file {setting} is a run of {recorded[1]} (checkpoint "
                f"{_short(recorded[0])}), not of the model this run loads ({ours['label']}, checkpoint "
                f"{_short(ours['fingerprint'])}): {name} scores the model's own responses; pass the samples "
                f"file of a {target} run of this model (capcal eval --tasks {target} ... --log_samples)"
            )
    return None


def check_inputs(
    model: Any,
    tasks: str | Sequence[Any],
    model_args: str | Mapping[str, Any] | None = None,
    *,
    repeats: int | None = None,
    limit: float | None = None,
    metadata: Mapping[str, Any] | None = None,
    include_path: str | Path | Sequence[str | Path] | None = None,
    data_dir: str | Path | None = None,
    apply_chat_template: bool | str = False,
    plain_prompts: bool = False,
    output_path: str | Path | None = None,
    gen_kwargs: str | Mapping[str, Any] | None = None,
    num_fewshot: int | None = None,
    batch_size: int | str | None = None,
    allow_large: bool = False,
    log_samples: bool = True,
) -> CheckedInputs:
    """Check ``evaluate``'s inputs without loading a model or a dataset; return what they resolve to.

    In order (cheap first): ``repeats`` a positive integer; ``limit`` positive (an integer when >= 1, a
    fraction of each task below 1); ``metadata`` a mapping; ``output_path``, ``gen_kwargs``,
    ``num_fewshot`` and ``batch_size`` usable (``analysis.checks.input_checks.run_settings_problem``);
    ``include_path`` folders existing; every task name occurring in some task YAML
    (``capcal_tasks.task_names``, before lm-eval's task code is imported); ``data_dir`` an existing folder
    (or ``"bundled"``); every task name registered, matched by a pattern or a YAML file (task config dicts
    and Task objects pass as they are; capcal's task folder is indexed first and lm-eval's only when needed,
    ``capcal_tasks.task_manager.task_manager_for``); for a model given by name: registered (lm-eval's or
    capcal's), importable here, every model argument accepted by the model class, ``pretrained`` /
    ``tokenizer`` paths existing; every local file the chosen capcal tasks read present in the data folder,
    or without one every hub dataset cached or reachable (the message suggests ``--data_dir bundled`` when
    capcal ships the dataset); a chat model (a chat template in its local tokenizer files, or on an ``LM``
    object's tokenizer) not run on capcal's chat prompts without ``apply_chat_template`` unless
    ``plain_prompts`` (``analysis.checks.input_checks.chat_template_problem``); a response-level task not
    given another model's samples file (``earlier_run_model_problem``); ``apply_chat_template`` only
    for a model whose local tokenizer has a chat template (``missing_chat_template_problem``). Raises
    ``EvaluationInputError`` (one line); ``repeats`` above ``MAX_REPEATS`` is refused without
    ``allow_large`` (``analysis.checks.input_checks.repeats_problem``). ``notices``: what a ``repeats``
    below the analyses' needs leaves out (``analysis.checks.input_checks.repeats_notices``). Then the run's
    plan (``_run_plan_checks``): greedy decoding with k > 1, ``num_fewshot`` on a capcal task without a
    few-shot split and a sample cache that cannot be written are refused; without ``log_samples`` a notice
    says that ``capcal check`` and ``report`` will have nothing to read. Recorded paths (``activations``,
    ``samples_file``) are made absolute (``analysis.runs.recorded_paths``).
    """
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        raise EvaluationInputError(f"repeats must be a positive integer, got {repeats!r}")
    from analysis.checks.input_checks import repeats_problem

    problem = repeats_problem(repeats, allow_large)
    if problem is not None:
        raise EvaluationInputError(problem)
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0 or limit != limit
    ):
        raise EvaluationInputError(f"limit must be positive (a count, or a fraction below 1), got {limit!r}")
    if limit is not None and limit >= 1 and limit != int(limit):
        raise EvaluationInputError(f"limit must be a whole number of questions when >= 1, got {limit!r}")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise EvaluationInputError(
            f"metadata must be a JSON object (a mapping), got {type(metadata).__name__}"
        )
    from analysis.checks.input_checks import run_settings_problem

    settings = parse_key_values(gen_kwargs, "gen_kwargs") if isinstance(gen_kwargs, str) else gen_kwargs
    problem = run_settings_problem(output_path, settings, num_fewshot, batch_size)
    if problem is not None:
        raise EvaluationInputError(problem)
    from analysis.runs.recorded_paths import absolute_recorded_paths

    # recorded paths (activations=, samples_file) absolute: the results file then means the same from anywhere
    arguments = absolute_recorded_paths(parse_key_values(model_args))
    metadata = absolute_recorded_paths(metadata) if metadata is not None else None
    paths = (
        []
        if include_path is None
        else [include_path]
        if isinstance(include_path, (str, Path))
        else include_path
    )
    for path in paths:
        if not Path(path).expanduser().is_dir():
            raise EvaluationInputError(f"include_path {path}: no such folder")
    items = tasks.split(",") if isinstance(tasks, str) else list(tasks)
    items = [item.strip() if isinstance(item, str) else item for item in items]
    items = [item for item in items if item != ""]
    if not items:
        raise EvaluationInputError("no tasks given")
    from capcal_tasks.task_names import unknown_task_message, unknown_task_names

    names = [item for item in items if isinstance(item, str)]
    unknown, declared = unknown_task_names(names, include_path)  # before lm-eval's task code is imported
    if unknown:
        raise EvaluationInputError(unknown_task_message(unknown[0], declared))
    root = _data_root(data_dir)  # imports datasets (seconds): after the names
    from analysis.checks.input_checks import (
        chat_template_problem,
        missing_chat_template_problem,
        repeats_notices,
    )
    from capcal_tasks.task_manager import UnknownTaskError, task_manager_for

    merged = {**arguments, **(metadata or {})}
    try:
        task_manager, _ = task_manager_for(
            names, include_path=include_path, repeats=repeats, screened=True, metadata=merged
        )
    except UnknownTaskError as error:
        raise EvaluationInputError(str(error)) from None
    resolved: list[Any] = []
    for item in items:  # a name is resolved; a task config dict or Task object is passed on as it is
        found = task_manager.resolve_task_names([item]) if isinstance(item, str) else [item]
        resolved += [entry for entry in found if entry not in resolved]
    if isinstance(model, str):  # after the task names: a model class may import torch (seconds)
        _check_model(model, arguments)
    configs = task_manager.task_configs([entry for entry in resolved if isinstance(entry, (str, dict))])
    sampled = _check_sampled_tasks(task_manager, resolved, repeats, root, merged, num_fewshot)
    _check_data(task_manager, configs, root, merged)
    if isinstance(model, str):
        problem = earlier_run_model_problem(model, arguments, configs, merged)
        if problem is not None:
            raise EvaluationInputError(problem)
    problem = chat_template_problem(
        arguments if isinstance(model, str) else _lm_tokenizer_source(model),
        configs,
        apply_chat_template,
        plain_prompts,
    )
    if problem is not None:
        raise EvaluationInputError(problem)
    problem = missing_chat_template_problem(
        arguments if isinstance(model, str) else _lm_tokenizer_source(model), apply_chat_template
    )
    if problem is not None:
        raise EvaluationInputError(problem)
    notices = repeats_notices(repeats, {**configs, **sampled})
    notices += _run_plan_checks(
        model, arguments, configs, repeats, settings, num_fewshot, log_samples, output_path, sampled
    )
    return CheckedInputs(task_manager, resolved, arguments, merged, configs, notices)


def _run_plan_checks(
    model: Any,
    model_args: Mapping[str, Any],
    configs: Mapping[str, Mapping[str, Any]],
    repeats: int | None,
    gen_kwargs: Mapping[str, Any] | None,
    num_fewshot: int | None,
    log_samples: bool,
    output_path: str | Path | None,
    sampled: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """What ``check_inputs`` checks of the run's plan once the task configs are known: greedy decoding with
    k > 1 (``analysis.checks.greedy_decoding.greedy_repeats_problem``; on the wrapped stock tasks of
    ``sampled`` too, with the settings they sample with, so that ``--gen_kwargs temperature=0`` is refused
    there as well), few-shot examples without a few-shot split (``fewshot_problem``, capcal's own tasks) and a
    sample cache that cannot be written (``sample_cache_problem``) raise ``EvaluationInputError``; returns
    the notices (no ``log_samples``: ``log_samples_notice``)."""
    from analysis.checks.greedy_decoding import greedy_repeats_problem
    from analysis.checks.input_checks import fewshot_problem, log_samples_notice, sample_cache_problem

    engine = model if isinstance(model, str) else None
    for problem in (
        greedy_repeats_problem({**configs, **(sampled or {})}, repeats, gen_kwargs, engine),
        fewshot_problem(num_fewshot, configs),
        sample_cache_problem(model, model_args),
    ):
        if problem is not None:
            raise EvaluationInputError(problem)
    notice = log_samples_notice(log_samples, output_path, configs)
    return [] if notice is None else [notice]


def _lm_tokenizer_source(model: Any) -> dict[str, Any]:
    """``model_args``-like ``{"tokenizer": path}`` of an lm-eval ``LM`` object whose tokenizer was loaded
    from a local folder (``name_or_path``), for ``chat_template_problem``; empty otherwise."""
    tokenizer = getattr(model, "tokenizer", None)
    source = getattr(tokenizer, "name_or_path", None)
    return {"tokenizer": source} if isinstance(source, str) and source else {}


def saved_files(
    output_path: str | Path, tracker: Any, task_names: Sequence[str], existing: bool = True
) -> dict[str, Any]:
    """Where lm-eval's ``EvaluationTracker`` saved a run: ``{"results": path, "samples": {task: path}}``
    (the layout of ``lm_eval --output_path``: ``<output>/<model_sanitized>/results_<time>.json``); with
    ``existing`` false also the samples files it should have written but did not."""
    path = Path(output_path)
    model_folder = str(tracker.general_config_tracker.model_name_sanitized)
    folder = path.parent if path.suffix == ".json" else path / model_folder
    results = (
        path.with_name(f"{path.stem}_{tracker.date_id}.json")
        if path.suffix == ".json"
        else folder / f"results_{tracker.date_id}.json"
    )
    samples = {task: folder / f"samples_{task}_{tracker.date_id}.jsonl" for task in task_names}
    return {"results": results, "samples": {t: p for t, p in samples.items() if p.is_file() or not existing}}


def _capcal_model(model: Any, model_args: dict[str, Any]) -> dict[str, Any]:
    from capcal_models.model_identity import model_fingerprint_from_args

    if isinstance(model, str):
        return model_fingerprint_from_args(model, model_args)
    pretrained = getattr(model, "pretrained", None)
    arguments = {"pretrained": pretrained} if isinstance(pretrained, str) else {}
    return model_fingerprint_from_args(type(model).__name__, arguments)


def _checked_device(model: Any, device: str | None) -> str | None:
    """Raise ``EvaluationInputError`` for a CUDA ``device`` this machine lacks; the fallback notice, or None
    (``analysis.checks.input_checks.device_problem``)."""
    from analysis.checks.input_checks import device_problem

    problem, notice = device_problem(model, device)
    if problem is not None:
        raise EvaluationInputError(problem)
    return notice


def _choose_batch_size(model: Any, model_args: dict[str, Any], device: str | None, kwargs: dict) -> dict:
    """Without a ``batch_size`` (argument or model argument), set ``kwargs["batch_size"]`` to
    ``capcal_models.batch_size.default_batch_size`` and log it; return the results' ``capcal_batch_size``."""
    from capcal_models.batch_size import default_batch_size

    if kwargs.get("batch_size") is not None:
        return {"value": kwargs["batch_size"], "chosen_by": "--batch_size"}
    if "batch_size" in model_args:
        return {"value": model_args["batch_size"], "chosen_by": "model_args"}
    choice = default_batch_size(model, model_args, device)
    logging.getLogger("capcal_models.batch_size").info(
        "batch size %s: %s (--batch_size N sets another)", choice.value, choice.reason
    )
    kwargs["batch_size"] = choice.value
    return choice.record()


def _capcal_version() -> str:
    """The installed capcal's version (``importlib.metadata``), "unknown" when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("capcal")
    except PackageNotFoundError:
        return "unknown"


def evaluate(
    model: Any,
    tasks: str | Sequence[Any],
    model_args: str | Mapping[str, Any] | None = None,
    repeats: int | None = None,
    data_dir: str | Path | None = None,
    include_path: str | Path | Sequence[str | Path] | None = None,
    metadata: Mapping[str, Any] | None = None,
    output_path: str | Path | None = None,
    log_samples: bool = True,
    limit: float | None = None,
    apply_chat_template: bool | str = False,
    fewshot_as_multiturn: bool | None = None,
    device: str | None = "cuda:0",
    plain_prompts: bool = False,
    notify: Callable[[str], None] | None = None,
    allow_large: bool = False,
    inform: Callable[[str], None] | None = None,
    **simple_evaluate_kwargs: Any,
) -> dict[str, Any]:
    """``lm_eval.simple_evaluate`` with capcal's tasks and models, ``repeats`` and ``data_dir``.

    ``model`` is a registered model name (lm-eval's or capcal's) or an lm-eval ``LM`` object. The inputs
    are checked first (``check_inputs``; ``EvaluationInputError`` before any model is loaded). The tasks see
    ``model_args | metadata`` as their metadata, as with ``lm_eval --metadata`` (e.g.
    ``{"samples_file": ...}`` for the response-level confidence tasks). ``fewshot_as_multiturn`` defaults
    to whether a chat template is applied, and ``device`` to ``cuda:0`` (lm-eval's HF and vLLM models use the
    CPU when there is no GPU), as in lm-eval's CLI. ``plain_prompts`` runs a chat model on capcal's chat
    prompts without its chat template (refused otherwise). ``notify`` receives each notice, one line:
    before the run, what ``repeats`` leaves out and the explanation of git's line when lm-eval's git call
    will print one (``lm_eval_messages.git_notice``); after it, tasks whose responses came back mostly empty
    or unreadable, with the likely cause (``analysis.checks.response_checks.response_notices``; from the
    samples, so with ``log_samples``); default: a warning of the ``analysis.evaluation`` logger. lm-eval's
    misleading log lines are filtered while it runs (``analysis.evaluation.lm_eval_messages``). Without a
    ``batch_size`` one fast on this machine is chosen (``capcal_models.batch_size.default_batch_size``),
    logged, and recorded with the results (``config.capcal_batch_size``). Once the tasks are loaded, before
    any request, ``inform`` receives the number of responses the run will draw (``sample_plan_line``;
    default: an info line of the logger), and a run above ``MAX_SAMPLES`` is refused
    (``EvaluationInputError``) without ``allow_large`` (``analysis.checks.input_checks``). Other keyword
    arguments go to ``simple_evaluate`` unchanged.

    With ``output_path`` the run is saved as ``lm_eval --output_path [--log_samples]`` saves it, plus the
    top-level keys ``"capcal_model"`` (``capcal_models.model_identity.model_fingerprint_from_args``) and
    ``"capcal_version"``.
    Returns lm-eval's results dictionary (with ``samples`` when ``log_samples``); after a save it also holds
    ``"capcal_files"``: ``{"results": Path, "samples": {task: Path}}`` (not written to the results file).
    What was saved is read back (``analysis.checks.output_checks``): a results file that does not parse or a
    samples file without one complete line per question (a full disk: lm-eval only logs the error) raises
    ``IncompleteOutputError`` (one line: which file, the OS error, whether the sample cache holds the
    samples), the run's files renamed ``*.incomplete``.
    """
    checked = check_inputs(
        model,
        tasks,
        model_args,
        repeats=repeats,
        limit=limit,
        metadata=metadata,
        include_path=include_path,
        data_dir=data_dir,
        apply_chat_template=apply_chat_template,
        plain_prompts=plain_prompts,
        output_path=output_path,
        gen_kwargs=simple_evaluate_kwargs.get("gen_kwargs"),
        num_fewshot=simple_evaluate_kwargs.get("num_fewshot"),
        batch_size=simple_evaluate_kwargs.get("batch_size"),
        allow_large=allow_large,
        log_samples=log_samples,
    )
    device_notice = _checked_device(model, device)
    batch_size_record = _choose_batch_size(model, checked.model_args, device, simple_evaluate_kwargs)
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker

    from analysis.checks.input_checks import planned_samples, sample_count_problem, sample_plan_line
    from analysis.checks.response_checks import aggregate_notices, response_notices
    from analysis.evaluation.lm_eval_messages import filtered_lm_eval_logs, git_notice

    notify = notify or logging.getLogger("analysis.evaluation").warning  # the package's logger, as before
    for notice in (*checked.notices, device_notice, git_notice()):
        if notice is not None:
            notify(notice)
    tracker = EvaluationTracker(output_path=str(output_path)) if output_path is not None else None
    multiturn = bool(apply_chat_template) if fewshot_as_multiturn is None else fewshot_as_multiturn
    inform = inform or logging.getLogger("analysis.evaluation").info

    def plan(tasks: dict[str, Any]) -> None:  # the tasks are loaded, nothing is sampled yet
        rows = planned_samples(tasks, limit, simple_evaluate_kwargs.get("samples"))
        inform(sample_plan_line(rows))
        problem = sample_count_problem(rows, allow_large)
        if problem is not None:
            raise EvaluationInputError(problem)

    checked.task_manager.on_load = plan
    with (
        data_dir_setting(data_dir),
        filtered_lm_eval_logs(checked.configs),
        _hook_removed(checked.task_manager),
    ):
        results = simple_evaluate(
            model=model,
            model_args=checked.model_args if isinstance(model, str) else None,
            tasks=checked.tasks,
            task_manager=checked.task_manager,
            metadata=checked.metadata,
            limit=limit,
            log_samples=log_samples,
            evaluation_tracker=tracker,
            apply_chat_template=apply_chat_template,
            fewshot_as_multiturn=multiturn,
            device=device,
            **simple_evaluate_kwargs,
        )
    if results is not None and not results.get("samples"):
        for notice in aggregate_notices(results):
            notify(notice)
    if results is not None and results.get("samples"):
        for notice in response_notices(
            results["samples"],
            results.get("configs") or {},
            model_args=checked.model_args if isinstance(model, str) else _lm_tokenizer_source(model),
            chat_template_applied=bool(apply_chat_template),
            model=model if isinstance(model, str) else None,
        ):
            notify(notice)
    if results is None or tracker is None:  # not the main process, or nothing to save
        return results
    model_args = checked.model_args if isinstance(model, str) else {}
    return save_run(results, tracker, output_path, log_samples, model, model_args, batch_size_record)


def save_run(
    results: dict[str, Any],
    tracker: Any,
    output_path: str | Path,
    log_samples: bool,
    model: Any,
    model_args: dict[str, Any],
    batch_size_record: dict[str, Any],
) -> dict[str, Any]:
    """Save lm-eval's ``results`` with ``tracker`` (an ``EvaluationTracker`` whose experiment arguments are
    logged) as ``evaluate`` does: the top-level ``capcal_model`` and ``capcal_version``, the config's
    ``capcal_batch_size``, the samples files with ``log_samples``; read back, ``IncompleteOutputError`` when
    incomplete; ``results["capcal_files"]`` set. Returns ``results``."""
    from analysis.checks.output_checks import lm_eval_save_errors

    samples = results.pop("samples", None) if log_samples else None
    results["capcal_model"] = _capcal_model(model, model_args)
    results["capcal_version"] = _capcal_version()
    results.setdefault("config", {})["capcal_batch_size"] = batch_size_record
    with lm_eval_save_errors() as save_errors:  # lm-eval logs and swallows its write errors
        tracker.save_results_aggregated(results=results, samples=samples)
        if samples is not None:
            for task_name in results["configs"]:
                tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    if samples is not None:
        results["samples"] = samples
    expected = saved_files(output_path, tracker, list(results["configs"]), existing=False)
    _check_saved(results, expected, save_errors, model, model_args)
    results["capcal_files"] = saved_files(output_path, tracker, list(results["configs"]))
    return results


def _check_saved(
    results: dict, files: dict, save_errors: list[str], model: Any, model_args: dict[str, Any]
) -> None:
    """Raise ``IncompleteOutputError`` (one line, the run's files renamed ``*.incomplete``) when the saved
    run is not complete (``analysis.checks.output_checks``)."""
    from analysis.checks.output_checks import (
        IncompleteOutputError,
        mark_incomplete,
        sample_cache_note,
        saved_run_problems,
    )

    logged = results.get("samples") or {}  # one line per question (lm-eval's n-samples "effective")
    questions = {task: len(logged[task]) for task in files["samples"] if task in logged}
    problems = saved_run_problems(files["results"], files["samples"], questions)
    if not problems:
        return
    renamed = mark_incomplete([files["results"], *files["samples"].values()])
    why = "; ".join(save_errors) or "no write error was reported"
    configs = results.get("configs") or {}
    output_types = {task: str(configs.get(task, {}).get("output_type")) for task in files["samples"]}
    cache = sample_cache_note(model, model_args, output_types)
    moved = f"; renamed {len(renamed)} file(s) *.incomplete" if renamed else ""
    raise IncompleteOutputError(
        f"the run's output is incomplete: {', '.join(problems)} ({why}){moved}; {cache}"
    )


@contextlib.contextmanager
def _hook_removed(task_manager: Any) -> Iterator[None]:
    """Within the block, ``task_manager.on_load`` stays as set; after it, it is removed (a task manager can
    be reused by a later run)."""
    try:
        yield
    finally:
        task_manager.on_load = None


def format_results(results: Mapping[str, Any], num_fewshot: int | None = None) -> str:
    """The summary ``lm_eval`` prints after a run: the run's settings line (``num_fewshot`` as requested)
    and lm-eval's results table (and the groups table when there are groups), from
    ``lm_eval.utils.make_table``; for an adaptive run, one line per task saying what its ``correctness`` is
    (the per-question unbiased mean) and the samples drawn against fixed k."""
    from lm_eval.utils import make_table

    config = results.get("config", {})
    model_args = config.get("model_args")
    if isinstance(model_args, dict):
        model_args = {key: value for key, value in model_args.items() if key != "trust_remote_code"}
    batch_sizes = ",".join(map(str, config.get("batch_sizes") or []))
    lines = [
        f"{config.get('model')} ({model_args}), gen_kwargs: ({config.get('gen_kwargs')}), "
        f"limit: {config.get('limit')}, num_fewshot: {num_fewshot}, "
        f"batch_size: {config.get('batch_size')}{f' ({batch_sizes})' if batch_sizes else ''}",
        make_table(dict(results)),
    ]
    if "groups" in results:
        lines.append(make_table(dict(results), "groups"))
    for task, summary in (results.get("capcal_adaptive") or {}).get("tasks", {}).items():
        lines.append(
            f"{task}, adaptive: correctness is the {summary['correctness']}, not the responses pooled over "
            f"unequal n ({summary['pooled_response_accuracy']:.4f}); {summary['samples_drawn']:,} samples "
            f"drawn, {summary['fixed_k_samples']:,} at fixed k ({summary['saved_fraction']:.1%} saved)"
        )
    return "\n".join(lines)
