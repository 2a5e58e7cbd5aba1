"""``capcal demo [options]``: the full pipeline on local models (sample, elicit, report),
``analysis.demo.run_demo``."""

from __future__ import annotations

import argparse

from analysis.cli.command import Command, SubParsers


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal demo``'s parser."""
    parser = commands.add_parser("demo", help="the full pipeline on local models: sample, elicit, report")
    parser.add_argument("--output_dir", default="capcal_demo", help="folder for the runs and the report")
    parser.add_argument(
        "--task", default="capcal_arithmetic", help="sampling task (default capcal_arithmetic)"
    )
    parser.add_argument("--model", default="smollm2", help="the model to calibrate (default smollm2)")
    parser.add_argument(
        "--strong_model", default="qwen2.5-coder-0.5b", help="the second model (routing target), or 'none'"
    )
    parser.add_argument("--repeats", type=int, default=16, help="samples per question k (default 16)")
    parser.add_argument("--train_repeats", type=int, default=8, help="samples per training question")
    parser.add_argument("--strong_repeats", type=int, default=8, help="samples per question, second model")
    parser.add_argument("--per_level", type=int, default=8, help="arithmetic questions per level (5 levels)")
    parser.add_argument("--train_per_level", type=int, default=12, help="training questions per level")
    parser.add_argument("--max_gen_toks", type=int, default=16, help="tokens per sampled answer (default 16)")
    parser.add_argument(
        "--verbalized_max_gen_toks",
        type=int,
        default=48,
        help="tokens per verbalized confidence (default 48)",
    )
    parser.add_argument(
        "--strong_verbalized",
        type=int,
        metavar="TOKENS",
        help="also elicit the second model's verbalized confidence, at most TOKENS tokens (e.g. 256)",
    )
    parser.add_argument("--batch_size", type=int, default=64, help="rows per decoding batch (default 64)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples in the report")
    return parser


def run(args: argparse.Namespace) -> int:
    """``run_demo`` with the flags (``--strong_model none``: no second model)."""
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


COMMAND = Command(name="demo", add_parser=add_parser, run=run, runs_models=True)
