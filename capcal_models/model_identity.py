"""Which model produced a run: a fingerprint of what was loaded, not the name it was loaded under.

``checkpoint_fingerprint(path)`` is ``"sha256:<hex>"``, the sha256 of the sorted lines
``"<file name> <sha256 of its bytes>"`` over the checkpoint folder's config, generation config, tokenizer
and chat-template files and weight files (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.gguf``, their index
files). capcal's prepared-model manifest (``capcal_model.json``, which holds a preparation time) is not
part of it, so two preparations of the same checkpoint agree, and a copy with one weight byte changed does
not. The path is resolved first, so ``/p/smollm2/``, ``/p/smollm2`` and a symlink to it give one fingerprint.

Hashing a checkpoint reads every byte once; each file's hash is cached under
``capcal_home()/cache/fingerprints``, keyed by (resolved path, size, mtime_ns), so later calls only stat.

``model_fingerprint_from_args(model, model_args)`` applies this to lm-eval's ``--model`` / ``--model_args``:
the ``pretrained`` (or ``model`` / ``path``) argument when it is a local folder or a checkpoint in the
Hugging Face cache; otherwise the model is ``unresolved`` and known only by its label.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from capcal_models.model_files import MANIFEST_NAME, file_sha256
from capcal_tasks.cache_files import cache_path, write_cache_file
from capcal_tasks.records import parse_json_object

__all__ = [
    "CHECKPOINT_FILE_PATTERNS",
    "checkpoint_files",
    "checkpoint_fingerprint",
    "model_fingerprint_from_args",
    "parse_model_args",
]

CHECKPOINT_FILE_PATTERNS = (
    "config.json",
    "generation_config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "chat_template*",
    "*.safetensors",
    "*.safetensors.index.json",
    "*.bin",
    "*.bin.index.json",
    "*.pt",
    "*.gguf",
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
_PATH_ARGUMENTS = ("pretrained", "model", "path", "model_path")


def checkpoint_files(folder: Path) -> list[Path]:
    """The files of a checkpoint folder that define the model (see the module docstring), sorted by name."""
    files = {
        path
        for pattern in CHECKPOINT_FILE_PATTERNS
        for path in folder.glob(pattern)
        if path.is_file() and path.name != MANIFEST_NAME
    }
    return sorted(files, key=lambda path: path.name)


def _file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, cached by (resolved path, size, mtime_ns)."""
    resolved = path.resolve()
    stat = resolved.stat()
    key = json.dumps([str(resolved), stat.st_size, stat.st_mtime_ns])
    cache_file = cache_path("fingerprints", f"{hashlib.sha256(key.encode()).hexdigest()}.json")
    try:
        cached = json.loads(cache_file.read_text(encoding="utf-8"))
        if cached.get("key") == key and isinstance(cached.get("sha256"), str):
            return cached["sha256"]
    except (OSError, ValueError):
        pass
    value = file_sha256(resolved)
    write_cache_file(cache_file, json.dumps({"key": key, "sha256": value}))  # a read-only home: hash again
    return value


def checkpoint_fingerprint(path: str | Path) -> str:
    """``"sha256:<hex>"`` over the checkpoint's defining files (see the module docstring).

    Raises ``FileNotFoundError`` for a path that is not a folder and ``ValueError`` for a folder without
    a config.json or without weight files (not a checkpoint).
    """
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"{path}: not a checkpoint folder")
    files = checkpoint_files(folder)
    names = {file.name for file in files}
    if "config.json" not in names or not any(name.endswith(_WEIGHT_SUFFIXES) for name in names):
        raise ValueError(f"{folder}: not a checkpoint (needs config.json and weight files)")
    lines = "".join(f"{file.name} {_file_sha256(file)}\n" for file in files)
    return "sha256:" + hashlib.sha256(lines.encode("utf-8")).hexdigest()


