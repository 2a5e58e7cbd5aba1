"""Unknown task names, found by reading YAML text: no lm-eval import, no task index.

lm-eval's TaskManager parses every YAML of lm-eval's task tree (about 14,000 files; 30-70 s on a loaded
machine) before it can say whether a name exists. Every task, group or tag name it can know is written in one
of the YAML files it indexes (lm-eval's task folder, capcal's, the include paths), so a name that occurs in
none of them (as a whole word) is unknown for sure; a name that occurs may still be unknown (a word in a
prompt), and is left to the index (``capcal_tasks.task_manager.task_manager_for``). ``unknown_task_names``
reads the files as bytes and parses nothing: about half a second of CPU time for lm-eval 0.4.13's tree here
(14,665 files, 7.7 MB). What it reads from lm-eval's installed task folder it keeps for the process (55,196
distinct runs of name characters, about 7 MB): the second screen of a process (``evaluate`` then
``evaluate_adaptive``, a notebook's runs) costs milliseconds. The other folders (capcal's, the include paths:
files a user edits) are read again each time.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from capcal_tasks import tasks_dir

__all__ = [
    "CALIBRATION_SUFFIX",
    "GLOB_CHARACTERS",
    "UnknownTaskError",
    "calibration_stem",
    "lm_eval_tasks_dir",
    "task_folders",
    "unknown_task_message",
    "unknown_task_names",
]

GLOB_CHARACTERS = frozenset("*?[")
#: ``<stock>_calibration`` names the calibration task of the stock task ``<stock>``
#: (``capcal_tasks.sampled_calibration``) where lm-eval knows no task of that name
CALIBRATION_SUFFIX = "_calibration"
# ``task: name`` / ``group: name`` / ``tag: name`` lines and ``tag:`` list items: the names offered as "did
# you mean".
_DECLARED_NAME = re.compile(rb"(?m)^(?:task|group|tag):[ \t]*['\"]?([\w.\-]+)")
_TAG_LIST = re.compile(rb"(?m)^tag:[ \t]*\n((?:[ \t]+-[ \t]*['\"]?[\w.\-]+['\"]?[ \t]*\n)+)")
_LIST_ITEM = re.compile(rb"-[ \t]*['\"]?([\w.\-]+)")
# ``include: file`` / ``include: [a, b]`` lines, and the file names in them.
_INCLUDE = re.compile(rb"(?m)^include:[ \t]*(.+)$")
_INCLUDED_FILE = re.compile(rb"[\w./\-]+")
# a maximal run of the characters a task name is made of
_NAME_RUN = re.compile(rb"[\w.\-]+")


class UnknownTaskError(ValueError):
    """A task name that is not a registered task, group or tag, a pattern matching one, or a YAML file."""


def calibration_stem(name: str) -> str | None:
    """``<stock>`` of a name ``<stock>_calibration`` (None for any other name); whether it names a wrapped
    calibration task is the task index's to say (``CapcalTaskManager.calibration_base``)."""
    stem = name.removesuffix(CALIBRATION_SUFFIX)
    return stem if stem != name and stem else None


def lm_eval_tasks_dir() -> Path | None:
    """lm-eval's own task folder, found without importing lm-eval (None when lm-eval is not installed)."""
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "tasks"


def task_folders(include_path: str | Path | Sequence[str | Path] | None = None) -> list[Path]:
    """The folders whose YAMLs ``CapcalTaskManager`` indexes: lm-eval's tasks, capcal's, ``include_path``."""
    extra = (
        []
        if include_path is None
        else [include_path]
        if isinstance(include_path, (str, Path))
        else list(include_path)
    )
    lm_eval = lm_eval_tasks_dir()
    return [*([lm_eval] if lm_eval is not None else []), tasks_dir(), *map(Path, extra)]


