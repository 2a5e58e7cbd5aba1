"""``capcal eval [lm_eval flags] [--repeats K] [--data_dir DIR] [--plain_prompts] [--adaptive [--looks L]
[--adaptive_rule R]]``: lm-eval on capcal's (and lm-eval's) tasks, ``analysis.evaluation.evaluate`` (with
``--adaptive``, ``analysis.evaluation.adaptive.evaluate_adaptive``).

Exit status 2 for an input that cannot work, found before a model is loaded; 1 when the run failed; 3 when
API requests still failed after their retries (the message says how to resume). Named ``eval_command`` so
as not to shadow the builtin ``eval``."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import traceback
from pathlib import Path
from typing import Any

from analysis.cli.arguments import bool_flag, comma_separated, parse_dict_flag, parse_seed
from analysis.cli.command import Command, SubParsers
from analysis.cli.logging_setup import set_up_run_logging
from analysis.text_safety import terminal_text
from capcal_tasks.settings import CONFIDENCES_KEY


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``capcal eval``: lm-eval 0.4.13's ``lm_eval run`` flags that apply to a local run (same
    names, short forms and defaults), plus ``--repeats``, ``--data_dir`` and ``--debug``."""
    lm = parser.add_argument_group("lm_eval flags")
    lm.add_argument(
        "--model", "-M", default="hf", help="model name (default hf; capcal-hf, capcal-vllm, ...)"
    )
    lm.add_argument("--tasks", "-t", nargs="+", required=True, help="task names, comma or space separated")
    lm.add_argument("--model_args", "-a", nargs="+", help="key=value,key2=value2 or a JSON object")
    lm.add_argument(
        "--apply_chat_template",
        nargs="?",
        const=True,
        default=False,
        metavar="TEMPLATE",
        help="format prompts with the model's chat template (or the named one)",
    )
    lm.add_argument(
        "--fewshot_as_multiturn",
        nargs="?",
        const=True,
        default=None,
        type=bool_flag,
        help="few-shot examples as chat turns (default: on with --apply_chat_template)",
    )
    lm.add_argument("--system_instruction", help="a system message put before every prompt")
    lm.add_argument("--limit", "-L", type=float, help="questions per task (a count, or a fraction below 1)")
    lm.add_argument("--samples", "-E", help="JSON (or a JSON file): task -> doc indices (not with --limit)")
    lm.add_argument(
        "--num_fewshot", "-f", type=int, help="few-shot examples per prompt (default: the task's)"
    )
    lm.add_argument(
        "--batch_size", "-b", help="integer, auto or auto:N (default: capcal_models.batch_size chooses)"
    )
    lm.add_argument("--max_batch_size", type=int, help="the largest batch --batch_size auto may choose")
    lm.add_argument("--device", default="cuda:0", help="default cuda:0 (the CPU when there is no GPU)")
    lm.add_argument("--gen_kwargs", nargs="+", help="generation settings, e.g. max_gen_toks=64")
    lm.add_argument("--output_path", "-o", help="folder for the results (and samples) files")
    lm.add_argument(
        "--log_samples", "-s", action="store_true", help="save every sample (needs --output_path)"
    )
    lm.add_argument(
        "--predict_only", "-x", action="store_true", help="save the responses without scoring them"
    )
    lm.add_argument("--use_cache", "-c", metavar="PATH", help="lm-eval's sqlite response cache")
    lm.add_argument(
        "--cache_requests",
        nargs="?",
        const="true",
        choices=["true", "refresh", "delete"],
        help="lm-eval's cache of built requests",
    )
    lm.add_argument("--check_integrity", action="store_true", help="run the tasks' own tests first")
    lm.add_argument("--write_out", "-w", action="store_true", help="print the prompts of the first documents")
    lm.add_argument("--show_config", action="store_true", help="print the full results and task configs")
    lm.add_argument("--include_path", help="a further folder of task YAMLs")
    lm.add_argument("--seed", type=parse_seed, help="one integer, or python,numpy,torch,fewshot seeds")
    lm.add_argument(
        "--metadata",
        nargs="+",
        help="task metadata: a JSON object or key=value pairs (capcal_confidences=ptrue,verbalized: a list)",
    )
    lm.add_argument(
        "--trust_remote_code", action="store_true", help="let the model's and datasets' own code run"
    )
    lm.add_argument(
        "--confirm_run_unsafe_code",
        action="store_true",
        help="allow tasks that execute model-written code",
    )
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
    own.add_argument(
        "--adaptive",
        action="store_true",
        help="adaptive sampling: each question stops at the first look where the rule fires "
        "(docs/methods.md#adaptive-sampling-estimates-after-stopping)",
    )
    own.add_argument(
        "--looks",
        help="with --adaptive: sample counts, default 8,16,32,64 below k_max (k_max = the repeats, appended)",
    )
    own.add_argument(
        "--adaptive_rule",
        default=None,
        help="with --adaptive: unanimity (default) or width:W (stop once the 95%% interval is below W)",
    )
    own.add_argument("--debug", action="store_true", help="show the traceback of an error")


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal eval``'s parser."""
    parser = commands.add_parser(
        "eval",
        help="lm_eval with capcal's tasks and models (+ --repeats K, --data_dir DIR)",
        description="Run lm-eval on capcal's (and lm-eval's) tasks: analysis.evaluation.evaluate.",
        allow_abbrev=False,
    )
    add_eval_arguments(parser)
    return parser


