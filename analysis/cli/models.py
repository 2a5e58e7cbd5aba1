"""``capcal models prepare NAME [--force] | list | path NAME``: local models, ``capcal_models.prepare``."""

from __future__ import annotations

import argparse
import json

from analysis.cli.command import Command, SubParsers


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """``capcal models``' parser and its actions."""
    parser = commands.add_parser("models", help="prepare and list local models")
    actions = parser.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    prepare = actions.add_parser("prepare", help="convert a packaged GGUF model to a HF checkpoint (once)")
    prepare.add_argument(
        "names", nargs="+", metavar="NAME",
        help="smollm2, gemma3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b (capcal models list)",
    )  # fmt: skip
    prepare.add_argument("--force", action="store_true", help="convert again even if prepared")
    listing = actions.add_parser("list", help="show known models, whether prepared and where")
    listing.add_argument("--json", action="store_true", help="one JSON list instead of a table")
    path = actions.add_parser("path", help="print the folder of a prepared model")
    path.add_argument("name", help="a model name of capcal models list")
    return parser


def run(args: argparse.Namespace) -> int:
    """``prepare_model`` each name, print ``model_path(name)``, or list ``list_models()`` (``--json``: as
    JSON) from ``capcal_models.prepare``."""
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


COMMAND = Command(name="models", add_parser=add_parser, run=run)
