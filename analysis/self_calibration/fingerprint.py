"""Step records of the Self-Calibration loop: what made each step's output, so that none is reused stale.

Each step folder of ``analysis.self_calibration.loop.run_self_calibration_loop`` holds
``capcal_step.json``::

    {"step": ..., "fingerprint": "sha256:...", "settings": {...}, "inputs": {...}, "complete": true,
     "output": "sha256:..."}

- ``fingerprint`` = sha256 of the canonical JSON of (step name, ``settings``, ``inputs``)
  (``step_fingerprint``); ``inputs`` are content identities: a source run's ``content_digest`` (its
  files' bytes, not its path or name), a model's ``capcal_models.model_identity.checkpoint_fingerprint``;
- ``output`` = ``content_digest`` of the folder once the step finished (the record itself and training
  checkpoints left out), so an output changed afterwards is not taken for the step's.

``run_step`` reuses a folder only when its record is complete, its fingerprint is the one asked for and its
output digest still matches; otherwise (``reuse="auto"``) it clears the folder and runs the step again, or
(``reuse="strict"``) raises ``StaleStepError`` with one line naming the step and why. A record written
before the step ran and left incomplete (a killed run) with the same fingerprint keeps the folder, so that
training resumes from its checkpoint; with another fingerprint the folder is cleared first.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from capcal_models.model_files import file_sha256

__all__ = [
    "REUSE_MODES",
    "STEP_RECORD",
    "StaleStepError",
    "content_digest",
    "read_step_record",
    "run_step",
    "step_fingerprint",
    "step_state",
]

STEP_RECORD = "capcal_step.json"
REUSE_MODES = ("auto", "strict")
SKIPPED_FOLDERS = ("checkpoints",)  # training's resumable state: not part of a step's output


class StaleStepError(ValueError):
    """A step's output exists but was not made by the asked settings and inputs (``reuse="strict"``)."""


def content_digest(folder: str | Path, skip: Iterable[str] = SKIPPED_FOLDERS) -> str:
    """``"sha256:<hex>"`` over the sorted lines ``"<relative path> <sha256 of the bytes>"`` of every file
    under ``folder`` (``STEP_RECORD`` and the top-level folders in ``skip`` left out): the content's identity,
    independent of where the folder is."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder")
    skipped = set(skip)
    lines = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or relative.parts[0] in skipped or relative.as_posix() == STEP_RECORD:
            continue
        lines.append(f"{relative.as_posix()} {file_sha256(path)}")
    return "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def step_fingerprint(step: str, settings: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    """``"sha256:<hex>"`` of the canonical JSON (sorted keys) of the step's name, settings and inputs'
    identities. ``TypeError`` for a setting JSON cannot hold."""
    canonical = json.dumps(
        {"step": step, "settings": settings, "inputs": inputs}, sort_keys=True, separators=(",", ":")
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_step_record(folder: str | Path) -> dict | None:
    """The folder's step record, or None when there is none or it is not a JSON object."""
    path = Path(folder) / STEP_RECORD
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def step_state(
    step: str, folder: str | Path, settings: Mapping[str, Any], inputs: Mapping[str, str]
) -> tuple[str, str]:
    """(state, reason) of ``folder`` for the step with these settings and inputs: ``"missing"`` (nothing
    there), ``"current"`` (reusable), ``"resumable"`` (an unfinished run with the same fingerprint) or
    ``"stale"`` (the reason names what changed)."""
    folder = Path(folder)
    if not folder.is_dir() or not any(folder.iterdir()):
        return "missing", "no output yet"
    record = read_step_record(folder)
    if record is None:
        return "stale", "its output has no step record (made by another version of capcal or by hand)"
    if record.get("fingerprint") != step_fingerprint(step, settings, inputs):
        return "stale", f"changed since it ran: {_changed(record, settings, inputs)}"
    if not record.get("complete"):
        return "resumable", "an unfinished run with the same settings and inputs"
    if record.get("output") != content_digest(folder):
        return "stale", "its output was modified after the step wrote it"
    return "current", "same settings, inputs and output"


def _changed(record: dict, settings: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
    """The settings and inputs whose recorded value differs from the asked one (at most six named)."""
    asked = {"settings": settings, "inputs": inputs}
    keys = []
    for part in ("settings", "inputs"):
        old = record.get(part) if isinstance(record.get(part), dict) else {}
        keys += [f"{part[:-1]} {key}" for key in sorted(set(old) | set(asked[part]))
                 if old.get(key) != asked[part].get(key)]  # fmt: skip
    return ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "") or "its fingerprint"


def _write(folder: Path, record: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STEP_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def run_step(
    step: str,
    folder: str | Path,
    settings: Mapping[str, Any],
    inputs: Mapping[str, str],
    action: Callable[[], Any],
    *,
    reuse: str = "auto",
) -> bool:
    """Run ``action`` (which writes the step's output into ``folder``) unless ``folder`` already holds the
    output of the same step, settings and inputs (module docstring). Returns whether it ran. ``reuse``:
    ``"auto"`` re-runs a stale step; ``"strict"`` raises ``StaleStepError`` (one line) instead."""
    if reuse not in REUSE_MODES:
        raise ValueError(f"reuse must be one of {', '.join(REUSE_MODES)}, got {reuse!r}")
    folder = Path(folder)
    settings, inputs = json.loads(json.dumps(settings, default=str)), dict(inputs)
    fingerprint = step_fingerprint(step, settings, inputs)
    state, reason = step_state(step, folder, settings, inputs)
    if state == "current":
        return False
    if state == "stale":
        if reuse == "strict":
            raise StaleStepError(
                f"step '{step}' in {folder} is stale: {reason}; run without --reuse strict to redo it "
                "and every step that depends on it, or use a new --output_dir"
            )
        shutil.rmtree(folder)
    entry = {
        "step": step,
        "fingerprint": fingerprint,
        "settings": settings,
        "inputs": inputs,
        "complete": False,
    }
    _write(folder, entry)
    action()
    _write(folder, {**entry, "complete": True, "output": content_digest(folder)})
    return True
