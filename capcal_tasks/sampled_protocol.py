"""The protocol of a wrapped lm-eval task (``capcal_tasks.sampled_task``), as its results file records it.

A wrapped task's dumped config holds ``metadata.capcal_sampled``: the base task and its version, the filter
pipeline kept, the metric read as each response's label, the task's own generation settings, its few-shot
settings and whether the rows came from the local data folder. ``protocol_lines`` says what capcal changed,
one line each (``capcal check`` and ``capcal report`` print them); it reads the config only (no lm-eval
import), so a reader of runs can call it cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PROTOCOL_KEY", "has_answer_classes", "protocol_lines", "relative_config_path"]

#: the key of the wrapped task's protocol in its config's metadata
PROTOCOL_KEY = "capcal_sampled"


def has_answer_classes(config: Mapping[str, Any]) -> bool:
    """False for a wrapped task whose responses reach a custom scorer whole (no answer classes: majority vote
    and consistency are left out); True otherwise (capcal's own tasks, wrapped tasks with classes)."""
    protocol = (config.get("metadata") or {}).get(PROTOCOL_KEY)
    return not isinstance(protocol, Mapping) or bool(protocol.get("answer_classes"))


def protocol_lines(config: Mapping[str, Any]) -> list[str]:
    """What capcal changed in a wrapped task's protocol, one line each, from its dumped config (the results
    file's ``configs`` entry): base task and version, the pipeline and metric, answer classes, the generation
    settings that differ from the task's own (after ``--gen_kwargs``), each marked with who changed it
    (capcal's sampling protocol, the run's ``--gen_kwargs``, or both), few-shot settings. Empty for a config
    that is not a wrapped task."""
    protocol = (config.get("metadata") or {}).get(PROTOCOL_KEY)
    if not isinstance(protocol, Mapping):
        return []
    task = config.get("task")
    own = protocol.get("task_generation_kwargs") or {}
    used = config.get("generation_kwargs") or {}
    changed = {
        key: (own.get(key), used.get(key))
        for key in sorted(set(own) | set(used))
        if own.get(key) != used.get(key)
    }
    by_capcal = protocol.get("generation_changed")
    changes = ", ".join(
        f"{key} {before!r} -> {after!r}{_changed_by(key, after, by_capcal)}"
        for key, (before, after) in changed.items()
    )
    classes = protocol.get("answer_classes")
    filters = " -> ".join(protocol.get("pipeline_filters") or []) or "nothing"
    lines = [
        f"{task}: lm-eval task {protocol.get('base_task')} (version {protocol.get('base_version')}) sampled "
        f"k = {protocol.get('k')} times per question",
        f"{task}: scored by its own metric {protocol.get('metric')} per response after its pipeline "
        f"{protocol.get('pipeline')} ({filters}; its final take_first dropped)",
        f"{task}: generation settings changed: {changes or 'none'}",
        f"{task}: few-shot: num_fewshot {config.get('num_fewshot')} "
        f"(task default {protocol.get('num_fewshot')})",
        f"{task}: answer classes: "
        + (
            "the pipeline's output, normalised as the metric compares answers"
            if classes
            else "none (the pipeline extracts no answer; majority vote and consistency left out)"
        ),
    ]
    if protocol.get("local_rows"):
        lines.append(f"{task}: rows read from the local data folder (capcal_tasks.local_rows), not the hub")
    return lines


def _changed_by(key: str, used: Any, by_capcal: Any) -> str:
    """Who changed setting ``key`` to ``used``: " (capcal)" when the wrapper set that value (its sampling
    protocol: ``generation_changed`` maps a key to [task's, capcal's]), " (--gen_kwargs)" when the wrapper
    left the key alone, " (capcal, then --gen_kwargs)" when the run changed the wrapper's value again; ""
    for a protocol recorded without ``generation_changed``."""
    if not isinstance(by_capcal, Mapping):
        return ""
    if key not in by_capcal:
        return " (--gen_kwargs)"
    set_by_capcal = by_capcal[key]
    if isinstance(set_by_capcal, (list, tuple)) and len(set_by_capcal) == 2 and set_by_capcal[1] == used:
        return " (capcal)"
    return " (capcal, then --gen_kwargs)"


def relative_config_path(path: str | None) -> str | None:
    """A config path shown from lm-eval's task folder on (``lm_eval/tasks/...``)."""
    if path is None:
        return None
    parts = Path(path).parts
    return "/".join(parts[parts.index("lm_eval") :]) if "lm_eval" in parts else path
