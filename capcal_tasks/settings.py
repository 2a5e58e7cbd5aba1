"""capcal's configuration from the environment, read in one place.

- ``capcal_home()``: capcal's cache folder (prepared models, sample caches, downloads): ``$CAPCAL_HOME``,
  else ``$XDG_CACHE_HOME/capcal``, else ``~/.cache/capcal``.
- ``DATA_DIR_ENV`` (``CAPCAL_DATA_DIR``) and ``data_dir()``: where task data is read from: unset for the
  Hugging Face hub, ``bundled`` for the data inside the capcal package, else a local folder.
- ``parse_bool(value)``: a boolean model argument or setting given as text ("true"/"false", ...).
- ``CONFIDENCES_KEY`` (``capcal_confidences``): the ``--metadata`` key that asks for confidence tasks on
  wrapped lm-eval tasks' questions, and ``CONFIDENCES``, the names it may list
  (``capcal_tasks.sampled_confidence``); here so that the CLI reads them without importing lm-eval's tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BUNDLED", "DATA_DIR_ENV", "capcal_home", "data_dir", "parse_bool"]

DATA_DIR_ENV = "CAPCAL_DATA_DIR"
BUNDLED = "bundled"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
#: the metadata key that asks for confidence tasks on the wrapped tasks' questions
CONFIDENCES_KEY = "capcal_confidences"
#: the confidences it may list, each the name of capcal's capability-form template and the task's suffix
CONFIDENCES = ("ptrue", "verbalized")


def capcal_home() -> Path:
    """capcal's cache folder: ``$CAPCAL_HOME``, else ``$XDG_CACHE_HOME/capcal``, else ``~/.cache/capcal``."""
    if os.environ.get("CAPCAL_HOME"):
        return Path(os.environ["CAPCAL_HOME"]).expanduser().resolve()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser().resolve() / "capcal"


def data_dir() -> Path | str | None:
    """The configured task data: None when ``$CAPCAL_DATA_DIR`` is unset or blank (the hub), ``"bundled"``
    for the bundled data, else the resolved folder; ``FileNotFoundError`` when that is not a folder."""
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    if not value:
        return None
    if value == BUNDLED:
        return BUNDLED
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"{DATA_DIR_ENV}={value!r} is not a folder")
    return path


def parse_bool(value: object) -> bool:
    """``value`` as a boolean: a string is one of 1/true/yes/on or 0/false/no/off (any case, surrounding
    spaces ignored), anything else ``ValueError``; other values by ``bool``."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"not a boolean: {value!r} (use one of {', '.join(TRUE_WORDS + FALSE_WORDS)})")
    return bool(value)
