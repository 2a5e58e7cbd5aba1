"""lm-eval's log lines that mislead about a capcal run: filtered while ``analysis.evaluation.evaluate`` runs.

lm-eval 0.4.13 logs, whatever the tasks say:

- "generation_kwargs: ... specified through cli ... Ensure 'do_sample=True' for non-greedy decoding!" for any
  ``gen_kwargs``: misleading when every task of the run already sets ``do_sample: true`` (capcal's sampling
  and verbalized tasks do), so the line is dropped then, and kept otherwise (it may matter);
- "<task>: Custom kwargs can be passed to `--metadata` ..." for every task with a ``custom_dataset``:
  capcal's tasks read their data through one (``capcal_tasks.data_sources``), and their options are
  documented in docs/tasks-and-data.md, so the line is dropped for capcal's tasks.

lm-eval is not patched: a ``logging.Filter`` is added to its loggers for the duration of the run and removed
after. lm-eval's own ``git describe`` call, which prints "fatal: not a git repository" outside a git work
tree, is run with ``GIT_DIR`` pointing at capcal's checkout when there is one (``git_dir_for_lm_eval``);
when there is none (capcal installed from a wheel, run outside any repository), git's line cannot be kept
out without patching lm-eval, so ``git_notice`` explains it once, before the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["MisleadingLogFilter", "filtered_lm_eval_logs", "git_dir_for_lm_eval", "git_notice"]

_LOGGERS = ("lm_eval.evaluator", "lm_eval.api.task")
_DO_SAMPLE = "Ensure 'do_sample=True' for non-greedy decoding"
_CUSTOM_KWARGS = "Custom kwargs can be passed to `--metadata`"


class MisleadingLogFilter(logging.Filter):
    """Drops lm-eval's do_sample warning when ``all_sample`` (every task samples: ``do_sample: true``) and
    its custom-kwargs warning for the tasks in ``capcal_tasks``."""

    def __init__(self, all_sample: bool, capcal_tasks: set[str]) -> None:
        super().__init__()
        self.all_sample = all_sample
        self.capcal_tasks = capcal_tasks

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _DO_SAMPLE in message:
            return not self.all_sample
        if _CUSTOM_KWARGS in message:
            return message.split(":", 1)[0] not in self.capcal_tasks
        return True


def _samples(config: Mapping[str, Any]) -> bool:
    """Whether a generation task's config sets ``do_sample: true`` (other output types do not generate)."""
    if config.get("output_type", "generate_until") != "generate_until":
        return True
    return (config.get("generation_kwargs") or {}).get("do_sample") is True


_CHECKOUT = Path(__file__).resolve().parents[2]  # analysis/evaluation/ -> the checkout (or site-packages)


def git_dir_for_lm_eval(checkout: Path = _CHECKOUT) -> str | None:
    """The ``.git`` folder of the checkout capcal runs from, when there is one (lm-eval records that
    commit as the run's ``git_hash`` either way when run from inside it); None otherwise (e.g. capcal
    installed from a wheel, where ``checkout`` is site-packages)."""
    here = Path(checkout) / ".git"
    return str(here) if here.exists() else None


def git_notice(folder: Path | None = None, checkout: Path = _CHECKOUT) -> str | None:
    """The one line that explains git's "fatal: not a git repository" before a run that will print it;
    None when it will not be printed.

    lm-eval records the commit of the folder it runs in (``git describe --always``, whose error goes to
    stderr); ``filtered_lm_eval_logs`` points that call at capcal's checkout when the current folder
    (``folder``, default the current one) is in no git work tree. The line is printed when neither exists,
    ``GIT_DIR`` is unset and git is installed. ``checkout``: the folder above capcal's packages.
    """
    folder = Path.cwd() if folder is None else Path(folder)
    if (
        git_dir_for_lm_eval(checkout)
        or os.environ.get("GIT_DIR")
        or _in_git_work_tree(folder)
        or not shutil.which("git")
    ):
        return None
    return (
        'git\'s line "fatal: not a git repository" below is harmless: lm-eval records the git commit of the '
        f"folder it runs in, and {folder} is in no git repository (the run's git_hash is then null)"
    )


@contextlib.contextmanager
def filtered_lm_eval_logs(configs: Mapping[str, Mapping[str, Any]]) -> Iterator[None]:
    """Within the block, lm-eval's misleading lines about the tasks in ``configs`` (task -> YAML config) are
    dropped (``MisleadingLogFilter``), and lm-eval's ``git describe`` finds a repository when the current
    folder is not in one and capcal runs from a checkout (``GIT_DIR``, restored after)."""
    capcal = {name for name, config in configs.items() if (config.get("metadata") or {}).get("capcal_task")}
    log_filter = MisleadingLogFilter(bool(configs) and all(map(_samples, configs.values())), capcal)
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    for logger in loggers:
        logger.addFilter(log_filter)
    previous = os.environ.get("GIT_DIR")
    git_dir = git_dir_for_lm_eval() if previous is None and not _in_git_work_tree(Path.cwd()) else None
    if git_dir is not None:
        os.environ["GIT_DIR"] = git_dir
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(log_filter)
        if git_dir is not None:
            os.environ.pop("GIT_DIR", None)


def _in_git_work_tree(folder: Path) -> bool:
    """Whether ``folder`` or a parent holds a ``.git`` entry."""
    return any((parent / ".git").exists() for parent in (folder, *folder.parents))
