"""Who and what a run is: its samples file with what its results file says (``SamplesFile``), the model's
identity (checkpoint fingerprint, else ``unresolved:<label>``) and the run's content identity (``run_key``).

See the "Run identity" and "Model identity" items of :mod:`analysis.runs`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from analysis.runs.files import SAMPLES_NAME, read_results
from analysis.runs.recorded_paths import resolve_recorded_path
from capcal_models.model_identity import model_fingerprint_from_args, parse_model_args
from capcal_tasks.checkers import describe_labels

__all__ = ["UNRESOLVED", "ModelIdentities", "SamplesFile", "run_content_key", "samples_file_model"]


UNRESOLVED = "unresolved:"


@dataclass(frozen=True)
class SamplesFile:
    """One lm-eval samples file (one run of one task) with what its results file says about it."""

    path: Path
    task: str
    run_id: str
    model: str  # display label
    task_config: dict  # the task's config from the results file ({} when there is no results file)
    has_results: bool = True  # False: no results file beside it (lm-eval writes both at the end of a run)
    logged_questions: int | None = None  # the results file's "n-samples" (effective) count for the task
    model_id: str = ""  # checkpoint fingerprint, or "unresolved:<label>"
    results_path: Path | None = None
    run_key: str = ""  # the run's content identity (see the module docstring)
    rescore: dict | None = None  # the results file's ``capcal_rescore`` (a re-scored run), else None

    @property
    def labels(self) -> str:
        """Which labels the run holds (``capcal_tasks.checkers.describe_labels``)."""
        return describe_labels(
            self.rescore, self.task, (self.task_config.get("metadata") or {}).get("version")
        )


def _label(results: dict | None, folder: Path) -> str:
    """The results file's ``capcal_model.label`` or ``model_name`` (for hf: the checkpoint path), else the
    output sub-folder's name; without a trailing slash."""
    if results:
        identity = results.get("capcal_model") or {}
        name = identity.get("label") or results.get("model_name")
        model_args = (results.get("config") or {}).get("model_args")
        if not name and model_args:
            try:
                arguments = parse_model_args(model_args)
            except ValueError:
                arguments = {}
            name = arguments.get("pretrained") or arguments.get("model") or str(model_args)
        if name:
            text = str(name)
            return text.rstrip("/") or text
    return folder.name


# model arguments that name a checkpoint folder (as ``capcal_models.model_identity`` reads them)
CHECKPOINT_ARGUMENTS = ("pretrained", "model", "path", "model_path")


def _checkpoint_found(model_args: str | dict, folder: Path) -> str | dict:
    """``model_args`` with a relative checkpoint path (a run of stock lm-eval, ``pretrained=./model``)
    resolved against the run's folders, then the current folder (``resolve_recorded_path``) where it is
    found there; unchanged otherwise (a hub id, an absolute path, unparsable arguments)."""
    try:
        arguments = parse_model_args(model_args)
    except ValueError:
        return model_args
    changed = dict(arguments)
    for key in CHECKPOINT_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            found = resolve_recorded_path(value, folder / "results.json", key)
            if found.path is not None and found.path.is_dir():
                changed[key] = str(found.path)
    return changed if changed != arguments else model_args


class ModelIdentities:
    """Model identities of results files, each (model, model_args) fingerprinted once per load."""

    def __init__(self) -> None:
        self.cache: dict[str, dict] = {}
        self.models: dict[str, dict] = {}

    def of(self, results: dict | None, folder: Path) -> tuple[str, str]:
        label = _label(results, folder)
        identity = (results or {}).get("capcal_model")
        if isinstance(identity, dict) and identity.get("fingerprint"):
            found = {
                "fingerprint": identity["fingerprint"],
                "label": label,
                "source": "checkpoint",
                "reason": "results file",
            }
        elif results and (results.get("config") or {}).get("model_args") is not None:
            config = results["config"]
            model_args = _checkpoint_found(config["model_args"], folder)
            key = repr((config.get("model"), model_args))
            if key not in self.cache:
                self.cache[key] = model_fingerprint_from_args(str(config.get("model")), model_args)
            found = {**self.cache[key], "label": label}
        else:
            found = {
                "fingerprint": None,
                "label": label,
                "source": "unresolved",
                "reason": "no model arguments in the results file" if results else "no results file",
            }
        model_id = found["fingerprint"] or f"{UNRESOLVED}{label}"
        self.models.setdefault(model_id, found)
        return model_id, self.models[model_id]["label"]


def run_content_key(results_digest: str | None, samples: Path) -> str:
    """sha256 over the results file's digest and the samples file's bytes: the run's content identity."""
    digest = hashlib.sha256(f"{results_digest or '-'}\0".encode())
    with samples.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def samples_file_model(path: str | Path) -> tuple[str, str] | None:
    """(model_id, label) of the run that wrote the samples file ``path``, read from the results file lm-eval
    wrote beside it (``results_<date>.json`` with ``samples_<task>_<date>.jsonl``) as every run is read
    (``ModelIdentities``); None when the name is not lm-eval's or there is no results file."""
    path = Path(path).expanduser()
    match = SAMPLES_NAME.match(path.name)
    results_path = path.with_name(f"results_{match['date']}.json") if match else None
    if results_path is None or not results_path.is_file():
        return None
    results, _ = read_results(results_path)
    return ModelIdentities().of(results, path.parent)
