"""Unknown task names, found by reading YAML text: no lm-eval import, no task index.

lm-eval's TaskManager parses every YAML of lm-eval's task tree (about 14,000 files; 30-70 s on a loaded
machine) before it can say whether a name exists. Every task, group or tag name it can know is written in one
of the YAML files it indexes (lm-eval's task folder, capcal's, the include paths), so a name that occurs in
none of them (as a whole word) is unknown for sure; a name that occurs may still be unknown (a word in a
prompt), and is left to the index (``capcal_tasks.task_manager.task_manager_for``). ``unknown_task_names``
reads the files as bytes and parses nothing: about a second of CPU time for lm-eval 0.4.13's tree here.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from capcal_tasks import tasks_dir

__all__ = [
    "CALIBRATION_SUFFIX",
    "GLOB_CHARACTERS",
    "MANY_NAMES",
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
# above this many names, ``unknown_task_names`` looks names up among each text's runs (see there)
MANY_NAMES = 200


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


def unknown_task_names(
    names: Sequence[str], include_path: str | Path | Sequence[str | Path] | None = None
) -> tuple[list[str], set[str]]:
    """The plain names among ``names`` (not patterns, not ``.yaml`` paths) that occur, as a whole word (no
    name character ``[\\w.-]`` on either side), in no YAML text of ``task_folders(include_path)``, and the
    names those YAMLs declare on ``task:`` / ``group:`` / ``tag:`` lines (for suggestions). A name
    ``<stock>_calibration`` (``calibration_stem``) is known where ``<stock>`` occurs."""
    plain = [name for name in names if not name.endswith(".yaml") and not GLOB_CHARACTERS & set(name)]
    if not plain:
        return [], set()
    stems = {name: calibration_stem(name) for name in plain}
    wanted = [*plain, *(stem for stem in stems.values() if stem is not None)]
    # a whole name: not part of a longer one (name characters on neither side). One regex of all names is
    # quick for a few names but slow for thousands (the scan tries every name at every position); a name
    # made of name characters only occurs whole exactly where it is a whole run of them, so many such names
    # are looked up in each text's runs instead (linear in the text, however many names).
    encoded = {name: name.encode("utf-8") for name in set(wanted)}
    by_run = {raw: name for name, raw in encoded.items() if _NAME_RUN.fullmatch(raw)}
    if len(by_run) <= MANY_NAMES:
        by_run = {}
    others = sorted((raw for raw in encoded.values() if raw not in by_run), key=len, reverse=True)
    whole_name = (
        re.compile(rb"(?<![\w.\-])(?:" + b"|".join(map(re.escape, others)) + rb")(?![\w.\-])")
        if others
        else None
    )
    found: set[str] = set()
    declared: set[str] = set()
    for folder in task_folders(include_path):
        for text in _yaml_texts(folder):
            if by_run:
                found.update(by_run[run] for run in by_run.keys() & set(_NAME_RUN.findall(text)))
            if whole_name is not None:
                found.update(match.decode("utf-8") for match in whole_name.findall(text))
            matches = _DECLARED_NAME.findall(text)
            for block in _TAG_LIST.findall(text):
                matches += _LIST_ITEM.findall(block)
            declared.update(match.decode("utf-8", "replace") for match in matches)
    return [name for name in plain if name not in found and stems[name] not in found], declared


def unknown_task_message(name: str, known: Iterable[str]) -> str:
    """``unknown task NAME``, with up to three of the ``known`` names closest to it."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    if not close:
        return f"unknown task {name}"
    shown = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f"unknown task {name}; did you mean {shown}?"