def parse_model_args(
    model_args: str | Mapping[str, Any] | None,
    *,
    typed: bool = False,
    what: str = "model arguments",
    list_keys: Collection[str] = (),
) -> dict[str, Any]:
    """lm-eval's dictionary arguments (``--model_args``, ``--gen_kwargs``, ``--metadata``) as a dict.

    A mapping is taken as given (keys as text), a text starting with ``{`` must be a JSON object, and any
    other text is ``key=value[,key=value...]`` (empty items ignored, spaces around keys and values
    stripped). The value of a key in ``list_keys`` is a list that goes on over the items without ``=``
    that follow it, kept as comma-separated text (``capcal_confidences=ptrue,verbalized``). ``typed=False``
    keeps the values as text (what a results file recorded, for identity); ``typed=True`` parses them as
    lm-eval does (``lm_eval.utils.handle_arg_string``: booleans, None, integers, floats, quoted text, else
    text). Raises ``ValueError`` naming ``what`` for invalid JSON, an item without ``=`` (after a key not in
    ``list_keys``) or another type.
    """
    if model_args is None:
        return {}
    if isinstance(model_args, Mapping):
        return {str(key): value for key, value in model_args.items()}
    if not isinstance(model_args, str):
        raise ValueError(f"{what}: expected text or a mapping, got {type(model_args).__name__}")
    text = model_args.strip()
    if text.startswith(("{", "[")):
        return parse_json_object(text, what, echo=True)
    parse_value = _lm_eval_value if typed else str.strip
    raw_values: dict[str, str] = {}
    listing: str | None = None  # the list key whose list the items without "=" go on
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, equals, raw = item.partition("=")
        if not equals and listing is not None:
            raw_values[listing] += f",{item}"
            continue
        if not equals or not key.strip():
            raise ValueError(f"{what}: expected key=value or a JSON object, got {item!r}")
        raw_values[key.strip()] = raw
        listing = key.strip() if key.strip() in list_keys else None
    return {key: parse_value(raw) for key, raw in raw_values.items()}


def _lm_eval_value(raw: str) -> Any:
    """A ``key=value`` value as lm-eval's command line parses it."""
    from lm_eval.utils import handle_arg_string

    return handle_arg_string(raw)


def _hub_snapshot(name: str, revision: str | None) -> Path | None:
    """The local snapshot of a Hugging Face hub model in the cache (no network), or None."""
    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(name, revision=revision, local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, offline, or not a hub id: unresolved
        return None
    return Path(folder)


def model_fingerprint_from_args(model: str, model_args: str | dict | None) -> dict:
    """The identity of the model lm-eval loaded from ``--model model --model_args model_args``.

    Returns ``{"fingerprint": str | None, "label": str, "source": "checkpoint" | "unresolved", "reason":
    str}``; ``label`` is the checkpoint argument with any trailing slash removed (or the model type), for
    display only.
    """
    try:
        arguments = parse_model_args(model_args)
    except ValueError as error:
        return {"fingerprint": None, "label": str(model), "source": "unresolved", "reason": str(error)}
    value = next((arguments[key] for key in _PATH_ARGUMENTS if arguments.get(key)), None)
    if value is None:
        return {
            "fingerprint": None,
            "label": str(model),
            "source": "unresolved",
            "reason": f"no {'/'.join(_PATH_ARGUMENTS)} in the model arguments",
        }
    text = str(value)
    label = text.rstrip("/") or text
    path = Path(text).expanduser()
    revision = arguments.get("revision")
    folder = path if path.is_dir() else _hub_snapshot(text, str(revision) if revision else None)
    if folder is None:
        return {
            "fingerprint": None,
            "label": label,
            "source": "unresolved",
            "reason": f"{text} is not a local checkpoint folder nor cached from the Hugging Face hub",
        }
    try:
        fingerprint = checkpoint_fingerprint(folder)
    except (OSError, ValueError) as error:
        return {"fingerprint": None, "label": label, "source": "unresolved", "reason": str(error)}
    return {
        "fingerprint": fingerprint,
        "label": label,
        "source": "checkpoint",
        "reason": f"checkpoint {folder}",
    }
