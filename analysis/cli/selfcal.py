"""``capcal selfcal data|train|compare|run [options]``: Self-Calibration training,
``analysis.self_calibration`` (its actions' flags come from ``TrainConfig`` and ``LoopSettings``, whose
import takes seconds: they are built only when ``capcal selfcal`` is parsed)."""

from __future__ import annotations

import argparse
from typing import Any

from analysis.cli.arguments import add_dataclass_flags, dataclass_from_flags
from analysis.cli.command import Command, SubParsers
from analysis.text_safety import terminal_text


def add_parser(commands: SubParsers) -> Any:
    """``capcal selfcal``'s parser; returns its actions (``add_actions`` fills them)."""
    return commands.add_parser(
        "selfcal", help="Self-Calibration training: data, train, compare, or the whole loop (run)"
    ).add_subparsers(dest="selfcal_command", required=True, metavar="ACTION")


def add_actions(actions: Any) -> None:
    """The actions of ``capcal selfcal`` (analysis.self_calibration)."""
    from analysis.self_calibration.loop import LoopSettings
    from analysis.self_calibration.train_config import TrainConfig

    making = actions.add_parser("data", help="SSC training tuples from a sampling run and its self-check run")
    making.add_argument("sampling_dir", help="folder with the (training-split) sampling run")
    making.add_argument("selfcheck_dir", help="folder with the self-check run on its responses")
    making.add_argument("--output", required=True, help="folder for train.jsonl and its card")
    making.add_argument(
        "--confidence",
        default="p_yes",
        choices=["p_yes", "p_yes_normalized"],
        help="the self-check field used as c_i (default p_yes, the paper's)",
    )
    making.add_argument("--lm_threshold", type=float, default=0.75, help="SSC above it: LM loss")
    making.add_argument("--exclude_run", help="samples file of held-out questions that must not appear")
    training = actions.add_parser("train", help="LoRA training on SSC tuples; adapter + merged checkpoint")
    training.add_argument("data", help="train.jsonl (or its folder)")
    training.add_argument("--model", required=True, help="base checkpoint folder or capcal model name")
    training.add_argument("--output", required=True, help="folder for checkpoints, adapter/ and merged/")
    add_dataclass_flags(training, TrainConfig)
    comparing = actions.add_parser("compare", help="before/after on held-out questions, with intervals")
    comparing.add_argument(
        "runs",
        nargs=4,
        metavar="DIR",
        help="before sampling, before self-check, after sampling, after self-check",
    )
    comparing.add_argument("--output", required=True, help="folder for the comparison and its report")
    comparing.add_argument("--training_data", help="train.jsonl: its questions must not be compared")
    comparing.add_argument(
        "--confidence",
        default="p_yes",
        choices=["p_yes", "p_yes_normalized"],
        help="the self-check field compared (default p_yes)",
    )
    comparing.add_argument("--tolerance", type=float, default=0.02, help="allowed drop in accuracy")
    comparing.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    running = actions.add_parser("run", help="the whole loop: sample, check, data, train, resample, compare")
    running.add_argument("--output_dir", required=True, help="folder for every step's output")
    add_dataclass_flags(running, LoopSettings)
    add_dataclass_flags(running, TrainConfig, skip=["seed"])


def run(args: argparse.Namespace) -> int:
    """``build_training_data``, ``train_self_calibration``, ``compare_runs`` or
    ``run_self_calibration_loop`` with the flags; prints where the results are."""
    from analysis.self_calibration import compare, data, loop, train
    from analysis.self_calibration.train_config import TrainConfig

    if args.selfcal_command == "data":
        excluded = loop.question_ids_of(args.exclude_run) if args.exclude_run else []
        result = data.build_training_data(
            args.sampling_dir, args.selfcheck_dir, args.output, confidence=args.confidence,
            lm_threshold=args.lm_threshold, exclude_question_ids=excluded,
        )  # fmt: skip
        print(terminal_text(f"{result.counts['tuples']} tuples -> {result.path} (card {result.readme})"))
    elif args.selfcal_command == "train":
        config = dataclass_from_flags(args, TrainConfig)
        result = train.train_self_calibration(args.data, loop.model_path(args.model), args.output, config)
        print(terminal_text(f"adapter {result.adapter_dir}\nmerged  {result.merged_dir}"))
    elif args.selfcal_command == "compare":
        result = compare.compare_runs(
            *args.runs, args.output, training_data=args.training_data, confidence=args.confidence,
            tolerance=args.tolerance, n_resamples=args.resamples,
        )  # fmt: skip
        print(terminal_text(f"report: {result.files['html']}\nsummary: {result.files['markdown']}"))
    else:
        settings = dataclass_from_flags(args, loop.LoopSettings)
        config = dataclass_from_flags(args, TrainConfig)
        result = loop.run_self_calibration_loop(args.output_dir, settings, config)
        timings = ", ".join(
            f"{name} {'reused' if name in result.reused else f'{value:.0f} s'}"
            for name, value in result.step_seconds.items()
        )
        print(terminal_text(f"steps: {timings}\nreport: {result.comparison.files['html']}"))
    return 0


COMMAND = Command(
    name="selfcal", add_parser=add_parser, run=run, runs_models=True, add_slow_parts=add_actions
)