def eval_request(args: argparse.Namespace) -> dict[str, Any]:
    """``evaluate``'s keyword arguments from ``capcal eval``'s parsed flags (cross-flag rules as lm-eval's
    CLI applies them). Raises ``ValueError`` (one line) for a combination that cannot work."""
    model_args = parse_dict_flag(args.model_args, "--model_args")
    gen_kwargs = parse_dict_flag(args.gen_kwargs, "--gen_kwargs")
    metadata = parse_dict_flag(args.metadata, "--metadata", list_keys=(CONFIDENCES_KEY,))
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
    adaptive: dict[str, Any] = {}
    if args.adaptive:
        from analysis.evaluation.adaptive import parse_looks
        from capcal_tasks.adaptive_records import parse_rule

        looks = None if args.looks is None else parse_looks(args.looks)
        rule = args.adaptive_rule or "unanimity"
        parse_rule(rule)
        adaptive = {"looks": looks, "rule": rule}
    elif args.looks is not None or args.adaptive_rule is not None:
        raise ValueError("--looks and --adaptive_rule need --adaptive")
    request: dict[str, Any] = {
        "model": args.model,
        "tasks": comma_separated(args.tasks),
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
        **adaptive,
    }
    if args.seed is not None:
        for key, seed in zip(
            ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed"),
            args.seed,
            strict=True,
        ):
            request[key] = seed
    return request


def api_requests_failed(error: Exception) -> bool:
    """Whether ``error`` is ``capcal_models.api.APIRequestsFailed`` (False where the API extra is missing)."""
    try:
        from capcal_models.api import APIRequestsFailed
    except ImportError:
        return False
    return isinstance(error, APIRequestsFailed)


def run(args: argparse.Namespace) -> int:
    """``capcal eval``: check the flags, run ``analysis.evaluation.evaluate`` and print lm-eval's summary.

    Exit status 0 on success; 2 for an input that cannot work (one line, before any model is loaded); 3 when
    API requests still failed after their retries; 1 when the run failed otherwise (one line; the traceback
    with ``--debug``)."""
    from analysis.checks.output_checks import IncompleteOutputError
    from analysis.evaluation import EvaluationInputError, evaluate, evaluate_adaptive, format_results

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
    set_up_run_logging(args.verbosity)

    def warn(message: str) -> None:
        print(terminal_text(f"capcal eval: warning: {message}"), file=sys.stderr)

    def inform(message: str) -> None:
        print(terminal_text(f"capcal eval: {message}"), file=sys.stderr, flush=True)

    try:
        run_evaluation = evaluate_adaptive if args.adaptive else evaluate
        results = run_evaluation(**request, notify=warn, inform=inform)
    except EvaluationInputError as error:
        return fail(str(error), 2)
    except IncompleteOutputError as error:  # a failed write is a failed run (analysis.checks.output_checks)
        command = shlex.join(["capcal", *getattr(args, "argv", ["eval", "..."])])
        return fail(
            f"{error}; free space (or choose another --output_path) and write them again: {command}", 1
        )
    except Exception as error:  # noqa: BLE001 - one line (the traceback with --debug)
        if api_requests_failed(error):  # the report says what finished, what did not, how to resume
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


COMMAND = Command(name="eval", add_parser=add_parser, run=run, runs_models=True, handles_errors=True)
