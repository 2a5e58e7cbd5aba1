"""``capcal rescore OUTPUT_DIR --checker NAME [--output DIR] [--tasks T,..] [--run RUN] [judge options]``:
re-score a run's logged responses with another checker (no model run), ``analysis.evaluation.rescore``."""

from __future__ import annotations

import argparse

from analysis.cli.arguments import comma_separated
from analysis.cli.command import Command, SubParsers
from analysis.text_safety import terminal_text

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


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal rescore``'s parser (its judge options from ``RESCORE_JUDGE_FLAGS``)."""
    parser = commands.add_parser(
        "rescore", help="re-score a run's logged responses with another checker (no model run)"
    )
    parser.add_argument("output_dir", help="an lm-eval output folder with logged samples")
    parser.add_argument(
        "--checker", required=True, help="task, alias, exact, math-verify, math-string or judge"
    )
    parser.add_argument("--output", help="folder for the new runs (default OUTPUT_DIR/rescored/CHECKER)")
    parser.add_argument("--tasks", nargs="+", help="only these tasks (comma or space separated)")
    parser.add_argument("--run", help="re-score this run (run id, run key prefix or path) instead")
    for flag, (kind, text) in RESCORE_JUDGE_FLAGS.items():
        parser.add_argument(f"--{flag}", type=kind, help=text)
    return parser


def run(args: argparse.Namespace) -> int:
    """``rescore`` the run and print the checker, the skipped files and each new run's counts."""
    from analysis.evaluation.rescore import rescore

    options = {name: getattr(args, name) for name in RESCORE_JUDGE_FLAGS}
    tasks = comma_separated(args.tasks)
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
    for item in result.runs:
        left_out = f", {len(item.questions_left_out)} question(s) left out" if item.questions_left_out else ""
        print(
            terminal_text(
                f"{item.task}: {item.questions} questions, {item.responses} responses, {item.labels_changed} "
                f"label(s) changed, {item.unparseable_verdicts} unreadable verdict(s){left_out} -> "
                f"{item.samples_path}"
            )
        )
    return 0


COMMAND = Command(name="rescore", add_parser=add_parser, run=run)