def _yaml_texts(folder: Path) -> Iterable[bytes]:
    """The bytes of every ``.yaml`` file under ``folder`` and of every file they include (``include:``
    names files of any name, ``_template``, ``_gen_yaml_2shot``: a tag such a file declares is the including
    task's), each once; symlinked folders are not followed, unreadable files skipped."""
    seen: set[str] = set()
    pending: list[str] = []
    for root, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if name != "__pycache__"]
        pending += [os.path.join(root, name) for name in files if name.endswith(".yaml")]
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            with open(path, "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        yield text
        for line in _INCLUDE.findall(text):
            for item in _INCLUDED_FILE.findall(line):
                pending.append(os.path.join(os.path.dirname(path), item.decode("utf-8", "replace")))


def _declared_names(text: bytes) -> set[str]:
    """The names ``text`` declares on ``task:`` / ``group:`` / ``tag:`` lines and in ``tag:`` lists."""
    matches = _DECLARED_NAME.findall(text)
    for block in _TAG_LIST.findall(text):
        matches += _LIST_ITEM.findall(block)
    return {match.decode("utf-8", "replace") for match in matches}


def _runs_and_declared_names(folder: Path) -> tuple[frozenset[bytes], frozenset[str]]:
    """Every maximal run of name characters (``[\\w.-]+``) in the YAML texts of ``folder`` (``_yaml_texts``),
    and every name they declare."""
    runs: set[bytes] = set()
    declared: set[str] = set()
    for text in _yaml_texts(folder):
        runs.update(_NAME_RUN.findall(text))
        declared |= _declared_names(text)
    return frozenset(runs), frozenset(declared)


@functools.lru_cache(maxsize=4)
def _installed_runs_and_declared_names(folder: Path) -> tuple[frozenset[bytes], frozenset[str]]:
    """``_runs_and_declared_names`` of an installed package's task folder, read once per process: it changes
    only when the package is reinstalled, and then the process runs the old package's code anyway."""
    return _runs_and_declared_names(folder)


def unknown_task_names(
    names: Sequence[str], include_path: str | Path | Sequence[str | Path] | None = None
) -> tuple[list[str], set[str]]:
    """The plain names among ``names`` (not patterns, not ``.yaml`` paths) that occur, as a whole word (no
    name character ``[\\w.-]`` on either side), in no YAML text of ``task_folders(include_path)``, and the
    names those YAMLs declare on ``task:`` / ``group:`` / ``tag:`` lines (for suggestions). A name
    ``<stock>_calibration`` (``calibration_stem``) is known where ``<stock>`` occurs.

    A name made of name characters only occurs whole exactly where it is a maximal run of them, so such names
    are looked up among each folder's runs (lm-eval's folder's kept for the process,
    ``_installed_runs_and_declared_names``); any other name (a space, a ``+``) is searched for in the texts
    with a regex that refuses a name character on either side."""
    plain = [name for name in names if not name.endswith(".yaml") and not GLOB_CHARACTERS & set(name)]
    if not plain:
        return [], set()
    stems = {name: calibration_stem(name) for name in plain}
    wanted = {*plain, *(stem for stem in stems.values() if stem is not None)}
    encoded = {name.encode("utf-8"): name for name in wanted}
    by_run = {raw: name for raw, name in encoded.items() if _NAME_RUN.fullmatch(raw)}
    others = sorted((raw for raw in encoded if raw not in by_run), key=len, reverse=True)
    whole_name = (
        re.compile(rb"(?<![\w.\-])(?:" + b"|".join(map(re.escape, others)) + rb")(?![\w.\-])")
        if others
        else None
    )
    installed = lm_eval_tasks_dir()
    found: set[str] = set()
    declared: set[str] = set()
    for folder in task_folders(include_path):
        if folder == installed:
            runs, names_declared = _installed_runs_and_declared_names(folder)
        else:
            runs, names_declared = _runs_and_declared_names(folder)
        found.update(name for raw, name in by_run.items() if raw in runs)
        declared |= names_declared
        if whole_name is not None:
            for text in _yaml_texts(folder):
                found.update(match.decode("utf-8") for match in whole_name.findall(text))
    return [name for name in plain if name not in found and stems[name] not in found], declared


def unknown_task_message(name: str, known: Iterable[str]) -> str:
    """``unknown task NAME``, with up to three of the ``known`` names closest to it."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    if not close:
        return f"unknown task {name}"
    shown = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"unknown task {name}; did you mean {shown}?"
