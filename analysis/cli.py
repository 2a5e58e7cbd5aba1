"""The ``capcal`` command line: a thin layer over capcal's Python API.

capcal eval [lm_eval flags] [--repeats K] [--data_dir DIR] [--plain_prompts]
                                                              -> analysis.evaluation.evaluate
    (exit status 2 for an input that cannot work, found before a model is loaded; 1 when the run failed;
    3 when API requests still failed after their retries: the message says how to resume)
capcal tasks-dir                                              -> capcal_tasks.tasks_dir
capcal models prepare NAME [--force] | list | path NAME       -> capcal_models.prepare
capcal analyze OUTPUT_DIR [--output FILE]                     -> analysis.runs
capcal check OUTPUT_DIR...                                    -> analysis.runs.completeness.check_run
capcal report OUTPUT_DIR... [--output DIR] [--activations DIR] [--calibration TASK=SPLIT[,SPLIT]]
                                                              -> analysis.report.build_report
capcal table OUTPUT_DIR... [--metric M]... [--format markdown|latex|csv|json] [--output FILE]
                                                              -> analysis.report.paper_table
capcal demo [options]                                         -> analysis.demo.run_demo
capcal rescore OUTPUT_DIR --checker NAME [--output DIR] [--tasks T,..] [--run RUN] [judge options]
                                                              -> analysis.evaluation.rescore.rescore
capcal selfcal data|train|compare|run [options]               -> analysis.self_calibration
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import re
import shlex
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from analysis.text_safety import terminal_text
from capcal_tasks.settings import parse_bool


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``<prog>: error: <message>`` on stderr (exit status 2),
    without the usage block."""

    def error(self, message: str) -> NoReturn:
        print(terminal_text(f"{self.prog}: error: {message}"), file=sys.stderr)
        raise SystemExit(2)


def parse_dict_flag(values: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """lm-eval's dictionary flags (``--model_args``, ``--gen_kwargs``, ``--metadata``, several values
    allowed): each value a JSON object or ``key=value[,key=value]``
    (``analysis.evaluation.parse_key_values``); later keys win. Raises ``ValueError`` naming the flag."""
    from analysis.evaluation import parse_key_values

    merged: dict[str, Any] = {}
    for value in values or []:
        merged.update(parse_key_values(value, flag))
    return merged


def parse_seed(value: str) -> list[int | None]:
    """``--seed``: one integer for all four seeds (Python, NumPy, torch, few-shot), or four comma-separated
    integers or ``None`` (lm-eval's rule; three are completed with lm-eval's default few-shot seed 1234)."""
    defaults: list[int | None] = [0, 1234, 1234, 1234]
    items = [item.strip() for item in value.split(",")]
    try:
        seeds = [None if item.lower() == "none" else int(item) for item in items]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer or 4 comma-separated integers, got {value!r}"
        ) from None
    if len(seeds) == 1:
        return seeds * 4
    if not 3 <= len(seeds) <= 4:
        raise argparse.ArgumentTypeError(f"expected 1 or 4 comma-separated values, got {value!r}")
    return seeds + defaults[len(seeds) :]


