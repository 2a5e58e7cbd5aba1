"""Flag parsing shared by the ``capcal`` commands: the one-line parser, lm-eval's dictionary and seed flags,
one flag per dataclass field, and the "did you mean" error for unknown flags."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import sys
from collections.abc import Collection, Sequence
from typing import Any, NoReturn

from analysis.text_safety import terminal_text
from capcal_tasks.settings import parse_bool


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``<prog>: error: <message>`` on stderr (exit status 2),
    without the usage block."""

    def error(self, message: str) -> NoReturn:
        print(terminal_text(f"{self.prog}: error: {message}"), file=sys.stderr)
        raise SystemExit(2)


def parse_dict_flag(
    values: Sequence[str] | None, flag: str, list_keys: Collection[str] = ()
) -> dict[str, Any]:
    """lm-eval's dictionary flags (``--model_args``, ``--gen_kwargs``, ``--metadata``, several values
    allowed): each value a JSON object or ``key=value[,key=value]``
    (``analysis.evaluation.parse_key_values``; a key of ``list_keys`` takes a comma-separated list, as
    ``capcal_confidences=ptrue,verbalized``); later keys win. Raises ``ValueError`` naming the flag."""
    from analysis.evaluation import parse_key_values

    merged: dict[str, Any] = {}
    for value in values or []:
        merged.update(parse_key_values(value, flag, list_keys))
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


def bool_flag(value: str) -> bool:
    """A boolean flag's value (``capcal_tasks.settings.parse_bool``), as argparse's type error."""
    try:
        return parse_bool(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def comma_separated(values: Sequence[str] | None) -> list[str]:
    """Names given as ``--flag a,b c``: comma or space separated, empty items dropped."""
    return [name for value in values or [] for name in value.split(",") if name]


def add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, skip: Sequence[str] = ()) -> None:
    """One ``--name`` flag per field of the dataclass ``cls`` (its default shown; types from the defaults)."""
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


def dataclass_from_flags(args: argparse.Namespace, cls: type, **given: Any) -> Any:
    """An instance of ``cls`` from the flags that were given (the others keep their defaults)."""
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if getattr(args, f.name, None) is not None
    }
    return cls(**{**values, **given})


def unrecognized_arguments(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """The error for flags ``parser`` does not know, with the closest known flag for the first of them."""
    message = f"unrecognized arguments: {' '.join(unknown)}"
    flags = sorted(set(re.findall(r"--[\w-]+", parser.format_usage())))
    first = next((item.split("=")[0] for item in unknown if item.startswith("--")), None)
    close = difflib.get_close_matches(first, flags, n=1, cutoff=0.6) if first else []
    return f"{message}; did you mean {close[0]}?" if close else message
