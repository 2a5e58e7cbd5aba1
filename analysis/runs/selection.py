"""Selection: which run of each (model, task) is used (the latest, unless ``select`` names others), and why
the others are left out.

See the "Selection" item of :mod:`analysis.runs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from analysis.runs.identity import SamplesFile
from analysis.runs.records import RunRows

__all__ = ["choose_runs", "run_order"]


def _matches(selector: str, file: SamplesFile) -> bool:
    selector = str(selector)
    if selector in (file.run_id, file.run_key) or (len(selector) >= 8 and file.run_key.startswith(selector)):
        return True
    candidates = [file.path] + ([file.results_path] if file.results_path else [])
    try:
        resolved = Path(selector).expanduser().resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved in (c.resolve(), c.parent.resolve()) for c in candidates)


def _selectors_for(
    select: Mapping | Iterable[str] | str | None, model_id: str, label: str, task: str
) -> list[str] | None:
    if select is None or isinstance(select, str):
        return None
    if isinstance(select, Mapping):
        for (model, wanted_task), value in select.items():
            if wanted_task == task and model in (model_id, label):
                return [value] if isinstance(value, str) else list(value)
        return None
    return list(select)


def run_order(file: SamplesFile) -> tuple[str, str]:
    """How runs of one (model, task) are ordered: by run id (its time), then path; the greatest is the
    latest, the run used unless ``select`` names another."""
    return (file.run_id, str(file.path))


def choose_runs(
    runs: list[RunRows], select: Mapping | Iterable[str] | str | None
) -> tuple[list[tuple[RunRows, bool, str]], set[str]]:
    """(run, used, reason) for every run; and the selectors that matched something."""
    groups: dict[tuple[str, str], list[RunRows]] = {}
    for run in runs:
        groups.setdefault((run.file.model_id, run.file.task), []).append(run)
    decided = []
    matched: set[str] = set()
    for (model_id, task), group in groups.items():
        group.sort(key=lambda r: run_order(r.file), reverse=True)
        if select == "all":
            decided += [(run, True, "all runs kept (load_run)") for run in group]
            continue
        selectors = _selectors_for(select, model_id, group[0].file.model, task)
        chosen = []
        if selectors is not None:
            for selector in selectors:
                hits = [run for run in group if _matches(selector, run.file)]
                if hits:
                    matched.add(str(selector))
                    chosen += [run for run in hits if run not in chosen]
            if isinstance(select, Mapping) and not chosen:
                raise ValueError(f"select: {selectors} matches no run of ({group[0].file.model}, {task})")
        if chosen:
            if len(chosen) > 1:
                raise ValueError(
                    f"select: several runs of ({group[0].file.model}, {task}) selected: "
                    + ", ".join(str(run.file.path) for run in chosen)
                )
            used = chosen[0]
            reason_used = "selected"
        else:
            used = group[0]
            reason_used = "latest run" if len(group) > 1 else "only run"
        for run in group:
            if run is used:
                decided.append((run, True, reason_used))
            elif reason_used == "selected":
                decided.append((run, False, f"not selected (used {used.file.run_id}: {used.file.path})"))
            elif run.file.run_id == used.file.run_id:
                decided.append(
                    (
                        run,
                        False,
                        f"same time as the used run {used.file.path}, different content; pass select",
                    )
                )
            else:
                decided.append((run, False, f"older than the used run {used.file.run_id}"))
    return decided, matched