def _bool_flag(value: str) -> bool:
    try:
        return parse_bool(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``capcal eval``: lm-eval 0.4.13's ``lm_eval run`` flags that apply to a local run (same
    names, short forms and defaults), plus ``--repeats``, ``--data_dir`` and ``--debug``."""
    lm = parser.add_argument_group("lm_eval flags")
    lm.add_argument(
        "--model", "-M", default="hf", help="model name (default hf; capcal-hf, capcal-vllm, ...)"
    )
    lm.add_argument("--tasks", "-t", nargs="+", required=True, help="task names, comma or space separated")
    lm.add_argument("--model_args", "-a", nargs="+", help="key=value,key2=value2 or a JSON object")
    lm.add_argument("--apply_chat_template", nargs="?", const=True, default=False, metavar="TEMPLATE")
    lm.add_argument("--fewshot_as_multiturn", nargs="?", const=True, default=None, type=_bool_flag)
    lm.add_argument("--system_instruction")
    lm.add_argument("--limit", "-L", type=float, help="questions per task (a count, or a fraction below 1)")
    lm.add_argument("--samples", "-E", help="JSON (or a JSON file): task -> doc indices (not with --limit)")
    lm.add_argument("--num_fewshot", "-f", type=int)
    lm.add_argument(
        "--batch_size", "-b", help="integer, auto or auto:N (default: capcal_models.batch_size chooses)"
    )
    lm.add_argument("--max_batch_size", type=int)
    lm.add_argument("--device", default="cuda:0", help="default cuda:0 (the CPU when there is no GPU)")
    lm.add_argument("--gen_kwargs", nargs="+", help="generation settings, e.g. max_gen_toks=64")
    lm.add_argument("--output_path", "-o", help="folder for the results (and samples) files")
    lm.add_argument(
        "--log_samples", "-s", action="store_true", help="save every sample (needs --output_path)"
    )
    lm.add_argument("--predict_only", "-x", action="store_true")
    lm.add_argument("--use_cache", "-c", metavar="PATH", help="lm-eval's sqlite response cache")
    lm.add_argument("--cache_requests", nargs="?", const="true", choices=["true", "refresh", "delete"])
    lm.add_argument("--check_integrity", action="store_true")
    lm.add_argument("--write_out", "-w", action="store_true", help="print the prompts of the first documents")
    lm.add_argument("--show_config", action="store_true", help="print the full results and task configs")
    lm.add_argument("--include_path", help="a further folder of task YAMLs")
    lm.add_argument("--seed", type=parse_seed, help="one integer, or python,numpy,torch,fewshot seeds")
    lm.add_argument("--metadata", nargs="+", help="task metadata: a JSON object or key=value pairs")
    lm.add_argument("--trust_remote_code", action="store_true")
    lm.add_argument("--confirm_run_unsafe_code", action="store_true")
    levels = ["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
    lm.add_argument("--verbosity", "-v", type=str.upper, choices=levels, help="lm-eval's log level")
    own = parser.add_argument_group("capcal flags")
    own.add_argument(
        "--repeats", type=int, help="k sampled responses per question for capcal's sampling tasks"
    )
    own.add_argument(
        "--data_dir", help="read task data from DIR (laid out like capcal's bundled data) or 'bundled'"
    )
    own.add_argument(
        "--plain_prompts",
        action="store_true",
        help="run a chat model on capcal's chat prompts without --apply_chat_template (refused otherwise)",
    )
    own.add_argument(
        "--allow_large",
        action="store_true",
        help="allow --repeats above 1000 or a run above 500,000 responses (refused otherwise)",
    )
    own.add_argument("--debug", action="store_true", help="show the traceback of an error")


def eval_request(args: argparse.Namespace) -> dict[str, Any]:
    """``evaluate``'s keyword arguments from ``capcal eval``'s parsed flags (cross-flag rules as lm-eval's
    CLI applies them). Raises ``ValueError`` (one line) for a combination that cannot work."""
    model_args = parse_dict_flag(args.model_args, "--model_args")
    gen_kwargs = parse_dict_flag(args.gen_kwargs, "--gen_kwargs")
    metadata = parse_dict_flag(args.metadata, "--metadata")
    samples = None
    if args.samples is not None:
        # a JSON object, or a file holding one (as lm_eval reads it)
        source = Path(args.samples).expanduser()
        text = source.read_text(encoding="utf-8") if source.is_file() else args.samples
        samples = parse_dict_flag([text], "--samples")
        if args.limit is not None:
            raise ValueError("--samples and --limit cannot be used together")
    if (args.log_samples or args.predict_only) and not args.output_path:
        raise ValueError("--log_samples and --predict_only need --output_path")
    if args.fewshot_as_multiturn and not args.apply_chat_template:
        raise ValueError("--fewshot_as_multiturn needs --apply_chat_template")
    if args.trust_remote_code:
        model_args["trust_remote_code"] = True
    request: dict[str, Any] = {
        "model": args.model,
        "tasks": [name for value in args.tasks for name in value.split(",") if name],
        "model_args": model_args,
        "repeats": args.repeats,
        "data_dir": args.data_dir,
        "include_path": args.include_path,
        "metadata": metadata or None,
        "output_path": args.output_path,
        "log_samples": args.log_samples or args.predict_only,
        "limit": args.limit,
        "samples": samples,
        "apply_chat_template": args.apply_chat_template,
        "fewshot_as_multiturn": args.fewshot_as_multiturn,
        "system_instruction": args.system_instruction,
        "num_fewshot": args.num_fewshot,
        "batch_size": args.batch_size,
        "max_batch_size": args.max_batch_size,
        "device": args.device,
        "use_cache": args.use_cache,
        "cache_requests": args.cache_requests in ("true", "refresh"),
        "rewrite_requests_cache": args.cache_requests == "refresh",
        "delete_requests_cache": args.cache_requests == "delete",
        "check_integrity": args.check_integrity,
        "write_out": args.write_out,
        "gen_kwargs": gen_kwargs or None,
        "predict_only": args.predict_only,
        "confirm_run_unsafe_code": args.confirm_run_unsafe_code,
        "plain_prompts": args.plain_prompts,
        "allow_large": args.allow_large,
    }
    if args.seed is not None:
        for key, seed in zip(
            ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed"),
            args.seed,
            strict=True,
        ):
            request[key] = seed
    return request


def _api_requests_failed(error: Exception) -> bool:
    """Whether ``error`` is ``capcal_models.api.APIRequestsFailed`` (False where the API extra is missing)."""
    try:
        from capcal_models.api import APIRequestsFailed
    except ImportError:
        return False
    return isinstance(error, APIRequestsFailed)


def run_eval(args: argparse.Namespace) -> int:
    """``capcal eval``: check the flags, run ``analysis.evaluation.evaluate`` and print lm-eval's summary.

    Exit status 0 on success; 2 for an input that cannot work (one line, before any model is loaded); 3 when
    API requests still failed after their retries; 1 when the run failed otherwise (one line; the traceback
    with ``--debug``)."""
    from analysis.checks.output_checks import IncompleteOutputError
    from analysis.evaluation import EvaluationInputError, evaluate, format_results

    def fail(message: str, status: int) -> int:
        if args.debug:
            traceback.print_exc()
        print(terminal_text(f"capcal eval: error: {message}"), file=sys.stderr)
        return status

    try:
        request = eval_request(args)
    except ValueError as error:
        return fail(str(error), 2)
    if args.trust_remote_code:  # as lm_eval does: datasets read its setting when imported
        import datasets

        datasets.config.HF_DATASETS_TRUST_REMOTE_CODE = True
    from lm_eval.utils import setup_logging

    setup_logging(args.verbosity or logging.INFO)
    _log_capcal_models_to_stderr()

    def warn(message: str) -> None:
        print(terminal_text(f"capcal eval: warning: {message}"), file=sys.stderr)

    def inform(message: str) -> None:
        print(terminal_text(f"capcal eval: {message}"), file=sys.stderr, flush=True)

    try:
        results = evaluate(**request, notify=warn, inform=inform)
    except EvaluationInputError as error:
        return fail(str(error), 2)
    except IncompleteOutputError as error:  # a failed write is a failed run (analysis.checks.output_checks)
        command = shlex.join(["capcal", *getattr(args, "argv", ["eval", "..."])])
        return fail(
            f"{error}; free space (or choose another --output_path) and write them again: {command}", 1
        )
    except Exception as error:  # noqa: BLE001 - one line (the traceback with --debug)
        if _api_requests_failed(error):  # the report says what finished, what did not, how to resume
            return fail(str(error), 3)
        first_line = (str(error).strip().splitlines() or [""])[0]
        hint = "" if args.debug else " (--debug shows the traceback)"
        return fail(f"{type(error).__name__}: {first_line}{hint}", 1)
    if results is None:
        return 0
    if args.show_config:
        from lm_eval.utils import handle_non_serializable

        shown = {key: value for key, value in results.items() if key not in ("samples", "capcal_files")}
        print(terminal_text(json.dumps(shown, indent=2, default=handle_non_serializable, ensure_ascii=False)))
    print(terminal_text(format_results(results, num_fewshot=args.num_fewshot)))
    for task, path in (results.get("capcal_files") or {}).get("samples", {}).items():
        print(terminal_text(f"samples of {task}: {path}"))
    return 0


def _models(args: argparse.Namespace) -> int:
    from capcal_models.prepare import list_models, model_path, prepare_model

    if args.models_command == "prepare":
        for name in args.names:
            prepared = prepare_model(name, force=args.force)
            print(f"{prepared.name}\t{prepared.path}")
    elif args.models_command == "path":
        print(model_path(args.name))
    else:
        rows = list_models()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            width = max(len(row["name"]) for row in rows) + 2
            for row in rows:
                where = row["path"] if row["prepared"] else "not prepared"
                print(f"{row['name']:<{width}}{where}\n{'':<{width}}{row['description']} [{row['license']}]")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.report.input_notices import k_notices
    from analysis.runs import load_run, summarize, write_question_table

    table = load_run(args.output_dir, responses=args.responses)
    for notice in k_notices(table):
        print(terminal_text(f"capcal analyze: warning: {notice}"), file=sys.stderr)
    output = Path(args.output) if args.output else Path(args.output_dir) / "capcal_questions.jsonl"
    write_question_table(table, output)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(terminal_text(summarize(table).to_string(index=False)))
    print(f"\n{len(table)} questions -> {output}")
    return 0


def _check(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.runs.completeness import check_run
    from capcal_tasks.checkers import TASK_LABELS

    checks = check_run(args.output_dirs)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 80):
        print(terminal_text(checks.drop(columns="problems").to_string(index=False)))
    for report in checks.attrs.get("joins", []):  # what each confidence run could not match
        print(terminal_text(f"join {report.summary()}"))
    for model, task, run_id, labels in checks.attrs.get("labels", []):
        if labels != TASK_LABELS:  # say which labels a re-scored run holds
            print(terminal_text(f"labels: {model} {task} {run_id}: {labels}"))
    for path, same_as in checks.attrs.get("duplicates", []):
        print(terminal_text(f"read once: {path} (the same run as {same_as})"))
    for note in checks.attrs.get("notes", []):  # ran as asked, but left something out of the report
        print(terminal_text(f"note: {note}"))
    incomplete = checks[~checks["complete"]]
    for row in incomplete.itertuples():
        print(terminal_text(f"incomplete: {row.model} {row.task} {row.run_id}: {row.problems}"))
    print(f"\n{len(checks) - len(incomplete)} of {len(checks)} run(s) complete")
    return 1 if len(incomplete) else 0


def _report(args: argparse.Namespace) -> int:
    from analysis.checks.input_checks import writable_folder_problem

    problem = writable_folder_problem(args.output)  # before any run is read or anything computed
    if problem is not None:
        raise ValueError(f"--output {args.output}: {problem}")
    from analysis.report import ReportOptions, build_report
    from capcal_tasks.relations import parse_calibration_overrides

    calibration = parse_calibration_overrides(args.calibration)
    notices = _report_notices(args, calibration)
    files = build_report(
        args.output_dirs,
        args.output,
        notices=notices,
        activations_dir=args.activations,
        options=ReportOptions(
            n_resamples=args.resamples, seed=args.seed, calibration=calibration, select=args.run or None
        ),
    )
    print(f"report:  {files.html}\nsummary: {files.markdown}")
    return 0


def _report_notices(args: argparse.Namespace, calibration: dict[str, list[str]]) -> list[str]:
    """``analysis.report.input_notices.report_notices`` for ``capcal report``'s flags, each printed as a
    warning on stderr (``NothingToScoreError``, a ``ValueError``, ends the command with exit status 2)."""
    from analysis.report.input_notices import report_notices

    notices = report_notices(args.output_dirs, args.activations, calibration, args.run or None)
    for notice in notices:
        print(terminal_text(f"capcal report: warning: {notice}"), file=sys.stderr)
    return notices


def _table(args: argparse.Namespace) -> int:
    from analysis.checks.input_checks import writable_file_problem

    problem = writable_file_problem(args.output) if args.output else None  # before anything is computed
    if problem is not None:
        raise ValueError(f"--output {args.output}: {problem}")
    from analysis.report import ReportOptions
    from analysis.report.paper_table import format_table, paper_table
    from capcal_tasks.relations import parse_calibration_overrides

    options = ReportOptions(
        n_resamples=args.resamples,
        seed=args.seed,
        calibration=parse_calibration_overrides(args.calibration),
        select=args.run or None,
    )
    rows = paper_table(
        args.output_dirs, args.metric or None, activations_dir=args.activations, options=options
    )
    text = format_table(rows, args.metric or None, args.format)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"table: {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from analysis.leaderboard import leaderboard_rows, template_tasks, write_leaderboard_results

    rows = leaderboard_rows(args.output_dirs, args.benchmark)
    for path, row in zip(write_leaderboard_results(rows, args.output), rows, strict=True):
        print(f"leaderboard: {row.model_name}: {path} ({len(row.values)} columns, version {row.version})")
        for column, reason in row.missing.items():
            print(
                terminal_text(
                    f"capcal leaderboard: warning: {row.model_name}: {column} is undefined ({reason}); "
                    "the template drops this model's row unless the column is left off the board"
                ),
                file=sys.stderr,
            )
    print("template Tasks (src/about.py):")
    for benchmark, metric, label in template_tasks(args.benchmark):
        print(f'    Task("{benchmark}", "{metric}", "{label}")')
    return 0


def _rescore(args: argparse.Namespace) -> int:
    from analysis.evaluation.rescore import rescore

    options = {name: getattr(args, name) for name in RESCORE_JUDGE_FLAGS}
    tasks = [name for value in args.tasks or [] for name in value.split(",") if name]
    result = rescore(
        args.output_dir,
        args.checker,
        output_dir_out=args.output,
        tasks=tasks or None,
        run=args.run,
        **options,
    )
    judge = f", judge {result.judge_model}" if result.judge_model else ""
    print(terminal_text(f"checker {result.checker} ({result.checker_version}{judge})"))
    for path, reason in result.skipped:
        print(terminal_text(f"skipped: {path}: {reason}"))
    for run in result.runs:
        left_out = f", {len(run.questions_left_out)} question(s) left out" if run.questions_left_out else ""
        print(
            terminal_text(
                f"{run.task}: {run.questions} questions, {run.responses} responses, {run.labels_changed} "
                f"label(s) changed, {run.unparseable_verdicts} unreadable verdict(s){left_out} -> "
                f"{run.samples_path}"
            )
        )
    return 0


# judge options of capcal rescore: flag name -> (type, help)
RESCORE_JUDGE_FLAGS = {
    "base_url": (str, "judge: the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    "model": (str, "judge: the model name the server serves"),
    "api_key_env": (str, "judge: the environment variable holding the API key (never logged)"),
    "num_concurrent": (int, "judge: concurrent requests"),
    "cache_path": (str, "judge: on-disk cache of the verdicts (resume)"),
    "max_retries": (int, "judge: retries per request"),
    "timeout": (float, "judge: seconds per request"),
    "max_tokens": (int, "judge: most tokens per verdict (default: the server's)"),
    "temperature": (float, "judge: sampling temperature (default 1.0, as in the paper)"),
    "top_p": (float, "judge: top_p (default 1.0, as in the paper)"),
    "seed": (int, "judge: seed from which each request's seed is derived (default 0)"),
}


def _demo(args: argparse.Namespace) -> int:
    from analysis.demo import run_demo

    run_demo(
        output_dir=args.output_dir,
        task=args.task,
        cheap_model=args.model,
        strong_model=None if args.strong_model == "none" else args.strong_model,
        repeats=args.repeats,
        train_repeats=args.train_repeats,
        strong_repeats=args.strong_repeats,
        per_level=args.per_level,
        train_per_level=args.train_per_level,
        max_gen_toks=args.max_gen_toks,
        verbalized_max_gen_toks=args.verbalized_max_gen_toks,
        strong_verbalized_max_gen_toks=args.strong_verbalized,
        batch_size=args.batch_size,
        resamples=args.resamples,
    )
    return 0


def _dataclass_flags(parser: argparse.ArgumentParser, cls: type, skip: Sequence[str] = ()) -> None:
    """One ``--name`` flag per field of the dataclass ``cls`` (its default shown; types from the defaults)."""
    import dataclasses

    for item in dataclasses.fields(cls):
        if item.name in skip:
            continue
        default = item.default
        if isinstance(default, bool):
            parser.add_argument(f"--{item.name}", type=parse_bool, help=f"default {default}")
        elif isinstance(default, tuple):
            parser.add_argument(f"--{item.name}", nargs="+", help=f"default {' '.join(default)}")
        elif "list[int]" in str(item.type):
            parser.add_argument(f"--{item.name}", nargs="+", type=int, help="default: all")
        else:
            kind = int if default is None and "int" in str(item.type) else type(default)
            kind = str if default is None and kind is type(None) else kind
            parser.add_argument(f"--{item.name}", type=kind, help=f"default {default}")


def _dataclass_from(args: argparse.Namespace, cls: type, **given: Any) -> Any:
    """An instance of ``cls`` from the flags that were given (the others keep their defaults)."""
    import dataclasses

    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if getattr(args, f.name, None) is not None
    }
    return cls(**{**values, **given})


def _selfcal(args: argparse.Namespace) -> int:
    from analysis.self_calibration import compare, data, loop, train

    if args.selfcal_command == "data":
        excluded = loop.question_ids_of(args.exclude_run) if args.exclude_run else []
        result = data.build_training_data(
            args.sampling_dir, args.selfcheck_dir, args.output, confidence=args.confidence,
            lm_threshold=args.lm_threshold, exclude_question_ids=excluded,
        )  # fmt: skip
        print(terminal_text(f"{result.counts['tuples']} tuples -> {result.path} (card {result.readme})"))
    elif args.selfcal_command == "train":
        config = _dataclass_from(args, train.TrainConfig)
        result = train.train_self_calibration(args.data, loop.model_path(args.model), args.output, config)
        print(terminal_text(f"adapter {result.adapter_dir}\nmerged  {result.merged_dir}"))
    elif args.selfcal_command == "compare":
        result = compare.compare_runs(
            *args.runs, args.output, training_data=args.training_data, confidence=args.confidence,
            tolerance=args.tolerance, n_resamples=args.resamples,
        )  # fmt: skip
        print(terminal_text(f"report: {result.files['html']}\nsummary: {result.files['markdown']}"))
    else:
        settings = _dataclass_from(args, loop.LoopSettings)
        config = _dataclass_from(args, train.TrainConfig)
        result = loop.run_self_calibration_loop(args.output_dir, settings, config)
        timings = ", ".join(
            f"{name} {'reused' if name in result.reused else f'{value:.0f} s'}"
            for name, value in result.step_seconds.items()
        )
        print(terminal_text(f"steps: {timings}\nreport: {result.comparison.files['html']}"))
    return 0


class _StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (which a caller such as pytest may replace between runs)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _log_capcal_models_to_stderr() -> None:
    """Show capcal_models' INFO logs (retries, the API models' summary lines) beside lm-eval's, which
    configures only its own logger; once per process."""
    models_logger = logging.getLogger("capcal_models")
    if not models_logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s [%(name)s] %(message)s"))
        models_logger.addHandler(handler)
        models_logger.setLevel(logging.INFO)


def unrecognized_arguments(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """The error for flags ``parser`` does not know, with the closest known flag for the first of them."""
    import difflib

    message = f"unrecognized arguments: {' '.join(unknown)}"
    flags = sorted(set(re.findall(r"--[\w-]+", parser.format_usage())))
    first = next((item.split("=")[0] for item in unknown if item.startswith("--")), None)
    close = difflib.get_close_matches(first, flags, n=1, cutoff=0.6) if first else []
    return f"{message}; did you mean {close[0]}?" if close else message


def _add_selfcal_parsers(selfcal: Any) -> None:
    """The actions of ``capcal selfcal`` (analysis.self_calibration)."""
    from analysis.self_calibration.loop import LoopSettings
    from analysis.self_calibration.train import TrainConfig

    making = selfcal.add_parser("data", help="SSC training tuples from a sampling run and its self-check run")
    making.add_argument("sampling_dir", help="folder with the (training-split) sampling run")
    making.add_argument("selfcheck_dir", help="folder with the self-check run on its responses")
    making.add_argument("--output", required=True, help="folder for train.jsonl and its card")
    making.add_argument("--confidence", default="p_yes", choices=["p_yes", "p_yes_normalized"])
    making.add_argument("--lm_threshold", type=float, default=0.75, help="SSC above it: LM loss")
    making.add_argument("--exclude_run", help="samples file of held-out questions that must not appear")
    training = selfcal.add_parser("train", help="LoRA training on SSC tuples; adapter + merged checkpoint")
    training.add_argument("data", help="train.jsonl (or its folder)")
    training.add_argument("--model", required=True, help="base checkpoint folder or capcal model name")
    training.add_argument("--output", required=True, help="folder for checkpoints, adapter/ and merged/")
    _dataclass_flags(training, TrainConfig)
    comparing = selfcal.add_parser("compare", help="before/after on held-out questions, with intervals")
    comparing.add_argument(
        "runs",
        nargs=4,
        metavar="DIR",
        help="before sampling, before self-check, after sampling, after self-check",
    )
    comparing.add_argument("--output", required=True, help="folder for the comparison and its report")
    comparing.add_argument("--training_data", help="train.jsonl: its questions must not be compared")
    comparing.add_argument("--confidence", default="p_yes", choices=["p_yes", "p_yes_normalized"])
    comparing.add_argument("--tolerance", type=float, default=0.02, help="allowed drop in accuracy")
    comparing.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    running = selfcal.add_parser("run", help="the whole loop: sample, check, data, train, resample, compare")
    running.add_argument("--output_dir", required=True)
    _dataclass_flags(running, LoopSettings)
    _dataclass_flags(running, TrainConfig, skip=[f for f in ("seed",)])


def build_parser(selfcal_actions: bool = True) -> argparse.ArgumentParser:
    """The ``capcal`` parser; ``selfcal_actions`` False leaves ``capcal selfcal``'s actions out (their flags
    come from analysis.self_calibration, whose import takes seconds: other commands do not wait for it)."""
    parser = OneLineParser(
        prog="capcal", description="Capability calibration on lm-eval.", allow_abbrev=False
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    evaluation = commands.add_parser(
        "eval",
        help="lm_eval with capcal's tasks and models (+ --repeats K, --data_dir DIR)",
        description="Run lm-eval on capcal's (and lm-eval's) tasks: analysis.evaluation.evaluate.",
        allow_abbrev=False,
    )
    add_eval_arguments(evaluation)
    commands.add_parser("tasks-dir", help="print the folder of capcal's task YAMLs (for --include_path)")

    models = commands.add_parser("models", help="prepare and list local models").add_subparsers(
        dest="models_command", required=True, metavar="ACTION"
    )
    prepare = models.add_parser("prepare", help="convert a packaged GGUF model to a HF checkpoint (once)")
    prepare.add_argument(
        "names", nargs="+", metavar="NAME",
        help="smollm2, gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b (capcal models list)",
    )  # fmt: skip
    prepare.add_argument("--force", action="store_true", help="convert again even if prepared")
    listing = models.add_parser("list", help="show known models, whether prepared and where")
    listing.add_argument("--json", action="store_true")
    path = models.add_parser("path", help="print the folder of a prepared model")
    path.add_argument("name")

    analyze = commands.add_parser("analyze", help="per-question table of an lm-eval output folder")
    analyze.add_argument("output_dir")
    analyze.add_argument(
        "--output", help="table file (.jsonl, .csv, .parquet); default OUTPUT_DIR/capcal_questions.jsonl"
    )
    analyze.add_argument(
        "--responses",
        action="store_true",
        help="keep every response text in the table (default: only each question's first response)",
    )

    check = commands.add_parser(
        "check", help="is every run in lm-eval output folders complete? (exit status 1 if not)"
    )
    check.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR")

    report = commands.add_parser("report", help="HTML report + Markdown summary of lm-eval output folders")
    report.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR")
    report.add_argument("--output", default="capcal_report", help="report folder (default capcal_report)")
    report.add_argument("--activations", help="activations folder written by capcal-hf (enables the probe)")
    report.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    report.add_argument("--seed", type=int, default=0)
    report.add_argument(
        "--calibration",
        action="append",
        default=[],
        metavar="TASK=SPLIT[,SPLIT]",
        help="fit TASK's probe and recalibrators on these calibration task(s) instead of the declared ones "
        "(cross-domain: capcal_aime25=capcal_math_train; several: mixed-domain); repeatable",
    )
    report.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="RUN",
        help="use this run (run id, run key prefix or path of its results or samples file) instead of the "
        "latest of its (model, task); repeatable; the report lists the runs it used and left out",
    )

    table = commands.add_parser(
        "table", help="estimator x task grid of a metric, for a paper (markdown, latex, csv or json)"
    )
    table.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR")
    table.add_argument(
        "--metric",
        action="append",
        default=[],
        help="a calibration-table metric (e.g. corrected_capability_brier, soft_auroc); repeatable; "
        "default: the headline metrics",
    )
    table.add_argument("--format", default="markdown", choices=["markdown", "latex", "csv", "json"])
    table.add_argument("--output", help="write the table to this file (default: standard output)")
    table.add_argument("--activations", help="activations folder written by capcal-hf (enables the probe)")
    table.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    table.add_argument("--seed", type=int, default=0)
    table.add_argument(
        "--calibration", action="append", default=[], metavar="TASK=SPLIT[,SPLIT]", help="as capcal report"
    )
    table.add_argument("--run", action="append", default=[], metavar="RUN", help="as capcal report")

    board = commands.add_parser(
        "leaderboard",
        help="export calibration columns as results files the Hugging Face leaderboard template reads",
    )
    board.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR", help="lm-eval output folders")
    board.add_argument("--output", required=True, help="folder for the template's results files")
    board.add_argument(
        "--benchmark",
        default="capcal_calibration_open",
        help="the calibration task or group to export (default capcal_calibration_open)",
    )

    rescoring = commands.add_parser(
        "rescore", help="re-score a run's logged responses with another checker (no model run)"
    )
    rescoring.add_argument("output_dir")
    rescoring.add_argument(
        "--checker", required=True, help="task, alias, exact, math-verify, math-string or judge"
    )
    rescoring.add_argument("--output", help="folder for the new runs (default OUTPUT_DIR/rescored/CHECKER)")
    rescoring.add_argument("--tasks", nargs="+", help="only these tasks (comma or space separated)")
    rescoring.add_argument("--run", help="re-score this run (run id, run key prefix or path) instead")
    for flag, (kind, text) in RESCORE_JUDGE_FLAGS.items():
        rescoring.add_argument(f"--{flag}", type=kind, help=text)

    demo = commands.add_parser("demo", help="the full pipeline on local models: sample, elicit, report")
    demo.add_argument("--output_dir", default="capcal_demo")
    demo.add_argument("--task", default="capcal_arithmetic", help="sampling task (default capcal_arithmetic)")
    demo.add_argument("--model", default="smollm2", help="the model to calibrate (default smollm2)")
    demo.add_argument(
        "--strong_model", default="qwen2.5-coder-0.5b", help="the second model (routing target), or 'none'"
    )
    demo.add_argument("--repeats", type=int, default=16, help="samples per question k (default 16)")
    demo.add_argument("--train_repeats", type=int, default=8, help="samples per training question")
    demo.add_argument("--strong_repeats", type=int, default=8, help="samples per question, second model")
    demo.add_argument("--per_level", type=int, default=8, help="arithmetic questions per level (5 levels)")
    demo.add_argument("--train_per_level", type=int, default=12, help="training questions per level")
    demo.add_argument("--max_gen_toks", type=int, default=16)
    demo.add_argument(
        "--verbalized_max_gen_toks",
        type=int,
        default=48,
        help="tokens per verbalized confidence (default 48)",
    )
    demo.add_argument(
        "--strong_verbalized",
        type=int,
        metavar="TOKENS",
        help="also elicit the second model's verbalized confidence, at most TOKENS tokens (e.g. 256)",
    )
    demo.add_argument("--batch_size", type=int, default=64)
    demo.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples in the report")
    selfcal = commands.add_parser(
        "selfcal", help="Self-Calibration training: data, train, compare, or the whole loop (run)"
    ).add_subparsers(dest="selfcal_command", required=True, metavar="ACTION")
    if selfcal_actions:
        _add_selfcal_parsers(selfcal)
    parser.command_parsers = dict(commands.choices)
    return parser


# The commands whose parsing does not need ``capcal selfcal``'s actions (``build_parser``).
COMMANDS_WITHOUT_SELFCAL = frozenset(
    {"eval", "tasks-dir", "models", "analyze", "check", "report", "demo", "rescore", "leaderboard"}
)


STOPPABLE_COMMANDS = ("eval", "demo", "selfcal")  # the commands that run models (capcal_models.stopping)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``capcal`` command; returns its exit status (argument errors: one line, exit status 2)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(selfcal_actions=not argv or argv[0] not in COMMANDS_WITHOUT_SELFCAL)
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            command_parser = parser.command_parsers.get(getattr(args, "command", None), parser)
            command_parser.error(unrecognized_arguments(command_parser, unknown))
    except SystemExit as exit:
        return int(exit.code or 0)
    args.argv = argv  # for the command that writes an incomplete run again (capcal eval)
    if args.command in STOPPABLE_COMMANDS:  # children end with capcal; SIGTERM and Ctrl-C stop cleanly
        from capcal_models.sample_cache import committed_samples
        from capcal_models.stopping import RunStopped, end_descendants_at_exit, stop_message, stop_on_signals

        end_descendants_at_exit()
        try:
            with stop_on_signals():
                return _run_command(args)
        except RunStopped as stopped:
            stopped.__traceback__ = None  # frees the run (its progress bars print their last line, vLLM's
            gc.collect()  # engine shuts down) before the message, which is then the last line
            message = stop_message(args.command, stopped, argv, committed_samples())
            print(terminal_text(message), file=sys.stderr)
            return stopped.exit_status
    return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed command ``args.command``; returns its exit status."""
    if args.command == "eval":
        return run_eval(args)
    if args.command == "tasks-dir":
        from capcal_tasks import tasks_dir

        print(tasks_dir())
        return 0
    handlers = {
        "models": _models,
        "analyze": _analyze,
        "check": _check,
        "report": _report,
        "table": _table,
        "leaderboard": _leaderboard,
        "demo": _demo,
        "rescore": _rescore,
        "selfcal": _selfcal,
    }
    from analysis.checks.output_checks import (
        failed_write_message,
        recording_written_files,
        remove_partial_files,
    )

    try:
        with recording_written_files() as written:
            return handlers[args.command](args)
    except (FileNotFoundError, ValueError, KeyError, RuntimeError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(terminal_text(f"capcal {args.command}: error: {message}"), file=sys.stderr)
        return 2
    except OSError as error:  # a failed write (a full disk): one line, the partial files removed
        outputs = [getattr(args, name, None) for name in ("output", "output_dir")]
        roots = [
            path for value in outputs if value for path in ([value] if isinstance(value, str) else value)
        ]
        removed = remove_partial_files(written, roots)
        print(terminal_text(failed_write_message(args.command, error, written, removed)), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
