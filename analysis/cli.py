"""The ``capcal`` command line: a thin layer over capcal's Python API.

capcal eval [lm_eval flags] [--repeats K] [--data_dir DIR]   -> analysis.evaluation.run_lm_eval
    (exit status 3 when API requests still failed after their retries: the message says how to resume)
capcal tasks-dir                                              -> capcal_tasks.tasks_dir
capcal models prepare NAME [--force] | list | path NAME       -> capcal_models.prepare
capcal analyze OUTPUT_DIR [--output FILE]                     -> analysis.runs
capcal report OUTPUT_DIR... [--output DIR] [--activations DIR] -> analysis.report_builder.build_report
capcal demo [options]                                         -> analysis.demo.run_demo
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path


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
            for row in rows:
                where = row["path"] if row["prepared"] else "not prepared"
                print(f"{row['name']:<14} {where}\n{'':<14} {row['description']} [{row['license']}]")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.runs import load_run, summarize, write_question_table

    table = load_run(args.output_dir)
    output = Path(args.output) if args.output else Path(args.output_dir) / "capcal_questions.jsonl"
    write_question_table(table, output)
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(summarize(table).to_string(index=False))
    print(f"\n{len(table)} questions -> {output}")
    return 0


def _check(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.completeness import check_run

    checks = check_run(args.output_dir)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 80):
        print(checks.drop(columns="problems").to_string(index=False))
    incomplete = checks[~checks["complete"]]
    for row in incomplete.itertuples():
        print(f"incomplete: {row.model} {row.task} {row.run_id}: {row.problems}")
    print(f"\n{len(checks) - len(incomplete)} of {len(checks)} run(s) complete")
    return 1 if len(incomplete) else 0


def _report(args: argparse.Namespace) -> int:
    from analysis.report_builder import ReportOptions, build_report

    files = build_report(
        args.output_dirs,
        args.output,
        activations_dir=args.activations,
        options=ReportOptions(n_resamples=args.resamples, seed=args.seed),
    )
    print(f"report:  {files.html}\nsummary: {files.markdown}")
    return 0


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
        batch_size=args.batch_size,
        resamples=args.resamples,
    )
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capcal", description="Capability calibration on lm-eval.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("eval", help="lm_eval with capcal's tasks and models (+ --repeats K, --data_dir DIR)")
    commands.add_parser("tasks-dir", help="print the folder of capcal's task YAMLs (for --include_path)")

    models = commands.add_parser("models", help="prepare and list local models").add_subparsers(
        dest="models_command", required=True, metavar="ACTION"
    )
    prepare = models.add_parser("prepare", help="convert a packaged GGUF model to a HF checkpoint (once)")
    prepare.add_argument("names", nargs="+", metavar="NAME", help="smollm2, gemma3-270m")
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

    check = commands.add_parser(
        "check", help="is every run in an lm-eval output folder complete? (exit status 1 if not)"
    )
    check.add_argument("output_dir")

    report = commands.add_parser("report", help="HTML report + Markdown summary of lm-eval output folders")
    report.add_argument("output_dirs", nargs="+", metavar="OUTPUT_DIR")
    report.add_argument("--output", default="capcal_report", help="report folder (default capcal_report)")
    report.add_argument("--activations", help="activations folder written by capcal-hf (enables the probe)")
    report.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    report.add_argument("--seed", type=int, default=0)

    demo = commands.add_parser("demo", help="the full pipeline on local models: sample, elicit, report")
    demo.add_argument("--output_dir", default="capcal_demo")
    demo.add_argument("--task", default="capcal_arithmetic", help="sampling task (default capcal_arithmetic)")
    demo.add_argument("--model", default="smollm2", help="the model to calibrate (default smollm2)")
    demo.add_argument("--strong_model", default="gemma3-270m", help="routing target, or 'none'")
    demo.add_argument("--repeats", type=int, default=16, help="samples per question k (default 16)")
    demo.add_argument("--train_repeats", type=int, default=8, help="samples per training question")
    demo.add_argument("--strong_repeats", type=int, default=8, help="samples per question, second model")
    demo.add_argument("--per_level", type=int, default=8, help="arithmetic questions per level (5 levels)")
    demo.add_argument("--train_per_level", type=int, default=12, help="training questions per level")
    demo.add_argument("--max_gen_toks", type=int, default=16)
    demo.add_argument("--batch_size", type=int, default=64)
    demo.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples in the report")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "eval":
        from analysis.evaluation import run_lm_eval
        from capcal_models.api import APIRequestsFailed

        _log_capcal_models_to_stderr()
        try:
            run_lm_eval(argv[1:])
        except APIRequestsFailed as error:  # the report says what finished, what did not and how to resume
            print(f"capcal eval: error: {error}", file=sys.stderr)
            return 3
        return 0
    args = build_parser().parse_args(argv)
    if args.command == "tasks-dir":
        from capcal_tasks import tasks_dir

        print(tasks_dir())
        return 0
    handlers = {"models": _models, "analyze": _analyze, "check": _check, "report": _report, "demo": _demo}
    try:
        return handlers[args.command](args)
    except (FileNotFoundError, ValueError, KeyError, RuntimeError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"capcal {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
